"""The content router of first sight: one new tool result through the reducers, once (ARCHITECTURE §5). Pure.

A tool result sent for the first time is in no provider's prompt cache yet, so reducing it
costs no cache break; the caller records the reduced bytes and resends them on every later
turn. :func:`reduce_at_first_sight` hands the result's text to each reducer in turn, each a
small pure function that says what it removed:

1. :mod:`~router.core.first_sight.terminal_noise` (lossless): escape sequences, redraws, superseded progress lines;
2. :mod:`~router.core.first_sight.repeated_lines` (lossless): runs of a line or block, folded with their count;
3. :mod:`~router.core.first_sight.in_context` (lossless while the earlier results are visible): what an
   earlier result shows already, as a pointer naming its call, or a diff to it;
4. :mod:`~router.core.first_sight.long_output` (lossy, only with ``allow_lossy``): past a size, head,
   tail, error lines and the lines naming the task's terms, the rest one ``pinch_retrieve`` away.

A result equal to an earlier one goes straight to 3. The reduction is made only when it saves at
least ``min_saved_tokens`` and ``min_saved_share`` of the result. Deterministic (the same inputs give
the same bytes) and idempotent (a text carrying a marker of ours is not reduced again); each reducer
is linear in the text, so a 40,000-line log takes milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from router.core.evidence import evidence_terms
from router.core.first_sight.in_context import EarlierIndex, point_at_earlier
from router.core.first_sight.long_output import cut_long_output
from router.core.first_sight.model import (
    DEFAULT_SETTINGS,
    EarlierResult,
    FirstSightSettings,
    NewResult,
    Reduced,
    Reduction,
    Rule,
    Step,
    is_reduced,
    text_tokens,
)
from router.core.first_sight.repeated_lines import fold_repeated_lines
from router.core.first_sight.terminal_noise import remove_terminal_noise

Reducer = Callable[[str], Reduced | None]


def reduce_at_first_sight(
    result: NewResult,
    earlier: Sequence[EarlierResult] | EarlierIndex = (),
    query: Sequence[str] = (),
    settings: FirstSightSettings = DEFAULT_SETTINGS,
    *,
    allow_lossy: bool = False,
    retrieve_id: str = "",
) -> Reduction | None:
    """The new result reduced once (module doc), or None when that saves too little.

    ``earlier``: the conversation's tool results before this one, oldest first, as the model sees them
    (an :class:`EarlierIndex` of them, kept from result to result, saves indexing them again; it must
    have been built with ``settings``). ``query``: what the task is about (the task, the current step):
    their paths and identifiers choose the lines a long output keeps. ``allow_lossy``: the model can call
    ``pinch_retrieve`` for the whole output, by ``retrieve_id`` (both needed for a lossy cut).
    """
    text = result.text
    if not text or is_reduced(text):
        return None
    index = earlier if isinstance(earlier, EarlierIndex) else EarlierIndex(earlier, settings)
    if index.settings != settings:
        raise ValueError("the earlier results were indexed with other settings")
    reducers: list[tuple[Rule, Reducer]]
    if index.same_text(text) is not None:
        reducers = [(Rule.ALREADY_IN_CONTEXT, lambda text: point_at_earlier(text, index))]
    else:
        reducers = [
            (Rule.TERMINAL_NOISE, remove_terminal_noise),
            (Rule.REPEATED_LINES, lambda text: fold_repeated_lines(text, settings.max_period)),
            (Rule.ALREADY_IN_CONTEXT, lambda text: point_at_earlier(text, index)),
        ]
        if allow_lossy and retrieve_id:
            queries = [evidence_terms(words) for words in query]
            reducers.append((Rule.LONG_OUTPUT, lambda text: cut_long_output(text, queries, settings, retrieve_id)))
    steps: list[Step] = []
    points_at: list[str] = []
    reduced = text
    for rule, reducer in reducers:
        outcome = reducer(reduced)
        if outcome is None or len(outcome.text) >= len(reduced):
            continue
        steps.append(Step(rule, outcome.removed, len(reduced), len(outcome.text)))
        points_at.extend(call_id for call_id in outcome.points_at if call_id not in points_at)
        reduced = outcome.text
    before, after = text_tokens(text), text_tokens(reduced)
    saved = before - after
    if not steps or saved < settings.min_saved_tokens or saved < settings.min_saved_share * before:
        return None
    return Reduction(
        text=reduced,
        steps=tuple(steps),
        chars_before=len(text),
        tokens_before=before,
        tokens_after=after,
        lossless=Rule.LONG_OUTPUT not in (step.rule for step in steps),
        points_at=tuple(points_at),
    )
