"""The docs site's generated parts: the benchmarks page from bench/results/, and the nav's pending pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from docs.gen_benchmarks import RESULTS, Result, ResultsError, read_result, render

ROOT = Path(__file__).resolve().parents[2]


def test_every_results_file_has_its_header_and_a_table() -> None:
    files = sorted(RESULTS.glob("*.txt"))
    assert len(files) >= 8
    for path in files:
        result = read_result(path)
        assert result.command.startswith(".venv/bin/python -m bench.") and result.bench in result.command
        assert "machine: " in result.measured and result.headline and result.verdict and result.figure


def test_the_page_has_one_summary_row_and_the_table_of_each_benchmark(tmp_path: Path) -> None:
    (tmp_path / "bench_a.txt").write_text("# .venv/bin/python -m bench.bench_a — 2026-12-02, machine: 2 CPUs, load average 0.5\nx  y\n1  2\ntarget met\n")
    (tmp_path / "bench_b.txt").write_text("# .venv/bin/python -m bench.bench_b — 2026-12-01, machine: 2 CPUs, load 3\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    page = render(tmp_path)
    assert "| [bench_a](#bench_a) | **met** | target met | 2026-12-02, machine: 2 CPUs, load average 0.5 |" in page
    assert "| [bench_b](#bench_b) | **no target** | 1: b 2 | 2026-12-01, machine: 2 CPUs, load 3 |" in page
    assert "## bench_a\n\n`.venv/bin/python -m bench.bench_a` — 2026-12-02, machine: 2 CPUs, load average 0.5\n\n```\nx  y\n1  2\ntarget met\n```" in page
    assert "\n| a | b |\n|---|---|\n| 1 | 2 |\n" in page  # a markdown table stays a table


@pytest.mark.parametrize(
    ("table", "verdict", "figure"),
    [
        (  # a row of numbers under names a space apart (right-aligned): each figure named
            ["session        turns calls off saved ms", "one                8         8     2120", "ALL               32        32     8488"],
            "no target", "ALL: turns 32, calls off 32, saved ms 8488",
        ),
        (  # a target per row, one missed; a note beside a value stays with it
            ["transcript  prune  ledger  target", "a           0.2    0.1     met (0.5×)", "b           0.3  [4]  0.4  MISSED (1.3×)"],
            "1 of 2 targets met", "b: prune 0.3 [4], ledger 0.4, target MISSED (1.3×)",
        ),
        (["| case | ms |", "|---|---|", "| all | 12 |", "5 of 9 target cells met"], "5 of 9 targets met", "5 of 9 target cells met"),
        (["x  y", "1  2", "target: under 3 ms: 2.1 ms — met"], "met", "target: under 3 ms: 2.1 ms — met"),
    ],
)
def test_each_benchmark_has_its_verdict_in_words_and_the_figure_it_rests_on(table: list[str], verdict: str, figure: str) -> None:
    result = Result("bench_x", ".venv/bin/python -m bench.bench_x", "today", table)
    assert (result.verdict, result.figure) == (verdict, figure)


@pytest.mark.parametrize(("content", "message"), [("no header\n| a |\n", "first line"), ("# cmd — today, machine: 1\n\n", "no table")])
def test_a_results_file_without_its_header_or_table_fails_the_build(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "bench_x.txt").write_text(content)
    with pytest.raises(ResultsError, match=message):
        render(tmp_path)


def test_a_pending_page_leaves_the_nav_only_while_its_file_is_missing(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")  # the docs extra
    from docs.hooks import _without_pending

    nav = [{"Home": "index.md"}, {"Reliability": [{"Wire cost": "wire-cost.md"}, {"Other": "other.md"}]}]
    assert _without_pending(nav, tmp_path) == [{"Home": "index.md"}, {"Reliability": [{"Other": "other.md"}]}]
    (tmp_path / "wire-cost.md").write_text("# Wire cost\n")
    assert _without_pending(nav, tmp_path) == nav
    assert _without_pending([{"Missing": "missing.md"}], tmp_path) == [{"Missing": "missing.md"}]  # strict mode reports it
