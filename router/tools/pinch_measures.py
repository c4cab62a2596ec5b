"""What ``eval-pinch`` measures about a replayed session, as functions of what it sent. Pure.

A provider's prompt cache (Anthropic's ``cache_control``, OpenAI's automatic
cache, a local server's KV cache) serves the longest *unchanged prefix* of a
request; what follows the first changed byte is prefilled and billed afresh.
So a session is judged by the requests that really went upstream:

* :func:`unchanged_prefix_tokens`: how much of a request repeats the previous
  one from its start: the tool schemas (sent before the messages by every
  provider), the leading messages that are equal, and of the first differing
  message the share of its JSON it still has in common from the start.
* :func:`price_session`: each request's cached and fresh tokens and its cost
  with a :class:`CachePricing`. A request is served from cache up to its
  unchanged prefix when the previous request was sent at most
  ``lifetime_seconds`` earlier (every hit refreshes the entry); otherwise,
  and with no pricing at all (a provider that caches nothing), every token is
  fresh. Cached tokens cost ``read``, fresh ones ``write`` (they are written
  to the cache); without a cache a token costs 1. Only the previous request's
  entry is consulted: a simplification that favours no mode.
* :func:`referenced_results`: the quality figure's ground truth. An old tool
  result is *referenced* by the agent's next step when that step (its text and
  tool-call arguments) uses a file path or code identifier that occurs in
  that result but nowhere in the protected tail (the last turns, which pinch
  never touches), so the agent had it from the old results.
* :func:`recency_kept`: the baseline at equal tokens: compress old results
  oldest first (with pinch's own :func:`compress_tool_result`) until the
  prompt is no larger than a given size; the newest stay as they are sent
  (verbatim, or as first sight reduced them: the same forms the mode sends).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from router.core.content import Message, content_text

from router.wire.openai_chat.view import tool_call_arguments
from router.core.pinch import compress_tool_result
from router.wire.openai_chat.pinch import tool_name_for
from router.core.tokens import TokenEstimator, tools_tokens


@dataclass(frozen=True, slots=True)
class CachePricing:
    """Input-price multipliers of a prompt cache, and how long an unused entry lives."""

    read: float
    write: float
    lifetime_seconds: float


# Anthropic: a cache read costs 0.1× the input price, a write 1.25×; entries live 5 minutes unless hit.
ANTHROPIC = CachePricing(read=0.1, write=1.25, lifetime_seconds=300.0)
# Gemini's implicit caching (2.5 and newer): a cached token costs 0.1× the input price (a 90% discount),
# nothing extra to write; how long an entry lives is not documented ("a short amount of time"): 5 minutes.
GEMINI = CachePricing(read=0.1, write=1.0, lifetime_seconds=300.0)


@dataclass(frozen=True, slots=True)
class SentRequest:
    """One request as it went upstream: its tokens, the part that repeats the previous
    request, and the seconds since the previous request was sent."""

    tokens: int
    prefix_tokens: int
    gap_seconds: float


@dataclass(frozen=True, slots=True)
class SessionCost:
    """A session's requests priced: totals over its requests."""

    requests: int
    tokens_sent: int
    prefix_tokens: int
    cached_tokens: int
    fresh_tokens: int
    cost: float

    @property
    def prefix_share(self) -> float:
        """Share of the tokens sent that repeated the previous request's start."""
        return self.prefix_tokens / self.tokens_sent if self.tokens_sent else 0.0

    @property
    def fresh_per_request(self) -> float:
        return self.fresh_tokens / self.requests if self.requests else 0.0


def unchanged_prefix_tokens(
    previous: Sequence[Message] | None, current: Sequence[Message], estimator: TokenEstimator, tools: Any = None
) -> int:
    """Tokens at the start of ``current`` that ``previous`` sent identically (0 with no previous).

    The tool schemas come first (the same on every request of a replay), then
    whole equal messages, then of the first differing message the share of
    its tokens that its JSON has in common with the previous one's from the start.
    """
    if previous is None:
        return 0
    tokens = tools_tokens(tools)
    for before, now in zip(previous, current, strict=False):
        if before == now:
            tokens += estimator.message_tokens(now)
            continue
        old, new = orjson.dumps(before), orjson.dumps(now)
        return tokens + estimator.message_tokens(now) * _common_prefix_length(old, new) // len(new)
    return tokens


def prompt_units(body: Mapping[str, Any]) -> list[Message]:
    """A request body as the units a provider's prefix cache reads, in the order it reads them.

    Every wire caches the tool schemas first, then the system prompt, then the
    conversation: each tool, then Anthropic's ``system`` (its blocks, or the string as
    one unit) or the Responses API's ``instructions``, then each of ``messages``
    (chat, Anthropic) or of ``input`` (Responses items; a string as one unit). Key order
    inside a unit is as the client sent it: a byte that moved is a byte that changed.
    """
    units: list[Message] = [tool for tool in body.get("tools") or [] if isinstance(tool, dict)]
    for key in ("system", "instructions", "messages", "input"):
        value = body.get(key)
        if isinstance(value, list):
            units += [unit for unit in value if isinstance(unit, dict)]
        elif isinstance(value, str):
            units.append({key: value})
    return units


def as_cached(value: Any) -> Any:
    """``value`` in the form a prefix cache compares: two spellings of one prompt become equal.

    Anthropic matches a cached prefix by its content, so at any depth ``cache_control``
    is left out (a client moves its breakpoint to the newest message every turn, which
    changes nothing that is read from the cache before it), and a message's ``content``
    string is the one text block it stands for (Claude Code sends its newest message as
    blocks, to carry the breakpoint, and the same message as a string on later turns).
    """
    if isinstance(value, dict):
        cached = {key: as_cached(item) for key, item in value.items() if key != "cache_control"}
        if isinstance(cached.get("content"), str) and "role" in cached:
            cached["content"] = [{"type": "text", "text": cached["content"]}]
        return cached
    if isinstance(value, list):
        return [as_cached(item) for item in value]
    return value


def results_by_call(units: Sequence[Message]) -> dict[str, bytes]:
    """The tool results among ``units`` (:func:`prompt_units`) by call id, as sent (their content's JSON):
    chat ``tool`` messages, Anthropic ``tool_result`` blocks, Responses ``function_call_output`` items."""
    found = {}
    for unit in units:
        if unit.get("role") == "tool" and isinstance(unit.get("tool_call_id"), str):
            found[unit["tool_call_id"]] = orjson.dumps(unit.get("content"))
        elif unit.get("type") == "function_call_output" and isinstance(unit.get("call_id"), str):
            found[unit["call_id"]] = orjson.dumps(unit.get("output"))
        for block in unit.get("content") if isinstance(unit.get("content"), list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                found[block["tool_use_id"]] = orjson.dumps(block.get("content"))
    return found


def unchanged_prefix_share(previous: Sequence[Message] | None, current: Sequence[Message], estimator: TokenEstimator) -> float:
    """The share of ``current``'s tokens that repeat ``previous`` from its start (:func:`unchanged_prefix_tokens`
    over units such as :func:`prompt_units` gives; 0 with no previous or an empty request)."""
    total = sum(estimator.message_tokens(unit) for unit in current)
    return unchanged_prefix_tokens(previous, current, estimator) / total if total else 0.0


def _common_prefix_length(a: bytes, b: bytes) -> int:
    low, high = 0, min(len(a), len(b))
    while low < high:  # binary search on slices: bytes comparison runs in C
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def priced_requests(requests: Iterable[SentRequest], pricing: CachePricing | None) -> list[tuple[int, float]]:
    """Each request's cached tokens and cost, in order; ``pricing`` None: a provider that caches
    nothing (every token costs 1)."""
    priced = []
    for index, request in enumerate(requests):
        warm = pricing is not None and index > 0 and request.gap_seconds <= pricing.lifetime_seconds
        cached = min(request.prefix_tokens, request.tokens) if warm else 0
        fresh = request.tokens - cached
        priced.append((cached, fresh if pricing is None else pricing.read * cached + pricing.write * fresh))
    return priced


def price_session(requests: Iterable[SentRequest], pricing: CachePricing | None) -> SessionCost:
    """The session's totals (:func:`priced_requests` summed)."""
    requests = list(requests)
    priced = priced_requests(requests, pricing)
    sent = sum(r.tokens for r in requests)
    cached = sum(c for c, _ in priced)
    return SessionCost(len(requests), sent, sum(r.prefix_tokens for r in requests), cached, sent - cached, sum(cost for _, cost in priced))


# A path (has a slash, or a dotted file name with an extension) or a code identifier
# (snake_case, CamelCase with an inner capital, or dotted): plain words are not references.
_TERM = re.compile(r"[A-Za-z_][\w./-]*\w")
_FILE_NAME = re.compile(r"\w\.[A-Za-z]{1,5}$")
MIN_TERM_CHARS = 4


def reference_terms(text: str) -> frozenset[str]:
    """The file paths and code identifiers in ``text`` (see the module doc)."""
    terms = set()
    for match in _TERM.finditer(text):
        term = match.group().strip("./-")
        if len(term) < MIN_TERM_CHARS:
            continue
        if "/" in term or "_" in term or _FILE_NAME.search(term) or "." in term or _inner_capital(term):
            terms.add(term)
    return frozenset(terms)


def _inner_capital(term: str) -> bool:
    return any(c.isupper() for c in term[1:]) and any(c.islower() for c in term)


def message_terms(message: Message) -> frozenset[str]:
    """The terms a message carries: its text and its tool calls' arguments."""
    return reference_terms("\n".join([content_text(message.get("content")), *tool_call_arguments(message)]))


def referenced_results(
    terms: Sequence[frozenset[str]], next_step: frozenset[str], candidates: Sequence[int], tail_start: int
) -> list[int]:
    """The candidates (message indexes) holding a term of the next step that the protected tail lacks.

    ``terms[i]`` are the terms of message ``i`` of the request (see
    :func:`message_terms`); the tail is ``terms[tail_start:]``, what pinch never touches.
    """
    wanted = next_step.difference(*terms[tail_start:])
    if not wanted:
        return []
    return [index for index in candidates if not wanted.isdisjoint(terms[index])]


def recency_kept(
    messages: list[Message],
    candidates: Sequence[int],
    target_tokens: int,
    max_summarize_chars: int,
    estimator: TokenEstimator,
    tools: Any = None,
    forms: Mapping[int, Message] | None = None,
) -> set[int]:
    """The candidates a keep-the-newest policy leaves uncompressed at no more than ``target_tokens``.

    Old results are compressed oldest first, each as pinch would (from its original), until the
    prompt fits; when even compressing them all does not, none is kept. ``forms``: message index →
    the form sent for it before any compression (first sight's text, :mod:`router.core.pinch_first_sight`):
    the prompt counts that form, a compression saves what it saves beyond it, and a result whose
    compression would save nothing beyond it stays so (kept), as pinch's batch leaves it.
    """
    forms = forms or {}
    sent = [forms.get(i, message) for i, message in enumerate(messages)]
    tokens = estimator.prompt_tokens(sent, tools)
    kept = set(candidates)
    for index in candidates:
        if tokens <= target_tokens:
            break
        compression = compress_tool_result(
            messages[index], lambda index=index: tool_name_for(messages, index), max_summarize_chars, estimator
        )
        if compression is None:
            continue  # a result pinch cannot shorten stays as it is
        saved = compression.tokens_saved if index not in forms else estimator.message_tokens(forms[index]) - compression.tokens_after
        if saved > 0:
            kept.discard(index)
            tokens -= saved
    return kept
