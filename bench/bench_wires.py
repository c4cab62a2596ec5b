"""CPU per request of every client wire on the same content, against the chat wire and the floor (issue #30).

The same content (bench_proxy's ``--pin`` bodies: a small chat, a 62 KB transcript within
pinch's budget, a 230 KB one pinch compresses) is sent as a request of each wire — chat
completions, Anthropic Messages, OpenAI Responses, Gemini (:mod:`bench.wire_bodies`) — in
one run, each proxy measured alone on one core (``taskset``), wrk and the mock upstream on
the other(s), the shipped config (every stage, decision log, access log, metrics), non-streamed.

Two ways a wire is served:

* ``pass``: to a provider of its own format (the mock upstream speaks all four): the wire's
  own cost — its validation, view and upstream body; chat's row is bench_proxy's chat.
* ``to chat``: to an OpenAI-chat provider, the request and the answer translated.

Beside each, the floor (bench/floor_proxy.py) forwarding the same body to the same path. The
mock upstream answers a body it has answered before from memory (bench/memo_upstream.py), so
the load core costs alike for every wire and never runs out before the proxy's does.
Printed per body and wire: CPU ms per answered request at concurrency 1 and 16 (from /proc),
its ratio to the chat wire's (pass) and to the floor's, the share of its core the proxy used at
16 (below ~95 % the load side, not the proxy, set the pace: its CPU per request is then not
comparable), and, with ``--instructions``, the
instructions per request callgrind counts (every thread, requests one at a time: the same
measure as bench_instructions; the noise-free one) and their ratio to chat's.
Targets (issue #30): every wire passed through ≤ 1.10× chat's CPU at c=1 and c=16 on the
small and 62 KB bodies; chat ≤ 2.5× the floor's at c=1 on all three.

    .venv/bin/python -m bench.bench_wires [--seconds 3] [--rounds 4] [--body small within pinched]
        [--instructions small within] [--requests 100] [--tree DIR] [--save]

``--save`` writes the table printed to bench/results/bench_wires.txt (first line: the
command, the UTC date, the machine's CPUs and load average).
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
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import orjson

from bench.bench_instructions import STARTUP_SECONDS
from bench.bench_proxy import PIN_BODIES, shipped_sections
from bench.harness import ROOT, cpu_seconds, drive, free_port, memo_upstream, mock_upstream, print_table, proxy, spawn, wrk_cell, write_config
from bench.wire_bodies import WIRES, as_wire, path_of

BODIES = dict(zip(("small", "within", "pinched"), PIN_BODIES))
# Each wire's own provider (pass), and the chat provider that serves every wire translated.
PROVIDERS = {
    "chat": lambda root: {"base_url": f"{root}/v1"},
    "messages": lambda root: {"base_url": root, "api": "anthropic"},
    "responses": lambda root: {"base_url": f"{root}/v1", "wire": "openai-responses"},
    "gemini": lambda root: {"base_url": root, "api": "gemini"},
}
TARGET_VS_CHAT = 1.10
TARGET_CHAT_VS_FLOOR = 2.5
RESULTS = ROOT / "bench" / "results"
T = TypeVar("T")


def config_for(path: Path, port: int, root: str, serving: str, decisions: Path) -> Path:
    """The shipped config, its one model on a provider of ``serving``'s format (the classifier on the chat mock)."""
    sections = shipped_sections(decisions)
    sections["providers"] = {"mock": {"base_url": f"{root}/v1"}, "up": PROVIDERS[serving](root)}
    model = {
        "name": "bench-model", "provider": "up", "upstream_model": "mock", "context_window": 2_000_000, "max_output_tokens": 8192,
        "supports": {"tools": True, "vision": True, "json_mode": True}, "tiers": [1, 2, 3],
    }  # fmt: skip
    sections["models"] = [model]
    return write_config(path, port, f"{root}/v1", **sections)


def rows() -> list[tuple[str, str]]:
    """(wire, how it is served): every wire passed through, and every other wire translated to chat."""
    return [(wire, "pass") for wire in WIRES] + [(wire, "to chat") for wire in WIRES if wire != "chat"]


def server_of(wire: str, mode: str) -> str:
    return wire if mode == "pass" else "chat"


@contextlib.contextmanager
def servers(tmp: Path, root: str, on_core: list[str], under: list[str] | None = None, tree: Path = ROOT) -> Iterator[dict[str, tuple[int, int]]]:
    """pinch-router once per provider format, each on ``on_core``: {format: (port, pid)}."""
    with contextlib.ExitStack() as stack:
        started: dict[str, tuple[int, int]] = {}
        for serving in PROVIDERS:
            port = free_port()
            config = config_for(tmp / f"{serving}.yaml", port, root, serving, tmp / f"{serving}.sqlite3")
            wait = STARTUP_SECONDS if under else 20.0
            process = stack.enter_context(spawn([*on_core, *(under or []), *proxy(config)], port, env={"PYTHONHASHSEED": "0"}, cwd=tree, startup_seconds=wait))
            started[serving] = (port, process.pid)
        yield started


def measure_cpu(args: argparse.Namespace, proxy_core: int, load_cores: list[int]) -> dict[tuple[str, str, str, str, int], float | None]:
    """CPU ms per request, {(body, wire, mode or 'floor', concurrency): ms}, and the share of its core
    the proxy used, {(body, wire, mode, 'busy', concurrency): share}."""
    on_proxy = ["taskset", "-c", str(proxy_core)]
    on_load = ["taskset", "-c", ",".join(map(str, load_cores))]
    up_port, floor_port = free_port(), free_port()
    root = f"http://127.0.0.1:{up_port}"
    spent: dict[tuple[str, str, str, int], list[tuple[float, int]]] = {}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        stack.enter_context(spawn(on_load + memo_upstream(up_port), up_port))
        floor = stack.enter_context(spawn(on_proxy + [sys.executable, "bench/floor_proxy.py", "--port", str(floor_port), "--upstream", f"{root}/v1"], floor_port))
        ours = stack.enter_context(servers(Path(tmp), root, on_proxy, tree=args.tree))
        targets = [(wire, "floor", floor_port, floor.pid) for wire in WIRES]
        targets += [(wire, mode, *ours[server_of(wire, mode)]) for wire, mode in rows()]
        for round_ in range(args.rounds):
            for short in args.body:
                chat = BODIES[short]
                for concurrency in (1, 16):
                    # every other round in reverse: a machine that drifts over a round (another
                    # tenant's load, the clock) weighs on the first and the last targets alike
                    for wire, mode, port, pid in targets if round_ % 2 == 0 else targets[::-1]:
                        body = orjson.dumps(as_wire({**PIN_BODIES[chat](), "stream": False}, wire))
                        url = f"http://127.0.0.1:{port}{path_of(wire)}"
                        wrk_cell(url, body, 1, concurrency)  # warm-up: caches, the session's ledger
                        before = cpu_seconds(pid)
                        cell = wrk_cell(url, body, args.seconds, concurrency)
                        after = cpu_seconds(pid)
                        if cell.errors or not cell.requests:
                            raise RuntimeError(f"{wire} {mode} {short} c={concurrency}: {cell.errors} errors of {cell.requests + cell.errors}")
                        spent.setdefault((short, wire, mode, concurrency), []).append((after - before, cell.requests, cell.seconds))  # type: ignore[operator]
    per_request = {key: 1000 * sum(s for s, _, _ in runs) / sum(n for _, n, _ in runs) for key, runs in spent.items()}
    # the share of its core the proxy used (1.0: the load side kept it busy all the time)
    busy = {(*key[:3], "busy", key[3]): sum(s for s, _, _ in runs) / sum(t for _, _, t in runs) for key, runs in spent.items()}
    return {**per_request, **busy}


def new_files(directory: Path, before: set[Path]) -> list[Path]:
    return [p for p in directory.iterdir() if p not in before and p.name.startswith("callgrind.out")]


def totals(paths: list[Path]) -> int:
    import re

    total = 0
    for path in paths:
        match = re.search(r"^totals: (\d+)", path.read_text(errors="replace"), re.MULTILINE)
        total += int(match.group(1)) if match else 0
    return total


def measure_instructions(args: argparse.Namespace, proxy_core: int, load_cores: list[int]) -> dict[tuple[str, str, str], float]:
    """Millions of instructions per request, every thread of the server: {(body, wire, mode): M}."""
    on_proxy = ["taskset", "-c", str(proxy_core)]
    on_load = ["taskset", "-c", ",".join(map(str, load_cores))]
    counts: dict[tuple[str, str, str], float] = {}
    up_port = free_port()
    root = f"http://127.0.0.1:{up_port}"
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        stack.enter_context(spawn(on_load + mock_upstream(up_port), up_port))
        for serving in PROVIDERS:  # one under valgrind at a time
            out_dir = Path(tmp) / serving
            out_dir.mkdir()
            valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes", f"--callgrind-out-file={out_dir}/callgrind.out"]
            with servers_one(Path(tmp), root, serving, on_proxy + valgrind, args.tree) as (port, pid):
                for wire, mode in rows():
                    if server_of(wire, mode) != serving:
                        continue
                    for short in args.instructions:
                        body = orjson.dumps(as_wire({**PIN_BODIES[BODIES[short]](), "stream": False}, wire))
                        url = f"http://127.0.0.1:{port}{path_of(wire)}"
                        asyncio.run(drive(url, body, 30, 1, False))  # warm-up, not counted
                        load, counted = instructions_of(pid, out_dir, lambda: asyncio.run(drive(url, body, args.requests, 1, False)))
                        if load.errors:
                            raise RuntimeError(f"{wire} {mode} {short}: {load.errors} of {args.requests} requests failed")
                        counts[short, wire, mode] = counted / args.requests / 1e6
    return counts


def instructions_of(pid: int, out_dir: Path, run: Callable[[], T]) -> tuple[T, int]:
    """What ``run()`` returned and the instructions the process ``pid`` (under ``valgrind --tool=callgrind
    --instr-atstart=no``, writing into ``out_dir``) executed while it ran, every thread."""
    subprocess.run(["callgrind_control", "-z", str(pid)], check=True, capture_output=True)
    before = set(out_dir.iterdir())
    subprocess.run(["callgrind_control", "-i", "on", str(pid)], check=True, capture_output=True)
    try:
        result = run()
    finally:
        subprocess.run(["callgrind_control", "-i", "off", str(pid)], check=True, capture_output=True)
        # dumped now: a server slow to stop under valgrind may be killed before it writes its counts
        subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    return result, totals(new_files(out_dir, before))


@contextlib.contextmanager
def servers_one(tmp: Path, root: str, serving: str, prefix: list[str], tree: Path = ROOT) -> Iterator[tuple[int, int]]:
    port = free_port()
    config = config_for(tmp / f"{serving}-counted.yaml", port, root, serving, tmp / f"{serving}-counted.sqlite3")
    with spawn([*prefix, *proxy(config)], port, env={"PYTHONHASHSEED": "0"}, cwd=tree, startup_seconds=STARTUP_SECONDS) as process:
        yield port, process.pid


def _ratio(value: float | None, base: float | None) -> str:
    return f"{value / base:.2f}×" if value is not None and base else "-"


def table(args: argparse.Namespace, cpu: dict, instructions: dict) -> list[str]:
    lines = [
        f"{'body':<8} {'wire':<10} {'served':<8} {'cpu c=1':>8} {'cpu c=16':>9} {'vs chat c=1':>12} {'vs chat c=16':>13} "
        f"{'vs floor c=1':>13} {'busy c=16':>10} {'M instr':>8} {'vs chat':>8}",
    ]
    lines.append("-" * len(lines[0]))
    verdicts: list[str] = []
    for short in args.body:
        chat1, chat16 = cpu[short, "chat", "pass", 1], cpu[short, "chat", "pass", 16]
        chat_ir = instructions.get((short, "chat", "pass"))
        for wire, mode in [(w, "floor") for w in WIRES] + rows():
            one, many = cpu[short, wire, mode, 1], cpu[short, wire, mode, 16]
            floor1 = cpu[short, wire, "floor", 1]
            ir = instructions.get((short, wire, mode))
            lines.append(
                f"{short:<8} {wire:<10} {mode:<8} {one:>8.3f} {many:>9.3f} {_ratio(one, chat1):>12} {_ratio(many, chat16):>13} "
                f"{(_ratio(one, floor1) if mode != 'floor' else '-'):>13} {cpu[short, wire, mode, 'busy', 16]:>10.0%} {(f'{ir:.3f}' if ir is not None else '-'):>8} "
                f"{(_ratio(ir, chat_ir) if ir is not None and mode != 'floor' else '-'):>8}"
            )
            if mode == "pass" and wire != "chat" and short in ("small", "within"):
                worst = max(one / chat1, many / chat16)
                verdicts.append(f"{short} {wire} pass ≤ {TARGET_VS_CHAT:.2f}× chat: {worst:.2f}× {'met' if worst <= TARGET_VS_CHAT else 'MISSED'}")
            if mode == "pass" and wire == "chat":
                verdicts.append(f"{short} chat ≤ {TARGET_CHAT_VS_FLOOR:.1f}× floor c=1: {one / floor1:.2f}× {'met' if one / floor1 <= TARGET_CHAT_VS_FLOOR else 'MISSED'}")
        lines.append("")
    return lines + verdicts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--body", nargs="+", choices=list(BODIES), default=list(BODIES))
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds of wrk per cell")
    parser.add_argument("--rounds", type=int, default=4, help="rounds pooled, every target taking its turn in each (every other round in reverse order)")
    parser.add_argument("--instructions", nargs="*", choices=list(BODIES), default=[], help="bodies whose instructions callgrind counts")
    parser.add_argument("--requests", type=int, default=100, help="with --instructions: requests counted, one at a time")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the source tree whose `router` is served (bench_recording.export makes one of a revision)")
    parser.add_argument("--save", action="store_true", help=f"write the table to {RESULTS.relative_to(ROOT)}/bench_wires.txt")
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    needed = ["taskset", "wrk"] + (["valgrind", "callgrind_control"] if args.instructions else [])
    if len(cpus) < 2 or any(shutil.which(tool) is None for tool in needed):
        print(f"needs two CPUs and {', '.join(needed)}", file=sys.stderr)
        return 2
    proxy_core, load_cores = cpus[-1], cpus[:-1]
    os.sched_setaffinity(0, load_cores)  # this process and wrk stay off the proxy's core
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    cpu = measure_cpu(args, proxy_core, load_cores)
    instructions = measure_instructions(args, proxy_core, load_cores) if args.instructions else {}
    load_after = os.getloadavg()
    head = (
        f"each proxy alone on CPU {proxy_core}, wrk and the mock upstream on CPU {','.join(map(str, load_cores))}; "
        f"cpu: ms per request (/proc), wrk {args.seconds:g} s a cell × {args.rounds} rounds pooled; "
        f"M instr: millions of instructions per request (callgrind, every thread, {args.requests} requests at c=1)"
    )
    lines = [head, "", *table(args, cpu, instructions)]
    lines.append(f"\n{time.monotonic() - started:.0f} s; load average {load_before:.2f} at the start, {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} at the end.")
    return print_table(__file__, "\n".join(lines).split("\n"), args.save)


if __name__ == "__main__":
    raise SystemExit(main())
