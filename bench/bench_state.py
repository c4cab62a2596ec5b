"""What the shared session state costs, and what a second worker gives: memory vs Redis, 1 vs 2 workers.

One run starts a mock upstream (Ollama's API, classifier included), a throwaway
redis-server on loopback, and three proxies on the full chain with the session
cache and the pinch ledger on: the memory backend (1 process), the Redis backend
(1 process) and the Redis backend with ``--workers 2``. Every request carries one
session header, as an agent's turns do, so each reads the session's
classification, ledger and escalation record and writes its ledger and request id.

Concurrency 1 is measured interleaved: one client sends each request to every
target in turn (the order rotating), so a busy machine slows all targets alike;
each round's "+p50 vs memory" is the difference of that round's medians, and the
table gives the median over the rounds with their min–max. "1 b2b" runs each
target's requests back to back instead, the order rotating each round: there a
request's write, not waited for, competes with its own sub-millisecond mock answer
and with the next request of the same process (an agent's next turn comes after
it has read the answer, and a model takes far longer than the write). "own p50" is the
proxy's own time (x-router-overhead-ms), which contains the state calls; "CPU
µs/req" is the proxy process's CPU time per request (1-process targets), the
background writes included. Concurrency 16 runs each target on its own in turn.

Target: Redis adds at most 0.3 ms p50 per request over the memory backend at
concurrency 1 (interleaved; the median over the rounds).

    .venv/bin/python -m bench.bench_state [--requests 400] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import orjson

from bench.harness import (
    LoadResult,
    cpu_seconds,
    drive,
    free_port,
    mock_upstream,
    percentile,
    proxy,
    spawn,
    transcript_body,
    wait_for_port,
    write_config,
)
from router.server.registry import REGISTRY

TARGET_ADDED_P50_MS = 0.3


def sections(tmp: Path, name: str, upstream: str, redis_port: int | None) -> dict:
    state = {"backend": "memory"} if redis_port is None else {"backend": "redis", "redis": {"url": f"redis://127.0.0.1:{redis_port}/0"}}
    return {
        "middlewares": list(REGISTRY.default_chain),
        "providers": {"mock": {"base_url": upstream, "api": "ollama"}},
        "classifier": {"provider": "mock", "model": "mock-classifier"},
        "pinch": {"enabled": True, "budget_tokens": 8000, "keep_last_turns": 4},
        "session_cache": {"enabled": True},
        "state": state,
        "decision_log": {"path": str(tmp / f"{name}.sqlite3")},
    }


@contextlib.contextmanager
def redis_server(port: int) -> Iterator[None]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (apt-get install -y redis-server)")
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, 10, process)
        yield
    finally:
        process.terminate()
        process.wait(10)


def pool(results: list[LoadResult]) -> LoadResult:
    return LoadResult(
        [v for r in results for v in r.latencies_ms],
        sum(r.errors for r in results),
        sum(r.seconds for r in results),
        [v for r in results for v in r.overhead_ms],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400, help="requests per target and round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    up_port, redis_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{up_port}/v1"
    ports = {"memory": free_port(), "redis": free_port(), "redis, 2 workers": free_port()}
    body = orjson.dumps(transcript_body())
    with tempfile.TemporaryDirectory() as directory, spawn(mock_upstream(up_port), up_port), redis_server(redis_port):
        tmp = Path(directory)
        commands = {}
        for name, port in ports.items():
            backend_port = None if name == "memory" else redis_port
            config = write_config(tmp / f"{name}.yaml", port, upstream, **sections(tmp, name.replace(", ", "-"), upstream, backend_port))
            commands[name] = proxy(config) + (["--workers", "2"] if "workers" in name else [])
        with contextlib.ExitStack() as stack:
            pids = {name: stack.enter_context(spawn(command, ports[name])).pid for name, command in commands.items()}
            urls = {name: f"http://127.0.0.1:{port}/v1/chat/completions" for name, port in ports.items()}
            print(f"cores: {os.cpu_count()}; body: {len(body):,} bytes, one session; {args.requests} requests per target × {args.rounds} rounds\n")
            header = f"{'conc':>5} {'target':<17} {'p50 ms':>8} {'p99 ms':>8} {'+p50 vs memory (min–max)':>26} {'own p50':>8} {'CPU µs/req':>10} {'req/s':>7} {'err':>4}"
            print(header)
            print("-" * len(header))

            asyncio.run(interleaved(urls, body, 50))  # warm-up: connections, the session's first classification
            rounds: list[dict[str, LoadResult]] = []
            cpu = {name: 0.0 for name in urls}
            for _ in range(args.rounds):
                before = {name: cpu_seconds(pid) or 0.0 for name, pid in pids.items()}
                rounds.append(asyncio.run(interleaved(urls, body, args.requests)))
                for name, pid in pids.items():
                    cpu[name] += (cpu_seconds(pid) or 0.0) - before[name]
            added = print_rounds("1", rounds, cpu)

            # Back to back: each target's requests in a row, the order rotating each round.
            names = list(urls)
            in_a_row = [
                {name: asyncio.run(drive_session(urls[name], body, args.requests, 1)) for name in names[i % len(names) :] + names[: i % len(names)]}
                for i in range(args.rounds)
            ]
            back_to_back = print_rounds("1 b2b", in_a_row, None)

            measured = {name: pool([asyncio.run(drive_session(url, body, args.requests, 16)) for _ in range(args.rounds)]) for name, url in urls.items()}
            base = percentile(measured["memory"].latencies_ms, 50)
            for name, load in measured.items():
                print(row("16", name, load, f"{percentile(load.latencies_ms, 50) - base:+.3f}" if name != "memory" else "", "—"))

            verdict = statistics.median(added["redis"])
            met = "met" if verdict <= TARGET_ADDED_P50_MS else "MISSED"
            print(f"\n1: the targets take turns request by request; 1 b2b: each target's {args.requests} requests back to back")
            print(f"back to back, Redis adds {statistics.median(back_to_back['redis']):+.3f} ms p50 (rounds {min(back_to_back['redis']):+.3f}–{max(back_to_back['redis']):+.3f})")
            print(f"target: Redis adds ≤ {TARGET_ADDED_P50_MS} ms p50 at concurrency 1: {verdict:+.3f} ms (rounds {min(added['redis']):+.3f}–{max(added['redis']):+.3f}) — {met}")
            return 0 if verdict <= TARGET_ADDED_P50_MS else 1


def print_rounds(label: str, rounds: list[dict[str, LoadResult]], cpu: dict[str, float] | None) -> dict[str, list[float]]:
    """One row per target, pooled over the rounds; each round's p50 difference to memory, per target."""
    added = {name: [percentile(r[name].latencies_ms, 50) - percentile(r["memory"].latencies_ms, 50) for r in rounds] for name in rounds[0]}
    for name in added:
        load = pool([r[name] for r in rounds])
        spread = f"{statistics.median(added[name]):+.3f} ({min(added[name]):+.3f}–{max(added[name]):+.3f})" if name != "memory" else ""
        per_request = f"{cpu[name] / len(load.latencies_ms) * 1e6:.0f}" if cpu is not None and "workers" not in name and load.latencies_ms else "—"
        print(row(label, name, load, spread, per_request))
    return added


def row(concurrency: str, name: str, load: LoadResult, added: str, cpu: str) -> str:
    own = percentile(load.overhead_ms, 50) if load.overhead_ms else float("nan")
    p50, p99 = percentile(load.latencies_ms, 50), percentile(load.latencies_ms, 99)
    return f"{concurrency:>5} {name:<17} {p50:>8.3f} {p99:>8.3f} {added:>26} {own:>8.3f} {cpu:>10} {load.rps:>7.0f} {load.errors:>4}"


async def interleaved(urls: dict[str, str], body: bytes, requests: int, extra_headers: dict[str, str] | None = None) -> dict[str, LoadResult]:
    """One client, one request at a time: each of ``requests`` turns sends one request to every target, the order rotating."""
    headers = {"Content-Type": "application/json", "x-router-session": "bench-session", **(extra_headers or {})}
    names = list(urls)
    latencies: dict[str, list[float]] = {name: [] for name in names}
    overheads: dict[str, list[float]] = {name: [] for name in names}
    errors = dict.fromkeys(names, 0)
    busy = dict.fromkeys(names, 0.0)
    async with aiohttp.ClientSession() as http:
        for turn in range(requests):
            for name in names[turn % len(names) :] + names[: turn % len(names)]:
                started = time.perf_counter()
                async with http.post(urls[name], data=body, headers=headers) as resp:
                    await resp.read()
                elapsed = time.perf_counter() - started
                busy[name] += elapsed
                if resp.status != 200:
                    errors[name] += 1
                    continue
                latencies[name].append(elapsed * 1000)
                if "x-router-overhead-ms" in resp.headers:
                    overheads[name].append(float(resp.headers["x-router-overhead-ms"]))
    return {name: LoadResult(latencies[name], errors[name], busy[name], overheads[name]) for name in names}


async def drive_session(url: str, body: bytes, requests: int, concurrency: int) -> LoadResult:
    return await drive(url, body, requests, concurrency, stream=False, headers={"x-router-session": "bench-session"})


if __name__ == "__main__":
    sys.exit(main())
