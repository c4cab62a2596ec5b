"""Error lines: what first sight never takes from a new result (ARCHITECTURE §5: the newest
result's errors stay verbatim). Pure.

Two sets, one inside the other:

* :data:`FAILURE_LINE` — a line that reports a failure: a traceback's first line, an exception
  named at the start of a line (``ValueError: …``, ``django.core.exceptions.FieldError: …``), a
  test runner's ``FAILED``/``ERROR``/``FAIL`` lines and pytest's ``E`` lines, a compiler's
  ``error:``, ``panic:``, ``fatal:``, ``npm ERR!``, a crash. No reducer removes one: a pointer to
  an earlier result or a diff leaves it in place.
* :data:`ERROR_LINE` — those, plus what surrounds a failure and names it: a traceback's frames
  (``  File "…", line 12, in f``), any ``…Error``/``…Exception`` name, ``assert``. The long-output cut
  keeps every one (in a source file they are few; in a log they are what the model looks for).
"""

from __future__ import annotations

import re

from router.core.first_sight.lines import line_starts, lines_holding

_FAILURE = (
    r"^Traceback \(most recent call last\)"
    r"|^[ \t]*(?:[A-Za-z_][\w.]*\.)?(?:[A-Z]\w*)?(?:Error|Exception|Exit|Interrupt|Failure)\b"
    r"|^[ \t]*(?:[a-z_]\w*\.){2,}[A-Z]\w*: "  # a dotted exception without the suffix: django.core.exceptions.ImproperlyConfigured: …
    r"|^(?:FAILED|FAIL|ERROR)\b|^=+ (?:FAILURES|ERRORS) =+$"
    r"|^E {2}"  # pytest's explanation lines
    r"|\berror(?:\[\w+\])?:|\bpanic(?:ked)?\b|\bfatal:|\bFATAL\b|\bPANIC\b"
    r"|npm ERR!|Segmentation fault|core dumped"
)
FAILURE_LINE = re.compile(_FAILURE)
ERROR_LINE = re.compile(
    _FAILURE
    + r'|^[ \t]+File "[^"]*", line \d+'  # a traceback's frames
    + r"|(?:Error|Exception)\b|\bFAIL(?:ED|URES?)?\b|\bERROR\b|\bassert(?:ion)?\b"
)
# Where every error line holds one of these (each alternative needs one): the lines worth testing.
_NEEDLES = (
    "Traceback", "Error", "Exception", "Exit", "Interrupt", "Failure", ": ", "FAIL", "ERROR", "E  ",
    "error", "panic", "fatal:", "FATAL", "PANIC", "npm ERR!", "Segmentation fault", "core dumped",
    'File "', "assert",
)


def is_error_line(line: str) -> bool:
    """True for a line the long-output cut always keeps (:data:`ERROR_LINE`)."""
    return ERROR_LINE.search(line) is not None


def is_failure_line(line: str) -> bool:
    """True for a line no reducer removes (:data:`FAILURE_LINE`)."""
    return FAILURE_LINE.search(line) is not None


def numbers_of(pattern: re.Pattern[str], text: str, lines: list[str], starts: list[int] | None = None) -> list[int]:
    """The numbers of the lines of ``text`` (split as ``lines``) that ``pattern`` (one of the two above) matches, ascending."""
    if starts is None:
        starts = line_starts(lines)
    return [number for number in lines_holding(text, _NEEDLES, starts) if pattern.search(lines[number])]
