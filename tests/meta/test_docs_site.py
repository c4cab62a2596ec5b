"""The docs site's generated parts: the benchmarks page from bench/results/, and the nav's pending pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from docs.gen_benchmarks import RESULTS, ResultsError, read_result, render

ROOT = Path(__file__).resolve().parents[2]


def test_every_results_file_has_its_header_and_a_table() -> None:
    files = sorted(RESULTS.glob("*.txt"))
    assert len(files) >= 8
    for path in files:
        result = read_result(path)
        assert result.command.startswith(".venv/bin/python -m bench.") and result.bench in result.command
        assert "machine: " in result.measured and result.headline


def test_the_page_has_one_summary_row_and_the_table_of_each_benchmark(tmp_path: Path) -> None:
    (tmp_path / "bench_a.txt").write_text("# .venv/bin/python -m bench.bench_a — 2026-12-02, machine: 2 CPUs, load average 0.5\nx  y\n1  2\ntarget met\n")
    (tmp_path / "bench_b.txt").write_text("# .venv/bin/python -m bench.bench_b — 2026-12-01, machine: 2 CPUs, load 3\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    page = render(tmp_path)
    assert "| [bench_a](#bench_a) | `.venv/bin/python -m bench.bench_a` | 2026-12-02, machine: 2 CPUs, load average 0.5 | target met |" in page
    assert "| [bench_b](#bench_b) | `.venv/bin/python -m bench.bench_b` | 2026-12-01, machine: 2 CPUs, load 3 | 1 2 |" in page
    assert "## bench_a\n\n`.venv/bin/python -m bench.bench_a` — 2026-12-02, machine: 2 CPUs, load average 0.5\n\n```\nx  y\n1  2\ntarget met\n```" in page
    assert "\n| a | b |\n|---|---|\n| 1 | 2 |\n" in page  # a markdown table stays a table


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
