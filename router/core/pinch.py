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
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

from router.context import PinchMode, PinchStats
from router.core.messages import TEXT_PART_TYPES, Message
from router.core.tokens import (
    CHARS_PER_TOKEN,
    DEFAULT_ESTIMATOR,
    PromptSize,
    TokenEstimator,
)
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


# The shortest placeholder there is: a one-character name and a one-digit size.
MIN_PLACEHOLDER_CHARS = len(placeholder("x", 0))
# The marker plus the two line breaks around it, for any removal this side of a petabyte.
MAX_MARKER_CHARS = len(elision_marker(10**15)) + 2
# Smallest max_summarize_chars whose head + marker + tail still fits in it:
# head and tail take 2 × 3/8, so the marker needs the remaining quarter.
MIN_SUMMARIZE_CHARS = 4 * MAX_MARKER_CHARS


class CompressionKind(enum.StrEnum):
    ELIDED = "elided"  # head + marker + tail
    PLACEHOLDER = "placeholder"


# Enum members read from the class cost ~0.1 µs each in 3.11; the loop reads them per result.
_ELIDED, _PLACEHOLDER = CompressionKind.ELIDED, CompressionKind.PLACEHOLDER


class Compression(NamedTuple):
    """One candidate's rewrite, as :func:`compress_tool_result` reports it: the new
    message and its tokens before and after (it always saves some)."""

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
    measured: PromptSize | None = None,
) -> tuple[list[Message], PinchStats]:
    """Compress old tool results until the prompt fits ``budget_tokens`` (see the module doc).

    ``relevance_order`` must list every candidate index exactly once, else
    :class:`RelevanceOrderError` (checked only when pruning is needed).
    ``measured`` is ``estimator.measure(messages, tools)`` when the caller
    already has it (pinch-relevance measured the same prompt); else it is made here.
    Returns the messages to send and exact stats.
    """
    if budget_tokens < 0 or keep_last_turns < 1 or max_summarize_chars < MIN_SUMMARIZE_CHARS:
        raise ValueError(
            f"need budget_tokens >= 0, keep_last_turns >= 1, max_summarize_chars >= {MIN_SUMMARIZE_CHARS}; "
            f"got {budget_tokens}, {keep_last_turns}, {max_summarize_chars}"
        )
    # the sizes let a rewrite be re-counted from its length change alone
    sizes, original = measured if measured is not None else estimator.measure(messages, tools)
    if original <= budget_tokens:
        return messages, PinchStats(PinchMode.WITHIN_BUDGET, original, original)

    candidates = trim_candidates(messages, keep_last_turns)
    if relevance_order is None:
        # uniform compresses every candidate: no deficit stops it
        mode, order, deficit = PinchMode.UNIFORM, range(len(candidates)), math.inf
    else:
        mode, order, deficit = PinchMode.RELEVANCE, _checked_order(relevance_order, len(candidates)), original - budget_tokens

    pruned: list[Message] | None = None
    saved = elided = placeholders = 0
    names = ToolNames(messages)
    for position in order:
        if saved >= deficit:
            break
        index = candidates[position]
        rewrite = _rewrite(messages[index], names, index, max_summarize_chars, sizes[index])
        if rewrite is None:
            continue
        if pruned is None:
            pruned = list(messages)
        pruned[index], kind, tokens_saved = rewrite
        saved += tokens_saved
        if kind is _ELIDED:
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
) -> Compression | None:
    """Compress one tool message's text, or None when that would not save tokens.

    None also for content that is neither a string nor a list with text
    parts, and for text that is already our marker's or placeholder's output.
    ``tool_name`` may be a function, called only if a placeholder is made.
    """
    size = estimator.message_sizes([message])[0]
    rewrite = _rewrite(message, _FixedName(tool_name), 0, max_summarize_chars, size)
    if rewrite is None:
        return None
    new_message, kind, tokens_saved = rewrite
    tokens_before = estimator.chars_tokens(size)
    return Compression(new_message, kind, tokens_before, tokens_before - tokens_saved)


class _Names(Protocol):
    def name(self, index: int) -> str: ...


def _rewrite(
    message: Message, names: _Names, index: int, max_chars: int, size: int
) -> tuple[Message, CompressionKind, int] | None:
    """The compressed message, how, and the tokens it saves; None when it would save none.

    Only the content changes, so the saving follows from the length change of
    the message's ``size`` (its weighted characters) alone: the per-message
    overhead and any images cancel out.
    """
    content = message.get("content")
    if type(content) is str:
        new_content: Any = _compress_text(content, names, index, max_chars)
        if new_content is None:
            return None
        delta = len(new_content) - len(content)
        # a text is elided exactly when it is longer than max_chars, else it became a placeholder
        kind = _ELIDED if len(content) > max_chars else _PLACEHOLDER
    elif isinstance(content, list):
        new_content, parts_kind, delta = _compress_parts(content, names, index, max_chars)
        if parts_kind is None:
            return None
        kind = parts_kind
    else:
        return None
    # ceil(size / 4) - ceil((size + delta) / 4); delta < 0
    tokens_saved = (size + delta) // -CHARS_PER_TOKEN - size // -CHARS_PER_TOKEN
    if tokens_saved <= 0:
        return None
    return {**message, "content": new_content}, kind, tokens_saved


class _FixedName:
    """One given tool name (or a function giving it), for a message compressed on its own."""

    def __init__(self, tool_name: str | Callable[[], str]) -> None:
        self.tool_name = tool_name

    def name(self, index: int) -> str:
        return self.tool_name if isinstance(self.tool_name, str) else self.tool_name()


class ToolNames:
    """Tool names by result index for one transcript: :func:`tool_name_for`, amortised.

    Each lookup walks back to the nearest assistant message, remembering the
    answer for every message it passes, so naming all of a transcript's
    results costs one pass over it in total, in any order (relevance mode
    asks in relevance order) — never a walk per result.
    """

    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages
        # message index -> index of the nearest assistant message at or before it (-1: none)
        self._answers: dict[int, int] = {}

    def name(self, index: int) -> str:
        messages = self.messages
        message = messages[index]
        # most results directly follow the call they answer
        assistant = index - 1 if index and messages[index - 1].get("role") == "assistant" else self._nearest_assistant(index - 1)
        name = _call_name(messages[assistant].get("tool_calls"), message.get("tool_call_id")) if assistant >= 0 else None
        return _clean_tool_name(name, message)

    def _nearest_assistant(self, start: int) -> int:
        messages, answers = self.messages, self._answers
        passed = []
        found = -1
        for index in range(start, -1, -1):
            known = answers.get(index)
            if known is not None:
                found = known
                break
            if messages[index].get("role") == "assistant":
                found = index
                break
            passed.append(index)
        for index in passed:
            answers[index] = found
        return found


def tool_name_for(messages: list[Message], index: int) -> str:
    """The tool that produced ``messages[index]``, for its placeholder.

    Found in the assistant message this result answers (the nearest one
    before it) by the call whose ``id`` is the ``tool_call_id``; else the
    message's ``name``; else ``tool``. One line, at most 64 characters.
    """
    return ToolNames(messages).name(index)


def _clean_tool_name(name: Any, message: Message) -> str:
    if type(name) is str and name.isidentifier() and len(name) <= TOOL_NAME_MAX_CHARS:
        return name  # the usual case: already one clean word
    if not isinstance(name, str) or not name.strip():
        name = message.get("name")
    if not isinstance(name, str):
        name = ""
    # one line, bounded: the placeholder must stay short and recognisable
    return " ".join(name.split())[:TOOL_NAME_MAX_CHARS] or "tool"


def _call_name(calls: Any, call_id: Any) -> Any:
    if type(calls) is not list or type(call_id) is not str:
        return None
    for call in calls:
        if type(call) is dict and call.get("id") == call_id:
            function = call.get("function")
            return function.get("name") if type(function) is dict else None
    return None


def is_compressed(text: str) -> bool:
    """True for text that carries our elision marker or is exactly our placeholder."""
    if _MARKER_OPEN in text and _MARKER_RE.search(text):
        return True
    return text.startswith(_PLACEHOLDER_OPEN) and _PLACEHOLDER_RE.fullmatch(text) is not None


def _compress_text(text: str, names: _Names, index: int, max_chars: int) -> str | None:
    """The shorter text: elided when longer than ``max_chars``, else a placeholder; None when it stays.

    ``names.name(index)`` names the tool; it is asked only when a placeholder is made.
    """
    length = len(text)
    if length > max_chars:
        # Our own output is never this long (an elided text fits in max_chars), so
        # long text needs no scan for the marker: with the same settings, pruning
        # again is a no-op, and a long result that merely quotes the marker is cut.
        return _elide(text, max_chars)
    if length <= MIN_PLACEHOLDER_CHARS:
        return None  # no placeholder is shorter
    # An elided text keeps at least a head and a tail of keep // 2 each, so a
    # shorter one can only be our placeholder: skip the marker scan for it.
    if (length >= max_chars * HEAD_TAIL_EIGHTHS // 8 or text.startswith(_PLACEHOLDER_OPEN)) and is_compressed(text):
        return None
    short = placeholder(names.name(index), length)
    return short if len(short) < length else None


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
    parts: list[Any], names: _Names, index: int, max_chars: int
) -> tuple[list[Any], CompressionKind | None, int]:
    """Each text part compressed on its own; every other part, and every key, kept.

    Returns the parts, how they were compressed, and the change in counted characters.
    """
    out: list[Any] = []
    kind: CompressionKind | None = None
    delta = 0
    for part in parts:
        if isinstance(part, dict) and part.get("type") in TEXT_PART_TYPES and isinstance(part.get("text"), str):
            text = _compress_text(part["text"], names, index, max_chars)
            if text is not None:
                part_kind = _ELIDED if len(part["text"]) > max_chars else _PLACEHOLDER
                delta += len(text) - len(part["text"])
                part = {**part, "text": text}
                # a message counts as elided when any of its parts was
                kind = _ELIDED if _ELIDED in (kind, part_kind) else part_kind
        out.append(part)
    return out, kind, delta


def _checked_order(order: Sequence[int], candidate_count: int) -> Sequence[int]:
    if len(order) != candidate_count or sorted(order) != list(range(candidate_count)):
        raise RelevanceOrderError(
            f"relevance order must list each of the {candidate_count} candidates once; got {list(order)[:20]}"
        )
    return order
