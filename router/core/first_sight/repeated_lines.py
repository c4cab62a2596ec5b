"""Repeated lines: a run of the same line (or block of lines) folds to one copy and a count. Lossless. Pure.

* A line, or a block of up to ``max_period`` lines, repeated back to back keeps its first copy,
  followed by ``[pinch-router: the line above repeated 57 more times]`` (``the 3 lines above``
  for a block) — the smallest block that folds the most wins.
* Lines that differ only in numbers fold only when nothing is lost: every number steps by the
  same amount from each line to the next (``epoch 1/50``, ``epoch 2/50``, …; written without
  leading zeros), so the first and the last line and the count give back every line. Timestamps
  and measurements do not step evenly and stay; lines of more than :data:`MAX_STEPPING_DIGITS`
  digits (a log line's date, time, ids and timings) are not even tried, which keeps a 40,000-line
  log from costing a number parse a line.

A fold is made only where the marker is shorter than what it replaces.
"""

from __future__ import annotations

import re

from router.core.first_sight.model import MARKER_OPEN, Reduced

_NUMBER_SPLIT = re.compile(r"(\d+)")
MAX_STEPPING_DIGITS = 12
# the shortest run of lines stepping evenly worth folding: first, marker, last
_MIN_STEPPING_LINES = 4


def repeat_marker(period: int, more: int) -> str:
    what = "the line above" if period == 1 else f"the {period} lines above"
    return f"{MARKER_OPEN}{what} repeated {more} more time{'' if more == 1 else 's'}]"


def stepping_marker(between: int) -> str:
    return f"{MARKER_OPEN}{between} more lines between the line above and the line below, each number stepping evenly from one to the other]"


def fold_repeated_lines(text: str, max_period: int) -> Reduced | None:
    """The text with its repeated runs folded (module doc); None when nothing folds."""
    lines = text.split("\n")
    out: list[str] = []
    folded_lines = folds = 0
    done = 0  # lines before this are in the output
    shapes: dict[int, tuple[str, list[int] | None]] = {}
    for start in _fold_candidates(text, lines, max_period):
        if start < done:
            continue
        period, more = _best_repeat(lines, start, max_period)
        if more:
            out.extend(lines[done : start + period])
            out.append(repeat_marker(period, more))
            folded_lines += period * more
            done = start + period * (more + 1)
        elif stepping := _stepping_run(lines, start, shapes):
            out.extend(lines[done : start + 1])
            out.extend((stepping_marker(stepping - 2), lines[start + stepping - 1]))
            folded_lines += stepping - 2
            done = start + stepping
        else:
            continue
        folds += 1
    if not folds:
        return None
    out.extend(lines[done:])
    return Reduced("\n".join(out), f"{folded_lines} repeated lines in {folds} runs")


def _fold_candidates(text: str, lines: list[str], max_period: int) -> list[int]:
    """Where a fold may start, ascending: a line equal to one up to ``max_period`` lines on, or the
    first of four lines equal but for their digits. Found with list-wide comparisons, so a long text
    without repeats costs little more than its split."""
    starts: set[int] = set()
    for period in range(1, max_period + 1):
        starts.update(i for i, (line, later) in enumerate(zip(lines, lines[period:])) if line == later)
    if len(lines) >= _MIN_STEPPING_LINES:
        # digits dropped from the UTF-8 bytes: bytes.translate runs at memory speed, str.translate a hundred times slower
        encoded = text.encode("utf-8", "surrogatepass")
        whole, bare = encoded.split(b"\n"), encoded.translate(None, b"0123456789").split(b"\n")
        starts.update(
            i
            for i, (a, b, c, d) in enumerate(zip(bare, bare[1:], bare[2:], bare[3:]))
            if a == b == c == d and 0 < len(whole[i]) - len(a) <= MAX_STEPPING_DIGITS and lines[i] != lines[i + 1]
        )
    return sorted(starts)


def _best_repeat(lines: list[str], start: int, max_period: int) -> tuple[int, int]:
    """The block length and the number of further copies of the fold at ``start`` that saves the most characters ((1, 0): none)."""
    best_period, best_more, best_saving = 1, 0, 0
    count = len(lines)
    for period in range(1, max_period + 1):
        if start + 2 * period > count:
            break
        if lines[start + period] != lines[start]:
            continue
        block = lines[start : start + period]
        more = 0
        following = start + period
        while following + period <= count and lines[following : following + period] == block:
            more += 1
            following += period
        if not more:
            continue
        block_chars = sum(len(line) + 1 for line in block)
        saving = more * block_chars - len(repeat_marker(period, more)) - 1
        if saving > best_saving:  # strictly: the smaller block wins a tie
            best_period, best_more, best_saving = period, more, saving
    return best_period, best_more


def _stepping_run(lines: list[str], start: int, shapes: dict[int, tuple[str, list[int] | None]]) -> int:
    """How many lines from ``start`` differ only in numbers that each step evenly (0: fewer than are
    worth folding). ``shapes`` memoises :func:`_shape` by line number."""
    if start + _MIN_STEPPING_LINES > len(lines) or lines[start] == lines[start + 1]:
        return 0
    shape, numbers = _cached_shape(lines, start, shapes)
    next_shape, next_numbers = _cached_shape(lines, start + 1, shapes)
    if next_shape != shape or numbers is None or next_numbers is None:
        return 0
    steps = [b - a for a, b in zip(numbers, next_numbers, strict=True)]
    end, previous = start + 2, next_numbers
    while end < len(lines):
        line_shape, line_numbers = _cached_shape(lines, end, shapes)
        if line_shape != shape or line_numbers is None or any(b - a != step for a, b, step in zip(previous, line_numbers, steps, strict=True)):
            break
        previous = line_numbers
        end += 1
    run = end - start
    if run < _MIN_STEPPING_LINES:
        return 0
    folded_chars = sum(len(line) + 1 for line in lines[start + 1 : end - 1])
    return run if folded_chars > len(stepping_marker(run - 2)) + 1 else 0


def _cached_shape(lines: list[str], number: int, shapes: dict[int, tuple[str, list[int] | None]]) -> tuple[str, list[int] | None]:
    found = shapes.get(number)
    if found is None:
        found = shapes[number] = _shape(lines[number])
    return found


def _shape(line: str) -> tuple[str, list[int] | None]:
    """The line with its numbers blanked, and the numbers (None when one has a leading zero: its width would be lost)."""
    parts = _NUMBER_SPLIT.split(line)
    digits = parts[1::2]
    if any(len(d) > 1 and d[0] == "0" for d in digits):
        return "", None
    return "#".join(parts[0::2]), [int(d) for d in digits]
