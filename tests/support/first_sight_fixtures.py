"""Real tool outputs for first sight's tests (tests/data/first_sight: each file says where it came from)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from router.core.first_sight import EarlierIndex, EarlierResult, NewResult
from router.core.first_sight.numbering import line_key

FIXTURES = Path(__file__).resolve().parent.parent / "data" / "first_sight"


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def fixture_text(name: str) -> str:
    return fixture(name)["text"]


def earlier_results(name: str) -> list[EarlierResult]:
    """The fixture's results as the conversation's earlier results, as they were sent."""
    return [EarlierResult(r["call_id"], r["tool_name"], r["arguments"], r["text"]) for r in fixture(name)["results"]]


def new_result(name: str, position: int = -1) -> NewResult:
    r = fixture(name)["results"][position]
    return NewResult(r["text"], r["tool_name"], r["arguments"])


# --- expanding a lossless reduction back: what the model can do with the pointers and counts ---

_SAME = re.compile(r"\[pinch-router: same output as the earlier call (.+)\]")
_RUN = re.compile(r"\[pinch-router: (\d+) lines omitted here(?:, the same as|:) lines (\d+)–(\d+) of the earlier call (.+?)(?:, (without line numbers|numbered \d+–\d+ .+))?\]")
_DIFF = re.compile(r"\[pinch-router: the output of the earlier call (.+), changed as this unified diff shows \(- earlier, \+ now\)\]")
_REPEAT = re.compile(r"\[pinch-router: the (?:line|(\d+) lines) above repeated (\d+) more times?\]")
_STEPPING = re.compile(r"\[pinch-router: (\d+) more lines between the line above and the line below, each number stepping evenly from one to the other\]")
_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NUMBERED = re.compile(r"numbered (\d+)–(\d+) (.+)")


def expand(text: str, earlier: list[EarlierResult] | EarlierIndex) -> str:
    """A lossless reduction made whole again from its markers and the earlier results they name."""
    index = earlier if isinstance(earlier, EarlierIndex) else EarlierIndex(earlier)
    by_name = {index.name(position): position for position in range(len(index))}
    lines = text.split("\n")
    if len(lines) == 1 and (same := _SAME.fullmatch(lines[0])):
        return unfold(index.results[by_name[same.group(1)]].text)
    if diff := _DIFF.fullmatch(lines[0]):
        return unfold(apply_unified_diff(index.lines[by_name[diff.group(1)]], lines[1:]))
    out: list[str] = []
    previous = None
    for line in lines:
        run = _RUN.fullmatch(line)
        if run is None:
            out.append(line)
            continue
        count, first, last, name, note = run.groups()
        position = previous if name == "named above" else by_name[name]
        previous = position
        earlier_lines = index.lines[position][int(first) - 1 : int(last)]
        assert len(earlier_lines) == int(count)
        out.extend(_renumbered(earlier_lines, note))
    return unfold("\n".join(out))


def _renumbered(lines: list[str], note: str | None) -> list[str]:
    if note is None:
        return lines
    keys = [line_key(line) for line in lines]
    if note == "without line numbers":
        return keys
    numbered = _NUMBERED.fullmatch(note)
    assert numbered is not None, note
    start, how = int(numbered.group(1)), numbered.group(3)
    if how == "as cat -n numbers lines":
        return [f"{start + i:>6}\t{key}" for i, key in enumerate(keys)]
    if how == "as cat -n does, with → for its tab":
        return [f"{start + i:>6}→{key}" for i, key in enumerate(keys)]
    if how == "as grep -n numbers matching lines (':')":
        marks = [":"] * len(keys)
    elif how == "as grep -n numbers context lines ('-')":
        marks = ["-"] * len(keys)
    else:
        listed = re.fullmatch(r"as grep -n numbers them, ':' on (.+) and '-' on the others", how)
        assert listed is not None, how
        matching: set[int] = set()
        for span in listed.group(1).split(", "):
            low, _, high = span.partition("–")
            matching.update(range(int(low), int(high or low) + 1))
        marks = [":" if start + i in matching else "-" for i in range(len(keys))]
    return [f"{start + i}{mark}{key}" for i, (mark, key) in enumerate(zip(marks, keys, strict=True))]


def unfold(text: str) -> str:
    """A text with its repeated-lines markers expanded."""
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if repeat := _REPEAT.fullmatch(line):
            period = int(repeat.group(1) or 1)
            out.extend(out[-period:] * int(repeat.group(2)))
        elif stepping := _STEPPING.fullmatch(line):
            between, above, below = int(stepping.group(1)), out[-1], lines[i + 1]
            firsts, lasts = [int(n) for n in re.findall(r"\d+", above)], [int(n) for n in re.findall(r"\d+", below)]
            parts = re.split(r"\d+", above)
            for k in range(1, between + 1):
                numbers = [a + (b - a) // (between + 1) * k for a, b in zip(firsts, lasts, strict=True)]
                out.append("".join(part + (str(n) if j < len(numbers) else "") for j, (part, n) in enumerate(zip(parts, [*numbers, 0], strict=True))))
        else:
            out.append(line)
        i += 1
    return "\n".join(out)


def apply_unified_diff(old: list[str], diff: list[str]) -> str:
    """``old`` (lines) patched by ``diff`` (its lines, no file header)."""
    out: list[str] = []
    taken = 0  # lines of old copied or consumed so far
    for line in diff:
        if hunk := _HUNK.fullmatch(line):
            start = int(hunk.group(1)) - (0 if hunk.group(2) == "0" else 1)
            out.extend(old[taken:start])
            taken = start
        elif line.startswith(" "):
            assert old[taken] == line[1:]
            out.append(line[1:])
            taken += 1
        elif line.startswith("-"):
            assert old[taken] == line[1:]
            taken += 1
        elif line.startswith("+"):
            out.append(line[1:])
        else:
            raise AssertionError(f"not a diff line: {line!r}")
    out.extend(old[taken:])
    return "\n".join(out)
