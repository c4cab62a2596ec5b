"""``eval-pinch --plot DIR``: PNG charts of the replayed sessions (matplotlib: the optional ``plot`` extra).

Per transcript, scenario and budget, two charts:

* ``<transcript>.<scenario>-<budget>.cost.png`` — the session's cumulative cost per turn, without pinch
  and in every pinch mode replayed (eval-pinch's price model:
  :func:`router.tools.pinch_measures.priced_requests`, so the last point of each line is the
  report's cost);
* ``<transcript>.<scenario>-<budget>.tokens.png`` — the tokens sent per turn and the part the
  (simulated) upstream reported as cached, without pinch and in the shipped mode (the ledger on,
  uniform unless only relevance was replayed).

Both mark the turns on which the ledger compressed a batch (vertical lines). Only this module imports
matplotlib, and nothing the server loads imports this module (an import-linter contract,
``server-without-plotting``, and tests/meta/test_plot_extra.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display, no GUI toolkit

import matplotlib.pyplot as plt  # noqa: E402

from router.tools.eval_pinch import NO_PINCH, Mode, Results, Scenario, SessionRun  # noqa: E402
from router.tools.pinch_measures import priced_requests  # noqa: E402

def cumulative_cost(run: SessionRun, scenario: Scenario) -> list[float]:
    """The session's cost so far after each turn (a refused turn adds nothing)."""
    costs = iter(cost for _, cost in priced_requests(run.requests, scenario.pricing))
    total, series = 0.0, []
    for turn in run.turns:
        if turn.forwarded:
            total += next(costs)
        series.append(total)
    return series


def shipped_mode(modes: Sequence[Mode]) -> Mode:
    """The mode the tokens chart shows beside no pinch: the ledger on, uniform first."""
    pinched = [m for m in modes if m.pinch]
    return next((m for m in pinched if m.ledger and not m.relevance), next((m for m in pinched if m.ledger), pinched[0] if pinched else NO_PINCH))


def _mark_batches(ax: plt.Axes, run: SessionRun, label: str) -> None:
    for n, turn in enumerate(run.batch_turns):
        ax.axvline(turn + 1, color="black", linestyle=":", linewidth=1, label=f"batch ({label})" if n == 0 else None)


def write_plots(results: Results, directory: Path) -> list[Path]:
    """Both charts for every transcript, scenario and budget replayed; the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    shown = shipped_mode(results.modes)
    for transcript in results.transcripts:
        for scenario in results.scenarios:
            for budget in results.budgets:
                stem = f"{transcript}.{scenario.name}-{budget // 1000}k"
                title = f"{transcript}\n{scenario.description} — budget {budget:,}"
                written.append(_cost_chart(results, transcript, scenario, budget, title, directory / f"{stem}.cost.png"))
                written.append(_tokens_chart(results, transcript, scenario, budget, shown, title, directory / f"{stem}.tokens.png"))
    return written


def _cost_chart(results: Results, transcript: str, scenario: Scenario, budget: int, title: str, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(9, 4.8))
    for mode in results.modes:
        run = results.run(transcript, scenario, budget, mode)
        series = cumulative_cost(run, scenario)
        ax.plot(range(1, len(series) + 1), series, label=mode.name, linewidth=2.2 if not mode.pinch else 1.5, linestyle="--" if not mode.pinch else "-")
    ledger = [m for m in results.modes if m.ledger]
    if ledger:
        _mark_batches(ax, results.run(transcript, scenario, budget, shipped_mode(results.modes)), shipped_mode(results.modes).name)
    unit = "input-token units" if scenario.pricing else "tokens (no cache: every token at the input price)"
    ax.set(title=title, xlabel="turn", ylabel=f"cumulative cost, {unit}")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def _tokens_chart(results: Results, transcript: str, scenario: Scenario, budget: int, mode: Mode, title: str, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(9, 4.8))
    for shown, colour in ((NO_PINCH, "tab:gray"), (mode, "tab:blue")):
        if shown is not NO_PINCH and not shown.pinch:
            continue
        run = results.run(transcript, scenario, budget, shown)
        turns = range(1, len(run.turns) + 1)
        ax.plot(turns, [t.sent_tokens for t in run.turns], color=colour, label=f"sent, {shown.name}")
        ax.fill_between(turns, [t.cached_tokens for t in run.turns], color=colour, alpha=0.25, label=f"cached, {shown.name}")
    if mode.ledger:
        _mark_batches(ax, results.run(transcript, scenario, budget, mode), mode.name)
    ax.axhline(budget, color="black", linewidth=0.8, linestyle="--", label=f"budget {budget:,}")
    ax.set(title=title, xlabel="turn", ylabel="prompt tokens per request")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
