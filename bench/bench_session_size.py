"""A Messages session from 0.1 to 2 MB: cost per request against the floor's, and how it grows (issue #48).

A real agent transcript (the shared ``mswea-deepseek-chat__django__django-15695``, 177 messages of
bash tool calls and results) is grown to each size by repeating its exchanges, each copy's tool
ids fresh (:func:`bench.harness.grown_session`), and written as Claude Code sends it
(:mod:`bench.wire_bodies`: ``system``, ``tools``, ``max_tokens``, tool_use / tool_result blocks; the
``cache_control`` mark on the newest message's last block, moved each turn). Its last
``--turns`` + 1 requests are replayed in order as one session, each resending the one before's
messages plus one exchange; the first is the warm-up (the session's first sight, its ledger, the
body kept), the others are measured. Each round of a size is a session of its own (its system text
numbered, apart across the sizes too), so every round starts cold and resumes as a real one does.
``--continued`` numbers them alike across the sizes instead: a size's session n is the smaller sizes'
session n to the proxy, grown at once by what the larger transcript adds, within a warm cache that
holds a batch off: pinch reapplies the smaller one's ledger and carries the new results uncompressed
(a state a long session passes through; more results to plan and index on every request).

Three servers of the same bytes, each alone on one core (``taskset``), the mock upstream and this
process on the other(s):

* ``floor``: bench/floor_proxy.py, forwarding the bytes to the mock's Messages endpoint;
* ``to chat``: ``serve`` on the shipped chain (every stage, decision log, access log, metrics), its
  model on an OpenAI-chat provider: every request translated and, past pinch's budget, pinched;
* ``pass``: the same on an Anthropic provider: passed through (pinched past the budget).

Printed per size: the measured requests' mean size, CPU ms per request (/proc, user + system,
``--rounds`` sessions pooled, more for the small sizes so each measures about the same bytes) and,
with ``--instructions``, millions of instructions per request counted by callgrind (every thread,
one session's measured requests; the machine's load does not move them), each with its ratio to
the floor's; then each server's cost per MB at each size and the slope per MB of each interval
(linear growth: the slopes stay alike). Targets: at 1 MB, CPU ≤ 2.5× the floor's (CPU, not
instructions: most of the floor's work is the kernel's copying of the bytes, which callgrind does not
count, so its instruction ratio overstates ours); linear growth (instructions where counted, the
measure the machine's load does not move): the cost per added MB from 1 to 2 MB over that from 0.25
to 1 MB ≤ 1.25× the floor's same growth (or 1, when the floor's is below): large buffers cost the
floor more per MB too (its bytes read and written through aiohttp), and that part is no session cost.

    .venv/bin/python -m bench.bench_session_size [--sizes 0.1 0.25 0.5 1 2] [--turns 6] [--rounds 4]
        [--instructions] [--continued] [--tree DIR] [--save]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import orjson

from bench.bench_instructions import STARTUP_SECONDS, WRITER_SETTLE_SECONDS
from bench.bench_wires import config_for, instructions_of
from bench.harness import ROOT, cpu_seconds, free_port, grown_session, mock_upstream, print_table, proxy, spawn, transcript_body
from bench.wire_bodies import as_wire, path_of

TRANSCRIPT = "mswea-deepseek-chat__django__django-15695"
TARGETS = ("floor", "to chat", "pass")
SERVING = {"to chat": "chat", "pass": "messages"}  # bench_wires' provider formats
TARGET_VS_FLOOR = 2.5
TARGET_LINEAR = 1.25
MB = 1_000_000


def session(size_mb: float, turns: int, number: int) -> list[bytes]:
    """The last ``turns`` + 1 requests of the transcript grown to ``size_mb``, as Claude Code's Messages
    bodies, session ``number``'s (its own system text)."""
    chat = transcript_body(TRANSCRIPT)
    messages = chat["messages"]
    chat = {**chat, "stream": False, "messages": [{**messages[0], "content": f"[session {number}] {messages[0]['content']}"}, *messages[1:]]}
    bodies = []
    for request in grown_session(chat, int(size_mb * MB), turns + 1):
        body = as_wire(request, "messages")
        last = body["messages"][-1]
        if isinstance(last["content"], list) and last["content"]:
            last["content"][-1] = {**last["content"][-1], "cache_control": {"type": "ephemeral"}}
        bodies.append(orjson.dumps(body))
    return bodies


async def replay(url: str, bodies: list[bytes]) -> None:
    """POST ``bodies`` in order, one at a time, on one connection; fail on anything but a 200."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as http:
        for body in bodies:
            async with http.post(url, data=body, headers={"Content-Type": "application/json"}) as response:
                answer = await response.read()
                if response.status != 200:
                    raise RuntimeError(f"{url}: {response.status} {answer[:300]!r}")


@contextlib.contextmanager
def started(target: str, tmp: Path, root: str, prefix: list[str], tree: Path, startup_seconds: float = 20.0) -> Iterator[tuple[int, int]]:
    """``target`` serving on a free port, its command after ``prefix``: (port, pid)."""
    port = free_port()
    if target == "floor":
        command = [sys.executable, str(ROOT / "bench" / "floor_proxy.py"), "--port", str(port), "--upstream", f"{root}/v1"]
    else:
        name = SERVING[target]
        command = proxy(config_for(tmp / f"{name}-{port}.yaml", port, root, name, tmp / f"{name}-{port}.sqlite3"))
    with spawn([*prefix, *command], port, env={"PYTHONHASHSEED": "0"}, cwd=tree, startup_seconds=startup_seconds) as process:
        yield port, process.pid


def rounds_of(size_mb: float, rounds: int) -> int:
    """Sessions measured at ``size_mb``: more for the small sizes, so each measures about the bytes of 1 MB's."""
    return max(rounds, math.ceil(rounds / size_mb))


def measure_cpu(args: argparse.Namespace, sessions: dict[float, list[list[bytes]]], on_proxy: list[str], on_load: list[str]) -> dict[tuple[float, str], float]:
    """CPU ms per measured request, {(size, target): ms}."""
    up_port = free_port()
    root = f"http://127.0.0.1:{up_port}"
    spent: dict[tuple[float, str], list[tuple[float, int]]] = {}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        stack.enter_context(spawn(on_load + mock_upstream(up_port), up_port))
        servers = {target: stack.enter_context(started(target, Path(tmp), root, on_proxy, args.tree)) for target in TARGETS}
        for size in args.sizes:
            for number, bodies in enumerate(sessions[size]):
                # every other session in reverse: drift over a size weighs on every target alike
                for target in TARGETS if number % 2 == 0 else TARGETS[::-1]:
                    port, pid = servers[target]
                    url = f"http://127.0.0.1:{port}{path_of('messages')}"
                    asyncio.run(replay(url, bodies[:1]))
                    before = cpu_seconds(pid)
                    asyncio.run(replay(url, bodies[1:]))
                    after = cpu_seconds(pid)
                    spent.setdefault((size, target), []).append((after - before, len(bodies) - 1))  # type: ignore[operator]
    return {key: 1000 * sum(s for s, _ in runs) / sum(n for _, n in runs) for key, runs in spent.items()}


def measure_instructions(args: argparse.Namespace, sessions: dict[float, list[list[bytes]]], on_proxy: list[str], on_load: list[str]) -> dict[tuple[float, str], float]:
    """Millions of instructions per measured request, every thread, one session a size: {(size, target): M}."""
    up_port = free_port()
    root = f"http://127.0.0.1:{up_port}"
    counts: dict[tuple[float, str], float] = {}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        stack.enter_context(spawn(on_load + mock_upstream(up_port), up_port))
        for target in TARGETS:  # one under valgrind at a time
            out_dir = Path(tmp) / target.replace(" ", "-")
            out_dir.mkdir()
            valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes", f"--callgrind-out-file={out_dir}/callgrind.out"]
            with started(target, Path(tmp), root, on_proxy + valgrind, args.tree, STARTUP_SECONDS) as (port, pid):
                url = f"http://127.0.0.1:{port}{path_of('messages')}"
                for size in args.sizes:
                    bodies = sessions[size][0]
                    asyncio.run(replay(url, bodies[:1]))
                    time.sleep(WRITER_SETTLE_SECONDS)  # the warm-up's row written first (bench_instructions says why)
                    _, counted = instructions_of(pid, out_dir, lambda: asyncio.run(replay(url, bodies[1:])))
                    counts[size, target] = counted / (len(bodies) - 1) / 1e6
    return counts


def _ratio(value: float | None, base: float | None) -> str:
    return f"{value / base:.2f}×" if value is not None and base else "-"


def slopes(costs: dict[float, float], sizes: dict[float, float]) -> list[float]:
    """The cost per added MB between each size and the next (sizes in MB measured)."""
    order = sorted(costs)
    return [(costs[b] - costs[a]) / (sizes[b] - sizes[a]) for a, b in zip(order, order[1:])]


def marginal(values: dict, sent_mb: dict[float, float], target: str, small: float, large: float) -> float:
    """The cost per added MB from ``small`` to ``large`` MB."""
    return (values[large, target] - values[small, target]) / (sent_mb[large] - sent_mb[small])


def table(args: argparse.Namespace, sent_mb: dict[float, float], cpu: dict, instructions: dict) -> list[str]:
    measures = [("cpu ms", cpu)] + ([("M instr", instructions)] if instructions else [])
    head = f"{'size':>5} {'sent MB':>8}"
    for unit, _ in measures:
        for target in TARGETS:
            head += f" {target + ' ' + unit.split()[0]:>11}" + (f" {'×floor':>7}" if target != "floor" else "")
    lines = [head, "-" * len(head)]
    for size in args.sizes:
        row = f"{size:>5g} {sent_mb[size]:>8.3f}"
        for _, values in measures:
            for target in TARGETS:
                row += f" {values[size, target]:>11.2f}" + (f" {_ratio(values[size, target], values[size, 'floor']):>7}" if target != "floor" else "")
        lines.append(row)
    lines += ["", "per MB sent, at each size; then the slope per added MB of each interval (" + " → ".join(f"{s:g}" for s in args.sizes) + " MB)"]
    for unit, values in measures:
        for target in TARGETS:
            costs = {size: values[size, target] for size in args.sizes}
            per_mb = " ".join(f"{costs[s] / sent_mb[s]:>7.2f}" for s in args.sizes)
            steps = " ".join(f"{v:>7.2f}" for v in slopes(costs, sent_mb))
            lines.append(f"{unit:<8} {target:<8} per MB {per_mb}   slope {steps}")
    lines.append("")
    one = min(args.sizes, key=lambda s: abs(s - 1.0))
    for target in ("to chat", "pass"):
        ratio = cpu[one, target] / cpu[one, "floor"]
        lines.append(f"{target}: {one:g} MB ≤ {TARGET_VS_FLOOR}× the floor's CPU: {ratio:.2f}× {'met' if ratio <= TARGET_VS_FLOOR else 'MISSED'}")
    unit, values = measures[-1]
    if len(args.sizes) >= 3:
        growth = {
            target: marginal(values, sent_mb, target, one, args.sizes[-1]) / marginal(values, sent_mb, target, args.sizes[1], one) for target in TARGETS
        }
        for target in ("to chat", "pass"):
            relative = growth[target] / max(1.0, growth["floor"])
            lines.append(
                f"{target}: linear ({unit}): the cost per added MB {one:g} → {args.sizes[-1]:g} MB / {args.sizes[1]:g} → {one:g} MB "
                f"= {growth[target]:.2f}× (the floor's {growth['floor']:.2f}×), ≤ {TARGET_LINEAR}× the floor's or 1: "
                f"{relative:.2f}× {'met' if relative <= TARGET_LINEAR else 'MISSED'}"
            )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", type=float, default=[0.1, 0.25, 0.5, 1.0, 2.0], help="session sizes, MB")
    parser.add_argument("--turns", type=int, default=6, help="requests measured per session (after one warm-up)")
    parser.add_argument("--rounds", type=int, default=4, help="sessions measured per size for CPU (more below 1 MB: rounds / MB)")
    parser.add_argument("--instructions", action="store_true", help="count instructions per request with callgrind too")
    parser.add_argument(
        "--continued", action="store_true",
        help="each size's session n resumes the smaller sizes' session n (the same session to the proxy): grown within a warm cache, its new results held uncompressed",
    )  # fmt: skip
    parser.add_argument("--tree", type=Path, default=ROOT, help="the source tree whose `router` is served")
    parser.add_argument("--save", action="store_true", help="write the table to bench/results/bench_session_size.txt")
    args = parser.parse_args()
    args.sizes = sorted(args.sizes)
    cpus = sorted(os.sched_getaffinity(0))
    needed = ["taskset"] + (["valgrind", "callgrind_control"] if args.instructions else [])
    if len(cpus) < 2 or any(shutil.which(tool) is None for tool in needed):
        print(f"needs two CPUs and {', '.join(needed)}", file=sys.stderr)
        return 2
    proxy_core, load_cores = cpus[-1], cpus[:-1]
    os.sched_setaffinity(0, load_cores)
    on_proxy, on_load = ["taskset", "-c", str(proxy_core)], ["taskset", "-c", ",".join(map(str, load_cores))]
    started_at, load_before = time.monotonic(), os.getloadavg()[0]
    # every session numbered apart, across the sizes too: a 1 MB session numbered as a 0.5 MB one is
    # the same session to the proxy (its fingerprint), resumed from that one's ledger (--continued)
    numbers = itertools.count()
    sessions: dict[float, list[list[bytes]]] = {
        size: [session(size, args.turns, n if args.continued else next(numbers)) for n in range(rounds_of(size, args.rounds))] for size in args.sizes
    }
    sent_mb = {size: sum(map(len, sessions[size][0][1:])) / args.turns / MB for size in args.sizes}
    cpu = measure_cpu(args, sessions, on_proxy, on_load)
    instructions = measure_instructions(args, sessions, on_proxy, on_load) if args.instructions else {}
    load_after = os.getloadavg()
    head = (
        f"a Messages session ({TRANSCRIPT} grown), its last {args.turns} requests after a warm-up, each server alone on CPU {proxy_core}, "
        f"the mock upstream and the client on CPU {','.join(map(str, load_cores))}; ms: CPU per request (/proc, ≥ {args.rounds} sessions pooled)"
        + ("; M: millions of instructions per request (callgrind, every thread, one session)" if instructions else "")
    )
    lines = [head, "", *table(args, sent_mb, cpu, instructions)]
    lines.append(f"\n{time.monotonic() - started_at:.0f} s; load average {load_before:.2f} at the start, {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} at the end.")
    return print_table(__file__, lines, args.save)


if __name__ == "__main__":
    raise SystemExit(main())
