"""Instructions per request of the proxy (callgrind), against the same code at other git revisions (issue #19).

Wall-clock CPU on a shared machine moves by ±30 % between minutes; instruction
counts repeat to ~1 %. Each tree's ``pinch-router serve`` (the shipped config,
as ``bench_proxy --pin`` runs it: every stage, classification-cache hits,
decision log, access log, metrics) runs under ``valgrind --tool=callgrind``
with instrumentation off; per body of ``bench_proxy --pin`` (small chat, a
transcript within pinch's budget, one pinch compresses) it answers
``--warmup`` requests one at a time, then instrumentation is switched on and
the next ``--requests`` are counted (the writer threads' work for them
included). The same body each time, as an agent's later turns resend their
history: the session's ledger is warm and reapplied. ``--floor`` adds the
pass-through floor (``bench/floor_proxy.py``) measured the same way.

Each ``--against`` revision is exported (``git archive``) and measured by the
same code, one after the other. Needs valgrind (``apt-get install valgrind``);
about a minute per tree.

    .venv/bin/python -m bench.bench_instructions [--against main] [--requests 40] [--warmup 40] [--floor]
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from bench.bench_proxy import PIN_BODIES, shipped_sections
from bench.bench_recording import WORKTREE, export
from bench.harness import ROOT, free_port, mock_upstream, wait_for_port, write_config

FLOOR = "floor"


def post(port: int, body: bytes, requests: int) -> None:
    """``requests`` POSTs of ``body``, one at a time on one keep-alive connection; any answer but 200 stops the bench."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        for _ in range(requests):
            connection.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
            answer = connection.getresponse()
            data = answer.read()
            if answer.status != 200:
                raise RuntimeError(f"status {answer.status}: {data[:300]!r}")
    finally:
        connection.close()


def callgrind(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True)


def dumped_instructions(out: Path, label: str, timeout: float = 60.0) -> int:
    """The instruction total of the dump triggered as ``label`` (callgrind writes it asynchronously)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in out.parent.glob(out.name + "*"):
            text = path.read_text(errors="replace")
            if f"Trigger: dump {label}\n" in text:
                for line in text.splitlines():
                    if line.startswith("summary:"):
                        return int(line.split()[1])
        time.sleep(0.2)
    raise RuntimeError(f"callgrind wrote no dump {label!r}")


def measure(target: str, tree: Path, scratch: Path, requests: int, warmup: int) -> dict[str, float]:
    """Instructions per request of one tree's proxy (or the floor) on each body."""
    upstream_port, port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{upstream_port}/v1"
    work = Path(tempfile.mkdtemp(dir=scratch))
    config = write_config(work / "bench.yaml", port, upstream, **shipped_sections(work / "decisions.sqlite3"))
    if target == FLOOR:
        command = [sys.executable, str(ROOT / "bench" / "floor_proxy.py"), "--port", str(port), "--upstream", upstream]
    else:
        command = [sys.executable, "-m", "router", "serve", "--config", str(config)]
    out = work / "callgrind.out"
    log = (work / "server.log").open("wb")
    mock = subprocess.Popen(mock_upstream(upstream_port), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}", *command],
        cwd=tree, env={**os.environ, "PYTHONHASHSEED": "0"}, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    per_request: dict[str, float] = {}
    try:
        wait_for_port(upstream_port, process=mock)
        wait_for_port(port, timeout=300, process=server)
        for index, (name, make) in enumerate(PIN_BODIES.items()):
            body = orjson.dumps({**make(), "stream": False})
            post(port, body, warmup)
            callgrind(server.pid, "--instr=on")
            callgrind(server.pid, "--zero")
            post(port, body, requests)
            time.sleep(0.5)  # the writer threads' batches for these requests
            label = f"body{index}"
            callgrind(server.pid, f"--dump={label}")
            callgrind(server.pid, "--instr=off")
            per_request[name] = dumped_instructions(out, label) / requests
    finally:
        for process in (server, mock):
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        log.close()
    return per_request


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", default="main", help="comma-separated git revisions to compare with the working tree")
    parser.add_argument("--requests", type=int, default=40, help="requests counted per body")
    parser.add_argument("--warmup", type=int, default=40, help="requests per body before counting")
    parser.add_argument("--floor", action="store_true", help="also measure the pass-through floor")
    args = parser.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("needs valgrind with callgrind_control (apt-get install valgrind)", file=sys.stderr)
        return 2
    refs = [r for r in args.against.split(",") if r] + [WORKTREE]
    targets = ([FLOOR] if args.floor else []) + refs
    with tempfile.TemporaryDirectory() as tmp:
        trees = {ref: ROOT if ref in (WORKTREE, FLOOR) else export(ref, Path(tmp)) for ref in targets}
        scratch = Path(tmp) / "scratch"
        scratch.mkdir()
        results = {}
        for target in targets:
            print(f"measuring {target} …", file=sys.stderr, flush=True)
            results[target] = measure(target, trees[target], scratch, args.requests, args.warmup)
    print(f"M instructions per request (callgrind, concurrency 1, {args.requests} requests per body after {args.warmup} of warm-up)\n")
    first = refs[0]
    header = f"{'body':<28}" + "".join(f"{t:>14}" for t in targets) + f"{'vs ' + first:>16}" + (f"{'vs floor':>10}" if args.floor else "")
    print(header)
    print("-" * len(header))
    for name in PIN_BODIES:
        cells = "".join(f"{results[t][name] / 1e6:>14.3f}" for t in targets)
        change = results[WORKTREE][name] / results[first][name] - 1
        line = f"{name:<28}{cells}{change:>+15.1%}"
        if args.floor:
            line += f"{results[WORKTREE][name] / results[FLOOR][name]:>9.2f}×"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
