"""`serve --workers 2` against one worker, in the same run (issue #48: ≥ 1.8× the requests per second at c=16).

``serve`` on the shipped chain (every stage, decision log, access log, metrics; the state on the
memory backend, each worker its own: ``--allow-split-state``) with ``--workers 1`` and with
``--workers 2``, in turns (``--rounds``, every other round the other first), against the mock
upstream that answers a repeated body from memory (bench/memo_upstream.py), loaded by wrk (one
thread) at ``-c 16`` with bench_proxy's pinned bodies on the chat wire.

On a machine of two cores the load side (wrk, the mock) needs CPU too, and two workers have no
core of their own: nothing is pinned, everything shares the cores, and the requests per second
show what the machine gives, not what the workers could. So beside them, from /proc, for each
server: its CPU (every worker's, the supervisor's) per answered request, and the cores it used on
average (CPU seconds / seconds); and how the kernel spread the connections (SO_REUSEPORT): each
worker's share of the workers' CPU. ``scaling`` is then the requests per second two workers would
give with a core each, against one worker on one: 2 × (one worker's CPU per request) / (two
workers' CPU per request) — 2.00× when a worker costs no more per request beside another.

    .venv/bin/python -m bench.bench_workers [--seconds 5] [--rounds 3] [--body small within] [--tree DIR] [--save]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

from bench.bench_proxy import PIN_BODIES, shipped_sections
from bench.harness import ROOT, Cell, cpu_seconds, free_port, memo_upstream, print_table, proxy, spawn, tree_cpu_seconds, wrk_cell, write_config

BODIES = dict(zip(("small", "within", "pinched"), PIN_BODIES))
TARGET = 1.8
CONCURRENCY = 16


def worker_pids(pid: int) -> list[int]:
    """The processes ``pid`` (the supervisor) started that still run."""
    children: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                children += [int(child) for child in (task / "children").read_text().split()]
    return children


@contextlib.contextmanager
def serving(workers: int, tmp: Path, upstream: str, tree: Path) -> Iterator[tuple[int, int]]:
    """``serve --workers N`` on a free port: (port, the pid of the process started)."""
    port = free_port()
    config = write_config(tmp / f"workers-{workers}.yaml", port, upstream, **shipped_sections(tmp / f"workers-{workers}.sqlite3"))
    with spawn([*proxy(config), "--workers", str(workers), "--allow-split-state"], port, env={"PYTHONHASHSEED": "0"}, cwd=tree) as process:
        if workers > 1:  # the supervisor listens on nothing: wait for every worker
            deadline = time.monotonic() + 30
            while len(worker_pids(process.pid)) < workers and time.monotonic() < deadline:
                time.sleep(0.1)
        yield port, process.pid


def measure(url: str, pid: int, body: bytes, seconds: float) -> tuple[Cell, float, list[float]]:
    """One cell after a warm-up: the load, the server's CPU seconds (every process), each worker's."""
    wrk_cell(url, body, 1, CONCURRENCY)
    workers = worker_pids(pid) or [pid]
    before, each_before = tree_cpu_seconds(pid), [cpu_seconds(w) for w in workers]
    cell = wrk_cell(url, body, seconds, CONCURRENCY)
    after, each_after = tree_cpu_seconds(pid), [cpu_seconds(w) for w in workers]
    if cell.errors or not cell.requests:
        raise RuntimeError(f"{url}: {cell.errors} errors of {cell.requests + cell.errors}")
    return cell, after - before, [b - a for a, b in zip(each_before, each_after)]  # type: ignore[operator]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--body", nargs="+", choices=list(BODIES), default=["small", "within"])
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds of wrk per cell")
    parser.add_argument("--rounds", type=int, default=3, help="rounds pooled (every other one the other server first)")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the source tree whose `router` is served")
    parser.add_argument("--save", action="store_true", help="write the table to bench/results/bench_workers.txt")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        print("needs wrk (apt-get install wrk)", file=sys.stderr)
        return 2
    started_at, load_before = time.monotonic(), os.getloadavg()[0]
    up_port = free_port()
    runs: dict[tuple[str, int], list[tuple[Cell, float, list[float]]]] = {}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        stack.enter_context(spawn(memo_upstream(up_port), up_port))
        upstream = f"http://127.0.0.1:{up_port}/v1"
        servers = {n: stack.enter_context(serving(n, Path(tmp), upstream, args.tree)) for n in (1, 2)}
        for round_ in range(args.rounds):
            for short in args.body:
                body = orjson.dumps({**PIN_BODIES[BODIES[short]](), "stream": False})
                for n in (1, 2) if round_ % 2 == 0 else (2, 1):
                    port, pid = servers[n]
                    runs.setdefault((short, n), []).append(measure(f"http://127.0.0.1:{port}/v1/chat/completions", pid, body, args.seconds))
    head = (
        f"serve --workers 1 and 2 on the shipped chain, the chat wire, wrk -c {CONCURRENCY} (one thread) and the memo mock on the "
        f"same {os.cpu_count()} cores, nothing pinned; {args.seconds:g} s a cell × {args.rounds} rounds pooled; cpu: the server's "
        "(every worker and the supervisor) per answered request; cores: its CPU seconds per second; spread: each worker's share of the workers' CPU"
    )
    lines = [head, "", f"{'body':<8} {'workers':>7} {'req/s':>8} {'vs 1':>6} {'cpu ms':>7} {'cores':>6} {'spread':>11} {'scaling':>8}", "-" * 70]
    verdicts = []
    for short in args.body:
        pooled = {}
        for n in (1, 2):
            cells = runs[short, n]
            requests, seconds = sum(c.requests for c, _, _ in cells), sum(c.seconds for c, _, _ in cells)
            spent = sum(s for _, s, _ in cells)
            each = [sum(w[i] for _, _, w in cells) for i in range(len(cells[0][2]))]
            pooled[n] = (requests / seconds, 1000 * spent / requests, spent / seconds, each)
        for n in (1, 2):
            rps, cpu_ms, cores, each = pooled[n]
            spread = "/".join(f"{w / sum(each):.0%}" for w in each) if n > 1 else "-"
            scaling = f"{2 * pooled[1][1] / cpu_ms:.2f}×" if n > 1 else "-"
            lines.append(f"{short:<8} {n:>7} {rps:>8.0f} {rps / pooled[1][0]:>5.2f}× {cpu_ms:>7.3f} {cores:>6.2f} {spread:>11} {scaling:>8}")
        ratio = pooled[2][0] / pooled[1][0]
        verdicts.append(f"{short}: 2 workers ≥ {TARGET}× one's requests per second at c={CONCURRENCY}: {ratio:.2f}× {'met' if ratio >= TARGET else 'MISSED'} "
                        f"(with a core per worker: {2 * pooled[1][1] / pooled[2][1]:.2f}×)")
    load_after = os.getloadavg()
    lines += ["", *verdicts, f"\n{time.monotonic() - started_at:.0f} s; load average {load_before:.2f} at the start, {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} at the end."]
    return print_table(__file__, lines, args.save)


if __name__ == "__main__":
    raise SystemExit(main())
