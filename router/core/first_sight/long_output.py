"""Long output: past a size, keep what the model most likely reads. LOSSY: the caller applies it
only when the model can call ``pinch_retrieve`` for the whole output. Pure.

Kept, verbatim and in order: a head and a tail of whole lines; every error line
(:data:`~router.core.first_sight.errors.ERROR_LINE`: a traceback and its frames, each with its source
and caret lines, ``…Error`` and ``…Exception`` names, ``FAILED``, ``assert``, ``error:``, pytest's
``E`` lines); every marker line
of ours (a pointer to an earlier result costs little and cuts nothing); and, up to a budget, the
lines that hold the most of the task's terms — the paths, identifiers and error names of the
queries (:func:`router.core.evidence.evidence_terms`), a rare term counting more
(:func:`router.core.evidence.lexical_evidence`). Each cut becomes ``[pinch-router: 120 lines cut
here]``; the first line says how many were cut in all and how to get them back.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from router.core.evidence import lexical_evidence
from router.core.first_sight.errors import ERROR_LINE
from router.core.first_sight.lines import line_starts, lines_holding
from router.core.first_sight.model import MARKER_OPEN, FirstSightSettings, Reduced

# Scores equal to this many decimals are ties (a sum over a set may differ in its last bits between runs).
_SCORE_DECIMALS = 9


def summary_marker(cut: int, total: int, retrieve_id: str) -> str:
    return f'{MARKER_OPEN}{cut} lines cut (of {total}); pinch_retrieve("{retrieve_id}") returns the whole output]'


def gap_marker(cut: int) -> str:
    return f"{MARKER_OPEN}{cut} line{'' if cut == 1 else 's'} cut here]"


def cut_long_output(text: str, queries: Sequence[frozenset[str]], settings: FirstSightSettings, retrieve_id: str) -> Reduced | None:
    """The text cut to head, tail, error lines, our markers and the lines naming the terms of ``queries``
    (module doc; a term named by several queries counts more), when longer than
    ``settings.long_output_chars``; None when it is not, or the cut would not be shorter."""
    if len(text) <= settings.long_output_chars:
        return None
    lines = text.split("\n")
    count = len(lines)
    keep = bytearray(count)  # 1: kept
    _keep_edge(lines, keep, range(count), settings.head_chars)
    _keep_edge(lines, keep, range(count - 1, -1, -1), settings.tail_chars)
    starts = line_starts(lines)
    for number in ERROR_LINE.numbers(text, lines, starts):
        keep[number] = 1
        if lines[number].lstrip().startswith('File "'):  # a frame: its source line and caret line too
            for following in range(number + 1, min(number + 3, count)):
                if not lines[following].startswith("    ") or lines[following].lstrip().startswith('File "'):
                    break
                keep[following] = 1
    for number in lines_holding(text, (MARKER_OPEN,), starts):
        keep[number] = 1
    _keep_relevant(text, lines, starts, keep, queries, settings.relevant_chars)
    out: list[str] = []
    cut = 0
    number = 0
    while number < count:
        if keep[number]:
            out.append(lines[number])
            number += 1
            continue
        gap_end = number
        while gap_end < count and not keep[gap_end]:
            gap_end += 1
        gap = gap_end - number
        if sum(len(line) + 1 for line in lines[number:gap_end]) <= len(gap_marker(gap)) + 1:
            out.extend(lines[number:gap_end])  # the marker would be no shorter than what it cuts
        else:
            out.append(gap_marker(gap))
            cut += gap
        number = gap_end
    if not cut:
        return None
    reduced = "\n".join([summary_marker(cut, count, retrieve_id), *out])
    if len(reduced) >= len(text):
        return None
    return Reduced(reduced, f"{cut} of {count} lines (pinch_retrieve returns them)")


def _keep_edge(lines: list[str], keep: bytearray, numbers: range, budget: int) -> None:
    """Keep whole lines from one end while they fit ``budget`` characters (the first one always)."""
    spent = 0
    for number in numbers:
        spent += len(lines[number]) + 1
        if spent > budget and spent != len(lines[number]) + 1:
            return
        keep[number] = 1


def _keep_relevant(text: str, lines: list[str], starts: list[int], keep: bytearray, queries: Sequence[frozenset[str]], budget: int) -> None:
    """Keep the lines not kept yet that hold the most of the queries' terms (rare ones count more), up to
    ``budget`` characters: the best first, and among equals the first in the text."""
    if budget <= 0:
        return
    held: dict[int, list[str]] = {}
    for term in sorted(frozenset().union(*queries)):
        for number in lines_holding(text, (term,), starts):
            if not keep[number]:
                held.setdefault(number, []).append(term)
    if not held:
        return
    # lines holding the same terms score the same: score each set of terms once
    by_terms: dict[frozenset[str], list[int]] = {}
    for number in sorted(held):
        by_terms.setdefault(frozenset(held[number]), []).append(number)
    sets = list(by_terms)
    scores = lexical_evidence(sets, queries, [terms for terms in sets for _ in by_terms[terms]])
    left = budget
    for i in sorted(range(len(sets)), key=lambda i: (-round(scores[i], _SCORE_DECIMALS), by_terms[sets[i]][0])):
        for number in by_terms[sets[i]]:
            chars = len(lines[number]) + 1
            if chars <= left:  # a line too long for what is left does not stop shorter ones
                left -= chars
                keep[number] = 1
        if left <= 0:
            return
