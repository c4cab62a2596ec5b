"""The samples the docs show are what the code prints or holds: the `top` captures, explain's output, relevance's weights.

The `top` screens docs/observability.md shows are the captures docs/capture_top.py wrote.

The page shows the main table and the detail popup as text; docs/top.txt and docs/top-detail.txt are
what the script captured from the TUI (headless, 120x30) in the same run as the SVGs next to them. The
page's blocks must be lines of those captures (the popup without its frame and scroll bar), so a
re-run of the script without the page following it fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def page_blocks() -> list[str]:
    return re.findall(r"```\n(.*?)```", (DOCS / "observability.md").read_text(encoding="utf-8"), re.S)


def capture_lines(name: str) -> list[str]:
    return [line.rstrip() for line in (DOCS / name).read_text(encoding="utf-8").splitlines()]


def popup_lines(capture: list[str]) -> list[str]:
    """The text inside the popup's frame (``█`` … ``█``), the scroll bar's ``▅`` cut off."""
    inside = [line[line.index("█") + 1 : line.rindex("█")] for line in capture if line.count("█") >= 2]
    text = [re.sub(r"\s*[▅▀▄]+\s*$", "", line).rstrip() for line in inside]
    first = next(i for i, line in enumerate(text) if line.lstrip().startswith("req_"))
    return text[first:]


def block_with(start: str) -> list[str]:
    block = next(b for b in page_blocks() if b.lstrip().startswith(start) or start in b.splitlines()[0])
    return [line.rstrip() for line in block.splitlines()]


def test_the_pages_top_table_is_lines_of_docs_top_txt():
    table = block_with("⭘")
    capture = capture_lines("top.txt")
    assert table and all(line in capture for line in table), [line for line in table if line not in capture]
    assert table == capture[: len(table)], "the page shows the capture's first lines, in order"


def test_the_pages_detail_popup_is_the_popup_of_docs_top_detail_txt():
    popup = block_with("req_")
    captured = popup_lines(capture_lines("top-detail.txt"))
    assert popup == captured[: len(popup)] and len(popup) > 10


# --- the explain sample: the command the page names, run in-process, its output the page's block ---

EXPLAIN_TRANSCRIPT = ROOT / "tests" / "data" / "transcripts" / "mswea-deepseek-chat__django__django-15695.json"


def without_timings(lines: list[str]) -> list[str]:
    """Milliseconds differ from run to run; everything else explain prints is deterministic. A stage past
    10 ms on a loaded machine widens the trace's ms column, so the columns' spacing is not compared."""
    masked = [re.sub(r"total [\d.]+ ms", "total … ms", line) for line in lines]
    masked = [re.sub(r"^(  \S+\s+(?:ok|error|skipped|fallback|timeout)\s+)[\d.]+", r"\1…", line) for line in masked]
    return [re.sub(r"(?<=\S) {2,}", "  ", line) for line in masked]


def test_the_pages_explain_sample_is_what_explain_offline_prints_on_the_shipped_config(capsys, monkeypatch):
    from router.cli import main

    monkeypatch.chdir(ROOT)
    status = main(["explain", "--config", "config.yaml", "--offline", str(EXPLAIN_TRANSCRIPT.relative_to(ROOT))])
    assert status == 0
    printed = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    sample = block_with("request ")
    start = printed.index(sample[0])
    assert without_timings(sample) == without_timings(printed[start : start + len(sample)])


# --- relevance's formula: the weights the page writes are rank_candidates' defaults ---


def test_the_relevance_pages_formula_has_rank_candidates_default_weights():
    from router.core.relevance import DEFAULT_WEIGHTS

    text = (DOCS / "relevance.md").read_text(encoding="utf-8")
    formula = re.search(r"worth = log\((\S+) \+ lexical \+ (\S+) · max\(0, similarity\)\) − log\(tokens compressing it saves\) \+ (\S+) · recency", text)
    assert formula, "docs/relevance.md no longer shows the formula this test reads"
    assert tuple(float(g) for g in formula.groups()) == (DEFAULT_WEIGHTS.floor, DEFAULT_WEIGHTS.similarity, DEFAULT_WEIGHTS.age)
