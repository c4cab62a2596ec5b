"""Finding lines in a long text fast. Pure.

A regular expression with many alternatives is tried at every position of the text, so
scanning a 40,000-line log with one costs a second. :func:`lines_holding` finds the lines that
hold any of a few literal strings with ``str.find`` (memchr speed), :func:`lines_matching` those
where a cheap pattern (a character class) matches, for a reducer to test those lines alone.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable
from itertools import accumulate
from operator import add


def line_starts(lines: list[str]) -> list[int]:
    """Where each line of ``"\\n".join(lines)`` starts."""
    # the lengths summed, plus one line break a line before it: map and accumulate stay in C
    return [0, *map(add, accumulate(map(len, lines[:-1])), range(1, len(lines)))]


def lines_holding(text: str, needles: Iterable[str], starts: list[int]) -> list[int]:
    """The numbers of the lines of ``text`` (which start at ``starts``) holding any of ``needles``, ascending."""
    found: set[int] = set()
    last = len(starts) - 1
    for needle in needles:
        position = text.find(needle)
        while position != -1:
            number = bisect_right(starts, position) - 1
            found.add(number)
            if number == last:
                break
            position = text.find(needle, starts[number + 1])  # one hit a line is enough
    return sorted(found)


def lines_matching(text: str, pattern: re.Pattern[str], starts: list[int]) -> list[int]:
    """The numbers of the lines of ``text`` (which start at ``starts``) where ``pattern`` matches, ascending."""
    found: list[int] = []
    last = len(starts) - 1
    match = pattern.search(text)
    while match is not None:
        number = bisect_right(starts, match.start()) - 1
        found.append(number)
        if number == last:
            break
        match = pattern.search(text, starts[number + 1])
    return found
