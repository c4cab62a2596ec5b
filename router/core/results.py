"""The stage result types: one frozen dataclass per context slot (ARCHITECTURE §3), and :class:`Slot`,
the typed key a stage writes its result under (``ctx[SLOT]``). Pure.

A result only its stages read has its slot in that stage's module; the slots below are the ones the
edges read too (the decision record and headers, the upstream attempt, ``explain``), which cannot
import a stage. Cores return the types; they live here so the cores never import the framework.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Generic, TypeVar

from router.core.frozen import frozen

T = TypeVar("T")


@dataclass(frozen=True, eq=False, slots=True)
class Slot(Generic[T]):
    """A context slot, typed as aiohttp's ``web.AppKey``: ``ctx[SLOT]`` reads it (None until written),
    ``ctx[SLOT] = value`` writes it; ``name`` is what its one writer ``provides`` (the order check's name)."""

    name: str
    type: Any  # what the slot holds: T, for the reader; a Mapping alias or a class


def round_ms(ms: float) -> float:
    """A duration in milliseconds to the microsecond, as recorded in traces and decision rows.

    The same value as ``round(ms, 3)`` for any measured duration, without its round trip through
    a decimal string (~2,800 instructions a call, several a request); only an exact decimal tie,
    which a measured time does not hit, may round the other way.
    """
    return round(ms * 1000) / 1000


class Outcome(enum.StrEnum):
    """How one stage ended for one request (the trace's vocabulary)."""

    OK = "ok"
    SKIPPED = "skipped"
    FALLBACK = "fallback"
    TIMEOUT = "timeout"
    ERROR = "error"


@frozen
class StageRecord:
    """One line of the trace: a stage, how it ended, how long its own work took."""

    stage: str
    outcome: Outcome
    ms: float
    detail: str = ""


@frozen
class SessionKey:
    """Who this request belongs to. ``source`` is ``header``, ``metadata`` (a session id in the body) or ``fingerprint``."""

    key: str
    source: str


class ClassificationSource(enum.StrEnum):
    CLASSIFIER = "classifier"
    OVERRIDE = "override"
    FALLBACK = "fallback"
    CACHED = "cached"


@frozen
class Classification:
    task_category: str
    task_tier: int
    source: ClassificationSource
    # The classifier's estimate; None when it gave none (cached, override, fallback).
    required_context_tokens: int | None = None
    # Why the classifier answered so, in its own few words; empty when it gave none (or not the classifier).
    reason: str = ""


class RelevanceStatus(enum.StrEnum):
    OK = "ok"
    SKIPPED = "skipped"
    UNAVAILABLE = "unavailable"
    # Not ranked yet: pinch awaits ``rank`` only when the order decides something (a batch, a cold
    # moment's re-plan); a request whose ledger compresses nothing new embeds nothing.
    DEFERRED = "deferred"


@frozen
class Relevance:
    """The candidates' order for pinch, least relevant first, or None (uniform prune); ``rank``
    (DEFERRED): the ranking to await when the order is needed — bounded, and it never raises."""

    status: RelevanceStatus
    order: tuple[int, ...] | None = None
    reason: str = ""
    embedded: int = 0
    cached: int = 0
    rank: Callable[[], Awaitable[Relevance]] | None = None
    # each candidate's evidence (router.core.relevance.candidate_evidence), for the ledger's batch order
    evidence: tuple[float, ...] | None = None


class PinchMode(enum.StrEnum):
    WITHIN_BUDGET = "within_budget"
    UNIFORM = "uniform"
    RELEVANCE = "relevance"
    DISABLED = "disabled"
    # Over the soft budget, but compressing new results would not pay with the cache warm (ledger only).
    DEFERRED = "deferred"


@frozen
class StaleSignatures:
    """Signed reasoning whose prefix the proxy changed, in one request.

    Some providers sign the reasoning a model sent back (Anthropic's thinking, Gemini's thought
    signatures) against everything before it; a model that checks the signature refuses it once
    pinch rewrote a result before it. The wire format names such parts (:meth:`Conversation.stale_signatures`);
    pinch records them beside its ledger, so every later request of the session leaves out the
    very same parts, and the wire's upstream body leaves them out for a model that checks.

    ``positions``: where each part is, in the wire format's own terms (opaque to the stages);
    ``keys``: the session's record after this request (every part gone stale so far, oldest first);
    ``new``: how many of ``positions`` went stale with this request; ``loop_without_reasoning``:
    leaving them out leaves the tool loop in progress without its leading reasoning (reasoning
    must then be switched off for the request).
    """

    positions: tuple[tuple[int, int], ...] = ()
    keys: tuple[str, ...] = ()
    new: int = 0
    loop_without_reasoning: bool = False


@frozen
class PinchStats:
    mode: PinchMode
    original_tokens: int
    final_tokens: int
    compressed: int = 0  # candidates rewritten (elided + placeholder)
    elided: int = 0  # long results cut to head + marker + tail
    placeholders: int = 0  # short results replaced by a placeholder
    # The session's pinch ledger (issue #11): results sent as the same compressed bytes as on an
    # earlier request of the session, results compressed for the first time by this request, and
    # why this request did or did not compress new results (shown in the trace, top and explain).
    reapplied: int = 0
    newly_compressed: int = 0
    # Results the ledger held compressed that this request sent verbatim again: at a cold-cache moment
    # (the prefix is prefilled anyway) the newest steps pointed at them and the budget allowed it.
    restored: int = 0
    reason: str = ""
    # Each compressed result, by its position in the view's tool results, and how
    # (pinch's CompressionKind: "elided" or "placeholder"), in position order: what explain shows.
    compressions: tuple[tuple[int, str], ...] = ()
    # The signed reasoning whose prefix pinch changed (Anthropic's preserved thinking), left out
    # for a model that checks it (models[].thinking_binding); None: none.
    stale: StaleSignatures | None = None
    # The deferred ranking pinch awaited (pinch-relevance's ``rank``): None when it needed no order.
    ranking: Relevance | None = None
    # First sight (issue #44): results sent reduced the first time they were sent (this request's
    # new ones), those resent as the text the ledger recorded, and the tokens they save here (part
    # of saved_tokens). A first-sight result is not counted in ``compressed``.
    first_sight_new: int = 0
    first_sight_reapplied: int = 0
    first_sight_saved: int = 0
    # The request offers the model pinch_retrieve (router.core.retrieve: lossy first sight is on and
    # the client offers tools), for every attempt whose provider's format can answer it.
    offers_retrieve: bool = False

    @property
    def saved_tokens(self) -> int:
        return self.original_tokens - self.final_tokens


@frozen
class Capabilities:
    """What the request needs from a model; computed fresh on every request."""

    tools_present: bool
    has_images: bool
    require_json_mode: bool
    prompt_tokens: int
    requested_output_tokens: int | None  # what the client asked for (max_completion_tokens / max_tokens)
    required_context_tokens: int  # prompt + output_room, or the classifier's estimate when larger
    output_room: int = 0  # tokens of the window kept for the answer
    # The smallest max_output_tokens a model must have: None when the request is clamped to any
    # model's limit (routing.output_limit: clamp), the requested output when it is not (reject).
    required_output_tokens: int | None = None
    # The client asked for extended thinking (Anthropic ``thinking``): shown with the needs; no model
    # is rejected for it (a provider without thinking gets the request without it: router.translate).
    thinking: bool = False


@frozen
class Rejection:
    model: str
    reasons: tuple[str, ...]


@frozen
class Candidate:
    model: str
    provider: str
    upstream_model: str
    # The output limit sent to this candidate: the request's, clamped to what the model can give;
    # None when the client set none (then none is sent).
    output_tokens: int | None = None
    # The model's configured window (Ollama's native chat loads the model with it as num_ctx).
    context_window: int | None = None
    # The model's configured output limit (sent to an Anthropic provider, which requires one,
    # when the client set none).
    max_output_tokens: int | None = None
    # Anthropic clients' thinking is sent to this model as `reasoning_content`, and back (models[].reasoning_content).
    reasoning_content: bool = False
    # How this model takes thinking switched off for one request (models[].thinking_off).
    thinking_off: str = "omit"
    # This model checks the prefix of the signed thinking sent back (models[].thinking_binding, resolved).
    thinking_binding: bool = False


@frozen
class Route:
    """The gate's decision: candidates in order (first = chosen), and who was rejected.

    No candidates: no model could serve the request (the gate answered ``no_capable_model``);
    ``rejected`` then says why for every model considered.
    """

    candidates: tuple[Candidate, ...]
    tier: int  # the tier routed on (after any escalation)
    pinned: bool
    rejected: tuple[Rejection, ...] = ()
    escalation: str = ""  # why the tier was raised, empty when it was not
    family: str = ""  # the model family the requested name matched and its hint (``claude-*opus* → tier 3``), empty when none

    @property
    def chosen(self) -> Candidate:
        return self.candidates[0]

    def candidate(self, model: str | None) -> Candidate | None:
        """The candidate named ``model``, if it is one."""
        return next((c for c in self.candidates if c.model == model), None)


@frozen
class Usage:
    """Token accounting an upstream reported for one answer (None: not reported).

    ``prompt_tokens`` is the whole prompt, cached part included (OpenAI's sense;
    an Anthropic-shaped report's ``input_tokens`` plus its cache reads and writes).
    ``cached_tokens``: prompt tokens served from the provider's prompt cache;
    ``cache_write_tokens``: prompt tokens written to it (Anthropic reports them).
    """

    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None

    @property
    def uncached_prompt_tokens(self) -> int | None:
        """Prompt tokens the model had to prefill afresh; None unless cache accounting was reported."""
        if self.prompt_tokens is None or self.cached_tokens is None:
            return None
        return max(self.prompt_tokens - self.cached_tokens, 0)

    def updated(self, later: Usage) -> Usage:
        """This report with every figure ``later`` has replacing ours (a stream may report in parts)."""
        figures = {f.name: getattr(later, f.name) for f in fields(Usage) if getattr(later, f.name) is not None}
        return replace(self, **figures)


@frozen
class Attempt:
    """One try of one candidate by upstream-forward."""

    model: str
    provider: str
    status: int | None  # HTTP status, None when no answer came
    error: str = ""  # why we moved on, empty when this attempt answered


@dataclass(slots=True)
class UpstreamResult:
    """What upstream-forward saw; filled in as the answer is relayed."""

    attempts: list[Attempt] = field(default_factory=list)
    # The providers candidates were skipped on as down (no answer earlier in this request, or marked
    # down by their breaker: router.core.breaker), each once, in the order met.
    providers_down: list[str] = field(default_factory=list)
    model: str | None = None  # the candidate that answered
    provider: str | None = None
    status: int | None = None
    first_byte_ms: float | None = None
    total_ms: float | None = None
    usage: Usage | None = None
    stream_error: str = ""  # set when a stream broke after its first byte
    client_gone: bool = False  # the client closed the connection before the answer was complete
    wire_out: str | None = None  # the wire format sent to the provider (the client's own: passed through)
    # What the translation to wire_out could not carry ("tool web_search", …): reported, not failed
    dropped: tuple[str, ...] = ()
    # pinch_retrieve calls the proxy answered itself (router.clients.retrieve), and the tokens their
    # answers added to the prompt of the rounds after them
    retrieve_calls: int = 0
    retrieve_tokens: int = 0

    @property
    def dropped_text(self) -> str:
        """``dropped`` as one line (``tool web_search, item web_search_call``), as long as the client's
        names made it: the header and the decision row each bound it their way."""
        return ", ".join(self.dropped)


# The slots the edges read as well as the stages: each written by the one stage named.
SESSION: Slot[SessionKey] = Slot("session", SessionKey)  # session-fingerprint
CLASSIFICATION: Slot[Classification] = Slot("classification", Classification)  # classifier
RELEVANCE: Slot[Relevance] = Slot("relevance", Relevance)  # pinch-relevance
PINCH: Slot[PinchStats] = Slot("pinch", PinchStats)  # pinch-prune
# pinch-prune: the compressed tool results by position in view.conversation.tool_results() (None: none)
REWRITES: Slot[Mapping[int, Any]] = Slot("rewrites", Mapping)
CAPABILITIES: Slot[Capabilities] = Slot("capabilities", Capabilities)  # capability-gate
ROUTE: Slot[Route] = Slot("route", Route)  # capability-gate
UPSTREAM: Slot[UpstreamResult] = Slot("upstream", UpstreamResult)  # upstream-forward
