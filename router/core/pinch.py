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
from typing import Any, NamedTuple, Protocol

from router.core.content import TEXT_PART_TYPES, Message
from router.core.request_view import NO_REWRITES, Conversation, Rewrites, Unit
from router.core.results import PinchMode, PinchStats
from router.core.tokens import (
    CHARS_PER_TOKEN,
    DEFAULT_ESTIMATOR,
    PromptSize,
    TokenEstimator,
)
from router.core.turns import candidate_results, old_results

# Head and tail each keep this share of max_summarize_chars; the marker fits in the rest.
HEAD_TAIL_EIGHTHS = 3

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


def prune_results(
    conversation: Conversation,
    budget_tokens: int,
    keep_last_turns: int,
    max_summarize_chars: int,
    relevance_order: Sequence[int] | None = None,
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
    *,
    tools: Any = None,
    measured: PromptSize | None = None,
) -> tuple[Rewrites, PinchStats]:
    """Compress old tool results until the prompt fits ``budget_tokens`` (see the module doc).

    Works on any wire format's :class:`~router.core.request_view.Conversation`
    and returns the rewrites by result position, for the wire adapter to write
    back. ``relevance_order`` must list every candidate index exactly once, else
    :class:`RelevanceOrderError` (checked only when pruning is needed).
    ``measured`` is ``estimator.measure(conversation.units, tools)`` when the caller
    already has it (pinch-relevance measured the same prompt); else it is made here.
    """
    measured, within = measure_against_budget(
        conversation.units, budget_tokens, keep_last_turns, max_summarize_chars, estimator, tools, measured
    )
    if within is not None:
        return NO_REWRITES, within
    return prune_measured(conversation, measured, budget_tokens, keep_last_turns, max_summarize_chars, relevance_order)


def measure_against_budget(
    units: list[Unit], budget_tokens: int, keep_last_turns: int, max_summarize_chars: int,
    estimator: TokenEstimator, tools: Any, measured: PromptSize | None,
) -> tuple[PromptSize, PinchStats | None]:
    """Pruning's first steps, which need no conversation: the settings checked, the prompt
    measured (unless it was), and the stats when it is within budget (else None)."""
    if budget_tokens < 0 or keep_last_turns < 1 or max_summarize_chars < MIN_SUMMARIZE_CHARS:
        raise ValueError(
            f"need budget_tokens >= 0, keep_last_turns >= 1, max_summarize_chars >= {MIN_SUMMARIZE_CHARS}; "
            f"got {budget_tokens}, {keep_last_turns}, {max_summarize_chars}"
        )
    # the sizes let a rewrite be re-counted from its length change alone
    if measured is None:
        measured = estimator.measure(units, tools)
    if measured.tokens <= budget_tokens:
        return measured, PinchStats(PinchMode.WITHIN_BUDGET, measured.tokens, measured.tokens)
    return measured, None


def prune_measured(
    conversation: Conversation, measured: PromptSize, budget_tokens: int, keep_last_turns: int, max_summarize_chars: int,
    relevance_order: Sequence[int] | None,
) -> tuple[Rewrites, PinchStats]:
    """:func:`prune_results` past its budget check: the prompt is over ``budget_tokens``."""
    sizes, original = measured.sizes, measured.tokens
    if relevance_order is None:
        # Uniform compresses every candidate, so no deficit stops it (none can save more than the
        # whole prompt) and the candidates need no list: it visits every result before the
        # protected turns, and one without text is no candidate because it has nothing to
        # compress (_rewrite makes no rewrite of it).
        mode, order, deficit = PinchMode.UNIFORM, range(old_results(conversation, keep_last_turns)), original + 1
    else:
        candidates = candidate_results(conversation, keep_last_turns)
        checked = _checked_order(relevance_order, len(candidates))
        mode, order, deficit = PinchMode.RELEVANCE, [candidates[position] for position in checked], original - budget_tokens

    rewrites: dict[int, Any] = {}
    kinds: list[CompressionKind] = []  # in the order of rewrites
    saved = 0
    result_units, units, key = conversation.result_units(), conversation.units, conversation.result_key
    for result_position in order:
        if saved >= deficit:
            break
        unit = result_units[result_position]
        rewrite = _rewrite(units[unit].get(key), conversation, unit, max_summarize_chars, sizes[unit])
        if rewrite is None:
            continue
        rewrites[result_position], kind, tokens_saved = rewrite
        kinds.append(kind)
        saved += tokens_saved
    compressed = len(kinds)
    elided = kinds.count(_ELIDED)
    # uniform visits the results in order, so its compressions are already by position
    compressions = tuple(zip(rewrites, kinds))
    if relevance_order is not None:
        compressions = tuple(sorted(compressions))
    stats = PinchStats(mode, original, original - saved, compressed, elided, compressed - elided, compressions=compressions)
    return rewrites, stats


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
    rewrite = _rewrite(message.get("content"), _FixedName(tool_name), 0, max_summarize_chars, size)
    if rewrite is None:
        return None
    new_content, kind, tokens_saved = rewrite
    tokens_before = estimator.chars_tokens(size)
    return Compression({**message, "content": new_content}, kind, tokens_before, tokens_before - tokens_saved)


class _Names(Protocol):
    def tool_name(self, unit: int) -> str: ...


def _rewrite(content: Any, names: _Names, unit: int, max_chars: int, size: int) -> tuple[Any, CompressionKind, int] | None:
    """A tool result's compressed content, how, and the tokens it saves; None when it would save none.

    Only the result's content changes, so the saving follows from the length
    change of its unit's ``size`` (weighted characters) alone: the per-unit
    overhead and any images cancel out. ``names.tool_name(unit)`` is asked
    only when a placeholder is made.
    """
    if type(content) is str:
        new_content: Any = _compress_text(content, names, unit, max_chars)
        if new_content is None:
            return None
        length = len(content)
        delta = len(new_content) - length
        # a text is elided exactly when it is longer than max_chars, else it became a placeholder
        kind = _ELIDED if length > max_chars else _PLACEHOLDER
    elif isinstance(content, list):
        new_content, parts_kind, delta = _compress_parts(content, names, unit, max_chars)
        if parts_kind is None:
            return None
        kind = parts_kind
    else:
        return None
    # ceil(size / 4) - ceil((size + delta) / 4); delta < 0
    tokens_saved = (size + delta) // -CHARS_PER_TOKEN - size // -CHARS_PER_TOKEN
    if tokens_saved <= 0:
        return None
    return new_content, kind, tokens_saved


class _FixedName:
    """One given tool name (or a function giving it), for a message compressed on its own."""

    def __init__(self, tool_name: str | Callable[[], str]) -> None:
        self.name = tool_name

    def tool_name(self, unit: int) -> str:
        return self.name if isinstance(self.name, str) else self.name()


def is_compressed(text: str) -> bool:
    """True for text that carries our elision marker or is exactly our placeholder."""
    if _MARKER_OPEN in text and _MARKER_RE.search(text):
        return True
    return text.startswith(_PLACEHOLDER_OPEN) and _PLACEHOLDER_RE.fullmatch(text) is not None


def _compress_text(text: str, names: _Names, unit: int, max_chars: int) -> str | None:
    """The shorter text: elided when longer than ``max_chars``, else a placeholder; None when it stays.

    ``names.tool_name(unit)`` names the tool; it is asked only when a placeholder is made.
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
    # placeholder(), inline: this runs once per placeholder made, and a call is a tenth of it
    short = f"{_PLACEHOLDER_OPEN}{names.tool_name(unit)} result omitted ({length} characters)]"
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
    parts: list[Any], names: _Names, unit: int, max_chars: int
) -> tuple[list[Any], CompressionKind | None, int]:
    """Each text part compressed on its own; every other part, and every key, kept.

    Returns the parts, how they were compressed, and the change in counted characters.
    """
    out: list[Any] = []
    kind: CompressionKind | None = None
    delta = 0
    for part in parts:
        if isinstance(part, dict) and part.get("type") in TEXT_PART_TYPES and isinstance(part.get("text"), str):
            text = _compress_text(part["text"], names, unit, max_chars)
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


def compression_saving(chars: int, max_chars: int) -> int:
    """About how many characters compressing a text of ``chars`` characters removes: the excess over
    ``max_chars`` when it is elided, nearly all of it when it becomes a placeholder. For ranking which
    to compress (:func:`router.core.relevance.rank_candidates`); the rewrite itself measures exactly."""
    if chars > max_chars:
        return chars - max_chars
    return max(chars - 2 * MIN_PLACEHOLDER_CHARS, 0)  # a placeholder names the tool and the size
