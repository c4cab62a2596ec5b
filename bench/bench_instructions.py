"""Instructions per request of pinch-router and of the floor, counted by callgrind (issue #19).

Wall clock on a shared machine moves by ±30 % between minutes; instruction counts
repeat far better, so each change to the fixed cost per request is judged by these.
The proxy measured runs under ``valgrind --tool=callgrind`` with counting off,
pinned to one CPU (the mock upstream and the load on the other(s)); after a
warm-up counting is switched on (``callgrind_control -i on``), a fixed number of
requests is sent one at a time, and the total over every thread of the process
(so the decision-log and log writer threads' recording is included) is divided
by that number. pinch-router runs the shipped config as ``bench_proxy --pin`` does.
The total moves by ~±1 % between runs with how the writer threads batch; the event
loop's thread alone, printed beside it, repeats to ~±0.3 % and is what tells a
change to the request path. The same body every time, as an agent's later turns
resend their history: the session's ledger is warm and reapplied. ``--keep DIR``
leaves callgrind's files for ``callgrind_annotate``; ``--tree DIR`` serves another
source tree; ``--against REV...`` measures each git revision too (exported with
``git archive``, served by the same bench), one after the other, in the same run.
``--parts`` measures the shipped chain with parts of it taken away (``PARTS``), each in the
same run: where a request's instructions go, stage by stage and beside the recording.

    .venv/bin/python -m bench.bench_instructions [--target pinch-router floor] [--body small within pinched] [--requests 300] [--against main] [--parts]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from bench.bench_proxy import PIN_BODIES, shipped_sections, target_urls
from bench.bench_recording import export
from bench.harness import ROOT, drive, free_port, mock_upstream, proxy, spawn, write_config

BODIES = dict(zip(("small", "within", "pinched"), PIN_BODIES))  # short name → bench_proxy's body name
STARTUP_SECONDS = 180.0  # Python under callgrind starts ~50× slower
WRITER_SETTLE_SECONDS = 3.0  # > the decision log's flush interval (0.5 s) at callgrind's pace
GATE_AND_FORWARD = ["capability-gate", "upstream-forward"]  # the shortest chain that serves a request


def _chain_without(*stages: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda sections: {**sections, "middlewares": [m for m in sections["middlewares"] if m not in stages]}


def _unrecorded(sections: dict[str, Any]) -> dict[str, Any]:
    """No decision log, no log line a request: the shortest chain's cost without the recording."""
    return {
        **sections,
        "middlewares": GATE_AND_FORWARD,
        "decision_log": {**sections["decision_log"], "enabled": False},
        "logging": {**sections.get("logging", {}), "level": "warning"},
    }


# --parts: label → the shipped sections changed so
PARTS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "shipped chain": lambda sections: sections,
    "without pinch-relevance, pinch-prune": _chain_without("pinch-relevance", "pinch-prune"),
    "without classification-cache, classifier": _chain_without("classification-cache", "classifier"),
    "capability-gate, upstream-forward only": lambda sections: {**sections, "middlewares": GATE_AND_FORWARD},
    "the same, nothing recorded": _unrecorded,
}


def counted(callgrind_out: Path) -> tuple[int, int]:
    """The instructions (Ir) callgrind counted: all threads together, and the event loop's (thread 1) alone."""
    total = loop = 0
    for path in callgrind_out.parent.glob(callgrind_out.name + "*"):
        text = path.read_text(errors="replace")
        match = re.search(r"^totals: (\d+)", text, re.MULTILINE)  # "summary:" may say 0
        if match:
            total += int(match.group(1))
            if re.search(r"^thread: 1$", text, re.MULTILINE):
                loop += int(match.group(1))
    return total, loop


def measure(
    target: str, body: bytes, requests: int, warmup: int, cpu: int, load_cpus: str, tree: Path, keep: Path | None = None,
    part: Callable[[dict[str, Any]], dict[str, Any]] = PARTS["shipped chain"],
) -> tuple[float, float]:
    """Millions of instructions per request of ``target`` (``pinch-router`` or ``floor``) on ``body``: all
    threads, the loop's thread; ``part``: how pinch-router's shipped sections are changed (``PARTS``)."""
    up_port, port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{up_port}/v1"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        if target == "floor":
            command = [sys.executable, str(ROOT / "bench" / "floor_proxy.py"), "--port", str(port), "--upstream", upstream]
        else:
            config = write_config(Path(tmp) / "bench.yaml", port, upstream, **part(shipped_sections(Path(tmp) / "decisions.sqlite3")))
            command = proxy(config)
        valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes", f"--callgrind-out-file={out}"]
        env = {"PYTHONHASHSEED": "0"}
        with (
            spawn(["taskset", "-c", load_cpus, *mock_upstream(up_port)], up_port),
            spawn(["taskset", "-c", str(cpu), *valgrind, *command], port, env=env, cwd=tree, startup_seconds=STARTUP_SECONDS) as process,
        ):
            url = target_urls(up_port, port, port)["floor"]
            asyncio.run(drive(url, body, warmup, 1, False))
            # the warm-up's rows written before counting starts: the decision log's first batch prepares
            # its INSERT (the half-hour sums' triggers compiled in: ~40 M instructions, once a process),
            # which landed in the count now and then and moved "all threads" by ~0.4 M a request
            time.sleep(WRITER_SETTLE_SECONDS)
            subprocess.run(["callgrind_control", "-i", "on", str(process.pid)], check=True, capture_output=True)
            load = asyncio.run(drive(url, body, requests, 1, False))
            subprocess.run(["callgrind_control", "-i", "off", str(process.pid)], check=True, capture_output=True)
            # dumped now: a server slow to stop under valgrind may be killed before it writes its counts
            subprocess.run(["callgrind_control", "-d", str(process.pid)], check=True, capture_output=True)
            if load.errors:
                raise RuntimeError(f"{target}: {load.errors} of {requests} requests failed")
        instructions, on_loop = counted(out)
        if keep is not None:  # for callgrind_annotate
            keep.mkdir(parents=True, exist_ok=True)
            for path in out.parent.glob(out.name + "*"):
                shutil.copy(path, keep / f"{target}-{path.name}")
        if not instructions:
            raise RuntimeError(f"{target}: callgrind counted nothing (is the counting toggled by pid?)")
        return instructions / requests / 1e6, on_loop / requests / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", nargs="+", choices=["pinch-router", "floor"], default=["pinch-router"])
    parser.add_argument("--body", nargs="+", choices=list(BODIES), default=["small"])
    parser.add_argument("--requests", type=int, default=300, help="requests counted, one at a time")
    parser.add_argument("--warmup", type=int, default=100, help="requests sent before counting starts")
    parser.add_argument("--keep", type=Path, help="copy callgrind's output files here (for callgrind_annotate)")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the source tree whose `router` is served")
    parser.add_argument("--against", nargs="+", default=[], metavar="REV", help="git revisions whose pinch-router is measured too")
    parser.add_argument("--parts", action="store_true", help="also pinch-router with parts of its chain taken away (PARTS)")
    args = parser.parse_args()
    if shutil.which("valgrind") is None or shutil.which("taskset") is None:
        print("needs valgrind (apt-get install valgrind) and taskset", file=sys.stderr)
        return 2
    cpus = sorted(os.sched_getaffinity(0))
    cpu, load_cpus = cpus[-1], ",".join(map(str, cpus[:-1] or cpus))
    os.sched_setaffinity(0, [int(c) for c in load_cpus.split(",")])
    with tempfile.TemporaryDirectory() as scratch:
        trees = [("pinch-router", args.tree.resolve())] if "pinch-router" in args.target else []
        trees += [(f"pinch-router@{rev}", export(rev, Path(scratch))) for rev in args.against]
        targets = [("floor", args.tree.resolve())] if "floor" in args.target else []
        print(f"{'body':<28} {'target':<42} {'M instructions / request':>25} {'on the loop thread':>19}")
        for short in args.body:
            name = BODIES[short]
            body = orjson.dumps({**PIN_BODIES[name](), "stream": False})
            for label, tree in targets + trees:
                target = "floor" if label == "floor" else "pinch-router"
                keep = args.keep / label.replace("@", "_") if args.keep else None
                total, on_loop = measure(target, body, args.requests, args.warmup, cpu, load_cpus, tree, keep)
                print(f"{name:<28} {label:<42} {total:>25.4f} {on_loop:>19.4f}", flush=True)
            for label, part in list(PARTS.items())[1:] if args.parts else []:
                total, on_loop = measure("pinch-router", body, args.requests, args.warmup, cpu, load_cpus, args.tree.resolve(), part=part)
                print(f"{name:<28} {label:<42} {total:>25.4f} {on_loop:>19.4f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
