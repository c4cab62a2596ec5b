"""Terminal noise: what a terminal draws but a model cannot use. Lossless for the model. Pure.

* ANSI escape sequences (colours, cursor moves, window titles) are removed;
* a line redrawn with carriage returns (a progress bar, a spinner) keeps only what was
  written after its last ``\\r`` (a ``\\r`` that ends a line, as in CRLF, stays);
* a run of consecutive progress lines that differ only in their numbers, bar and spinner
  (pip, tqdm, npm, docker, wget printed without redraws) keeps its last line: the final state.

A progress line is one with a drawn bar (``████``, ``━━━``, ``[====>   ]``), a braille spinner,
or a percentage with a rate or an ETA; identical lines are never dropped here (they are
repeated lines, folded with their count).
"""

from __future__ import annotations

import re

from router.core.first_sight.lines import line_starts, lines_holding, lines_matching
from router.core.first_sight.model import Reduced

# CSI (colours, cursor), OSC (titles, links: ended by BEL or ST), charset selection, any other two-byte escape
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[()][0-9A-Za-z]|[@-_])")
_BAR_CHARS = "█▉▊▋▌▍▎▏━╸╺╾╼░▒▓■"
_BAR = re.compile(rf"[{_BAR_CHARS}]{{3}}|[\[|][ .]*[#=]{{2,}}>?[ .\-]*[\]|]")  # drawn, or ASCII: [=====>   ]  |#####   |
_RATE = re.compile(r"\d%.*(?:\d/s\b|it/s|s/it|\beta\b|\bETA\b)")  # a percentage with a rate or an ETA
_SPINNER = re.compile(r"\s*[\u2800-\u28ff]")  # a braille spinner starting the line
# What every progress line holds: "%", an ASCII bar's "==" or "##", or a drawn bar's or spinner's character
# (box drawing, blocks and shapes, U+2500–U+25FF; braille, U+2800–U+28FF), looked for in the UTF-8 bytes first:
# a regex scans bytes ~50 times faster than a text with characters beyond Latin-1
_ASCII_HINTS = ("%", "==", "##")
_DRAWN = re.compile("[\u2500-\u25ff\u2800-\u28ff]")
_DRAWN_UTF8 = re.compile(b"\xe2[\x94-\x97\xa0-\xa3]")


def _is_progress(line: str) -> bool:
    return _BAR.search(line) is not None or ("%" in line and _RATE.search(line) is not None) or _SPINNER.match(line) is not None


# What stays of a progress line once its numbers, bar and spinner are gone: equal for two states of one bar
_MOVING = re.compile(rf"\d+(?:[.,:]\d+)*|\b(?:[kMGT]i?B|B|eta|ETA)\b|[{_BAR_CHARS}\u2800-\u28ff#=>\-.\s]+")


def remove_terminal_noise(text: str) -> Reduced | None:
    """The text without escape sequences, redraws and superseded progress lines; None when it has none."""
    escapes = 0
    if "\x1b" in text:
        text, escapes = _ANSI.subn("", text)
    lines = text.split("\n")
    redrawn = 0
    if "\r" in text:
        for i, line in enumerate(lines):
            if "\r" in line:
                kept = _last_drawn(line)
                if kept is not line:
                    lines[i] = kept
                    redrawn += 1
    lines, superseded = _last_progress_states(lines, "\n".join(lines) if redrawn else text)
    if not (escapes or redrawn or superseded):
        return None
    removed = [
        f"{count} {what}"
        for count, what in ((escapes, "escape sequences"), (redrawn, "redrawn lines"), (superseded, "superseded progress lines"))
        if count
    ]
    return Reduced("\n".join(lines), ", ".join(removed))


def _last_drawn(line: str) -> str:
    """What a terminal shows of a line written over with ``\\r``: its last non-empty segment (the line itself when none was overwritten)."""
    body, end = (line[:-1], "\r") if line.endswith("\r") else (line, "")
    if "\r" not in body:
        return line
    segments = [segment for segment in body.split("\r") if segment]
    last = segments[-1] if segments else ""
    return last + end if len(segments) > 1 or len(last) + len(end) < len(line) else line


def _last_progress_states(lines: list[str], text: str) -> tuple[list[str], int]:
    """Lines without the progress lines that the next line supersedes (same skeleton, other numbers)."""
    starts = line_starts(lines)
    hinted = set(lines_holding(text, _ASCII_HINTS, starts))
    if not text.isascii() and _DRAWN_UTF8.search(text.encode("utf-8", "surrogatepass")):
        hinted.update(lines_matching(text, _DRAWN, starts))
    progress = [n for n in sorted(hinted) if _is_progress(lines[n])]
    skeletons = {n: _MOVING.sub("", lines[n]) for n in progress}
    superseded = {
        n for n in progress if skeletons.get(n + 1) == skeletons[n] and lines[n + 1] != lines[n]
    }
    if not superseded:
        return lines, 0
    return [line for n, line in enumerate(lines) if n not in superseded], len(superseded)
