"""bench_peers' table: requests per second per core from the CPU the servers used, ours over theirs, per cell."""

from __future__ import annotations

from bench.bench_peers import FLOOR, OURS, Run, pool, summary
from bench.harness import Cell


def run(requests: int, cpu_seconds: float | None, errors: int = 0, seconds: float = 4.0, p50: float = 1.0) -> Run:
    return Run(Cell(requests, errors, seconds, p50, p50), cpu_seconds)


def test_rounds_pool_into_requests_over_cpu_seconds_not_over_wall_clock() -> None:
    pooled = pool([run(400, 1.0, p50=2.0), run(200, 1.0, p50=1.0, seconds=8.0), run(600, 2.0, p50=3.0)])
    assert pooled.cell.requests == 1200 and pooled.cell.seconds == 16.0
    assert pooled.per_core == 300.0  # 1,200 requests over 4 CPU seconds, though 75 a second on the clock
    assert pooled.cell.p50_ms == 2.0  # the median round's
    assert pool([run(400, 1.0), run(400, None)]).per_core is None  # a round without /proc: no figure at all


def test_each_cell_is_ours_over_theirs_and_cells_under_three_times_are_named() -> None:
    results = {
        ("chat", OURS, "small", 1): run(1000, 1.0),
        ("chat", FLOOR, "small", 1): run(1000, 0.4),
        ("chat", "Portkey", "small", 1): run(1000, 2.5),  # 400 per core against our 1,000: 2.50×
        ("chat", OURS, "small", 16): run(2000, 1.0),
        ("chat", FLOOR, "small", 16): run(2000, 0.5),
        ("chat", "Portkey", "small", 16): run(400, 1.0),  # 5.00×
        ("messages", OURS, "small", 1): run(900, 1.0),
        ("messages", "ccr", "small", 1): run(100, 1.0, errors=3),  # answered with errors: it cannot serve the cell
        ("messages", "ccr", "small", 16): run(0, 4.0),  # answered nothing in the time given: nor this one
    }
    lines, below = summary(results, ["small"], {"Portkey": "chat", "ccr": "messages"})
    assert lines[0] == "| body, c | vs Portkey (chat) | vs ccr (Messages) | CPU vs the floor (chat / Messages) |"
    assert lines[2] == "| small, 1 | 2.50× | — | 2.50× / — |"
    assert lines[3] == "| small, 16 | 5.00× | — | 2.00× / — |"
    assert below == ["small, c=1 vs Portkey (chat): 2.50×"]
