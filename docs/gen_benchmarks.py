"""The benchmarks page, generated from ``bench/results/*.txt`` (run by the docs build: docs/hooks.py).

Each results file is what one benchmark printed last, saved by the benchmark itself (``--save``) or
moved there from the old README: a first line ``# <command> — <when>, <machine: nproc, load average>``,
then exactly the table it printed. The page is one summary table (a row per benchmark: its verdict in
words — met, missed, k of n targets met, or no target — with the figure it rests on, and when and where
it ran) and each table in full, under its command.
History stays in git. ``python -m docs.gen_benchmarks`` prints the page.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
_VERDICT = re.compile(r"\b(met|MISSED|target|targets|ALL|all|total)\b")
_MET = re.compile(r"\bmet\b")
_MISSED = re.compile(r"\b(MISSED|missed|not met)\b")
_WORDS = re.compile(r"[A-Za-z]{3,}")


@dataclass(frozen=True, slots=True)
class Result:
    bench: str
    command: str
    measured: str
    table: list[str]

    @property
    def headline(self) -> str:
        """The table's verdict: its last line naming a target or a total, else its last line; spaces collapsed."""
        lines = [line for line in self.table if line.strip() and not line.startswith(("load average", "("))]  # not a legend
        if lines[0].startswith("|") and len(lines) > 2:
            lines = lines[2:]  # a markdown table's head and rule are not its verdict
        last = next((line for line in reversed(lines) if _VERDICT.search(line)), lines[-1])
        cells = last.strip().strip("|").split("|") if last.startswith("|") else [last]
        return " ".join(" ".join(cells).split())

    @property
    def verdict(self) -> str:
        """The table's verdict in words: "met", "missed", "k of n targets met" (its lines saying met or
        missed: a row per target, or one line that sums them up, which is then taken whole), or "no target"."""
        lines = [line for line in self.table if _MET.search(line) or _MISSED.search(line)]
        summing = [line for line in lines if re.search(r"\b(all|ALL)\b.*\bmet\b|\b(\d+) of (\d+)\b", line)]
        found = re.search(r"\b(\d+) of (\d+)\b[^|]*\bmet\b", summing[-1]) if summing else None
        if found is not None:
            return f"{found.group(1)} of {found.group(2)} targets met" if found.group(1) != found.group(2) else "met"
        if summing and not _MISSED.search(summing[-1]):
            return "met"
        missed = sum(1 for line in lines if _MISSED.search(line))
        if not lines:
            return "no target"
        if missed == 0:
            return "met"
        return "missed" if missed == len(lines) else f"{len(lines) - missed} of {len(lines)} targets met"

    @property
    def figure(self) -> str:
        """The headline, its numbers named: a table's row (``ALL 32 32 4 9748 …``) is read against the header
        of its block, each value with the column it stands under (``ALL: turns 32, calls off 32, …``); a
        sentence is taken as it is."""
        lines = [line for line in self.table if line.strip() and not line.startswith("load average")]
        if lines[0].startswith("|"):
            row = next(line for line in reversed(lines) if _flat(line) == self.headline)
            if not row.startswith("|"):
                return self.headline  # a sentence under the table
            names, values = (_markdown_cells(line) for line in (lines[0], row))
            return _named(list(zip(names, values, strict=False)))
        rows = [i for i, line in enumerate(self.table) if _flat(line) == self.headline]
        if not rows or len(re.findall(r"\S(?:\S| (?! ))*", self.table[rows[-1]])) < 3 or len(re.split(r"\s{2,}", self.table[rows[-1]].strip())) < 3:
            return self.headline  # a sentence, not a row of a table
        at = rows[-1]
        head = at
        while head > 0 and self.table[head - 1].strip():
            head -= 1  # the block's first line
        while head < at and len(re.split(r"\s{2,}", self.table[head].strip())) < 2:
            head += 1  # a caption above the header
        header, row = self.table[head], self.table[at]
        pairs: list[tuple[str, str]] = []
        start = 0
        values: list[tuple[int, int, str]] = []  # (start, where its column's name ends, the value)
        for found in re.finditer(r"\S+(?: \S+)*", row):
            if values and values[-1][2].endswith("/"):  # "11.8 /  4.1 / 13.3": one value
                values[-1] = (values[-1][0], found.end(), f"{values[-1][2]} {found.group()}")
            elif values and found.group().startswith("["):  # "0.491  [164]": a note on the value before it
                values[-1] = (values[-1][0], values[-1][1], f"{values[-1][2]} {found.group()}")
            else:
                values.append((found.start(), found.end(), found.group()))
        names = [(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+(?: \S+)*", header)]
        if len(names) == len(values):  # names set apart as the values are: column by column
            pairs = [(name, value) for (_, _, name), (_, _, value) in zip(names, values, strict=True)]
        else:  # names a space apart: a value ends where its column's name ends (numbers align right)
            for n, (first, last, value) in enumerate(values):
                end = last if first else max(last, names[0][1])
                end = len(header) if n == len(values) - 1 else end  # the last column takes the rest of its name
                pairs.append((" ".join(header[start:end].split()), value))
                start = end
        return _named(pairs)


def _flat(line: str) -> str:
    cells = line.strip().strip("|").split("|") if line.startswith("|") else [line]
    return " ".join(" ".join(cells).split())


def _markdown_cells(line: str) -> list[str]:
    return [" ".join(cell.split()) for cell in line.strip().strip("|").split("|")]


def _named(pairs: list[tuple[str, str]]) -> str:
    """``first value: name value, name value, …`` — the row's label, then each figure with its column."""
    (_, label), *rest = [(name, value) for name, value in pairs if value]
    return f"{label}: " + ", ".join(f"{name} {value}".strip() for name, value in rest)


class ResultsError(ValueError):
    pass


def read_result(path: Path) -> Result:
    first, *table = path.read_text(encoding="utf-8").splitlines()
    if not first.startswith("# ") or " — " not in first:
        raise ResultsError(f"{path}: the first line must be '# <command> — <when>, <machine>', not {first!r}")
    command, measured = first[2:].split(" — ", 1)
    if not any(line.strip() for line in table):
        raise ResultsError(f"{path}: no table under the header line")
    return Result(path.stem, command.strip(), measured.strip(), table)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(results: Path = RESULTS) -> str:
    found = [read_result(p) for p in sorted(results.glob("*.txt"))]
    lines = [
        "# Benchmarks",
        "",
        "<!-- GENERATED by docs/gen_benchmarks.py from bench/results/*.txt when the site is built: edit those files "
        "(a benchmark run with --save rewrites its own), not this page. -->",
        "",
        "Benchmarks are scripts, not tests: each prints a table against a baseline measured in the same run, on",
        "this project's shared 2-core machine (noisy: ±20–40 % between minutes for wall-clock figures; instruction",
        "counts repeat to ~1 %). Run them from the repository root after the test set-up. Each table below is the",
        "latest its benchmark printed, from `bench/results/<bench>.txt`; older runs are in git's history, what each",
        "benchmark measures and the verdicts are on [Benchmark notes](benchmark-notes.md).",
        "",
        "| benchmark | verdict | the figure it rests on | measured |",
        "|---|---|---|---|",
    ]
    lines += [f"| [{r.bench}](#{r.bench}) | **{r.verdict}** | {_cell(r.figure)} | {_cell(r.measured)} |" for r in found]
    for r in found:
        lines += ["", f"## {r.bench}", "", f"`{r.command}` — {r.measured}", ""]
        if all(line.startswith("|") for line in r.table if line.strip()):
            lines += r.table  # a markdown table as the benchmark printed it
        else:
            lines += ["```", *r.table, "```"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
