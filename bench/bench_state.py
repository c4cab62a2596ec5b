"""What the shared session state costs, and what a second worker gives: memory vs Redis, 1 vs 2 workers.

One run starts a mock upstream (Ollama's API, classifier included), a throwaway
redis-server on loopback, and three proxies on the full chain with the session
cache and the pinch ledger on: the memory backend (1 process), the Redis backend
(1 process) and the Redis backend with ``--workers 2``. Every request carries one
session header, as an agent's turns do, so each reads and writes the session's
classification, ledger and escalation record. Each target is measured at
concurrency 1 and 16, the targets taking turns each round.

Target: Redis adds at most 0.3 ms p50 per request over the memory backend at
concurrency 1 ("+p50 vs memory"). "own p50" is the proxy's own time
(x-router-overhead-ms), which contains the state calls.

    .venv/bin/python -m bench.bench_state [--requests 400] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import orjson

from bench.harness import LoadResult, drive, free_port, mock_upstream, percentile, proxy, spawn, transcript_body, wait_for_port, write_config
from router.config import DEFAULT_CHAIN

TARGET_ADDED_P50_MS = 0.3


def sections(tmp: Path, name: str, upstream: str, redis_port: int | None) -> dict:
    state = {"backend": "memory"} if redis_port is None else {"backend": "redis", "redis": {"url": f"redis://127.0.0.1:{redis_port}/0"}}
    return {
        "middlewares": list(DEFAULT_CHAIN),
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
    parser.add_argument("--requests", type=int, default=400, help="requests per cell and round")
    parser.add_argument("--rounds", type=int, default=3)
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
            for name, command in commands.items():
                stack.enter_context(spawn(command, ports[name]))
            urls = {name: f"http://127.0.0.1:{port}/v1/chat/completions" for name, port in ports.items()}
            print(f"cores: {os.cpu_count()}; body: {len(body):,} bytes, one session; {args.requests} requests per cell × {args.rounds} rounds\n")
            header = f"{'conc':>4} {'target':<17} {'p50 ms':>8} {'p99 ms':>8} {'+p50 vs memory':>15} {'own p50':>8} {'req/s':>8} {'err':>4}"
            print(header)
            print("-" * len(header))
            verdict = None
            for concurrency in (1, 16):
                measured: dict[str, list[LoadResult]] = {name: [] for name in urls}
                for _ in range(args.rounds):
                    for name, url in urls.items():
                        measured[name].append(asyncio.run(drive_session(url, body, args.requests, concurrency)))
                pooled = {name: pool(results) for name, results in measured.items()}
                base = percentile(pooled["memory"].latencies_ms, 50)
                for name, load in pooled.items():
                    p50 = percentile(load.latencies_ms, 50)
                    added = f"{p50 - base:+.3f}" if name != "memory" else ""
                    own = percentile(load.overhead_ms, 50) if load.overhead_ms else float("nan")
                    print(
                        f"{concurrency:>4} {name:<17} {p50:>8.3f} {percentile(load.latencies_ms, 99):>8.3f} {added:>15} "
                        f"{own:>8.3f} {load.rps:>8.0f} {load.errors:>4}"
                    )
                if concurrency == 1:
                    verdict = percentile(pooled["redis"].latencies_ms, 50) - base
            assert verdict is not None
            met = "met" if verdict <= TARGET_ADDED_P50_MS else "MISSED"
            print(f"\ntarget: Redis adds ≤ {TARGET_ADDED_P50_MS} ms p50 at concurrency 1: {verdict:+.3f} ms — {met}")
            return 0 if verdict <= TARGET_ADDED_P50_MS else 1


async def drive_session(url: str, body: bytes, requests: int, concurrency: int) -> LoadResult:
    return await drive(url, body, requests, concurrency, stream=False, headers={"x-router-session": "bench-session"})


if __name__ == "__main__":
    sys.exit(main())
