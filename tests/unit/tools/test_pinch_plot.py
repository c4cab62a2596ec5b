"""`eval-pinch --plot DIR`: the charts of a replayed session, drawn from the replay's own figures."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from router.cli import main
from router.config import load_config
from router.tools.eval_pinch import MODES, NO_PINCH, SCENARIOS, SHARED_TRANSCRIPTS, run_eval
from router.tools.pinch_plot import cumulative_cost, shipped_mode, write_plots
from router.tools.transcripts import load_transcript

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = load_config(ROOT / "config.yaml")
SMALL = SHARED_TRANSCRIPTS / "sweagent-gpt4__pydicom__pydicom-1458.json"
PNG = b"\x89PNG\r\n\x1a\n"
LEDGER = next(m for m in MODES if m.ledger and not m.relevance)


@pytest.fixture(scope="module")
def replayed():
    cold = next(s for s in SCENARIOS if s.name == "cold")
    transcript = load_transcript(SMALL)
    results = asyncio.run(run_eval(SHIPPED, [transcript], io.StringIO(), io.StringIO(), budgets=[8_000], scenarios=[cold], modes=[LEDGER]))
    return results, cold, transcript.name


def test_the_cumulative_cost_ends_at_the_reports_cost_and_never_falls(replayed) -> None:
    results, cold, name = replayed
    for mode in results.modes:
        run = results.run(name, cold, 8_000, mode)
        series = cumulative_cost(run, cold)
        assert len(series) == len(run.turns) and series == sorted(series)
        assert series[-1] == pytest.approx(run.cost(cold).cost)


def test_the_batches_are_the_turns_the_decision_rows_name(replayed) -> None:
    results, cold, name = replayed
    run = results.run(name, cold, 8_000, LEDGER)
    assert run.batches > 0 and len(run.batch_turns) == run.batches
    # a batch turn sends fewer tokens than the turn before it: that is where the ledger compressed
    assert all(run.turns[i].sent_tokens < run.turns[i - 1].sent_tokens for i in run.batch_turns if i > 0)


def test_both_charts_are_written_for_each_replay(replayed, tmp_path: Path) -> None:
    results, _, name = replayed
    written = write_plots(results, tmp_path / "plots")
    assert sorted(p.name for p in written) == [f"{name}.cold-8k.cost.png", f"{name}.cold-8k.tokens.png"]
    assert all(p.read_bytes().startswith(PNG) and p.stat().st_size > 10_000 for p in written)


def test_the_tokens_chart_shows_the_shipped_mode() -> None:
    assert shipped_mode(MODES) == LEDGER
    assert shipped_mode([NO_PINCH, *(m for m in MODES if m.relevance)]).ledger


def test_the_command_writes_the_charts_and_names_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval-pinch", "--scenario", "nocache", "--budget", "8000", "--plot", str(tmp_path), str(SMALL)]) == 0
    out = capsys.readouterr().out
    files = sorted(tmp_path.glob("*.png"))
    assert [p.name for p in files] == sorted(f"{SMALL.stem}.nocache-8k.{kind}.png" for kind in ("cost", "tokens"))
    assert all(f"wrote {p}" in out for p in files)
