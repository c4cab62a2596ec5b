"""Line numbers a tool prints before each line (``grep -n``, ``cat -n``, an editor's view). Pure.

The same line of a file reads ``882:    def f():`` in one output, ``882-    def f():`` in another
(grep marks the matching lines with ``:``, their context with ``-``), ``   882\\tdef f():`` or
plain ``    def f():`` in a third. :func:`line_key` is a line without that prefix, so a run
of lines can be found in an earlier output whatever numbered it; :func:`numbering_note` then says
how this output numbered the run, so the pointer loses nothing the model can use.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_GREP = re.compile(r"(\d+)([:-])")
_CAT = re.compile(r" *(\d+)(\t|→)")
_EITHER = re.compile(r"\d+[:-]| *\d+[\t→]")  # one match a line instead of two: line_key runs on every line
_STARTS_NUMBERED = frozenset("0123456789 ")


def line_key(line: str) -> str:
    """The line without a leading ``grep -n`` or ``cat -n`` number."""
    if not line or line[0] not in _STARTS_NUMBERED:
        return line
    match = _EITHER.match(line)
    return line[match.end() :] if match else line


def numbering_note(lines: Sequence[str]) -> str | None:
    """How ``lines`` are numbered, to say beside a pointer to the same lines elsewhere: ``without line
    numbers``, ``numbered 882–923 as cat -n numbers lines``, or grep's numbers and which lines it
    marked as matching; None when they are numbered in mixed styles or not consecutively."""
    first = _GREP.match(lines[0]) or _CAT.match(lines[0]) if lines[0][:1] in _STARTS_NUMBERED else None
    if first is None:
        return "without line numbers" if all(line_key(line) == line for line in lines) else None
    pattern = _GREP if first.re is _GREP else _CAT
    start = int(first.group(1))
    marks: list[str] = []
    for offset, line in enumerate(lines):
        match = pattern.match(line)
        if match is None or int(match.group(1)) != start + offset:
            return None
        if pattern is _CAT and match.group() != f"{start + offset:>6}{first.group(2)}":
            return None  # only cat -n's own layout (six columns) is said in so few words
        marks.append(match.group(2))
    numbers = f"numbered {start}–{start + len(lines) - 1}"
    if pattern is _CAT:
        return f"{numbers} as cat -n numbers lines" if first.group(2) == "\t" else f"{numbers} as cat -n does, with → for its tab"
    matching = [start + offset for offset, mark in enumerate(marks) if mark == ":"]
    if len(matching) == len(lines):
        return f"{numbers} as grep -n numbers matching lines (':')"
    if not matching:
        return f"{numbers} as grep -n numbers context lines ('-')"
    return f"{numbers} as grep -n numbers them, ':' on {_ranges(matching)} and '-' on the others"


def _ranges(numbers: list[int]) -> str:
    """``882–883, 885``: ascending numbers as ranges."""
    spans: list[str] = []
    begin = previous = numbers[0]
    for number in [*numbers[1:], None]:
        if number is not None and number == previous + 1:
            previous = number
            continue
        spans.append(str(begin) if begin == previous else f"{begin}–{previous}")
        if number is not None:
            begin = previous = number
    return ", ".join(spans)
