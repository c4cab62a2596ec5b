"""10,000 half-open connections against a real ``pinch-router serve``: are they closed within the head
timeout, and what do real requests see meanwhile? (issue #27, item 6)

``python -m bench.bench_half_open [--count 10000] [--head-timeout 5] [--seconds 5]``

Two phases against one proxy (on the mock upstream), the same probes in each: a **baseline**
without the flood, then the **flood** — ``bench/half_open_flood.py`` in its own process opening
``--count`` connections as fast as it can, each sending half a request head — until the proxy
has closed every one. The probes, throughout (raw sockets: an HTTP client library's own CPU was most of what it
measured): one client on a kept-alive connection and one opening a new connection for every request (which must get past the flood into the accept
queue and, at ``server.max_connections``, make the proxy close a half-open connection for it),
each sending small chat requests back to back. The table gives each probe's latency per phase;
below it, how long the proxy held the flood's connections (from the client's connect to the
close it saw) against the head timeout, and why it closed them (its own counter).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from bench.harness import cpu_seconds, free_port, mock_upstream, percentile, proxy, scrape_metrics, spawn, write_config

BODY = orjson.dumps({"model": "auto", "messages": [{"role": "user", "content": "hi"}]})


REQUEST = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    + f"Content-Length: {len(BODY)}\r\n".encode()
)


async def probe(port: int, new_connections: bool, stop: asyncio.Event, latencies: list[float], errors: list[str]) -> None:
    """Small chat requests back to back over raw sockets (an HTTP client library's own work would be
    most of what is measured): on one kept-alive connection, or a new connection each."""
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    while not stop.is_set():
        started = time.perf_counter()
        try:
            async with asyncio.timeout(30):
                if connection is None or new_connections:
                    connection = await asyncio.open_connection("127.0.0.1", port)
                reader, writer = connection
                writer.write(REQUEST + (b"Connection: close\r\n" if new_connections else b"") + b"\r\n" + BODY)
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
                await reader.readexactly(length)
                if new_connections:
                    writer.close()
            if not head.startswith(b"HTTP/1.1 200"):
                errors.append(head.split(b"\r\n")[0].decode())
                continue
        except (OSError, asyncio.IncompleteReadError, TimeoutError, StopIteration) as exc:
            errors.append(type(exc).__name__)
            connection = None
            continue
        latencies.append((time.perf_counter() - started) * 1000)


async def phase(port: int, run: asyncio.Future[bytes] | float) -> dict[str, tuple[list[float], list[str]]]:
    """Both probes until ``run`` (seconds, or a future: the flood) is over."""
    stop = asyncio.Event()
    results: dict[str, tuple[list[float], list[str]]] = {name: ([], []) for name in ("kept-alive", "new connection")}
    probes = [asyncio.create_task(probe(port, name == "new connection", stop, *results[name])) for name in results]
    if isinstance(run, float):
        await asyncio.sleep(run)
    else:
        await run
    stop.set()
    await asyncio.gather(*probes)
    return results


def row(name: str, mode: str, latencies: list[float], errors: list[str]) -> str:
    return (
        f"{name:9} {mode:15} {len(latencies):9,} {len(errors):7} {percentile(latencies, 50):8.2f} {percentile(latencies, 99):8.2f}"
        f" {max(latencies) if latencies else float('nan'):8.2f}"
    )


async def main_async(args: argparse.Namespace) -> int:
    upstream_port, port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        config = write_config(
            Path(tmp) / "config.yaml", port, f"http://127.0.0.1:{upstream_port}/v1",
            server={"port": port, "head_timeout_seconds": args.head_timeout, "max_connections": args.max_connections},
            decision_log={"path": str(Path(tmp) / "decisions.sqlite3")},
            logging={"level": "warning"},
        )  # fmt: skip
        # --pin: the proxy alone on CPU 0; this process, the probes, the flood and the mock upstream on CPU 1
        pin = (lambda command, cpu: ["taskset", "-c", str(cpu), *command]) if args.pin else (lambda command, cpu: command)
        if args.pin:
            os.sched_setaffinity(0, {1})
        with spawn(pin(mock_upstream(upstream_port), 1), upstream_port), spawn(pin(proxy(config), 0), port) as served:
            await phase(port, 1.0)  # warm up
            cpu = [cpu_seconds(served.pid) or 0.0]
            baseline = await phase(port, args.seconds)
            cpu.append(cpu_seconds(served.pid) or 0.0)
            async def run_flood() -> bytes:
                flood_process = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "bench.half_open_flood", "--port", str(port), "--count", str(args.count), stdout=subprocess.PIPE
                )
                out, _ = await flood_process.communicate()
                return out

            flood_run = asyncio.ensure_future(run_flood())
            flooded = await phase(port, flood_run)
            cpu.append(cpu_seconds(served.pid) or 0.0)
            lines = flood_run.result().splitlines()
            flood = orjson.loads(lines[-1]) if lines else None
            metrics = await scrape_metrics(f"http://127.0.0.1:{port}/metrics")
    closed_by = {labels["reason"]: int(value) for labels, value in metrics.get("pinch_router_connections_closed_total", [])}
    print(f"bench_half_open: {args.count:,} half-open connections, head timeout {args.head_timeout:g} s, server.max_connections {args.max_connections}")
    print(f"{'phase':9} {'probe':15} {'requests':>9} {'errors':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for name, results in (("baseline", baseline), ("flood", flooded)):
        for mode, (latencies, errors) in results.items():
            print(row(name, mode, latencies, errors))
    if flood is None:
        print("the flood process printed nothing")
        return 1
    held = flood["held"]
    within = sum(1 for h in held if h <= args.head_timeout + 0.25)
    print(
        f"flood: {flood['opened']:,} opened in {flood['open_seconds']} s ({flood['connect_failed']} connects failed), "
        f"{flood['closed']:,} closed by the proxy, {flood['still_open']} still open; held p50 {flood['held_p50']} s, max {flood['held_max']} s"
    )
    print(f"closed by the proxy: {closed_by}")
    print(f"the proxy's CPU: baseline {cpu[1] - cpu[0]:.2f} s, flood {cpu[2] - cpu[1]:.2f} s; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"closed within the head timeout (+0.25 s): {within:,} of {flood['opened']:,}")
    flood_p99 = max(percentile(latencies, 99) for latencies, _ in flooded.values())
    met = within == flood["opened"] == args.count and flood["still_open"] == 0
    print(f"target: every half-open connection closed within the head timeout — {'met' if met else 'MISSED'}")
    print(f"target: real requests p99 < 100 ms during the flood — {flood_p99:.1f} ms, {'met' if flood_p99 < 100 else 'MISSED'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--head-timeout", type=float, default=5.0)
    parser.add_argument("--max-connections", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=5.0, help="the baseline phase")
    parser.add_argument("--pin", action="store_true", help="the proxy on CPU 0, everything else on CPU 1 (taskset)")
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
