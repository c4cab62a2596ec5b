"""First sight's data: the result seen, the results seen before it, the settings, the answer. Pure.

A tool result sent for the first time is in no provider's cache yet, so it may be
reduced once, for free; the caller records the reduced bytes and resends them ever
after (ARCHITECTURE §5, "First sight"). These types are what the router
(:func:`router.core.first_sight.reduce_at_first_sight`) and its reducers exchange.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

from router.core.frozen import frozen
from router.core.tokens import CHARS_PER_TOKEN

# Every marker a reducer writes starts so; a text holding it is never reduced again.
MARKER_OPEN = "[pinch-router: "
# pinch's own elision marker (router/core/pinch.py): a compressed text is no new result either.
_ELISION_OPEN = "[... pinch-router removed "


class Rule(enum.StrEnum):
    """The reducers, by what they remove."""

    TERMINAL_NOISE = "terminal noise"  # lossless
    REPEATED_LINES = "repeated lines"  # lossless: the count is kept
    ALREADY_IN_CONTEXT = "already in context"  # lossless while the results it points at are visible
    LONG_OUTPUT = "long output"  # lossy: the whole output is one pinch_retrieve away


@frozen
class NewResult:
    """A tool result about to be sent for the first time: its text and the call that made it."""

    text: str
    tool_name: str = ""
    arguments: str = ""


@frozen
class EarlierResult:
    """A tool result the conversation already holds, as the model sees it: ``text`` is what was
    sent (reduced, if it was), since a pointer must point at what is visible. ``call_id`` names it
    in :attr:`Reduction.points_at`; the model is told the call by ``tool_name`` and ``arguments``
    (the arguments as the model wrote them, e.g. ``{"command": "cat src/a.py"}``)."""

    call_id: str
    tool_name: str
    arguments: str
    text: str


@dataclass(frozen=True, slots=True)
class FirstSightSettings:
    """Thresholds of first sight (defaults tuned on the shared transcripts only, ``bench/bench_first_sight.py``).

    Whole reduction: made only when it saves at least ``min_saved_tokens`` and ``min_saved_share`` of
    the result's tokens. Repeated lines: blocks of up to ``max_period`` lines. Already in context: a run
    of lines is pointed at when it has at least ``min_run_lines`` lines and ``min_run_chars`` characters;
    only lines of at least ``min_anchor_chars`` non-blank characters start a match (a blank line or a
    lone brace would match everywhere), each remembered at its ``max_occurrences`` latest places; a diff
    is tried against results of at most ``diff_max_lines`` lines, changed in at most ``diff_max_edits``
    lines, with ``diff_context`` lines of context; a call is named in at most ``max_label_chars``
    characters. Long output (``lossy``): past ``long_output_chars``, keep ``head_chars`` and ``tail_chars`` of whole
    lines, every error line, and the lines naming the task's terms up to ``relevant_chars``.
    """

    min_saved_tokens: int = 50
    min_saved_share: float = 0.05
    max_period: int = 4
    min_run_lines: int = 3
    min_run_chars: int = 240
    min_anchor_chars: int = 8
    max_occurrences: int = 8
    diff_max_lines: int = 4000
    diff_max_edits: int = 64
    diff_context: int = 2
    max_label_chars: int = 160
    long_output_chars: int = 6_000
    head_chars: int = 1_500
    tail_chars: int = 1_500
    relevant_chars: int = 1_500
    lossy: bool = False  # the long-output cut, made only for a request whose model can call pinch_retrieve

    def __post_init__(self) -> None:
        counts = {name: getattr(self, name) for name in ("min_saved_tokens", "min_run_chars", "head_chars", "tail_chars", "relevant_chars")}
        positive = {name: getattr(self, name) for name in ("max_period", "min_run_lines", "min_anchor_chars", "max_occurrences", "max_label_chars", "long_output_chars")}
        bad = [f"{name}={value}" for name, value in counts.items() if value < 0]
        bad += [f"{name}={value}" for name, value in positive.items() if value < 1]
        bad += [f"{name}={getattr(self, name)}" for name in ("diff_max_lines", "diff_max_edits", "diff_context") if getattr(self, name) < 0]
        bad += [f"min_saved_share={self.min_saved_share}"] if not 0 <= self.min_saved_share < 1 else []
        if bad:
            raise ValueError(f"first-sight settings out of range: {', '.join(bad)}")


DEFAULT_SETTINGS = FirstSightSettings()


class Reduced(NamedTuple):
    """One reducer's answer: the new text, what it removed (for the trace), and the earlier
    results (by call id) whose visible text now holds part of this one."""

    text: str
    removed: str
    points_at: tuple[str, ...] = ()


@frozen
class Step:
    """One rule applied: what it removed, and the text's length before and after it."""

    rule: Rule
    removed: str
    chars_before: int
    chars_after: int


@frozen
class Reduction:
    """A new result reduced at first sight: ``text`` is what to send (and to record, and resend as
    these very bytes); ``steps`` the rules applied, in order; ``lossless`` False when a part of the
    output was cut (the whole is one ``pinch_retrieve`` away); ``points_at`` the earlier results
    (call ids, oldest first) whose visible text holds what this one now only points at."""

    text: str
    steps: tuple[Step, ...]
    chars_before: int
    tokens_before: int
    tokens_after: int
    lossless: bool
    points_at: tuple[str, ...] = ()

    @property
    def rules(self) -> tuple[Rule, ...]:
        return tuple(step.rule for step in self.steps)

    @property
    def chars_after(self) -> int:
        return len(self.text)

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after

    @property
    def needs_original_visible(self) -> bool:
        """True when the results in :attr:`points_at` must stay visible for this one to be lossless:
        once one of them is compressed, what this result points at is one retrieve away."""
        return bool(self.points_at)


def text_tokens(text: str) -> int:
    """A text's tokens as the project's estimator counts them (ceil of chars / 4), without the
    per-message overhead: a result's reduction changes its text alone."""
    return -(-len(text) // CHARS_PER_TOKEN)


def is_reduced(text: str) -> bool:
    """True for a text that carries a marker of ours (first sight's or pinch's): it is not reduced again."""
    return MARKER_OPEN in text or _ELISION_OPEN in text
