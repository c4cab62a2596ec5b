"""Bytecodes per request of pinch-router and of the floor, by package and by module (issue #19).

Where bench_instructions says how much a request costs, this says where the Python
part of it runs, exactly and repeatably: each target runs under
:mod:`bench.bytecode_counter`, gets a warm-up, then a fixed number of requests one
at a time are counted, every thread included. Same shipped config and bodies as
``bench_proxy --pin``. The counter slows the process ~10×, so the numbers say what
runs, not how long it takes; the C under each bytecode (dict lookups, allocation,
``object.__setattr__`` of a frozen dataclass, orjson, aiohttp's C parser and
writer) is not in them.

    .venv/bin/python -m bench.bench_bytecodes [--body small] [--wire chat] [--served pass] [--requests 200] [--top 40]

``--wire`` sends the same content as another client API's body (:mod:`bench.wire_bodies`),
``--served`` to a provider of its own format (``pass``) or translated to chat (``to-chat``),
configured as bench_wires does; the floor forwards the same bytes to the same path.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from bench.bench_instructions import BODIES
from bench.bench_proxy import PIN_BODIES, shipped_sections
from bench.bench_wires import config_for
from bench.wire_bodies import WIRES, as_wire, path_of
from bench.harness import ROOT, drive, free_port, mock_upstream, proxy, spawn, wait_for_port, write_config


def counted(target: str, body: bytes, requests: int, warmup: int, wire: str = "chat", serving: str | None = None) -> dict[str, list[int]]:
    """``file:line:function`` → [bytecodes, entries] over ``requests`` requests of ``target``;
    ``serving``: the provider format of bench_wires' config (None: bench_proxy's shipped one)."""
    up_port, port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{up_port}/v1"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bytecodes.json"
        if target == "floor":
            program = [str(ROOT / "bench" / "floor_proxy.py"), "--port", str(port), "--upstream", upstream]
        else:
            if serving is None:
                config = write_config(Path(tmp) / "bench.yaml", port, upstream, **shipped_sections(Path(tmp) / "decisions.sqlite3"))
            else:
                config = config_for(Path(tmp) / "bench.yaml", port, f"http://127.0.0.1:{up_port}", serving, Path(tmp) / "decisions.sqlite3")
            program = proxy(config)[1:]
        with spawn(mock_upstream(up_port), up_port):
            process = subprocess.Popen(
                [sys.executable, "-m", "bench.bytecode_counter", str(out), *program],
                cwd=ROOT,
                env={**os.environ, "PYTHONHASHSEED": "0"},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                wait_for_port(port, 60, process)
                url = f"http://127.0.0.1:{port}{path_of(wire)}"
                asyncio.run(drive(url, body, warmup, 1, False))
                process.send_signal(signal.SIGUSR1)
                time.sleep(0.2)
                load = asyncio.run(drive(url, body, requests, 1, False))
                time.sleep(0.5)  # the writer threads' last batch
                process.send_signal(signal.SIGUSR2)
                for _ in range(100):
                    if out.exists() and out.stat().st_size:
                        break
                    time.sleep(0.1)
                time.sleep(0.2)
            finally:
                process.terminate()
                process.wait(30)
        if load.errors:
            raise RuntimeError(f"{target}: {load.errors} of {requests} requests failed")
        return json.loads(out.read_text())


def area(path: str) -> str:
    """The package a function belongs to, or the module for the proxy's own code."""
    if path == "<string>":
        return "dataclasses' generated __init__ etc."
    if "site-packages/" in path:
        return path.split("site-packages/")[1].split("/")[0]
    if path.startswith(str(ROOT)):
        return path[len(str(ROOT)) + 1 :]
    if "/lib/python3" in path:
        module = path.split("/lib/python3")[1].split("/", 1)[1]
        return "stdlib " + module.split("/")[0]
    return path or "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--body", choices=list(BODIES), default="small")
    parser.add_argument("--wire", choices=list(WIRES), default="chat", help="the client API the content is sent as")
    parser.add_argument("--served", choices=["pass", "to-chat"], default=None, help="configured as bench_wires: to the wire's own format or to chat")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--top", type=int, default=40, help="functions listed, most bytecodes first")
    args = parser.parse_args()
    body = orjson.dumps(as_wire({**PIN_BODIES[BODIES[args.body]](), "stream": False}, args.wire))
    serving = None if args.served is None and args.wire == "chat" else (args.wire if args.served != "to-chat" else "chat")
    per_area: dict[str, collections.Counter[str]] = {}
    functions: dict[str, dict[str, list[int]]] = {}
    for target in ("pinch-router", "floor"):
        functions[target] = counted(target, body, args.requests, args.warmup, args.wire, serving)
        tally: collections.Counter[str] = collections.Counter()
        for key, (n, _) in functions[target].items():
            tally[area(key.rsplit(":", 2)[0])] += n
        per_area[target] = tally
    n = args.requests
    served = f", {args.wire} {'to chat' if serving == 'chat' and args.wire != 'chat' else 'pass'}" if serving is not None else ""
    print(f"bytecodes per request, {BODIES[args.body]}{served}, {n} requests one at a time after {args.warmup}")
    print(f"{'package or module':<48} {'pinch-router':>13} {'floor':>8}")
    names = sorted(set(per_area["pinch-router"]) | set(per_area["floor"]), key=lambda a: -per_area["pinch-router"][a] - per_area["floor"][a])
    for name in names:
        ours, floor = per_area["pinch-router"][name] / n, per_area["floor"][name] / n
        if ours >= 20 or floor >= 20:
            print(f"{name[:48]:<48} {ours:>13,.0f} {floor:>8,.0f}")
    print(f"{'total':<48} {sum(per_area['pinch-router'].values()) / n:>13,.0f} {sum(per_area['floor'].values()) / n:>8,.0f}")
    print(f"\npinch-router's functions, most bytecodes a request first ({'bytecodes':>9}, entries):")
    ranked = sorted(functions["pinch-router"].items(), key=lambda item: -item[1][0])[: args.top]
    for key, (bytecodes, entries) in ranked:
        path, line, name = key.rsplit(":", 2)
        where = path.split("site-packages/")[1] if "site-packages/" in path else area(path)
        print(f"  {bytecodes / n:>9,.1f} {entries / n:>6.1f}  {where}:{line} {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
