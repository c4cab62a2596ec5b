"""Added latency and throughput of the proxy, against a minimal pass-through proxy (the floor).

One run starts a mock upstream, pinch-router on the full configured chain and
the floor (bench/floor_proxy.py), each in its own process on loopback, then
measures direct → upstream, floor → upstream and pinch-router → upstream at
concurrency 1 and 16, streamed and not, with a real agent request body.

Targets: the chain adds at most 2× the floor's added latency (p50) and keeps
at least half the floor's throughput.

"own p50" is what pinch-router itself reports per request (x-router-overhead-ms:
its time up to the response head, minus time waiting on the upstream), so its
share of "+p50" can be told from the network and the client. "cpu/req" is the
CPU time (user + system, from /proc) the floor or pinch-router process spent
per answered request during the cell: once the machine's cores are busy (at
concurrency 16 on a small machine), latency and throughput follow it. The decision log
goes to the run's temporary directory, so every run starts from an empty one.
``--rounds N`` measures each cell N times, the three targets taking turns, and
pools the rounds: on a noisy machine this spreads slow spells over all targets.

    .venv/bin/python -m bench.bench_proxy [--requests 300] [--rounds 1] [--body small|transcript]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

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
    write_config,
)
from router.config import DEFAULT_CHAIN


def chain_sections() -> dict:
    """The full chain (every stage, in the default order), pinch on, the session cache on."""
    return {
        "middlewares": list(DEFAULT_CHAIN),
        "pinch": {"enabled": True, "budget_tokens": 8000, "keep_last_turns": 4},
        "session_cache": {"enabled": True},
    }


@dataclass(frozen=True)
class Measured:
    load: LoadResult
    cpu_seconds: float | None  # CPU the proxy process (floor or pinch-router) used for these requests


async def measure(url: str, body: bytes, requests: int, concurrency: int, stream: bool, pid: int | None) -> Measured:
    await drive(url, body, max(20, requests // 10), concurrency, stream)  # warm-up
    before = cpu_seconds(pid) if pid is not None else None
    load = await drive(url, body, requests, concurrency, stream)
    after = cpu_seconds(pid) if pid is not None else None
    return Measured(load, after - before if before is not None and after is not None else None)


def pooled(results: list[Measured]) -> tuple[LoadResult, float | None]:
    """Several rounds of one target as one result (all latencies, all errors, the total time) and its CPU ms a request."""
    load = LoadResult(
        [ms for r in results for ms in r.load.latencies_ms],
        sum(r.load.errors for r in results),
        sum(r.load.seconds for r in results),
        [ms for r in results for ms in r.load.overhead_ms],
    )
    cpu = [r.cpu_seconds for r in results]
    answered = len(load.latencies_ms)
    cpu_ms = 1000 * sum(c for c in cpu if c is not None) / answered if answered and None not in cpu else None
    return load, cpu_ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300, help="requests per cell")
    parser.add_argument("--rounds", type=int, default=1, help="measure each cell this many times, targets taking turns")
    parser.add_argument("--body", choices=["small", "transcript"], default="transcript")
    parser.add_argument("--chain", help="comma-separated stages instead of the full registered chain")
    args = parser.parse_args()

    if args.body == "small":
        body_obj = {"model": "auto", "messages": [{"role": "user", "content": "hello"}]}
    else:
        body_obj = transcript_body()

    up_port, floor_port, proxy_port = free_port(), free_port(), free_port()
    upstream = f"http://127.0.0.1:{up_port}/v1"
    sections = chain_sections()
    if args.chain:
        sections["middlewares"] = args.chain.split(",")
    if "classifier" in sections["middlewares"]:
        sections["classifier"] = {"provider": "mock", "model": "mock-classifier"}
    with tempfile.TemporaryDirectory() as tmp:
        sections["decision_log"] = {"path": str(Path(tmp) / "decisions.sqlite3")}
        config = write_config(Path(tmp) / "bench.yaml", proxy_port, upstream, **sections)
        with (
            spawn(mock_upstream(up_port), up_port),
            spawn([sys.executable, "bench/floor_proxy.py", "--port", str(floor_port), "--upstream", upstream], floor_port) as floor_process,
            spawn(proxy(config), proxy_port) as proxy_process,
        ):
            pids = {"direct": None, "floor": floor_process.pid, "pinch-router": proxy_process.pid}
            targets = {
                "direct": f"http://127.0.0.1:{up_port}/v1/chat/completions",
                "floor": f"http://127.0.0.1:{floor_port}/v1/chat/completions",
                "pinch-router": f"http://127.0.0.1:{proxy_port}/v1/chat/completions",
            }
            rounds = f" × {args.rounds} rounds" if args.rounds > 1 else ""
            print(f"body: {args.body} ({len(orjson.dumps(body_obj)):,} bytes), {args.requests} requests per cell{rounds}")
            print(f"chain: {' → '.join(sections['middlewares'])}\n")
            header = (
                f"{'mode':<11} {'conc':>4} {'target':<13} {'p50 ms':>8} {'p99 ms':>8} {'+p50 ms':>8} {'+p99 ms':>8} "
                f"{'req/s':>8} {'err':>4} {'own p50':>8} {'cpu/req':>8}"
            )
            print(header)
            print("-" * len(header))
            verdicts = []
            for stream in (False, True):
                body = orjson.dumps({**body_obj, "stream": stream})
                for concurrency in (1, 16):
                    rounds_of: dict[str, list[Measured]] = {name: [] for name in targets}
                    for _ in range(args.rounds):
                        for name, url in targets.items():
                            rounds_of[name].append(asyncio.run(measure(url, body, args.requests, concurrency, stream, pids[name])))
                    pooled_of = {name: pooled(measured) for name, measured in rounds_of.items()}
                    results = {name: load for name, (load, _) in pooled_of.items()}
                    direct = results["direct"]
                    for name, result in results.items():
                        cpu_ms = pooled_of[name][1]
                        cpu = f"{cpu_ms:>8.2f}" if cpu_ms is not None else f"{'-':>8}"
                        added50 = percentile(result.latencies_ms, 50) - percentile(direct.latencies_ms, 50)
                        added99 = percentile(result.latencies_ms, 99) - percentile(direct.latencies_ms, 99)
                        own = f"{percentile(result.overhead_ms, 50):>8.2f}" if result.overhead_ms else f"{'-':>8}"
                        print(
                            f"{'stream' if stream else 'json':<11} {concurrency:>4} {name:<13} "
                            f"{percentile(result.latencies_ms, 50):>8.2f} {percentile(result.latencies_ms, 99):>8.2f} "
                            f"{added50 if name != 'direct' else 0:>8.2f} {added99 if name != 'direct' else 0:>8.2f} "
                            f"{result.rps:>8.0f} {result.errors:>4} {own} {cpu}"
                        )
                    floor, ours = results["floor"], results["pinch-router"]
                    floor_added = max(percentile(floor.latencies_ms, 50) - percentile(direct.latencies_ms, 50), 0.01)
                    ours_added = percentile(ours.latencies_ms, 50) - percentile(direct.latencies_ms, 50)
                    floor_cpu, ours_cpu = pooled_of["floor"][1], pooled_of["pinch-router"][1]
                    verdicts.append(
                        (
                            f"{'stream' if stream else 'json'} c={concurrency}",
                            ours_added / floor_added,
                            ours.rps / floor.rps if floor.rps else 0.0,
                            ours_cpu / floor_cpu if ours_cpu is not None and floor_cpu else None,
                        )
                    )
                    print()
            print(f"{'cell':<14} {'added p50 vs floor':>20} {'throughput vs floor':>21} {'cpu/req vs floor':>18}  target (≤2.0×, ≥0.5×)")
            for cell, latency_ratio, rps_ratio, cpu_ratio in verdicts:
                ok = "met" if latency_ratio <= 2.0 and rps_ratio >= 0.5 else "MISSED"
                cpu_text = f"{cpu_ratio:>17.2f}×" if cpu_ratio is not None else f"{'-':>18}"
                print(f"{cell:<14} {latency_ratio:>19.2f}× {rps_ratio:>20.2f}× {cpu_text}  {ok}")
            print(f"\n{os.cpu_count()} CPUs, shared by the load generator (this process), the mock upstream and the proxy measured.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
