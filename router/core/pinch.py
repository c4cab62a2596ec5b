"""Pinch: compress old tool results until the prompt fits a token budget (ARCHITECTURE §5). Pure.

:func:`prune_context` is the whole algorithm; :func:`compress_tool_result`
rewrites one candidate. Contract, in the order the algorithm applies it:

* **Budget.** The prompt is measured with the one :class:`TokenEstimator`:
  every message plus, when given, the request's tool schemas (``tools``), the
  same total the capability gate measures. Tool schemas count toward the
  budget but are never compressed. Within budget ⇒ the very same list object
  comes back, mode ``within_budget``.
* **Candidates** are :func:`router.core.turns.trim_candidates`: ``tool``
  messages with text content before the ``keep_last_turns``-th assistant
  message from the end. The in-progress turn and the last turns are never
  touched; with fewer turns than ``keep_last_turns`` nothing is.
* **One candidate.** Text longer than ``max_summarize_chars`` keeps a head and
  a tail (each ~3/8 of it, snapped to a line break when one is near) around a
  marker stating how many characters were removed; shorter text becomes a
  placeholder naming the tool (see :func:`tool_name_for`) and the original
  size. A list of parts has each text part compressed this way,
  its other parts and every key of parts and message kept. A rewrite that
  would not save tokens is not made, so a message never grows. Our own marker
  and placeholder are recognised, so pruning again with the same settings
  changes nothing (a short tool result that quotes them verbatim is
  therefore left alone too).
* **Uniform mode** (``relevance_order is None``) compresses every candidate.
  **Relevance mode** compresses in the given order (indexes into the
  candidate list, least relevant first) and stops as soon as the deficit
  (original − budget) is covered; it compresses a subset of what uniform mode
  would, each candidate identically.
* **Invariants.** No message added, removed or reordered; every message but a
  compressed candidate is the same object, byte for byte; the input list and
  its dicts are never mutated. When no message changes, the input list itself
  is returned.
* **Stats are exact**: ``final_tokens == estimator.prompt_tokens(result, tools)``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from router.context import PinchMode, PinchStats
from router.core.messages import TEXT_PART_TYPES, Message
from router.core.tokens import DEFAULT_ESTIMATOR, TokenEstimator
from router.core.turns import trim_candidates

# Head and tail each keep this share of max_summarize_chars; the marker fits in the rest.
HEAD_TAIL_EIGHTHS = 3
TOOL_NAME_MAX_CHARS = 64

_MARKER_OPEN = "[... pinch-router removed "
_MARKER_RE = re.compile(r"\[\.\.\. pinch-router removed \d+ characters \.\.\.\]")
_PLACEHOLDER_OPEN = "[pinch-router: old "
_PLACEHOLDER_RE = re.compile(r"\[pinch-router: old .+ result omitted \(\d+ characters\)\]", re.DOTALL)


def elision_marker(removed_chars: int) -> str:
    return f"{_MARKER_OPEN}{removed_chars} characters ...]"


def placeholder(tool_name: str, original_chars: int) -> str:
    return f"{_PLACEHOLDER_OPEN}{tool_name} result omitted ({original_chars} characters)]"


# The marker plus the two line breaks around it, for any removal this side of a petabyte.
MAX_MARKER_CHARS = len(elision_marker(10**15)) + 2
# Smallest max_summarize_chars whose head + marker + tail still fits in it:
# head and tail take 2 × 3/8, so the marker needs the remaining quarter.
MIN_SUMMARIZE_CHARS = 4 * MAX_MARKER_CHARS


class CompressionKind(enum.StrEnum):
    ELIDED = "elided"  # head + marker + tail
    PLACEHOLDER = "placeholder"


class Compression(NamedTuple):
    """One candidate's rewrite: the new message and the tokens it saves (always > 0).

    A NamedTuple rather than a frozen dataclass: it is made once per compressed
    result on the request path, and a frozen dataclass costs ~1 µs more each.
    """

    message: Message
    kind: CompressionKind
    tokens_before: int
    tokens_after: int

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after


class RelevanceOrderError(ValueError):
    """A relevance order that is not a permutation of the candidate indexes."""


def prune_context(
    messages: list[Message],
    budget_tokens: int,
    keep_last_turns: int,
    max_summarize_chars: int,
    relevance_order: Sequence[int] | None = None,
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
    *,
    tools: Any = None,
) -> tuple[list[Message], PinchStats]:
    """Compress old tool results until the prompt fits ``budget_tokens`` (see the module doc).

    ``relevance_order`` must list every candidate index exactly once, else
    :class:`RelevanceOrderError` (checked only when pruning is needed).
    Returns the messages to send and exact stats.
    """
    if budget_tokens < 0 or keep_last_turns < 1 or max_summarize_chars < MIN_SUMMARIZE_CHARS:
        raise ValueError(
            f"need budget_tokens >= 0, keep_last_turns >= 1, max_summarize_chars >= {MIN_SUMMARIZE_CHARS}; "
            f"got {budget_tokens}, {keep_last_turns}, {max_summarize_chars}"
        )
    sizes = list(map(estimator.message_size, messages))
    original = sum(estimator.size_tokens(*size) for size in sizes) + estimator.prompt_tokens([], tools)
    # == prompt_tokens(messages, tools); sizes let a rewrite be re-counted from its length change alone
    if original <= budget_tokens:
        return messages, PinchStats(PinchMode.WITHIN_BUDGET, original, original)

    candidates = trim_candidates(messages, keep_last_turns)
    if relevance_order is None:
        mode, order, deficit = PinchMode.UNIFORM, range(len(candidates)), None
    else:
        mode, order, deficit = PinchMode.RELEVANCE, _checked_order(relevance_order, len(candidates)), original - budget_tokens

    pruned: list[Message] | None = None
    saved = elided = placeholders = 0
    names = ToolNames(messages)
    for position in order:
        if deficit is not None and saved >= deficit:
            break
        index = candidates[position]
        compression = compress_tool_result(messages[index], names.lookup(index), max_summarize_chars, estimator, sizes[index])
        if compression is None:
            continue
        if pruned is None:
            pruned = list(messages)
        pruned[index] = compression.message
        saved += compression.tokens_saved
        if compression.kind is CompressionKind.ELIDED:
            elided += 1
        else:
            placeholders += 1
    stats = PinchStats(mode, original, original - saved, elided + placeholders, elided, placeholders)
    return (messages if pruned is None else pruned), stats


def compress_tool_result(
    message: Message,
    tool_name: str | Callable[[], str],
    max_summarize_chars: int,
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
    size: tuple[int, int] | None = None,
) -> Compression | None:
    """Compress one tool message's text, or None when that would not save tokens.

    None also for content that is neither a string nor a list with text
    parts, and for text that is already our marker's or placeholder's output.
    ``tool_name`` may be a function, called only if a placeholder is made;
    ``size`` (the estimator's message_size) saves counting the message again:
    only the content changes, so its token count follows from the length change.
    """
    content = message.get("content")
    kind: CompressionKind | None
    if isinstance(content, str):
        new_content, kind = _compress_text(content, tool_name, max_summarize_chars)
        delta = len(new_content) - len(content) if kind is not None else 0
    elif isinstance(content, list):
        new_content, kind, delta = _compress_parts(content, tool_name, max_summarize_chars)
    else:
        return None
    if kind is None:
        return None
    chars, images = size if size is not None else estimator.message_size(message)
    tokens_before = estimator.size_tokens(chars, images)
    tokens_after = estimator.size_tokens(chars + delta, images)
    if tokens_after >= tokens_before:
        return None
    return Compression({**message, "content": new_content}, kind, tokens_before, tokens_after)


class ToolNames:
    """Tool names by result index for one transcript, from one lazy pass over its tool calls."""

    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages
        self._by_call_id: dict[str, Any] | None = None

    def lookup(self, index: int) -> Callable[[], str]:
        return lambda: self._name(index)

    def _name(self, index: int) -> str:
        if self._by_call_id is None:
            self._by_call_id = {}
            for message in self.messages:
                calls = message.get("tool_calls") if message.get("role") == "assistant" else None
                for call in calls if isinstance(calls, list) else ():
                    if isinstance(call, dict) and isinstance(call.get("id"), str):
                        function = call.get("function")
                        self._by_call_id.setdefault(call["id"], function.get("name") if isinstance(function, dict) else None)
        call_id = self.messages[index].get("tool_call_id")
        return _clean_tool_name(self._by_call_id.get(call_id) if isinstance(call_id, str) else None, self.messages[index])


def tool_name_for(messages: list[Message], index: int) -> str:
    """The tool that produced ``messages[index]``, for its placeholder.

    Found in the assistant message this result answers (the nearest one
    before it) by the call whose ``id`` is the ``tool_call_id``; else the
    message's ``name``; else ``tool``. One line, at most 64 characters.
    """
    message = messages[index]
    call_id = message.get("tool_call_id")
    name: Any = None
    for earlier in range(index - 1, -1, -1):
        if messages[earlier].get("role") == "assistant":
            name = _call_name(messages[earlier].get("tool_calls"), call_id)
            break
    return _clean_tool_name(name, message)


def _clean_tool_name(name: Any, message: Message) -> str:
    if not isinstance(name, str) or not name.strip():
        name = message.get("name")
    if not isinstance(name, str):
        name = ""
    # one line, bounded: the placeholder must stay short and recognisable
    return " ".join(name.split())[:TOOL_NAME_MAX_CHARS] or "tool"


def _call_name(calls: Any, call_id: Any) -> Any:
    if not isinstance(calls, list) or not isinstance(call_id, str):
        return None
    for call in calls:
        if isinstance(call, dict) and call.get("id") == call_id:
            function = call.get("function")
            return function.get("name") if isinstance(function, dict) else None
    return None


def is_compressed(text: str) -> bool:
    """True for text that carries our elision marker or is exactly our placeholder."""
    if _MARKER_OPEN in text and _MARKER_RE.search(text):
        return True
    return text.startswith(_PLACEHOLDER_OPEN) and _PLACEHOLDER_RE.fullmatch(text) is not None


def _compress_text(text: str, tool_name: str | Callable[[], str], max_chars: int) -> tuple[str, CompressionKind | None]:
    """The shorter text and how it was made, or (text, None) when it stays as it is."""
    if len(text) > max_chars:
        # Our own output is never this long (an elided text fits in max_chars), so
        # long text needs no scan for the marker: with the same settings, pruning
        # again is a no-op, and a long result that merely quotes the marker is cut.
        return _elide(text, max_chars), CompressionKind.ELIDED
    # An elided text keeps at least a head and a tail of keep // 2 each, so a
    # shorter one can only be our placeholder: skip the marker scan for it.
    if (text.startswith(_PLACEHOLDER_OPEN) or len(text) >= max_chars * HEAD_TAIL_EIGHTHS // 8) and is_compressed(text):
        return text, None
    short = placeholder(tool_name if isinstance(tool_name, str) else tool_name(), len(text))
    if len(short) >= len(text):
        return text, None
    return short, CompressionKind.PLACEHOLDER


def _elide(text: str, max_chars: int) -> str:
    """Head + marker + tail, at most ``max_chars`` long; cuts at line breaks when one is near."""
    keep = max_chars * HEAD_TAIL_EIGHTHS // 8
    head_end = keep
    newline = text.rfind("\n", keep // 2, keep)
    if newline != -1:
        head_end = newline + 1
    tail_start = len(text) - keep
    newline = text.find("\n", tail_start, tail_start + keep // 2)
    if newline != -1:
        tail_start = newline + 1
    head, tail = text[:head_end], text[tail_start:]
    before = "" if head.endswith("\n") else "\n"
    return f"{head}{before}{elision_marker(tail_start - head_end)}\n{tail}"


def _compress_parts(
    parts: list[Any], tool_name: str | Callable[[], str], max_chars: int
) -> tuple[list[Any], CompressionKind | None, int]:
    """Each text part compressed on its own; every other part, and every key, kept.

    Returns the parts, how they were compressed, and the change in counted characters.
    """
    out: list[Any] = []
    kind: CompressionKind | None = None
    delta = 0
    for part in parts:
        if isinstance(part, dict) and part.get("type") in TEXT_PART_TYPES and isinstance(part.get("text"), str):
            text, part_kind = _compress_text(part["text"], tool_name, max_chars)
            if part_kind is not None:
                delta += len(text) - len(part["text"])
                part = {**part, "text": text}
                # a message counts as elided when any of its parts was
                kind = CompressionKind.ELIDED if CompressionKind.ELIDED in (kind, part_kind) else part_kind
        out.append(part)
    return out, kind, delta


def _checked_order(order: Sequence[int], candidate_count: int) -> Sequence[int]:
    if len(order) != candidate_count or sorted(order) != list(range(candidate_count)):
        raise RelevanceOrderError(
            f"relevance order must list each of the {candidate_count} candidates once; got {list(order)[:20]}"
        )
    return order
