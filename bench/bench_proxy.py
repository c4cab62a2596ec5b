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

``--pin`` is the measurement of issue #19: the proxy measured (pinch-router or the
floor, one at a time) alone on one core, the load generator and the mock
upstream on the other(s), the shipped config (config.yaml: every stage,
classification cache hits after the first request, decision log, access log,
metrics), non-streamed, on three bodies — a small chat, a transcript within
pinch's budget, a transcript pinch compresses. Per body it prints the CPU per
request of each (from /proc, at concurrency 16), the added p50 at concurrency 1
(over direct → upstream) and the req/s at concurrency 16, their ratios, and the
targets (CPU ≤ 2.0×, added p50 ≤ 2.0×, req/s ≥ 0.5× the floor's). The load
generator is wrk when installed (``apt-get install wrk``), else this process.
``--against REV...`` serves each git revision's pinch-router too (exported with
``git archive``, on the same core, the same config), measured in the same rounds
as the others, taking turns with them, and prints this tree's figures over each
revision's: a change's cost on the request path, in one run on a noisy machine.

    .venv/bin/python -m bench.bench_proxy [--requests 300] [--rounds 1] [--body small|transcript]
    .venv/bin/python -m bench.bench_proxy --pin [--seconds 5] [--rounds 2] [--loader auto|wrk|python] [--against REV...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import orjson
import yaml

from bench.harness import (
    ROOT,
    Cell,
    LoadResult,
    cpu_seconds,
    drive,
    free_port,
    mock_upstream,
    percentile,
    proxy,
    spawn,
    transcript_body,
    wrk_cell,
    write_config,
)
from bench.bench_recording import export
from router.server.registry import REGISTRY


def chain_sections() -> dict:
    """The full chain (every stage, in the default order), pinch on, the session cache on."""
    return {
        "middlewares": list(REGISTRY.default_chain),
        "pinch": {"enabled": True, "budget_tokens": 8000, "keep_last_turns": 4},
        "session_cache": {"enabled": True},
    }


@dataclass(frozen=True)
class Measured:
    load: LoadResult
    cpu_seconds: float | None  # CPU the proxy process (floor or pinch-router) used for these requests


def target_urls(upstream_port: int, floor_port: int, proxy_port: int) -> dict[str, str]:
    """The chat endpoint of each target: the upstream itself, the floor and pinch-router."""
    ports = {"direct": upstream_port, "floor": floor_port, "pinch-router": proxy_port}
    return {name: f"http://127.0.0.1:{port}/v1/chat/completions" for name, port in ports.items()}


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
    parser.add_argument("--rounds", type=int, help="measure each cell this many times, targets taking turns (default 1; 2 with --pin)")
    parser.add_argument("--body", choices=["small", "transcript"], default="transcript")
    parser.add_argument("--chain", help="comma-separated stages instead of the full registered chain")
    parser.add_argument("--pin", action="store_true", help="the proxy measured alone on one core, the shipped config, three bodies (issue #19)")
    parser.add_argument("--seconds", type=float, default=5.0, help="with --pin and wrk: seconds per cell")
    parser.add_argument("--loader", choices=["auto", "wrk", "python"], default="auto", help="with --pin: the load generator")
    parser.add_argument("--against", nargs="+", default=[], metavar="REV", help="with --pin: git revisions whose pinch-router is measured too, in turns")
    args = parser.parse_args()
    if args.rounds is None:
        # pinned, the floor and pinch-router are measured one after the other: taking turns
        # twice spreads a busy spell of the machine over both
        args.rounds = 2 if args.pin else 1
    if args.pin:
        return pinned(args)

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
            targets = target_urls(up_port, floor_port, proxy_port)
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


# --- --pin ------------------------------------------------------------------------------

SMALL_CHAT = {
    "model": "auto",
    "messages": [
        {"role": "system", "content": "You are a coding assistant working in the user's repository."},
        {"role": "user", "content": "Rename the helper `x` to `count` in utils.py and keep the tests passing."},
    ],
}
PIN_BODIES = {  # name → body: ~200 B; ~62 KB, within pinch's budget; ~230 KB, over it (pinched)
    "small chat": lambda: SMALL_CHAT,
    "transcript, within budget": lambda: transcript_body("sweagent-gpt4__pydicom__pydicom-1458"),
    "transcript, pinched": lambda: transcript_body("mswea-deepseek-chat__django__django-15695"),
}
PIN_TARGETS = {"cpu": 2.0, "p50": 2.0, "rps": 0.5}


def shipped_sections(decision_log: Path) -> dict:
    """config.yaml's chain and settings (pinch, caches, decision log, logging at info), its models replaced by the bench's."""
    shipped = yaml.safe_load((ROOT / "config.yaml").read_text())
    sections = {key: value for key, value in shipped.items() if key not in ("server", "providers", "models")}
    sections["classifier"] = {**shipped["classifier"], "provider": "mock", "model": "mock-classifier"}
    sections["decision_log"] = {**shipped["decision_log"], "path": str(decision_log)}
    return sections


def pinned(args: argparse.Namespace) -> int:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or shutil.which("taskset") is None:
        print("--pin needs two CPUs and taskset", file=sys.stderr)
        return 2
    if args.loader == "wrk" and shutil.which("wrk") is None:
        print("--loader wrk: wrk is not installed (apt-get install wrk); --loader python drives the load from this process", file=sys.stderr)
        return 2
    use_wrk = args.loader == "wrk" or (args.loader == "auto" and shutil.which("wrk") is not None)
    proxy_core, load_cores = cpus[-1], cpus[:-1]
    os.sched_setaffinity(0, load_cores)  # this process (and wrk, its child) stays off the proxy's core
    on_proxy_core = ["taskset", "-c", str(proxy_core)]
    on_load_cores = ["taskset", "-c", ",".join(map(str, load_cores))]

    def cell(url: str, body: bytes, concurrency: int, pid: int | None) -> tuple[Cell, float | None]:
        """One cell after a short warm-up: the load, and the CPU ms per answered request of ``pid``."""
        if use_wrk:
            wrk_cell(url, body, 1, concurrency)
            before = cpu_seconds(pid) if pid else None
            load = wrk_cell(url, body, args.seconds, concurrency)
        else:
            asyncio.run(drive(url, body, max(20, args.requests // 10), concurrency, False))
            before = cpu_seconds(pid) if pid else None
            load = Cell.of(asyncio.run(drive(url, body, args.requests, concurrency, False)))
        after = cpu_seconds(pid) if pid else None
        cpu_ms = 1000 * (after - before) / load.requests if before is not None and after is not None and load.requests else None
        return load, cpu_ms

    up_port, floor_port, proxy_port = free_port(), free_port(), free_port()
    upstream = f"http://127.0.0.1:{up_port}/v1"
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        config = write_config(Path(tmp) / "bench.yaml", proxy_port, upstream, **shipped_sections(Path(tmp) / "decisions.sqlite3"))
        with (
            spawn(on_load_cores + mock_upstream(up_port), up_port),
            spawn(on_proxy_core + [sys.executable, "bench/floor_proxy.py", "--port", str(floor_port), "--upstream", upstream], floor_port) as floor_process,
            spawn(on_proxy_core + proxy(config), proxy_port) as proxy_process,
            ExitStack() as revisions,
        ):
            urls = target_urls(up_port, floor_port, proxy_port)
            pids = {"direct": None, "floor": floor_process.pid, "pinch-router": proxy_process.pid}
            for i, rev in enumerate(args.against):  # each revision's own tree (cwd: -m router imports it), its own log
                port, tree = free_port(), export(rev, Path(tmp) / "trees")
                at = write_config(Path(tmp) / f"at-{i}.yaml", port, upstream, **shipped_sections(Path(tmp) / f"decisions-{i}.sqlite3"))
                urls[f"pinch-router@{rev}"] = f"http://127.0.0.1:{port}/v1/chat/completions"
                pids[f"pinch-router@{rev}"] = revisions.enter_context(spawn(on_proxy_core + proxy(at), port, cwd=tree)).pid
            loader = f"wrk, {args.seconds:g} s a cell" if use_wrk else f"this process (no wrk), {args.requests} requests a cell"
            rounds = f", {args.rounds} rounds pooled" if args.rounds > 1 else ""
            print(f"--pin: the proxy measured on CPU {proxy_core} alone; load ({loader}) and mock upstream on CPU {','.join(map(str, load_cores))}{rounds}")
            print(f"shipped chain: {' → '.join(shipped_sections(Path(tmp))['middlewares'])}; non-stream\n")
            width = max(13, *map(len, urls))
            header = (
                f"{'body':<34} {'target':<{width}} {'p50 c=1':>8} {'+p50 c=1':>9} {'cpu/req c=1':>12} "
                f"{'req/s c=16':>11} {'cpu/req c=16':>13} {'err':>4}"
            )
            print(header)
            print("-" * len(header))
            verdicts = []
            against: list[tuple[str, str, list[float | None]]] = []  # body, revision, this tree's figures over its
            for name, make in PIN_BODIES.items():
                body = orjson.dumps({**make(), "stream": False})
                runs: dict[tuple[str, int], list[tuple[Cell, float | None]]] = {}
                for _ in range(args.rounds):
                    for concurrency in (1, 16):
                        for target, url in urls.items():
                            if target == "direct" and concurrency != 1:
                                continue
                            runs.setdefault((target, concurrency), []).append(cell(url, body, concurrency, pids[target]))
                pooled_runs = {key: _pooled_cells(measured) for key, measured in runs.items()}
                direct_p50 = pooled_runs["direct", 1][0].p50_ms
                row: dict[str, tuple[float, float, float | None, float | None]] = {}
                for target in urls:
                    one, cpu1 = pooled_runs[target, 1]
                    many, cpu16 = pooled_runs.get((target, 16), (None, None))
                    added = one.p50_ms - direct_p50
                    errors = one.errors + (many.errors if many is not None else 0)
                    print(
                        f"{name + f' ({len(body) / 1024:,.1f} KB)':<34} {target:<{width}} {one.p50_ms:>8.3f} "
                        f"{(added if target != 'direct' else 0):>9.3f} {_ms(cpu1):>12} "
                        f"{(f'{many.rps:,.0f}' if many is not None else '-'):>11} {_ms(cpu16):>13} {errors:>4}"
                    )
                    if many is not None:
                        row[target] = (added, many.rps, cpu16, cpu1)
                print()
                for rev in args.against:
                    now, then = row["pinch-router"], row[f"pinch-router@{rev}"]
                    against.append((name, rev, [_over(now[3], then[3]), _over(now[2], then[2]), _over(now[0], then[0]), _over(now[1], then[1])]))
                floor, ours = row["floor"], row["pinch-router"]
                verdicts.append(
                    (
                        name,
                        ours[2] / floor[2] if ours[2] is not None and floor[2] else None,
                        ours[0] / max(floor[0], 0.001),
                        ours[1] / floor[1] if floor[1] else 0.0,
                    )
                )
    print(
        f"{'body':<34} {'cpu/req c=16 vs floor':>22} {'added p50 c=1 vs floor':>23} {'req/s c=16 vs floor':>20}"
    )
    print(f"{'  target':<34} {'≤ 2.0×':>22} {'≤ 2.0×':>23} {'≥ 0.5×':>20}")
    met = 0
    for name, cpu, p50, rps in verdicts:
        marks = (
            cpu is not None and cpu <= PIN_TARGETS["cpu"],
            p50 <= PIN_TARGETS["p50"],
            rps >= PIN_TARGETS["rps"],
        )
        met += sum(marks)
        cpu_text = f"{cpu:.3f}×" if cpu is not None else "-"
        print(
            f"{name:<34} {cpu_text + (' met' if marks[0] else ' MISSED'):>22} {f'{p50:.3f}×' + (' met' if marks[1] else ' MISSED'):>23} "
            f"{f'{rps:.3f}×' + (' met' if marks[2] else ' MISSED'):>20}"
        )
    if against:
        print(f"\n{'body':<34} {'this tree over':<20} {'cpu/req c=1':>12} {'cpu/req c=16':>13} {'+p50 c=1':>9} {'req/s c=16':>11}")
        for name, rev, ratios in against:
            print(f"{name:<34} {rev:<20} " + " ".join(f"{'-' if r is None else f'{r:.3f}×':>{w}}" for r, w in zip(ratios, (12, 13, 9, 11), strict=True)))
    # the bench itself keeps ~3 processes busy (load generator, mock upstream, proxy)
    load, cpus = os.getloadavg()[0], os.cpu_count() or 1
    busy = f"load average {load:.1f} on {cpus} CPUs: other processes shared the cores, expect noise" if load > cpus + 1.5 else f"load average {load:.1f}"
    print(f"\n{met} of {3 * len(verdicts)} target cells met; {time.monotonic() - started:.0f} s; {busy}.")
    return 0


def _pooled_cells(measured: list[tuple[Cell, float | None]]) -> tuple[Cell, float | None]:
    """Rounds of one cell as one: requests, errors and seconds summed, the median round's percentiles, CPU per request overall."""
    cells = [c for c, _ in measured]
    middle = sorted(cells, key=lambda c: c.p50_ms)[len(cells) // 2]
    requests = sum(c.requests for c in cells)
    pooled = Cell(requests, sum(c.errors for c in cells), sum(c.seconds for c in cells), middle.p50_ms, middle.p99_ms)
    cpus = [cpu * c.requests for c, cpu in measured if cpu is not None]
    return pooled, sum(cpus) / requests if len(cpus) == len(measured) and requests else None


def _over(now: float | None, then: float | None) -> float | None:
    return now / then if now is not None and then else None


def _ms(value: float | None) -> str:
    return f"{value:.3f} ms" if value is not None else "-"


if __name__ == "__main__":
    raise SystemExit(main())
