"""Requests per second per core against the peers: Portkey, claude-code-router, LiteLLM (issue #48).

Each peer is installed from its registry (pinned below) into a cache folder outside the
repository (``--prefix``, default ~/.cache/pinch-router-bench): LiteLLM's ``litellm[proxy]``
in a venv of its own, Portkey's gateway and claude-code-router with npm. A peer that cannot
be installed or started, or that does not answer a first request, is skipped with the reason.

Every server measured runs alone on one core (``taskset``): pinch-router on config.yaml's chain
and settings (its models replaced by one on the mock: bench_proxy's ``--pin`` config), each peer
with its defaults routing one model to the mock, and the floor (bench/floor_proxy.py, a bare
aiohttp pass-through). The load (wrk when installed, else this process) and the one mock
upstream for all (bench/memo_upstream.py: a resent body answered from memory, so the load core
does not run out first) share the other core. How each peer is pointed at the mock:

* LiteLLM: a config.yaml with the model ``openai/mock`` and ``api_base`` the mock; the chat
  wire on /v1/chat/completions, the Messages wire on its /v1/messages (translated to chat).
* Portkey: the chat wire with ``x-portkey-provider: openai`` and ``x-portkey-custom-host``.
* claude-code-router: its config.json in a temporary HOME, one provider whose
  ``api_base_url`` is the mock's chat endpoint: Messages in, chat out, as Claude Code uses it.

pinch-router serves chat passed through and Messages translated to chat, as the peers do.
Bodies: bench_proxy's ``--pin`` ones (a small chat, a 62 KB transcript, a 230 KB one pinch
compresses), in each wire's shape (bench/wire_bodies.py), non-streamed, at concurrency 1 and 16.

Printed: requests per second per core of each server (answered requests / CPU seconds the
server's processes used, from /proc, pooled over the rounds), the ratio ours / theirs per cell
(the target: ≥ 3×), pinch-router's CPU per request against the floor's, and the p50 added at
c=1 over the mock straight (the target: ≤ 1 ms for the small body). A cell a peer answers with
errors is "—". "busy" is the share of its core the server used at c=16: below ~95 % the load
side, not the server, set the pace. The machine's load average is printed: other tenants on the
cores make every figure noisy, ratios less so.

    .venv/bin/python -m bench.bench_peers [--seconds 4] [--rounds 2] [--peers litellm portkey ccr] [--prefix DIR] [--tree DIR] [--save]
    .venv/bin/python -m bench.bench_peers --quick    # a smoke run: the small body, 1 s cells, one round
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson
import yaml

from bench.bench_proxy import PIN_BODIES, shipped_sections
from bench.harness import ROOT, Cell, drive, free_port, memo_upstream, print_table, proxy, spawn, tree_cpu_seconds, wrk_cell, write_config
from bench.wire_bodies import as_wire, path_of

LITELLM_VERSION = "1.108.7"  # the newest 1.108.x whose [proxy] extra installs: .8 to .14 pin litellm-enterprise or litellm-proxy-extras .post releases the registry lacks
PORTKEY_VERSION = "1.15.2"  # @portkey-ai/gateway
CCR_VERSION = "2.0.0"  # @musistudio/claude-code-router
DEFAULT_PREFIX = Path.home() / ".cache" / "pinch-router-bench"

BODIES = dict(zip(("small", "62 KB", "230 KB"), PIN_BODIES.values()))
CONCURRENCY = (1, 16)
WIRES = ("chat", "messages")
TARGET_RATIO = 3.0
TARGET_ADDED_P50_MS = 1.0
STARTUP_SECONDS = 180.0  # LiteLLM imports for a long while on a busy core


class Unavailable(Exception):
    """Why a peer is skipped: it did not install, start, or answer."""


@dataclass(frozen=True)
class Target:
    """One server measured: where each wire it serves is posted, with what headers and model name."""

    name: str
    port: int
    pid: int | None  # None: the mock itself, whose CPU is not measured
    paths: dict[str, str]
    model: str
    headers: dict[str, str] = field(default_factory=dict)

    def url(self, wire: str) -> str:
        return f"http://127.0.0.1:{self.port}{self.paths[wire]}"


# --- installing the peers ---------------------------------------------------------------------


def run_install(args: list[str], cwd: Path, what: str) -> None:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-2:])
        raise Unavailable(f"{what} did not install: {tail}")


def install_litellm(prefix: Path) -> Path:
    """``litellm[proxy]`` in a venv of its own; its ``litellm`` command."""
    venv = prefix / f"litellm-{LITELLM_VERSION}"
    command = venv / "bin" / "litellm"
    if not command.exists():
        run_install([sys.executable, "-m", "venv", "--clear", str(venv)], prefix, "LiteLLM's venv")
        run_install([str(venv / "bin" / "pip"), "install", "-q", f"litellm[proxy]=={LITELLM_VERSION}"], prefix, f"litellm[proxy]=={LITELLM_VERSION}")
    return command


def install_npm(prefix: Path, package: str, version: str, entry: str) -> Path:
    """``package@version`` installed with npm in a folder of its own; the file ``entry`` of it node runs."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        raise Unavailable("node and npm are not installed")
    folder = prefix / f"{package.rsplit('/', 1)[-1]}-{version}"
    script = folder / "node_modules" / package / entry
    if not script.exists():
        folder.mkdir(parents=True, exist_ok=True)
        run_install(["npm", "install", "--prefix", str(folder), "--no-audit", "--no-fund", f"{package}@{version}"], folder, f"{package}@{version}")
    if not script.exists():
        raise Unavailable(f"{package}@{version} has no {entry}")
    return script


# --- starting the servers ---------------------------------------------------------------------

Starter = Callable[[contextlib.ExitStack, Path, str, list[str]], Target]


def start_ours(stack: contextlib.ExitStack, tmp: Path, mock: str, on_core: list[str], tree: Path = ROOT) -> Target:
    """pinch-router on config.yaml's chain and settings, serving ``tree``'s ``router`` (a revision's copy: --tree)."""
    port = free_port()
    config = write_config(tmp / "pinch-router.yaml", port, f"{mock}/v1", **shipped_sections(tmp / "decisions.sqlite3"))
    process = stack.enter_context(spawn([*on_core, *proxy(config)], port, cwd=tree, log_path=tmp / "pinch-router.log"))
    return Target("pinch-router", port, process.pid, {wire: path_of(wire) for wire in WIRES}, "auto")


def start_floor(stack: contextlib.ExitStack, tmp: Path, mock: str, on_core: list[str]) -> Target:
    port = free_port()
    floor = [sys.executable, "bench/floor_proxy.py", "--port", str(port), "--upstream", f"{mock}/v1"]
    process = stack.enter_context(spawn([*on_core, *floor], port, log_path=tmp / "floor.log"))
    return Target("floor", port, process.pid, {wire: path_of(wire) for wire in WIRES}, "mock")


def peer_starter(prefix: Path, peer: str) -> Starter:
    """How to install and start ``peer``, pointed at the mock (raises :class:`Unavailable` from the starter)."""

    def litellm(stack: contextlib.ExitStack, tmp: Path, mock: str, on_core: list[str]) -> Target:
        command = install_litellm(prefix)
        port = free_port()
        config = tmp / "litellm.yaml"
        model = {"model_name": "bench-model", "litellm_params": {"model": "openai/mock", "api_base": f"{mock}/v1", "api_key": "none"}}
        config.write_text(yaml.safe_dump({"model_list": [model], "litellm_settings": {"telemetry": False}}))
        # no download of the price list at start; no master key, as pinch-router's shipped config has no keys
        # (1.108 refuses to start without one unless told so)
        env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR", "LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY": "true"}
        args = [*on_core, str(command), "--config", str(config), "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"]
        process = stack.enter_context(spawn(args, port, env=env, startup_seconds=STARTUP_SECONDS, log_path=tmp / "litellm.log"))
        paths = {"chat": "/v1/chat/completions", "messages": "/v1/messages"}
        return Target(f"LiteLLM {LITELLM_VERSION}", port, process.pid, paths, "bench-model")

    def portkey(stack: contextlib.ExitStack, tmp: Path, mock: str, on_core: list[str]) -> Target:
        script = install_npm(prefix, "@portkey-ai/gateway", PORTKEY_VERSION, "build/start-server.js")
        port = free_port()
        args = [*on_core, "node", str(script), f"--port={port}", "--headless"]
        process = stack.enter_context(spawn(args, port, startup_seconds=STARTUP_SECONDS, log_path=tmp / "portkey.log"))
        headers = {"x-portkey-provider": "openai", "x-portkey-custom-host": f"{mock}/v1", "Authorization": "Bearer none"}
        return Target(f"Portkey {PORTKEY_VERSION}", port, process.pid, {"chat": "/v1/chat/completions"}, "mock", headers)

    def ccr(stack: contextlib.ExitStack, tmp: Path, mock: str, on_core: list[str]) -> Target:
        script = install_npm(prefix, "@musistudio/claude-code-router", CCR_VERSION, "dist/cli.js")
        port = free_port()
        home = tmp / "ccr-home"
        (home / ".claude-code-router").mkdir(parents=True)
        provider = {"name": "mock", "api_base_url": f"{mock}/v1/chat/completions", "api_key": "none", "models": ["mock"]}
        config = {"LOG": False, "HOST": "127.0.0.1", "PORT": port, "APIKEY": "", "Providers": [provider], "Router": {"default": "mock,mock"}}
        (home / ".claude-code-router" / "config.json").write_text(json.dumps(config))
        args = [*on_core, "node", str(script), "start"]
        process = stack.enter_context(spawn(args, port, env={"HOME": str(home)}, startup_seconds=STARTUP_SECONDS, log_path=tmp / "ccr.log"))
        return Target(f"claude-code-router {CCR_VERSION}", port, process.pid, {"messages": "/v1/messages"}, "claude-sonnet-4-5")

    return {"litellm": litellm, "portkey": portkey, "ccr": ccr}[peer]


PEERS = ("portkey", "ccr", "litellm")


def body_for(name: str, wire: str, model: str) -> bytes:
    return orjson.dumps(as_wire({**BODIES[name](), "model": model, "stream": False}, wire))


async def probe(target: Target, wire: str) -> str | None:
    """What is wrong with ``target``'s answer to one small request of ``wire``, or None."""
    timeout = aiohttp.ClientTimeout(total=60)
    headers = {"Content-Type": "application/json", **target.headers}
    try:
        async with aiohttp.ClientSession(timeout=timeout) as http, http.post(target.url(wire), data=body_for("small", wire, target.model), headers=headers) as response:
            text = await response.text()
    except (aiohttp.ClientError, TimeoutError) as exc:
        return f"{wire}: {type(exc).__name__} {exc}"
    expected = '"choices"' if wire == "chat" else '"content"'
    return None if response.status == 200 and expected in text else f"{wire}: {response.status} {text[:300]}"


def start_targets(stack: contextlib.ExitStack, tmp: Path, mock: str, on_core: list[str], args: argparse.Namespace) -> tuple[list[Target], list[str]]:
    """pinch-router, the floor and every peer that starts and answers; the reasons of those skipped."""
    targets = [start_ours(stack, tmp, mock, on_core, args.tree), start_floor(stack, tmp, mock, on_core)]
    skipped: list[str] = []
    for peer in args.peers:
        inner = contextlib.ExitStack()
        try:
            target = peer_starter(args.prefix, peer)(inner, tmp, mock, on_core)
            problems = [p for p in (asyncio.run(probe(target, wire)) for wire in target.paths) if p]
            if problems:
                raise Unavailable("its first answer is not one: " + "; ".join(problems))
        except (Unavailable, RuntimeError) as exc:
            inner.close()
            skipped.append(f"{peer} skipped: {exc}")
            print(skipped[-1], file=sys.stderr)
            continue
        stack.enter_context(inner)
        targets.append(target)
    return targets, skipped


# --- measuring --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One target's requests in one cell, pooled over the rounds: the load, and the CPU seconds its server used."""

    cell: Cell
    cpu_seconds: float | None

    @property
    def per_core(self) -> float | None:
        """Answered requests per CPU second of the server: its requests per second on one whole core (None: it
        answered none, or some with errors)."""
        return self.cell.requests / self.cpu_seconds if self.cpu_seconds and self.cell.requests and not self.cell.errors else None

    @property
    def busy(self) -> float | None:
        """The share of its core the server used."""
        return self.cpu_seconds / self.cell.seconds if self.cpu_seconds is not None and self.cell.seconds else None


def pool(runs: list[Run]) -> Run:
    """Rounds of one cell as one: requests, errors, seconds and CPU summed; the median round's percentiles."""
    middle = sorted(runs, key=lambda r: r.cell.p50_ms)[len(runs) // 2].cell
    cells = [r.cell for r in runs]
    cpu = [r.cpu_seconds for r in runs]
    return Run(
        Cell(sum(c.requests for c in cells), sum(c.errors for c in cells), sum(c.seconds for c in cells), middle.p50_ms, middle.p99_ms),
        sum(c for c in cpu if c is not None) if None not in cpu else None,
    )


def load_cell(target: Target, wire: str, body: bytes, concurrency: int, args: argparse.Namespace) -> Run:
    """A short warm-up, then one measured cell of ``target``; its CPU from /proc before and after."""
    url = target.url(wire)
    if args.use_wrk:
        wrk_cell(url, body, 1, concurrency, target.headers)
    else:
        asyncio.run(drive(url, body, max(20, args.requests // 10), concurrency, False, target.headers))
    before = tree_cpu_seconds(target.pid) if target.pid else None
    if args.use_wrk:
        cell = wrk_cell(url, body, args.seconds, concurrency, target.headers)
    else:
        cell = Cell.of(asyncio.run(drive(url, body, args.requests, concurrency, False, target.headers)))
    after = tree_cpu_seconds(target.pid) if target.pid else None
    return Run(cell, after - before if before is not None and after is not None else None)


Key = tuple[str, str, str, int]  # (wire, target name, body, concurrency)


def measure(targets: list[Target], args: argparse.Namespace) -> dict[Key, Run]:
    runs: dict[Key, list[Run]] = {}
    for round_ in range(args.rounds):
        for body in args.body:
            for concurrency in CONCURRENCY:
                # every other round in reverse: a machine that drifts over a round weighs on all alike
                order = [(wire, t) for t in targets for wire in WIRES if wire in t.paths]
                for wire, target in order if round_ % 2 == 0 else order[::-1]:
                    if target.pid is None and concurrency != 1:
                        continue  # the mock straight: only the c=1 latency is needed
                    sent = body_for(body, wire, target.model)
                    runs.setdefault((wire, target.name, body, concurrency), []).append(load_cell(target, wire, sent, concurrency, args))
    return {key: pool(measured) for key, measured in runs.items()}


# --- the table --------------------------------------------------------------------------------

OURS, FLOOR, DIRECT = "pinch-router", "floor", "mock straight"


def ratio(ours: Run | None, theirs: Run | None) -> float | None:
    """Our requests per second per core over theirs; None where either could not serve the cell."""
    if ours is None or theirs is None or ours.per_core is None or theirs.per_core is None:
        return None
    return ours.per_core / theirs.per_core


def times(value: float | None) -> str:
    return f"{value:.2f}×" if value is not None else "—"


def summary(results: dict[Key, Run], bodies: list[str], peers: dict[str, str]) -> tuple[list[str], list[str]]:
    """The issue's table (ours / theirs per cell, CPU vs the floor) and the cells below the target.

    ``peers``: {target name: the wire it is compared on, or "both"}.
    """
    columns = [f"vs {name} ({'chat / Messages' if wire == 'both' else 'Messages' if wire == 'messages' else 'chat'})" for name, wire in peers.items()]
    columns.append("CPU vs the floor (chat / Messages)")
    lines = ["| " + " | ".join(["body, c", *columns]) + " |", "|---" * (len(columns) + 1) + "|"]
    below: list[str] = []
    for body in bodies:
        for concurrency in CONCURRENCY:
            cells = []
            for name, on in peers.items():
                wires = WIRES if on == "both" else (on,)
                figures = [ratio(results.get((wire, OURS, body, concurrency)), results.get((wire, name, body, concurrency))) for wire in wires]
                cells.append(" / ".join(times(f) for f in figures))
                below += [f"{body}, c={concurrency} vs {name} ({wire}): {f:.2f}×" for wire, f in zip(wires, figures) if f is not None and f < TARGET_RATIO]
            floor = [ratio(results.get((wire, FLOOR, body, concurrency)), results.get((wire, OURS, body, concurrency))) for wire in WIRES]
            cells.append(" / ".join(times(f) for f in floor))
            lines.append("| " + " | ".join([f"{body}, {concurrency}", *cells]) + " |")
    return lines, below


def details(results: dict[Key, Run], names: list[str], bodies: list[str]) -> list[str]:
    """Every target's figures per cell: req/s per core, CPU ms a request, busy share, p50 and the p50 added over the mock."""
    head = f"{'wire':<9} {'body':<7} {'c':>3} {'target':<26} {'req/s/core':>10} {'cpu ms/req':>10} {'busy':>5} {'req/s':>7} {'p50 ms':>8} {'+p50 ms':>8} {'errors':>6}"
    lines = [head, "-" * len(head)]
    for wire in WIRES:
        for body in bodies:
            direct = results.get((wire, DIRECT, body, 1))
            for concurrency in CONCURRENCY:
                for name in names:
                    run = results.get((wire, name, body, concurrency))
                    if run is None:
                        continue
                    cpu_ms = 1000 * run.cpu_seconds / run.cell.requests if run.cpu_seconds and run.cell.requests else None
                    added = run.cell.p50_ms - direct.cell.p50_ms if direct is not None and concurrency == 1 and name != DIRECT else None
                    lines.append(
                        f"{wire:<9} {body:<7} {concurrency:>3} {name:<26} {(f'{run.per_core:,.0f}' if run.per_core else '—'):>10} "
                        f"{(f'{cpu_ms:.3f}' if cpu_ms else '-'):>10} {(f'{run.busy:.0%}' if run.busy is not None else '-'):>5} {run.cell.rps:>7,.0f} "
                        f"{run.cell.p50_ms:>8.3f} {(f'{added:.3f}' if added is not None else '-'):>8} {run.cell.errors:>6}"
                    )
            lines.append("")
    return lines


def added_p50(results: dict[Key, Run], body: str = "small") -> list[str]:
    """pinch-router's p50 at c=1 over the mock straight's, per wire, against the target (the floor's beside it:
    what a server on the shared core adds whatever it does)."""
    verdicts = []
    for wire in WIRES:
        ours, floor, direct = (results.get((wire, name, body, 1)) for name in (OURS, FLOOR, DIRECT))
        if ours is not None and direct is not None:
            added = ours.cell.p50_ms - direct.cell.p50_ms
            mark = "met" if added <= TARGET_ADDED_P50_MS else "MISSED"
            beside = f", the floor's {floor.cell.p50_ms - direct.cell.p50_ms:.3f} ms" if floor is not None else ""
            verdicts.append(f"added p50 at c=1, {body} body, {wire}: {added:.3f} ms (target ≤ {TARGET_ADDED_P50_MS:g} ms{beside}) {mark}")
    return verdicts


@contextlib.contextmanager
def cores() -> Iterator[tuple[list[str], list[str]]]:
    """The server's core (the last) and the load's (the others) as taskset prefixes; this process moves to the load's."""
    cpus = sorted(os.sched_getaffinity(0))
    server, load = cpus[-1], cpus[:-1]
    os.sched_setaffinity(0, load)
    try:
        yield ["taskset", "-c", str(server)], ["taskset", "-c", ",".join(map(str, load))]
    finally:
        os.sched_setaffinity(0, cpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=4.0, help="with wrk: seconds a cell")
    parser.add_argument("--requests", type=int, default=400, help="without wrk: requests a cell")
    parser.add_argument("--rounds", type=int, default=2, help="rounds pooled, every other one in reverse order")
    parser.add_argument("--body", nargs="+", choices=list(BODIES), default=list(BODIES))
    parser.add_argument("--peers", nargs="*", choices=PEERS, default=list(PEERS))
    parser.add_argument("--prefix", type=Path, default=DEFAULT_PREFIX, help="where the peers are installed (outside the repository)")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the source tree whose `router` is served (bench_recording.export makes one of a revision)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: the small body, 1 s (or 100-request) cells, one round")
    parser.add_argument("--save", action="store_true", help="write the table to bench/results/bench_peers.txt")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.requests, args.rounds, args.body = 1.0, 100, 1, ["small"]
    if len(os.sched_getaffinity(0)) < 2 or shutil.which("taskset") is None:
        print("needs two CPUs and taskset", file=sys.stderr)
        return 2
    args.use_wrk = shutil.which("wrk") is not None
    args.prefix.mkdir(parents=True, exist_ok=True)
    started, load_before = time.monotonic(), os.getloadavg()
    with cores() as (on_server, on_load), tempfile.TemporaryDirectory(prefix="pinch-peers-") as tmp, contextlib.ExitStack() as stack:
        mock_port = free_port()
        stack.enter_context(spawn([*on_load, *memo_upstream(mock_port)], mock_port))
        mock = f"http://127.0.0.1:{mock_port}"
        targets, skipped = start_targets(stack, Path(tmp), mock, on_server, args)
        direct = Target(DIRECT, mock_port, None, {wire: path_of(wire) for wire in WIRES}, "mock")
        results = measure([direct, *targets], args)
    peers = {t.name: "both" if len(t.paths) == 2 else next(iter(t.paths)) for t in targets if t.name not in (OURS, FLOOR)}
    table, below = summary(results, args.body, peers)
    loader = f"wrk, {args.seconds:g} s a cell" if args.use_wrk else f"this process (no wrk), {args.requests} requests a cell"
    load_after = os.getloadavg()
    lines = [
        f"requests per second per core (answered requests / CPU seconds of the server), ours / theirs; each server alone on one core, "
        f"the load ({loader}) and the mock upstream on the other; {args.rounds} round(s) pooled; non-streamed",
        "",
        *table,
        "",
        *details(results, [DIRECT, OURS, FLOOR, *peers], args.body),
        *skipped,
        *(f"below {TARGET_RATIO:g}×: {cell}" for cell in below),
        *added_p50(results),
        f"{len(below)} cell(s) below {TARGET_RATIO:g}×; {time.monotonic() - started:.0f} s; load average {load_before[0]:.2f} at the start, "
        f"{load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} at the end (other processes on the cores: noisy).",
    ]
    return print_table(__file__, lines, args.save)


if __name__ == "__main__":
    raise SystemExit(main())
