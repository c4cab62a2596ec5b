"""Real tool outputs for first sight's tests (tests/data/first_sight: each file says where it came from)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from router.core.first_sight.model import EarlierResult, NewResult

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


# --- expanding a reduction back: what the model can do with the counts ---

_REPEAT = re.compile(r"\[pinch-router: the (?:line|(\d+) lines) above repeated (\d+) more times?\]")
_STEPPING = re.compile(r"\[pinch-router: (\d+) more lines between the line above and the line below, each number stepping evenly from one to the other\]")


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
