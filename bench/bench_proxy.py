"""Added latency and throughput of the proxy, against a minimal pass-through proxy (the floor).

One run starts a mock upstream, pinch-router on the full configured chain and
the floor (bench/floor_proxy.py), each in its own process on loopback, then
measures direct → upstream, floor → upstream and pinch-router → upstream at
concurrency 1 and 16, streamed and not, with a real agent request body.

Targets: the chain adds at most 2× the floor's added latency (p50) and keeps
at least half the floor's throughput.

"own p50" is what pinch-router itself reports per request (x-router-overhead-ms:
its time up to the response head, minus time waiting on the upstream), so its
share of "+p50" can be told from the network and the client. The decision log
goes to the run's temporary directory, so every run starts from an empty one.
``--rounds N`` measures each cell N times, the three targets taking turns, and
pools the rounds: on a noisy machine this spreads slow spells over all targets.

    .venv/bin/python -m bench.bench_proxy [--requests 300] [--rounds 1] [--body small|transcript]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

import orjson

from bench.harness import (
    LoadResult,
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


async def measure(url: str, body: bytes, requests: int, concurrency: int, stream: bool) -> LoadResult:
    await drive(url, body, max(20, requests // 10), concurrency, stream)  # warm-up
    return await drive(url, body, requests, concurrency, stream)


def pooled(results: list[LoadResult]) -> LoadResult:
    """Several rounds of one target as one result: all latencies, all errors, the total time."""
    return LoadResult(
        [ms for r in results for ms in r.latencies_ms],
        sum(r.errors for r in results),
        sum(r.seconds for r in results),
        [ms for r in results for ms in r.overhead_ms],
    )


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
            spawn([sys.executable, "bench/floor_proxy.py", "--port", str(floor_port), "--upstream", upstream], floor_port),
            spawn(proxy(config), proxy_port),
        ):
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
                f"{'req/s':>8} {'err':>4} {'own p50':>8}"
            )
            print(header)
            print("-" * len(header))
            verdicts = []
            for stream in (False, True):
                body = orjson.dumps({**body_obj, "stream": stream})
                for concurrency in (1, 16):
                    rounds_of: dict[str, list[LoadResult]] = {name: [] for name in targets}
                    for _ in range(args.rounds):
                        for name, url in targets.items():
                            rounds_of[name].append(asyncio.run(measure(url, body, args.requests, concurrency, stream)))
                    results = {name: pooled(measured) for name, measured in rounds_of.items()}
                    direct = results["direct"]
                    for name, result in results.items():
                        added50 = percentile(result.latencies_ms, 50) - percentile(direct.latencies_ms, 50)
                        added99 = percentile(result.latencies_ms, 99) - percentile(direct.latencies_ms, 99)
                        own = f"{percentile(result.overhead_ms, 50):>8.2f}" if result.overhead_ms else f"{'-':>8}"
                        print(
                            f"{'stream' if stream else 'json':<11} {concurrency:>4} {name:<13} "
                            f"{percentile(result.latencies_ms, 50):>8.2f} {percentile(result.latencies_ms, 99):>8.2f} "
                            f"{added50 if name != 'direct' else 0:>8.2f} {added99 if name != 'direct' else 0:>8.2f} "
                            f"{result.rps:>8.0f} {result.errors:>4} {own}"
                        )
                    floor, ours = results["floor"], results["pinch-router"]
                    floor_added = max(percentile(floor.latencies_ms, 50) - percentile(direct.latencies_ms, 50), 0.01)
                    ours_added = percentile(ours.latencies_ms, 50) - percentile(direct.latencies_ms, 50)
                    verdicts.append(
                        (
                            f"{'stream' if stream else 'json'} c={concurrency}",
                            ours_added / floor_added,
                            ours.rps / floor.rps if floor.rps else 0.0,
                        )
                    )
                    print()
            print(f"{'cell':<14} {'added p50 vs floor':>20} {'throughput vs floor':>21}  target (≤2.0×, ≥0.5×)")
            for cell, latency_ratio, rps_ratio in verdicts:
                ok = "met" if latency_ratio <= 2.0 and rps_ratio >= 0.5 else "MISSED"
                print(f"{cell:<14} {latency_ratio:>19.2f}× {rps_ratio:>20.2f}×  {ok}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
