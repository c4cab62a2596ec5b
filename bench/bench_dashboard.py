"""The dashboard's overview and sessions list over a large decision log: how long each answer takes.

Writes ``--rows`` decision rows (default 100,000: a week of a busy team, ``--sessions`` sessions of
40-turn agent loops on two priced models, pinch on, cache figures reported, a few errors and
fallbacks) into a SQLite decision log through :class:`~router.observe.decision_log.DecisionLog`, then
times what ``GET /ui/api/overview`` and ``GET /ui/api/sessions`` do for the week's window: price and
sum the rows in SQL (:mod:`router.observe.decision_sums`) and assemble the answer
(:mod:`router.core.usage_summary`), beside the same in Python row by row (read, price, sum: the core's
spec, what the first version did) — medians of ``--repeats`` runs, in this process, in wall and CPU
time (the CPU time is what a loaded machine does not inflate); then both views through the proxy over
HTTP on loopback. The overview is timed twice: a first view (a log just opened) and a refresh; both
read the half-hours wholly in the window from the sums the log's triggers store as rows are written
(:mod:`router.observe.half_hour_sums`), which the log's writer pays for: its CPU a row is timed with
and without them (``--write-rows`` rows, in batches of 256 as the proxy writes them). Two logs
(``--logs``): one whose provider reports cache figures, one whose rows have none (Ollama, many chat
providers: each row priced with its session's previous one). The target: each answer under 300 ms.

    .venv/bin/python -m bench.bench_dashboard [--rows 100000] [--sessions 2500] [--repeats 5] [--write-rows 20000] [--logs reported,linked] [--save]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from time import perf_counter, process_time

from aiohttp.test_utils import TestClient, TestServer

from bench.harness import print_table
from router.config import parse_config
from router.core.pricing import price_rows
from router.core.results import Attempt
from router.core.usage_summary import overview, overview_of_groups, session_summaries, sessions_of_groups
from router.http.dashboard import MAX_SESSIONS, WINDOWS
from router.observe import half_hour_sums
from router.observe.prices import prices_of
from router.observe.decision_log import DecisionLog
from router.observe.decision_record import Decision
from router.server.app import create_app

TARGET_MS = 300.0
WEEK = WINDOWS["week"][0]


def config(log_path: str):
    model = {"provider": "cloud", "context_window": 200_000, "max_output_tokens": 8_000, "tiers": [1, 2, 3]}
    return parse_config(
        {
            "middlewares": ["session-fingerprint", "capability-gate", "upstream-forward"],
            "providers": {"cloud": {"base_url": "http://127.0.0.1:9/v1"}},
            "models": [
                {**model, "name": "sonnet", "upstream_model": "s", "cost_per_mtok": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}},
                {**model, "name": "haiku", "upstream_model": "h", "cost_per_mtok": {"input": 1, "output": 5, "cache_read": 0.1, "cache_write": 1.25}},
            ],
            "dashboard": {"reference_prices": {"claude-opus-4-5": {"input": 5, "output": 25, "cache_read": 0.5, "cache_write": 6.25}}, "reference_model": "claude-opus-4-5"},
            "decision_log": {"path": log_path},
        },
        environ={},
    )


def generated_rows(count: int, sessions: int, now: float, linked: bool = False) -> list[Decision]:
    """``count`` rows spread over the last week, in sessions of consecutive turns whose prompts grow;
    ``linked``: without cache figures (as Ollama and many chat providers answer), each row priced with
    its session's previous one (:data:`~router.observe.decision_sums.LINKED`)."""
    rng = random.Random(46)
    rows = []
    per_session = max(1, count // sessions)
    for s in range(sessions):
        start = now - WEEK + rng.random() * (WEEK - per_session * 20)
        prompt = 2_000
        model = "sonnet" if s % 3 else "haiku"
        for turn in range(per_session):
            if len(rows) == count:
                break
            prompt += rng.randint(200, 2_000)
            saved = rng.randint(0, prompt // 3) if prompt > 20_000 else 0
            failed = rng.random() < 0.01
            rows.append(
                Decision(
                    request_id=f"req_{s}_{turn}", ts=start + turn * 20, status=502 if failed else 200, duration_ms=800.0,
                    error_code="upstream_failed" if failed else None, session=f"{s:024x}", session_source="header",
                    client=f"key-{s % 7}", requested_model="claude-opus-4-5" if s % 2 else "auto", category="coding_general",
                    tier=2, source="cached" if turn else "classifier", model=None if failed else model, provider="cloud",
                    attempts=(Attempt(model, "cloud", 200),) * (2 if rng.random() < 0.02 else 1), pinch_mode="uniform",
                    tokens_before=prompt + saved, tokens_after=prompt, pinch_newly_compressed=int(saved > 0 and turn % 10 == 0),
                    pinch_restored=0, prompt_tokens=None if failed else prompt, completion_tokens=None if failed else rng.randint(50, 800),
                    cached_tokens=None if failed else prompt - rng.randint(200, 2_000), cache_write_tokens=None if failed else rng.randint(0, 2_000),
                    wire_in="anthropic-messages", wire_out="openai-chat",
                )  # fmt: skip
            )
    if linked:
        rows = [replace(row, cached_tokens=None, cache_write_tokens=None) for row in rows]
    return rows


# the stored sums a writer keeps, as the log's versions did: none, the half-hours' of the rows not
# linked (ef69926), and those and the linked rows' (a version without them has no LINKS: the same as the second)
STORED = {"none": (), "half-hours": (half_hour_sums.TABLE,), "all": (half_hour_sums.TABLE, getattr(half_hour_sums, "LINKS", half_hour_sums.TABLE))}


def write_cost(rows: list[Decision], path: str, stored: str) -> float:
    """The decision log's writer's CPU microseconds a row, writing ``rows`` into a new log at ``path`` in
    batches of 256 on this thread (what its database thread does), with the triggers of the stored
    sums ``stored`` (a key of :data:`STORED`) only."""
    log = DecisionLog(path)
    log._open()
    assert log._conn is not None
    kept = STORED[stored]
    for table in {half_hour_sums.TABLE, getattr(half_hour_sums, "LINKS", half_hour_sums.TABLE)} - set(kept):
        triggers = log._conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND substr(name, 1, ?) = ?", (len(table) + 1, f"{table}_"))
        for (trigger,) in triggers.fetchall():
            log._conn.execute(f"DROP TRIGGER {trigger}")
    if not kept:  # as the log was before: no triggers, no index of the linked rows
        log._conn.execute("DROP INDEX decisions_linked")
    started = process_time()
    for i in range(0, len(rows), 256):
        assert not log._write(rows[i : i + 256])
    spent = process_time() - started
    log._close()
    return spent / len(rows) * 1e6


def median_ms(samples: list[tuple[float, float]]) -> str:
    """The median wall and CPU milliseconds, as two cells (CPU: what a loaded machine does not inflate)."""
    return f"{statistics.median(w for w, _ in samples) * 1000:.0f} | {statistics.median(c for _, c in samples) * 1000:.0f}"


async def one_log(rows: int, sessions: int, repeats: int, write_rows: int, linked: bool) -> list[str]:
    """The table of one generated log (``linked``: of rows without cache figures only)."""
    with tempfile.TemporaryDirectory() as tmp:
        sample = generated_rows(write_rows, max(1, sessions * write_rows // rows), time.time(), linked)
        writes: dict[str, list[float]] = {stored: [] for stored in STORED}
        for i in range(repeats):  # in turns: a slow spell of the machine falls on each
            for stored in STORED:
                writes[stored].append(write_cost(sample, str(Path(tmp) / f"write-{i}-{stored}.sqlite3"), stored))
        path = str(Path(tmp) / "decisions.sqlite3")
        settings = config(path)
        now = time.time()
        log = DecisionLog(path, queue_size=rows + 1, batch_size=5_000)
        await log.start()
        for row in generated_rows(rows, sessions, now, linked):
            log.submit(row)
        await log.close()

        prices = prices_of(settings)
        since, bucket = time.time() - WEEK, WINDOWS["week"][1]
        python, sql_cold, sql_warm, sql_sessions = [], [], [], []  # (wall, CPU) seconds each
        for _ in range(repeats):
            log = DecisionLog(path)  # a log just opened: nothing kept (the first view)
            await log.start()
            until = time.time()
            since = until - WEEK
            started, cpu = perf_counter(), process_time()
            window = await log.rows_since(since - prices.longest_lifetime)
            costs = price_rows(window, prices)
            totals = overview(window, costs, since, until, bucket)
            session_summaries(window, costs, since, MAX_SESSIONS)
            python.append((perf_counter() - started, process_time() - cpu))
            started, cpu = perf_counter(), process_time()
            overview_of_groups(await log.overview_groups(prices, since, until, bucket), since, until, bucket)
            sql_cold.append((perf_counter() - started, process_time() - cpu))
            until = time.time()  # a refresh, a moment later
            since = until - WEEK
            started, cpu = perf_counter(), process_time()
            overview_of_groups(await log.overview_groups(prices, since, until, bucket), since, until, bucket)
            sql_warm.append((perf_counter() - started, process_time() - cpu))
            started, cpu = perf_counter(), process_time()
            sessions_of_groups(await log.session_groups(prices, since, until, limit=MAX_SESSIONS), MAX_SESSIONS)
            sql_sessions.append((perf_counter() - started, process_time() - cpu))
            await log.close()

        app = await create_app(settings)
        client = TestClient(TestServer(app, host="127.0.0.1"))
        await client.start_server()
        http: dict[str, list[tuple[float, float]]] = {"overview": [], "sessions": []}
        try:
            for _ in range(repeats + 1):
                for name in http:
                    started, cpu = perf_counter(), process_time()
                    response = await client.get(f"/ui/api/{name}", params={"window": "week"})
                    await response.read()
                    assert response.status == 200
                    http[name].append((perf_counter() - started, process_time() - cpu))
        finally:
            await client.close()
        first_view, http["overview"] = http["overview"][:1], http["overview"][1:]  # the proxy's first overview

    kind = "every row without cache figures (linked to its previous one)" if linked else "cache figures reported"
    lines = [
        f"dashboard over {len(window):,} rows in the week's window ({totals['requests']:,} requests, {sessions:,} sessions, {kind}); median of {repeats} runs",
        "",
        "| view | wall ms | CPU ms |",
        "|---|---:|---:|",
        f"| overview + sessions, row by row in Python (read, price, sum) | {median_ms(python)} |",
        f"| overview, summed in SQL: first view (a log just opened) | {median_ms(sql_cold)} |",
        f"| overview, summed in SQL: again | {median_ms(sql_warm)} |",
        f"| sessions list, summed in SQL | {median_ms(sql_sessions)} |",
        f"| GET /ui/api/overview over HTTP, the proxy's first (one run) | {median_ms(first_view)} |",
        f"| GET /ui/api/overview over HTTP, again (client included) | {median_ms(http['overview'])} |",
        f"| GET /ui/api/sessions over HTTP (client included) | {median_ms(http['sessions'])} |",
        "",
        f"the log's writer, {write_rows:,} rows in batches of 256, CPU µs a row (median of {repeats}):"
        f" {statistics.median(writes['none']):.1f} without the stored sums, {statistics.median(writes['half-hours']):.1f} with the half-hours' of the rows not linked,"
        f" {statistics.median(writes['all']):.1f} with the linked rows' too",
        f"load average while it ran: {' '.join(f'{v:.1f}' for v in os.getloadavg())}",
    ]
    for view, samples in (("overview, first view", first_view), ("overview, again", http["overview"]), ("sessions list", http["sessions"])):
        cpu_ms = statistics.median(c for _, c in samples) * 1000
        lines.append(f"target: {view} < {TARGET_MS:.0f} ms of CPU: {'met' if cpu_ms < TARGET_MS else 'MISSED'} ({cpu_ms:.0f} ms)")
    return lines


async def run(rows: int, sessions: int, repeats: int, write_rows: int, logs: list[str]) -> list[str]:
    lines: list[str] = []
    for name in logs:
        lines += ([""] if lines else []) + await one_log(rows, sessions, repeats, write_rows, name == "linked")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=2_500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--write-rows", type=int, default=20_000, help="rows written to time the log's writer")
    parser.add_argument(
        "--logs", default="reported,linked",
        help="the generated logs, comma-separated: 'reported' (cache figures reported, pinch on), 'linked' (no cache figures: each row priced with its session's previous one)",
    )  # fmt: skip
    parser.add_argument("--save", action="store_true", help="write the table to bench/results/")
    args = parser.parse_args(argv)
    table = asyncio.run(run(args.rows, args.sessions, args.repeats, args.write_rows, args.logs.split(",")))
    return print_table(__file__, table, args.save, argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
