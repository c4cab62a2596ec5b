"""Pinch with a per-session ledger: sticky compression in cache-timed batches (ARCHITECTURE §5, issue #11). Pure.

Providers cache the longest unchanged prefix of a session's requests, so what
a request costs is mostly what follows the first byte that changed since the
previous one. :func:`prune_context` rewrites old tool results afresh on every
request; :func:`pinch_session` keeps the session's prompt stable instead:

* **Ledger.** A compressed result is remembered by its id (``tool_call_id``)
  and a digest of its content (:func:`content_digest`). On every later request
  of the session each trim candidate that is in the ledger with the same
  content is sent as exactly the same bytes — a placeholder as the ledger
  stored it, an elided result made again from the same text with the same
  function and settings — before anything else is decided. A
  result never comes back uncompressed. A result whose content changed, or
  that the client dropped (its own compaction, an edited history), simply no
  longer matches: the ledger applies only to results still present with
  identical content. An empty ledger (a new session, or one the store lost or
  evicted) means the request is pinched as a fresh session: one batch, never
  an error. Results that are not trim candidates (the protected last turns)
  are never touched, whatever the ledger says.
* **Two limits.** The model's context window is hard: the prompt must fit
  ``windows[0]`` (the window of the model the gate will prefer, less the room
  left for the answer), or, when even compressing every candidate cannot fit
  it, the first larger window that it can (the gate will then route there); it
  fits none ⇒ everything is compressed and the gate answers 400. The budget
  (``budget_tokens``) is soft: beyond it, new results are compressed only when
  it pays (:mod:`router.core.cache_timing`): the provider caches nothing, the
  cache is cold anyway, or — with a warm cache — the saving over the expected
  rest of the session covers the rewrite.
* **Batches with hysteresis.** Within the budget after the ledger is
  reapplied, nothing new is compressed. A batch compresses new candidates until
  the prompt is down to ``low_watermark`` × the budget (or × the window when
  that is smaller), so one rewrite buys many turns of stable prefix — except
  for a provider that caches nothing, where there is no prefix to keep and a
  batch stops at ``no_cache_watermark`` × the budget (1: at the budget, losing
  no more than it must), unless the window forces it further. With a
  relevance order, the least relevant new candidates go first (with its evidence, weighed against
  what each step really saves, first sight's text counted: :meth:`_Rewrites.by_worth`), and one whose
  saving the batch did not need stays as it is (the step that reached the target saved more than was
  missing: :meth:`_Rewrites.needed`); without one the oldest go first (:class:`BatchOrder`; ``bench/bench_batch_order``
  measures it against largest-first: they tie on 18 of 24 replays and each is
  cheaper on 3, but largest-first misses the cold-gaps target on one).
* **Placeholders for elided results, when the cache allows.** When a batch
  has compressed every new candidate and the prompt is still above its target,
  and the cache is not warm (cold, none) or the window forces it, the batch
  goes on turning the results that are elided (head and tail kept, in the
  ledger or in this batch) into placeholders, oldest first. The ledger then
  holds the placeholder: the result is sent as that from then on — it never
  returns to its elided form, let alone to the original. Only string results
  are turned so (a list of parts stays elided: the ledger recomputes those).
* **An early batch on a cold cache.** When the cache is cold (not for a
  provider that caches nothing) and the prompt is within the budget but above ``cold_batch_from`` ×
  the budget, a batch is made anyway: the prompt will cross the budget soon,
  most likely while the cache is warm, where a rewrite does not pay and the
  request would go out over budget until the next cold moment. Now the rewrite
  costs nothing extra.
* **Restore when it is free** (``policy.restore``, off by default). When the cache is cold (its
  lifetime exceeded) the whole prefix is prefilled anyway, so rewriting it costs nothing extra: with
  a relevance order the ledger is not reapplied but planned afresh, its results joining the new
  candidates where the order ranks them. Those the batch does not compress again (the budget allows
  them) go verbatim and leave the ledger; the stats count them as ``restored``. With a warm cache
  nothing compressed returns, and neither with a provider that caches nothing: there every request is
  a cold moment, so restoring would re-plan the prompt on every request, each restored result pushing
  another one out at the same budget, for no saving — the prompt would churn (measured: no cache at
  20k, 79.9 % of each request an unchanged prefix instead of 84.4 %) without keeping more of what the
  next step refers to on the shared transcripts (docs/relevance.md). Off (the default), a cold moment
  reapplies the ledger as any request does: measured at cold gaps, the re-plan brought back old
  results that the current step's evidence pointed at and, to pay for them, compressed results that
  had come since the last batch, mostly large and recent, which are what the next steps refer to;
  the uniform prune kept more of them (docs/decisions.md, #49).
* **First sight** (``policy.first_sight``; :mod:`router.core.pinch_first_sight`). Before anything
  is decided, the ledger's first-sight texts are resent (every tool result, the protected turns
  too) and the in-progress turn's new results reduced once, losslessly; the budget and the batch
  see those sizes. A result sent as its first-sight text is still a batch candidate, compressed
  from its original when that saves more (the ledger then holds the compression). A batch that
  compresses a result a first-sight text points at sends that text's result as its original (no
  pointer names a compressed result), and counts what that gives back: a result whose compression
  would save no more than that is taken on a second pass, once what points at it may have been
  compressed, and on a third together with what points at it (so a window fits as without first sight).
* The invariants of :func:`prune_context` hold: no message added, removed or
  reordered; every message but a compressed candidate is the same object; the
  input is never mutated; stats are exact.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import orjson
from xxhash import xxh3_64_hexdigest

from router.core.cache_timing import CacheState, CacheVerdict, rewrite_pays
from router.core.content import Message
from router.core.first_sight import EarlierIndex, FirstSightSettings
from router.core.frozen import frozen
from router.core.pinch import (
    _ELIDED,
    _PLACEHOLDER,
    MIN_SUMMARIZE_CHARS,
    RelevanceOrderError,
    _checked_order,
    _rewrite,
)
from router.core.pinch_first_sight import FirstSight, FirstSightEntries, FirstSightEntry, content_digest
from router.core.relevance import order_by_worth
from router.core.request_view import NO_REWRITES, Conversation, Rewrites, stable_id
from router.core.results import PinchMode, PinchStats
from router.core.tokens import (
    CHARS_PER_TOKEN,
    DEFAULT_ESTIMATOR,
    PromptSize,
    TokenEstimator,
)
from router.core.turns import candidate_results
from router.core.unit_memo import UnitMemo

# A max_summarize_chars no text reaches: every text compressed with it becomes a placeholder.
PLACEHOLDER_ONLY = 1 << 62
# A session's ledger keeps at most this many results; the oldest are forgotten first.
MAX_LEDGER_RESULTS = 4096


def result_id(message: Message, index: int) -> str:
    """How the ledger names a tool result: its ``tool_call_id``, else its position."""
    return stable_id(message.get("tool_call_id"), index)


@dataclass(frozen=True, slots=True)
class Ledger:
    """The results a session has compressed: result id → digest of each content compressed under it → the
    placeholder text that was sent for it (None when it was elided, which is recomputed: head and tail of
    the very same text give the very same bytes). Placeholders are kept because they are short and name
    a tool found elsewhere in the history; resending the stored text is also the cheapest reapply.

    ``first_sight``: the results reduced at first sight, by id and digest likewise, each with the text
    sent (never recomputed: it depended on the earlier results of its moment) and what it points at
    (:class:`~router.core.pinch_first_sight.FirstSightEntry`); a batch that compresses one further moves
    it to ``compressed``. ``first_seen``: the results of the previous request's in-progress turn that went
    verbatim, never reduced later. Neither counts in ``len``: it counts the compressed results."""

    compressed: Mapping[str, Mapping[str, str | None]] = field(default_factory=dict)
    first_sight: FirstSightEntries = field(default_factory=dict)
    first_seen: tuple[str, ...] = ()

    def __len__(self) -> int:
        return sum(len(digests) for digests in self.compressed.values())

    def holds(self, message: Message, index: int) -> bool:
        digests = self.compressed.get(result_id(message, index))
        return digests is not None and content_digest(message.get("content")) in digests

    def without(self, removed: Iterable[tuple[str, str]]) -> Ledger:
        """This ledger less the ``(result id, digest)`` entries given (restored results)."""
        return replace(self, compressed=_without(self.compressed, removed))

    def with_results(self, added: Iterable[tuple[str, str, str | None]]) -> Ledger:
        """This ledger plus ``(result id, digest, placeholder)`` entries, the oldest ids forgotten beyond :data:`MAX_LEDGER_RESULTS`;
        a first-sight entry of the same result is replaced (a batch compressed it further)."""
        added = list(added)
        return replace(self, compressed=_with(self.compressed, added), first_sight=_without(self.first_sight, ((r, d) for r, d, _ in added)))

    def with_first_sight(self, added: Iterable[tuple[str, str, FirstSightEntry]], dropped: Iterable[tuple[str, str]], seen: tuple[str, ...]) -> Ledger:
        """This ledger with the first-sight entries ``added``, less those ``dropped``, and ``seen`` as the verbatim ones."""
        return replace(self, first_sight=_with(_without(self.first_sight, dropped), added), first_seen=seen)


def _with(entries: Mapping[str, Mapping[str, Any]], added: Iterable[tuple[str, str, Any]]) -> dict[str, Mapping[str, Any]]:
    """``entries`` (id → digest → value) plus the ``(id, digest, value)`` given, the oldest ids forgotten beyond :data:`MAX_LEDGER_RESULTS`."""
    out = dict(entries)
    for rid, digest, value in added:
        out[rid] = {**out.pop(rid, {}), digest: value}
    while len(out) > MAX_LEDGER_RESULTS:
        del out[next(iter(out))]
    return out


def _without(entries: Mapping[str, Mapping[str, Any]], removed: Iterable[tuple[str, str]]) -> Mapping[str, Mapping[str, Any]]:
    """``entries`` (id → digest → value) less the ``(id, digest)`` given; the very mapping when none was there."""
    out: dict[str, Mapping[str, Any]] | None = None
    for rid, digest in removed:
        current = (out if out is not None else entries).get(rid)
        if current is None or digest not in current:
            continue
        if out is None:
            out = dict(entries)
        digests = {d: value for d, value in current.items() if d != digest}
        if digests:
            out[rid] = digests
        else:
            del out[rid]
    return entries if out is None else out


EMPTY_LEDGER = Ledger()
_ABSENT = object()
# How a result sent as its first-sight text is marked among the compressions' kinds (never a CompressionKind).
_FIRST_SIGHT = "first sight"


def _placeholder_text(content: Any, kind: Any) -> str | None:
    """A compressed result's text when it is a placeholder string (what the ledger keeps), else None."""
    return content if kind is _PLACEHOLDER and type(content) is str else None


@frozen
class PinchSession:
    """What pinch remembers about one session between its requests (a session-state value).

    ``last_seen``: the clock when its previous request was pinched; ``provider``:
    where that request was meant to go; ``requests``: how many it has had;
    ``stale_keys``: the signed reasoning whose prefix its batches changed, left out of every
    later request (:class:`~router.core.results.StaleSignatures`' keys), oldest first.
    """

    ledger: Ledger = EMPTY_LEDGER
    last_seen: float | None = None
    provider: str | None = None
    requests: int = 0
    stale_keys: tuple[str, ...] = ()

    def encode(self) -> bytes:
        ledger = self.ledger
        return orjson.dumps(
            {
                "ledger": ledger.compressed,
                "last_seen": self.last_seen,
                "provider": self.provider,
                "requests": self.requests,
                "unbound": self.stale_keys,  # its stored name: values written by earlier versions read the same
                # each entry as [text, [[id, digest], ...]]
                "first_sight": {rid: {d: [e.text, [list(p) for p in e.points_at]] for d, e in ds.items()} for rid, ds in ledger.first_sight.items()},
                "first_seen": ledger.first_seen,
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> PinchSession:
        raw = orjson.loads(data)
        # "first_sight" and "first_seen" came later: a value stored before them has none
        entries = {
            rid: {d: FirstSightEntry(text, tuple((pid, pd) for pid, pd in points)) for d, (text, points) in ds.items()}
            for rid, ds in raw.get("first_sight", {}).items()
        }
        ledger = Ledger(raw["ledger"], entries, tuple(raw.get("first_seen", ())))
        # "unbound" came later: a value stored before it has none recorded
        return cls(ledger, raw["last_seen"], raw["provider"], raw["requests"], tuple(raw.get("unbound", ())))


class BatchOrder(enum.StrEnum):
    """Which new candidates a batch compresses first when no relevance order is given."""

    OLDEST = "oldest"  # the cache is busted from the oldest uncompressed result on
    LARGEST = "largest"  # fewest results rewritten for the tokens, wherever they are


@dataclass(frozen=True, slots=True)
class WindowLimit:
    """A context window pinch must fit: the model's, and the prompt tokens it leaves room for."""

    model: str
    provider: str
    context_window: int
    prompt_limit: int  # context_window − the room kept for the answer
    thinking_binding: bool = False  # the model checks the prefix of signed thinking (models[].thinking_binding)


@frozen
class SessionPinch:
    messages: list[Message]
    stats: PinchStats
    ledger: Ledger


@dataclass(frozen=True, slots=True)
class SessionRewrites:
    """:func:`pinch_conversation`'s answer: the rewrites by result position, exact stats, the new ledger,
    and ``first_changed``: the position of the first result sent otherwise than on the session's
    previous request (None: every result went as before), from which on the prompt's bytes differ."""

    rewrites: Rewrites
    stats: PinchStats
    ledger: Ledger
    first_changed: int | None = None
    memo: LedgerMemo | None = None  # step 1 on this conversation, for the next request that resumes it
    earlier: EarlierIndex | None = None  # first sight's index of the results, for the next request (pinch_conversation)
    units: UnitMemo | None = None  # each result's compression and call, for the next request (pinch_conversation)


class PinchNote(NamedTuple):
    """What pinch-prune keeps on a body kept for the next request (``KnownBody.pinch``,
    :mod:`router.core.resent_prefix`): the answer's ``memo``, ``earlier`` and ``units``, which the next
    request that resumes the body passes to :func:`pinch_conversation`."""

    memo: LedgerMemo | None
    earlier: EarlierIndex | None
    units: UnitMemo | None = None


@dataclass(frozen=True, slots=True, eq=False)
class LedgerMemo:
    """Step 1 of :func:`pinch_conversation` (the ledger reapplied) on one conversation, for the next
    request whose conversation begins with the very same units (a resent body: its first units are
    the earlier body's objects, :mod:`router.core.resent_prefix`).

    What step 1 decides for a candidate depends on nothing but its unit (content, id, size), the
    units before it (the tool name a placeholder recomputed names: on a format whose names may read
    later units, ``Conversation.names_from_earlier_units`` false, such a step leaves no memo),
    the ledger, ``max_summarize_chars`` and the estimator. So when all of those are the same, the
    decisions on the candidates the two conversations share are the same, and are taken from here
    instead of digesting and rewriting every old result again (on the 230 KB transcript, ~85 % of
    pinch's time a request). Never changed once made.
    """

    held: Mapping[str, Mapping[str, str | None]]  # the ledger reapplied (Ledger.compressed)
    max_chars: int
    estimator: TokenEstimator
    candidates: list[int]  # the candidates decided (result positions, oldest first)
    last_unit: int  # the unit of the last of them: the next conversation must share it (-1: none)
    fresh: tuple[int, ...]  # the candidates (indexes into ``candidates``) the ledger did not hold
    rewrites: Mapping[int, Any]  # result position → the content sent for it
    kinds: Mapping[int, Any]  # result position → CompressionKind
    saved: Mapping[int, int]  # unit → tokens saved
    elided: int

    def shared(self, candidates: list[int], held: Mapping[str, Any], max_chars: int, estimator: TokenEstimator, shared_units: int) -> int:
        """How many of ``candidates`` (the first ones) the memo decides for a conversation whose first
        ``shared_units`` units are this one's: all of its own, or none."""
        count = len(self.candidates)
        if (
            self.last_unit >= shared_units
            or max_chars != self.max_chars
            or estimator != self.estimator
            or len(candidates) < count
            or candidates[:count] != self.candidates
            or not (held is self.held or held == self.held)
        ):
            return 0
        return count


@frozen
class PinchPolicy:
    """How far pinch compresses, and when (the ``pinch.*`` settings, as the core reads them).

    ``budget_tokens``: the soft limit; ``keep_last_turns``: the turns never touched;
    ``max_summarize_chars``: a longer result is elided to this many characters, a shorter one
    becomes a placeholder; ``low_watermark``: a batch compresses down to this share of the budget
    (or of the window); ``cold_batch_from``: the share of the budget above which a cold cache gets
    an early batch (None: never early); ``no_cache_watermark``: where a batch stops when the
    provider caches nothing; ``batch_order``: which new results a batch takes first without a
    relevance order; ``first_sight``: the thresholds of first sight (:mod:`router.core.pinch_first_sight`),
    None when it is off; ``restore``: a cold moment with a relevance order plans the ledger afresh
    (restore, module doc).
    """

    budget_tokens: int
    keep_last_turns: int
    max_summarize_chars: int
    low_watermark: float = 0.6
    cold_batch_from: float | None = None
    no_cache_watermark: float = 1.0
    batch_order: BatchOrder = BatchOrder.OLDEST
    first_sight: FirstSightSettings | None = None
    restore: bool = False


def pinch_conversation(
    conversation: Conversation,
    ledger: Ledger,
    policy: PinchPolicy,
    cache: CacheState,
    *,
    windows: Sequence[WindowLimit] = (),
    relevance_order: Sequence[int] | None = None,
    relevance_evidence: Sequence[float] | None = None,
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
    tools: Any = None,
    measured: PromptSize | None = None,
    soft_hold: str | None = None,
    memo: LedgerMemo | None = None,
    shared_units: int = 0,
    query: Sequence[str] = (),
    retrieve: bool = False,
    earlier: EarlierIndex | None = None,
    unit_memo: UnitMemo | None = None,
) -> SessionRewrites:
    """Reapply ``ledger``, then compress a new batch when a limit and the cache call for one (module doc).

    Works on any wire format's :class:`~router.core.request_view.Conversation`, under ``policy``
    (how far and when; :class:`PinchPolicy`) and ``cache`` (the provider's prompt cache now).
    ``windows``: the hard limits in the order to try (the preferred model's
    first); none ⇒ only the budget applies. ``relevance_order`` lists every
    candidate index exactly once (else :class:`RelevanceOrderError`, checked
    only when a batch is made); ``relevance_evidence``, each candidate's evidence
    (:func:`~router.core.relevance.candidate_evidence`; one per candidate, else
    :class:`RelevanceOrderError`): with it the batch orders the new candidates by
    that evidence per token each step really saves (:meth:`_Rewrites.by_worth`), not
    by the saving of the original the order was ranked with. ``soft_hold``: why a batch only the budget calls for
    waits (None: it does not; the window always forces one). A cold cache with a relevance order
    re-plans the ledger when ``policy.restore`` says so (restore, module doc). Returns the
    rewrites by result position, exact stats (with the reason a batch was or was
    not made) and the session's new ledger. ``memo``: the :class:`LedgerMemo` of an earlier request whose
    conversation's first ``shared_units`` units are this one's very objects; the answer's ``memo`` is this
    request's, for the next. First sight (``policy.first_sight``) reduces the in-progress turn's new
    results, and the ledger's first-sight texts are resent, before the batch is planned
    (:mod:`router.core.pinch_first_sight`); ``query``: the task and the current step; ``retrieve``: the
    model can call ``pinch_retrieve`` on this request (a lossy cut is made only then, and only when
    ``policy.first_sight.lossy``). ``earlier``: the answer's ``earlier`` of the conversation's previous
    request (the index of the results first sight reduced against, extended when this one continues it).
    ``unit_memo``: the answer's ``units`` of the request whose conversation's first ``shared_units`` units
    are this one's (each result's compression and call, :mod:`router.core.unit_memo`).
    """
    budget_tokens, keep_last_turns, max_summarize_chars = policy.budget_tokens, policy.keep_last_turns, policy.max_summarize_chars
    low_watermark, cold_batch_from, no_cache_watermark, batch_order = (
        policy.low_watermark, policy.cold_batch_from, policy.no_cache_watermark, policy.batch_order
    )
    if budget_tokens < 0 or keep_last_turns < 1 or max_summarize_chars < MIN_SUMMARIZE_CHARS or not 0 < low_watermark <= 1:
        raise ValueError(
            f"need budget_tokens >= 0, keep_last_turns >= 1, max_summarize_chars >= {MIN_SUMMARIZE_CHARS}, "
            f"0 < low_watermark <= 1; got {budget_tokens}, {keep_last_turns}, {max_summarize_chars}, {low_watermark}"
        )
    size = measured if measured is not None else estimator.measure(conversation.units, tools)
    sizes, original = size.sizes, size.tokens
    early_from = math.inf if cold_batch_from is None or cold_batch_from >= 1 or cache.verdict is not CacheVerdict.COLD else cold_batch_from * budget_tokens
    if (
        not ledger.compressed
        and not ledger.first_sight
        and policy.first_sight is None
        and original <= min(budget_tokens, early_from)
        and (not windows or original <= windows[0].prompt_limit)
    ):
        # nothing to reapply, nothing to decide: no rewrite, as prune_results returns it
        return SessionRewrites(NO_REWRITES, PinchStats(PinchMode.WITHIN_BUDGET, original, original, reason="within budget"), ledger)
    work = _Rewrites(conversation, sizes, max_summarize_chars, UnitMemo(conversation, max_summarize_chars, estimator, unit_memo, shared_units))
    result_units, units, key, id_key = work.result_units, work.units, work.key, conversation.result_id_key
    candidates = candidate_results(conversation, keep_last_turns)

    # 1. the ledger, before anything is decided. The loop runs on every request of a session, over
    # every old result (84 on the 224 KB transcript), so it is kept flat: stable_id and
    # content_digest inline, the counters local.
    held, saved_at, rewrites, kinds = ledger.compressed, work.saved, work.rewrites, work.kinds
    # a cold cache (its lifetime exceeded, not a provider that caches nothing): the ledger is planned afresh, when asked
    restoring: Collection[int] = ()
    if held and relevance_order is not None and cache.verdict is CacheVerdict.COLD and policy.restore:
        restoring = frozenset(candidates)
    # a placeholder was made again, naming its tool: the memo would depend on later units, on a format
    # whose names may read them
    named = False
    names_later = not getattr(conversation, "names_from_earlier_units", False)
    if not held:
        fresh = list(range(len(candidates)))  # candidate positions not in the ledger
    else:
        fresh = []
        elided = 0
        start = memo.shared(candidates, held, max_summarize_chars, estimator, shared_units) if memo is not None and not restoring else 0
        if start:
            fresh.extend(memo.fresh)
            rewrites.update(memo.rewrites)
            kinds.update(memo.kinds)
            saved_at.update(memo.saved)
            elided = memo.elided
        for position in range(start, len(candidates)):
            result_position = candidates[position]
            unit = result_units[result_position]
            holder = units[unit]
            call_id = holder.get(id_key)
            digests = held.get(call_id if type(call_id) is str and call_id else f"#{unit}")
            if digests is None:
                fresh.append(position)
                continue
            content = holder.get(key)
            sent = digests.get(
                xxh3_64_hexdigest(content.encode("utf-8", "surrogatepass")) if type(content) is str else content_digest(content), _ABSENT
            )
            if sent is _ABSENT:
                fresh.append(position)
                continue
            if restoring and result_position in restoring:
                fresh.append(position)
                work.restoring.append((result_position, call_id if type(call_id) is str and call_id else f"#{unit}"))
                continue
            if type(sent) is str and type(content) is str:
                # the placeholder sent before, resent as it was; only the content differs from the
                # client's message, so the saving follows from the two lengths
                size = sizes[unit]
                rewrites[result_position], kinds[result_position] = sent, _PLACEHOLDER
                saved_at[unit] = (size + len(sent) - len(content)) // -CHARS_PER_TOKEN - size // -CHARS_PER_TOKEN
                continue
            rewrite = work.compression(unit)
            if rewrite is None:
                continue  # it no longer saves anything (the settings changed): it stays as it is
            rewrites[result_position], kind, saved_at[unit] = rewrite
            kinds[result_position] = kind
            elided += kind is _ELIDED
            named = named or (kind is _PLACEHOLDER and names_later)
        work.elided = elided
        if memo is not None and start == len(candidates):
            work.memo = memo  # nothing new decided: the same memo serves the next request
        elif not restoring and not named:
            last_unit = result_units[candidates[-1]] if candidates else -1
            work.memo = LedgerMemo(
                held, max_summarize_chars, estimator, candidates, last_unit, tuple(fresh), dict(rewrites), dict(kinds), dict(saved_at), elided
            )
    reapplied = len(saved_at)
    if policy.first_sight is not None or ledger.first_sight:
        # first sight: the ledger's texts resent (the protected turns too), the in-progress turn's new results reduced
        sight = FirstSight(conversation, sizes, work.units_memo)
        sight.resend(ledger.first_sight, kinds)
        sight.reduce(kinds, ledger.first_seen, policy.first_sight, query, lossy=retrieve, earlier=earlier)
        work.first_sight(sight)
    work.total_saved = sum(saved_at.values())
    current = original - work.total_saved

    # 2. is a batch needed, and down to what?
    hard = windows[0] if windows else None
    forced = hard is not None and current > hard.prompt_limit
    pays_check = False
    if forced:
        reason = f"over the {hard.context_window}-token window of {hard.model}"
    elif current <= budget_tokens:
        if current <= early_from:
            return work.result(original, budget_tokens, ledger, reapplied, "within budget", batched=None)
        reason = f"near budget; {cache.reason}"
    elif cache.verdict is CacheVerdict.WARM:
        reason, pays_check = "over budget; warm cache", True
    else:
        reason = f"over budget; {cache.reason}"
    if soft_hold is not None and not forced:
        return work.result(original, budget_tokens, ledger, reapplied, f"{reason}; {soft_hold}", batched=None)

    # 3. the batch: new candidates in order, down to the low watermark
    if relevance_order is not None:
        fresh_positions = set(fresh)
        order = [p for p in _checked_order(relevance_order, len(candidates)) if p in fresh_positions]
        if relevance_evidence is not None:
            order = work.by_worth(order, relevance_evidence, candidates)
    elif batch_order is BatchOrder.LARGEST:
        order = sorted(fresh, key=lambda p: -sizes[result_units[candidates[p]]])
    else:
        order = fresh
    # steps: (result position, its rewrite, the tokens it saves beyond what is sent for it already)
    plan = work.steps(candidates[p] for p in order)
    compressions = len(plan)  # the steps compressing new candidates; placeholder steps follow them
    if forced or cache.verdict is not CacheVerdict.WARM:
        plan += work.placeholder_steps(plan)
    limit = budget_tokens
    if hard is not None:
        reachable = current - sum(step[2] for step in plan)
        window = next((w for w in windows if reachable <= w.prompt_limit), windows[-1])
        if reachable > window.prompt_limit:
            reason += "; fits no window even with every old result compressed"
        elif window is not hard:
            reason += f"; toward the {window.context_window}-token window of {window.model}"
        limit = min(limit, window.prompt_limit)
    # The low watermark buys turns of stable prefix. A provider that caches nothing has none to keep,
    # so there a batch (not forced by the window) stops at no_cache_watermark × the budget: at the
    # budget by default, losing no more than it must.
    soft_only = hard is None or current <= hard.prompt_limit
    share = no_cache_watermark if cache.verdict is CacheVerdict.NONE and soft_only else low_watermark
    target = math.floor(share * limit)
    batch: list[tuple[int, tuple[Any, Any, int], int]] = []
    for step in plan:
        if current <= target:
            break
        batch.append(step)
        current -= step[2]
    if relevance_order is not None:
        batch = work.needed(batch, compressions, target - current)
    if pays_check:
        saved = sum(step[2] for step in batch)
        first = min((result_units[step[0]] for step in batch), default=len(sizes))
        if not batch or not rewrite_pays(saved, work.tokens_from(first, estimator) - saved, cache.requests):
            return work.result(original, budget_tokens, ledger, reapplied, reason + ", rewrite does not pay", batched=None)
        reason += ", rewrite pays"
    for rp, rewrite, _ in batch:
        work.apply(rp, rewrite)
    mode = PinchMode.UNIFORM if relevance_order is None else PinchMode.RELEVANCE
    return work.result(original, budget_tokens, ledger, reapplied, reason, batched=mode)


Step = tuple[int, tuple[Any, Any, int], int]  # (result position, its rewrite, the tokens it saves beyond what is sent for it)


class _Rewrites:
    """The compressions one request makes, in application order, and what they save."""

    def __init__(self, conversation: Conversation, sizes: list[int], max_chars: int, units: UnitMemo) -> None:
        self.conversation, self.sizes, self.max_chars, self.units_memo = conversation, sizes, max_chars, units
        self.result_units, self.units, self.key = conversation.result_units(), conversation.units, conversation.result_key
        self.rewrites: dict[int, Any] = {}  # result position → new content
        self.saved: dict[int, int] = {}  # unit index → tokens saved
        self.total_saved = self.elided = 0
        self.new: dict[int, Any] = {}  # result position → CompressionKind, the batch's members
        self.turned_from_ledger = 0  # ledger results this batch made placeholders
        self.kinds: dict[int, Any] = {}  # result position → CompressionKind (or _FIRST_SIGHT), every rewrite sent
        self.restoring: list[tuple[int, str]] = []  # (result position, ledger id) of held results planned afresh
        self.memo: LedgerMemo | None = None  # step 1's decisions, for the next request (pinch_conversation)
        self.sight: FirstSight | None = None  # first sight's part of this request

    def content(self, position: int) -> Any:
        return self.units[self.result_units[position]].get(self.key)

    def rewrite(self, position: int) -> tuple[Any, Any, int] | None:
        """Result ``position`` compressed from its original (made once a request, or taken from the request
        this one resumed: :mod:`router.core.unit_memo`; :meth:`by_worth` and :meth:`steps` both ask)."""
        return self.compression(self.result_units[position])

    def compression(self, unit: int) -> tuple[Any, Any, int] | None:
        """:meth:`rewrite`, by the result's unit."""
        memo = self.units_memo
        found = memo.compression(unit, _ABSENT)
        if found is _ABSENT:
            found = _rewrite(self.units[unit].get(self.key), memo, unit, self.max_chars, self.sizes[unit])
            memo.keep_compression(unit, found)
        return found  # type: ignore[no-any-return]

    def by_worth(self, order: Sequence[int], evidence: Sequence[float], candidates: Sequence[int]) -> list[int]:
        """The new candidates of ``order`` (candidate indexes, as relevance ranked them) least worth keeping
        per token first (:func:`~router.core.relevance.order_by_worth`), each weighed against what its
        step would save: its compression less what first sight's text saves already and less what the
        texts pointing at it give back (:meth:`steps`). Relevance ranked by the saving of the original; a
        result first sight cut or pointed at saves far less, and ranked so, a batch spent its steps on
        such results, each losing a result for a few tokens, then had to take more. ``order`` as it is
        when first sight changed no step's saving. ``evidence``: one per candidate (``candidates``: their
        result positions, oldest first)."""
        if len(evidence) != len(candidates):
            raise RelevanceOrderError(f"relevance evidence has {len(evidence)} values for {len(candidates)} candidates")
        sight, saved, result_units = self.sight, self.saved, self.result_units
        if sight is None or not sight.rewrites:
            return list(order)
        gain: dict[int, int] = {}
        changed = False
        for rp in (candidates[i] for i in order):
            rewrite = self.rewrite(rp)
            given_back = (saved[result_units[rp]] if rp in sight.rewrites else 0) + sum(saved[result_units[p]] for p in sight.dependents(rp))
            gain[rp] = (rewrite[2] if rewrite is not None else 0) - given_back
            changed = changed or given_back != 0
        if not changed:
            return list(order)
        # the held candidates count in the recency scale (as in the ranking) but are no batch steps
        return [i for i in order_by_worth([gain.get(rp, 0) for rp in candidates], evidence) if candidates[i] in gain]

    def needed(self, batch: Sequence[Step], compressions: int, slack: int) -> list[Step]:
        """``batch`` without the steps it did not need. Its first ``compressions`` steps compress new
        candidates, least worth keeping first; any after them turn elided results into placeholders. The
        batch stops at the step that reaches its target, which may save more than was missing (``slack``:
        the tokens it saved beyond the target): a new candidate whose steps save no more than that slack
        was not needed, so it stays as it is sent. Those most worth keeping (the last) are looked at first.
        One that first-sight texts point at stays (its saving is net of the pointers it releases)."""
        sight = self.sight
        turned = {step[0]: step for step in batch[compressions:]}
        dropped: set[int] = set()
        for position, _, saved in reversed(batch[:compressions]):
            placeholder = turned.get(position)
            total = saved + (placeholder[2] if placeholder is not None else 0)
            if 0 < total <= slack and (sight is None or not sight.dependents(position)):
                slack -= total
                dropped.add(position)
        return [step for step in batch if step[0] not in dropped] if dropped else list(batch)

    def first_sight(self, sight: FirstSight) -> None:
        """Send first sight's texts (resent and new), counting what they save."""
        self.sight = sight
        rewrites, kinds, saved, result_units = self.rewrites, self.kinds, self.saved, self.result_units
        for position, content in sight.rewrites.items():
            rewrites[position], kinds[position] = content, _FIRST_SIGHT
            saved[result_units[position]] = sight.saved[position]

    def steps(self, positions: Iterable[int]) -> list[Step]:
        """A batch's steps over the new candidates at ``positions``, in that order: each compressed from
        its original, saving what it saves beyond the first-sight text sent for it, less the first-sight
        texts that point at it (they go as their originals once it is compressed: :meth:`apply`)."""
        sight = self.sight
        if sight is None:
            return [(rp, rewrite, rewrite[2]) for rp in positions if (rewrite := self.rewrite(rp)) is not None]
        saved, result_units = self.saved, self.result_units
        live = set(sight.rewrites)  # the first-sight texts still sent once the steps so far are made
        steps: list[Step] = []
        rewrites = {rp: rewrite for rp in positions if (rewrite := self.rewrite(rp)) is not None}
        later, taken = list(rewrites.items()), set()
        # A result whose pointers save more than compressing it would is taken on a second pass, once
        # the results pointing at it may have been compressed themselves (then it saves all it can); on
        # a third, together with them, when that saves anything (a window may need it).
        pointed_at = sight.pointers  # most candidates no first-sight text points at: their step is theirs alone
        for joint in (False, False, True):
            todo, later = later, []
            for rp, rewrite in todo:
                if rp in taken:
                    continue
                gain = rewrite[2] - (saved[result_units[rp]] if rp in live else 0)
                released = sight.dependents(rp, live) if rp in pointed_at else None
                if not released:  # the group below, of one step (on a long session, nearly every candidate)
                    if gain <= 0:
                        later.append((rp, rewrite))
                        continue
                    steps.append((rp, rewrite, gain))
                    taken.add(rp)
                    live.discard(rp)
                    continue
                gain -= sum(saved[result_units[p]] for p in released)
                group = [(rp, rewrite, gain)]
                if joint:  # each result pointing at it compressed from its original, after it
                    group += [(p, rewrites[p], rewrites[p][2]) for p in released if p in rewrites and p not in taken]
                if sum(step[2] for step in group) <= 0:
                    later.append((rp, rewrite))
                    continue
                steps += group
                taken.update(step[0] for step in group)
                live.difference_update(released)
                live.discard(rp)
        return steps

    def placeholder_steps(self, plan: Sequence[Step]) -> list[Step]:
        """Steps turning each elided string result (sent elided already, or elided by ``plan``) into a
        placeholder, oldest first, each with the tokens it saves beyond its elision."""
        result_units = self.result_units
        elided = {rp: self.saved[result_units[rp]] for rp, kind in self.kinds.items() if kind is _ELIDED}
        elided.update((rp, saved) for rp, (_, kind, saved), _ in plan if kind is _ELIDED)
        steps = []
        for rp in sorted(elided):
            content = self.content(rp)
            if type(content) is not str:
                continue  # the ledger recomputes a list of parts: it stays elided
            unit = result_units[rp]
            rewrite = _rewrite(content, self.conversation, unit, PLACEHOLDER_ONLY, self.sizes[unit])
            if rewrite is not None and rewrite[2] > elided[rp]:
                steps.append((rp, rewrite, rewrite[2] - elided[rp]))
        return steps

    def apply(self, position: int, rewrite: tuple[Any, Any, int]) -> None:
        """Send ``rewrite`` for result ``position``, a new batch member (or a deeper rewrite of one sent already)."""
        unit = self.result_units[position]
        if self.sight is not None:
            # what first sight points at this result with goes as its original (no pointer names a compressed result)
            for released in self.sight.release(position):
                del self.rewrites[released], self.kinds[released]
                self.total_saved -= self.saved.pop(self.result_units[released])
            self.sight.compressed(position)
        previous = self.kinds.get(position)
        if previous is not None:
            # an elided result made a placeholder, or a first-sight text compressed further: it counts
            # as new, no longer as reapplied
            self.total_saved -= self.saved[unit]
            if previous is not _FIRST_SIGHT:
                self.elided -= previous is _ELIDED
                self.turned_from_ledger += position not in self.new
        self.rewrites[position], kind, saved = rewrite
        self.new[position] = kind
        self.kinds[position] = kind
        self.saved[unit] = saved
        self.total_saved += saved
        self.elided += kind is _ELIDED

    def tokens_from(self, unit: int, estimator: TokenEstimator) -> int:
        """Tokens of the units from ``unit`` on, as they are now (rewrites applied so far)."""
        return estimator.sizes_tokens(self.sizes[unit:]) - sum(saved for i, saved in self.saved.items() if i >= unit)

    def result(
        self, original: int, budget: int, ledger: Ledger, reapplied: int, reason: str, batched: PinchMode | None
    ) -> SessionRewrites:
        final = original - self.total_saved
        if batched is not None:
            mode = batched
        else:
            mode = PinchMode.WITHIN_BUDGET if final <= budget else PinchMode.DEFERRED
        sight, result_units = self.sight, self.result_units
        sighted = [position for position, kind in self.kinds.items() if kind is _FIRST_SIGHT]
        compressed = len(self.kinds) - len(sighted)
        restored = [(position, rid) for position, rid in self.restoring if position not in self.new]
        sighted_new = sum(position in sight.new for position in sighted) if sight is not None else 0
        stats = PinchStats(
            mode,
            original,
            final,
            compressed,
            self.elided,
            compressed - self.elided,
            reapplied=reapplied - self.turned_from_ledger,
            newly_compressed=len(self.new),
            restored=len(restored),
            reason=reason + (f"; {len(restored)} restored" if restored else ""),
            compressions=tuple(sorted((p, kind) for p, kind in self.kinds.items() if kind is not _FIRST_SIGHT)),
            first_sight_new=sighted_new,
            first_sight_reapplied=len(sighted) - sighted_new,
            first_sight_saved=sum(self.saved[result_units[position]] for position in sighted),
        )
        if restored:
            ledger = ledger.without((rid, content_digest(self.content(position))) for position, rid in restored)
        if sight is not None and (sight.new or sight.dropped or sight.seen != ledger.first_seen):
            ledger = ledger.with_first_sight(sight.added, sight.dropped, sight.seen)
        if self.new:
            ledger = ledger.with_results(self._entry(p, kind) for p, kind in self.new.items())
        reverted = sight.reverted if sight is not None else ()
        first_changed = min([*self.new, *(position for position, _ in restored), *reverted], default=None)
        earlier = self.sight.earlier if self.sight is not None else None
        return SessionRewrites(self.rewrites, stats, ledger, first_changed, self.memo, earlier, self.units_memo)

    def _entry(self, position: int, kind: Any) -> tuple[str, str, str | None]:
        """The ledger entry of a batch member: its id, its content's digest, the placeholder sent (None: elided)."""
        unit = self.result_units[position]
        holder = self.units[unit]
        return stable_id(holder.get(self.conversation.result_id_key), unit), content_digest(holder.get(self.key)), _placeholder_text(self.rewrites[position], kind)
