"""Error lines: what first sight never takes from a new result (ARCHITECTURE §5: the newest
result's errors stay verbatim). Pure.

Two sets, one inside the other:

* :data:`FAILURE_LINE` — a line that reports a failure: a traceback's first line, an exception
  named at the start of a line (``ValueError: …``, ``SystemExit: 1``), a test runner's
  ``FAILED``/``ERROR``/``FAIL`` lines and pytest's ``E`` lines, a compiler's ``error:``,
  ``panic``, ``fatal:``, ``npm ERR!``, a crash. No reducer removes one: a pointer to an earlier
  result or a diff leaves it in place.
* :data:`ERROR_LINE` — those, plus what surrounds a failure and names it: a traceback's frames
  (``  File "…", line 12, in f``), any ``…Error``/``…Exception`` name, ``FAILED``, ``ERROR``,
  ``assert``. The long-output cut keeps every one (in a source file they are few; in a log they
  are what the model looks for).

A set is a :class:`LineTest`: a pattern tried at the start of a line, one tried anywhere in it,
and the literal strings every match holds, so a long text is searched for those strings (memchr
speed) and only the lines holding one are tried.
"""

from __future__ import annotations

import re

from router.core.first_sight.lines import line_starts, lines_holding


class LineTest:
    """Which lines of a text belong to a set (module doc)."""

    def __init__(self, start: str, start_needles: tuple[str, ...], anywhere: str, anywhere_needles: tuple[str, ...]) -> None:
        self.start = re.compile(start)  # tried with match: a line that does not begin so fails at once
        self.anywhere = re.compile(anywhere)
        self.start_needles, self.anywhere_needles = start_needles, anywhere_needles

    def holds(self, line: str) -> bool:
        return self.start.match(line) is not None or self.anywhere.search(line) is not None

    def numbers(self, text: str, lines: list[str], starts: list[int] | None = None) -> list[int]:
        """The numbers of the lines of ``text`` (split as ``lines``) in the set, ascending."""
        if starts is None:
            starts = line_starts(lines)
        found = {number for number in lines_holding(text, self.start_needles, starts) if self.start.match(lines[number])}
        found.update(number for number in lines_holding(text, self.anywhere_needles, starts) if self.anywhere.search(lines[number]))
        return sorted(found)


_START = (
    r"Traceback \(most recent call last\)"
    r"|[ \t]*(?:[A-Za-z_][\w.]*\.)?(?:[A-Z]\w*)?(?:Error|Exception|Exit|Interrupt|Failure)\b"  # ValueError: …, pkg.mod.Error
    r"|(?:FAILED|FAIL|ERROR)\b|=+ (?:FAILURES|ERRORS) =+$"
    r"|E {2}"  # pytest's explanation lines
)
_START_NEEDLES = ("Traceback", "Error", "Exception", "Exit", "Interrupt", "Failure", "FAIL", "ERROR", "E  ")
_ANYWHERE = r"\berror(?:\[\w+\])?:|\bpanic(?:ked)?\b|\bfatal:|\bFATAL\b|\bPANIC\b|npm ERR!|Segmentation fault|core dumped"
_ANYWHERE_NEEDLES = ("error", "panic", "fatal:", "FATAL", "PANIC", "npm ERR!", "Segmentation fault", "core dumped")

FAILURE_LINE = LineTest(_START, _START_NEEDLES, _ANYWHERE, _ANYWHERE_NEEDLES)
ERROR_LINE = LineTest(
    rf'{_START}|[ \t]+File "[^"]*", line \d+',  # and a traceback's frames
    (*_START_NEEDLES, 'File "'),
    rf"{_ANYWHERE}|(?:Error|Exception)\b|\bFAIL(?:ED|URES?)?\b|\bERROR\b|\bassert(?:ion)?\b",
    (*_ANYWHERE_NEEDLES, "Error", "Exception", "FAIL", "ERROR", "assert"),
)


def is_error_line(line: str) -> bool:
    """True for a line the long-output cut always keeps (:data:`ERROR_LINE`)."""
    return ERROR_LINE.holds(line)


def is_failure_line(line: str) -> bool:
    """True for a line no reducer removes (:data:`FAILURE_LINE`)."""
    return FAILURE_LINE.holds(line)
