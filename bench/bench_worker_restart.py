"""``serve --workers 2`` under load, one worker killed with ``kill -9`` again and again: how many requests
fail, and how soon is a new worker listening? (issue #27, item 5)

``python -m bench.bench_worker_restart [--kills 3] [--every 4] [--concurrency 8]``

One group of two workers (memory state, ``--allow-split-state``) on the mock upstream;
``--concurrency`` clients send small chat requests back to back on kept-alive connections the
whole time. The first ``--every`` seconds are the baseline; then every ``--every`` seconds one
worker is killed with SIGKILL. Per window (baseline, then after each kill): requests, failures,
p50/p99 latency, and for each kill the seconds until a new worker listened on the port.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import yaml

from bench.harness import ROOT, free_port, mock_upstream, percentile, spawn, tcp_states, wait_for_port


def listening_children(supervisor: int, port: int) -> list[int]:
    pids = [int(pid) for pid in Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()]
    return [pid for pid in pids if tcp_states(pid, local_port=port).get("LISTEN")]


async def client(url: str, stop: asyncio.Event, window: list[int], windows: list[list[tuple[bool, float]]]) -> None:
    body = b'{"model": "auto", "messages": [{"role": "user", "content": "hi"}]}'
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1), timeout=aiohttp.ClientTimeout(total=10)) as http:
        while not stop.is_set():
            started = time.perf_counter()
            try:
                async with http.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
                    await resp.read()
                    ok = resp.status == 200
            except (aiohttp.ClientError, TimeoutError):
                ok = False
            windows[window[0]].append((ok, (time.perf_counter() - started) * 1000))


async def main_async(args: argparse.Namespace) -> int:
    upstream_port, port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp, spawn(mock_upstream(upstream_port), upstream_port):
        config = Path(tmp) / "config.yaml"
        config.write_text(yaml.safe_dump({
            "server": {"port": port},
            "middlewares": ["session-fingerprint", "capability-gate", "upstream-forward"],
            "providers": {"mock": {"base_url": f"http://127.0.0.1:{upstream_port}/v1"}},
            "models": [{"name": "m", "provider": "mock", "upstream_model": "up", "context_window": 10_000, "max_output_tokens": 100, "tiers": [1, 2, 3]}],
            "decision_log": {"path": str(Path(tmp) / "decisions.sqlite3")},
            "logging": {"level": "warning"},
        }))  # fmt: skip
        log = open(Path(tmp) / "serve.log", "wb")
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "router", "serve", "--config", str(config), "--workers", "2", "--allow-split-state"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            wait_for_port(port, 30, supervisor)
            while len(listening_children(supervisor.pid, port)) < 2:
                await asyncio.sleep(0.05)
            stop, window = asyncio.Event(), [0]
            windows: list[list[tuple[bool, float]]] = [[] for _ in range(args.kills + 1)]
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            clients = [asyncio.create_task(client(url, stop, window, windows)) for _ in range(args.concurrency)]
            restarts: list[float] = []
            for kill in range(args.kills):
                await asyncio.sleep(args.every)
                before = listening_children(supervisor.pid, port)
                window[0] = kill + 1
                os.kill(before[0], signal.SIGKILL)
                killed = time.monotonic()
                while not [pid for pid in listening_children(supervisor.pid, port) if pid not in before]:
                    await asyncio.sleep(0.01)
                restarts.append(time.monotonic() - killed)
            await asyncio.sleep(args.every)
            stop.set()
            await asyncio.gather(*clients)
        finally:
            supervisor.send_signal(signal.SIGTERM)
            supervisor.wait(30)
            log.close()
    print(f"bench_worker_restart: serve --workers 2, {args.concurrency} clients on kept-alive connections, a worker killed (SIGKILL) every {args.every:g} s")
    print(f"{'window':14} {'requests':>9} {'failed':>7} {'ok %':>8} {'p50 ms':>8} {'p99 ms':>8} {'restart s':>10}")
    for index, samples in enumerate(windows):
        latencies = [ms for ok, ms in samples if ok]
        failed = sum(1 for ok, _ in samples if not ok)
        name = "baseline" if index == 0 else f"after kill {index}"
        restart = f"{restarts[index - 1]:10.2f}" if index else f"{'':>10}"
        print(f"{name:14} {len(samples):9,} {failed:7} {100 * (1 - failed / max(len(samples), 1)):8.2f} {percentile(latencies, 50):8.2f} {percentile(latencies, 99):8.2f} {restart}")
    total = sum(len(w) for w in windows)
    failed = sum(1 for w in windows for ok, _ in w if not ok)
    print(f"target: ≥ 99 % of requests succeed — {100 * (1 - failed / total):.2f} % ({failed} of {total:,} failed), {'met' if failed <= total / 100 else 'MISSED'}")
    print(f"target: a new worker listens within 2 s — worst {max(restarts):.2f} s, {'met' if max(restarts) < 2 else 'MISSED'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--every", type=float, default=4.0)
    parser.add_argument("--concurrency", type=int, default=8)
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
