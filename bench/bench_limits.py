"""What the keys' limits add to a request (issue #45): at concurrency 1, with and without Redis.

One run starts a mock upstream, a throwaway redis-server on loopback and four proxies (the short
chain: session-fingerprint, capability-gate, upstream-forward), every request sent with the same
client key: on the memory backend and on Redis, each once with a key without limits (the baseline:
the limiter only counts the key when its answer ends) and once with a key whose four limits are set
(too high to refuse anything: every request is admitted against them, holds its estimate and is
settled; on Redis, the settling admits the key's next request ahead, which that request then takes
without a round trip of its own, router.state.limiter). For scale, the benchmark then times one
Redis round trip from its own process: a GET, and the admission script. One client sends each request to every target in turn, the order rotating, so a busy
machine slows them alike (bench_state's ``interleaved``); each round's difference is that round's
medians', the table gives the median over the rounds with their min–max. "own" is the proxy's own
time (``x-router-overhead-ms``), which holds the admission (on Redis, a round trip when no request
was admitted ahead: the first of a minute); the settling is not waited for by the request.

Targets: the limiter adds < 0.1 ms per request without Redis and < 0.5 ms with it (own p50, each
against its backend's baseline). The table is printed, not asserted.

"CPU µs/req" is the CPU (user + system, /proc) each proxy process spent per answered request over
the measured rounds: what the limiter costs the process whether or not a request waits for it (the
settling included). ``--pin`` runs the four proxies on one CPU alone (``taskset``) and this process,
the mock upstream and redis-server on the others, so that no load shares the proxies' core.

    .venv/bin/python -m bench.bench_limits [--requests 400] [--rounds 5] [--pin] [--save]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson
from redis.asyncio import Redis

from bench.bench_state import interleaved, pool, redis_server
from bench.harness import LoadResult, cpu_seconds, free_port, mock_upstream, percentile, print_table, proxy, spawn, write_config
from router.core.limits import Amount, KeyLimits
from router.state.limiter import Hold, RedisLimits

KEY = "bench-limits-key-0123456789"
HIGH = {"requests_per_minute": 10**9, "tokens_per_minute": 10**12, "usd_per_day": 10**6, "usd_per_month": 10**7}
# target → (its backend, whether its key has limits); each limited target's baseline is the unlimited one on its backend
TARGETS = {
    "memory, no limits": ("memory", False),
    "memory, limits": ("memory", True),
    "redis, no limits": ("redis", False),
    "redis, limits": ("redis", True),
}
BASELINE = {"memory, limits": "memory, no limits", "redis, limits": "redis, no limits"}
ADDED_TARGET_MS = {"memory, limits": 0.1, "redis, limits": 0.5}


def sections(name: str, port: int, tmp: Path, redis_port: int) -> dict:
    backend, limited = TARGETS[name]
    key = {"name": "bench", "key": KEY, **({"limits": HIGH} if limited else {})}
    state = {"backend": "memory"} if backend == "memory" else {"backend": "redis", "redis": {"url": f"redis://127.0.0.1:{redis_port}/0", "namespace": name.replace(", ", "-").replace(" ", "-")}}
    return {
        "server": {"port": port, "api_keys": [key]},
        "models": [{"name": "bench-model", "provider": "mock", "upstream_model": "mock", "context_window": 200_000, "max_output_tokens": 8192,
                    "tiers": [1, 2, 3], "cost_per_mtok": {"input": 3.0, "output": 15.0}}],
        "state": state,
        "decision_log": {"path": str(tmp / f"{name.replace(', ', '-').replace(' ', '-')}.sqlite3")},
    }


async def redis_round_trips(port: int, calls: int) -> tuple[float, float]:
    """p50 ms of a GET and of the admission script (admitted, then settled) from this process: what a
    round trip costs on the machine as loaded now, beside what the proxies measured."""
    client = Redis.from_url(f"redis://127.0.0.1:{port}/0")
    limits = RedisLimits(client, "bench-round-trips")
    ceilings = KeyLimits(**HIGH)
    gets, admits = [], []
    try:
        for i in range(calls):
            started = time.perf_counter()
            await client.get("bench-round-trips:nothing")
            gets.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            hold = Hold("bench", Amount(1000, 1000), f"r{i}", on_redis=True, counted=True)
            await limits.admit("bench", ceilings, hold, time.time())
            admits.append((time.perf_counter() - started) * 1000)
            await limits.settle("bench", hold, Amount(100, 100), 0, time.time())
    finally:
        await client.aclose()
    return percentile(gets, 50), percentile(admits, 50)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400, help="requests per target and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pin", action="store_true", help="the proxies alone on one CPU (taskset), the load, mock upstream and redis-server on the others")
    parser.add_argument("--save", action="store_true", help="also write the table to bench/results/bench_limits.txt")
    args = parser.parse_args()
    on_proxy_core: list[str] = []
    placement = "not pinned"
    if args.pin:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2 or shutil.which("taskset") is None:
            print("--pin needs two CPUs and taskset", file=sys.stderr)
            return 2
        os.sched_setaffinity(0, cpus[:-1])  # this process and its children (mock upstream, redis-server) off the proxies' core
        on_proxy_core = ["taskset", "-c", str(cpus[-1])]
        placement = f"proxies pinned to CPU {cpus[-1]}, load, mock upstream and redis-server to CPU {','.join(map(str, cpus[:-1]))}"

    up_port, redis_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{up_port}/v1"
    ports = {name: free_port() for name in TARGETS}
    body = orjson.dumps({"model": "auto", "messages": [{"role": "user", "content": "fix the failing test in tests/test_app.py"}], "max_tokens": 1024})
    auth = {"Authorization": f"Bearer {KEY}"}
    with tempfile.TemporaryDirectory() as directory, spawn(mock_upstream(up_port), up_port), redis_server(redis_port):
        tmp = Path(directory)
        with contextlib.ExitStack() as stack:
            pids = {}
            for name, port in ports.items():
                config = write_config(tmp / f"{name.replace(', ', '-').replace(' ', '-')}.yaml", port, upstream, **sections(name, port, tmp, redis_port))
                pids[name] = stack.enter_context(spawn(on_proxy_core + proxy(config), port)).pid
            urls = {name: f"http://127.0.0.1:{port}/v1/chat/completions" for name, port in ports.items()}
            asyncio.run(interleaved(urls, body, 50, auth))  # warm-up: connections, the scripts loaded on Redis
            cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
            rounds: list[dict[str, LoadResult]] = [asyncio.run(interleaved(urls, body, args.requests, auth)) for _ in range(args.rounds)]
            cpu_after = {name: cpu_seconds(pid) for name, pid in pids.items()}
            round_trips = asyncio.run(redis_round_trips(redis_port, 1000))
    table = [
        f"cores: {os.cpu_count()}; {placement}; {args.requests} requests per target × {args.rounds} rounds, concurrency 1, interleaved; one client key",
        "",
        f"{'target':<18} {'p50 ms':>8} {'own p50':>8} {'own p99':>8} {'+own p50 vs baseline (min–max)':>32} {'aim':>12} {'CPU µs/req':>11} {'+CPU µs':>8} {'err':>4}",
    ]
    table.append("-" * len(table[-1]))
    verdicts = []
    cpu_us = {}
    for name in TARGETS:
        answered = sum(len(r[name].latencies_ms) for r in rounds)
        before, after = cpu_before[name], cpu_after[name]
        cpu_us[name] = 1e6 * (after - before) / answered if before is not None and after is not None and answered else float("nan")
    for name in TARGETS:
        load = pool([r[name] for r in rounds])
        added, aim, added_cpu = "baseline", "", ""
        if name in BASELINE:
            added_cpu = f"{cpu_us[name] - cpu_us[BASELINE[name]]:+.0f}"
            base = BASELINE[name]
            diffs = [percentile(r[name].overhead_ms, 50) - percentile(r[base].overhead_ms, 50) for r in rounds]
            median = statistics.median(diffs)
            added = f"{median:+.3f} ({min(diffs):+.3f}–{max(diffs):+.3f})"
            aim = f"< {ADDED_TARGET_MS[name]:g}" + (" met" if median < ADDED_TARGET_MS[name] else " MISSED")
            verdicts.append(f"{name.split(',')[0]} {median:+.3f} ms ({aim})")
        own = load.overhead_ms
        table.append(
            f"{name:<18} {percentile(load.latencies_ms, 50):>8.3f} {percentile(own, 50):>8.3f} {percentile(own, 99):>8.3f} {added:>32} {aim:>12} {cpu_us[name]:>11.0f} {added_cpu:>8} {load.errors:>4}"
        )
    table.append("")
    table.append("own: the proxy's own time (x-router-overhead-ms); + vs baseline: each round's own p50 against the same backend's key without limits, median over the rounds")
    table.append("CPU µs/req: the proxy process's CPU over the measured rounds per answered request (the settling off the response path included); +: against its baseline")
    get, admit = round_trips
    table.append(f"one Redis round trip from the benchmark's own process, same run: GET p50 {get:.3f} ms, the admission script p50 {admit:.3f} ms")
    table.append(f"target: what the limiter adds per request at concurrency 1 — {'; '.join(verdicts)}")
    return print_table(__file__, table, args.save)


if __name__ == "__main__":
    raise SystemExit(main())
