"""CPU per request of recording a finished request, against the same code at other git revisions.

Recording is what happens once a request's answer is done: its decision record is
built from the context, the metrics observe it, it is queued for the decision
log (SQLite, written in batches on its own thread) and its access-log line is
written (JSON, by the log-writer thread). This measures exactly that, through
the real objects: a child process serves a few small chat requests through the
full shipped chain (in-process, against the mock upstream, a provider key
configured so the log's redaction runs as in a real deployment), keeps the last
request's context, then records ``--requests`` requests from it (each with its
own request id, drawn as the edge draws them, yielding to the loop every 16 as
served requests do) and
flushes the decision log and the log writer. It reports process CPU per request
(every thread: the loop's share and the writer threads' share). ``--logged N``
first records N requests the same way, unmeasured: a decision log that has been
in use for a while (its indexes no longer fit SQLite's page cache) costs more a
row than a new one, and how much depends on the request ids.

Each ``--against`` revision is exported (``git archive``) to a temporary
directory and measured by the same child code with that tree first on
``sys.path``; the revisions take turns, ``--rounds`` times, and the table shows
each one's median with its difference to the first. CPU time, not wall time,
so other load on the machine moves the figures little; the rounds show how much.

``--proxy`` measures the whole proxy instead, the same way: each revision's
``pinch-router serve`` (full chain, decision log and access log on, the log to
a file) answers ``--requests`` small chat requests at concurrency 16 from the
mock upstream, and the table shows its CPU per answered request (from /proc).
That is what a change to recording buys a served request, other effects
included (the writer threads' hand-overs, caches), with the noise of a loaded
machine: use more rounds.

    .venv/bin/python -m bench.bench_recording [--against main] [--requests 20000] [--rounds 5] [--logged 0] [--proxy]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
WORKTREE = "worktree"  # the working tree as it is, uncommitted changes included
CHAT = {"model": "auto", "messages": [{"role": "user", "content": "hello"}]}
PROVIDER_KEY = "sk-bench-provider-key-0123456789"
YIELD_EVERY = 16


def export(ref: str, into: Path) -> Path:
    """The proxy's packages at ``ref``, unpacked under ``into``."""
    tree = into / ref.replace("/", "_")
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", ref, "router", "middlewares"], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def run_child(tree: Path, requests: int, scratch: Path, logged: int = 0) -> dict[str, float]:
    """One measurement of the tree's code in a fresh process (cwd outside any tree, so ``tree`` is what imports)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", str(requests), "--logged", str(logged)],
        cwd=scratch, env=env, check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    return orjson.loads(done.stdout.splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", default="main", help="comma-separated git revisions to compare with the working tree")
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--logged", type=int, default=0, help="requests recorded into the decision log before measuring")
    parser.add_argument("--proxy", action="store_true", help="measure the whole proxy serving small chat requests")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(orjson.dumps(asyncio.run(measure_here(args.child, args.logged))).decode())
        return 0
    refs = [r for r in args.against.split(",") if r] + [WORKTREE]
    with tempfile.TemporaryDirectory() as tmp:
        trees = {ref: ROOT if ref == WORKTREE else export(ref, Path(tmp)) for ref in refs}
        scratch = Path(tmp) / "scratch"
        scratch.mkdir()
        if args.proxy:
            runs = measure_proxies(trees, args.requests, args.rounds, scratch)
            what, keys = f"the proxy serving {args.requests:,} small chat requests at concurrency {CONCURRENCY}", ("total_us",)
        else:
            runs = {ref: [] for ref in refs}
            for ref in turns(refs, args.rounds):
                runs[ref].append(run_child(trees[ref], args.requests, scratch, args.logged))
            logged = f" into a decision log of {args.logged:,} rows" if args.logged else ""
            what, keys = f"recording {args.requests:,} small chat requests{logged}", ("loop_us", "threads_us", "total_us")
    print(f"{what} × {args.rounds} rounds; CPU µs per request, median (min–max)\n")
    titles = {"loop_us": "on the loop", "threads_us": "writer threads", "total_us": "total"}
    header = f"{'revision':<24} " + " ".join(f"{titles[key]:>20}" for key in keys) + f" {'total vs first':>15}"
    print(header)
    print("-" * len(header))
    first = statistics.median(r["total_us"] for r in runs[refs[0]])
    for ref in refs:
        cells = []
        for key in keys:
            values = [r[key] for r in runs[ref]]
            cells.append(f"{statistics.median(values):>7.1f} ({min(values):.1f}–{max(values):.1f})")
        total = statistics.median(r["total_us"] for r in runs[ref])
        print(f"{ref:<24} " + " ".join(f"{cell:>20}" for cell in cells) + f" {total - first:>+14.1f}")
    return 0


def turns(refs: list[str], rounds: int) -> list[str]:
    """``rounds`` rounds of every revision, each taking every place in a round in turn."""
    return [ref for round_ in range(rounds) for ref in refs[round_ % len(refs) :] + refs[: round_ % len(refs)]]


CONCURRENCY = 16


def measure_proxies(trees: dict[str, Path], requests: int, rounds: int, scratch: Path) -> dict[str, list[dict[str, float]]]:
    """CPU per answered request of each tree's ``serve``, the trees serving side by side and measured in turns."""
    from contextlib import ExitStack

    from bench.bench_proxy import chain_sections
    from bench.harness import cpu_seconds, drive, free_port, mock_upstream, proxy, spawn, write_config

    body = orjson.dumps(CHAT)
    up_port = free_port()
    upstream = f"http://127.0.0.1:{up_port}/v1"
    runs: dict[str, list[dict[str, float]]] = {ref: [] for ref in trees}
    with ExitStack() as stack:
        stack.enter_context(spawn(mock_upstream(up_port), up_port))
        served: dict[str, tuple[str, int]] = {}
        for ref, tree in trees.items():
            port, state = free_port(), scratch / f"state-{ref.replace('/', '_')}"
            state.mkdir()
            sections = {**chain_sections(), "classifier": {"provider": "mock", "model": "mock-classifier"}}
            sections["decision_log"] = {"path": str(state / "decisions.sqlite3")}
            config = write_config(state / "bench.yaml", port, upstream, **sections)
            process = stack.enter_context(spawn(proxy(config), port, cwd=tree))
            served[ref] = (f"http://127.0.0.1:{port}/v1/chat/completions", process.pid)
        for url, _ in served.values():
            asyncio.run(drive(url, body, 500, CONCURRENCY, False))  # warm-up: connections, caches, the classification
        for ref in turns(list(trees), rounds):
            url, pid = served[ref]
            before = cpu_seconds(pid)
            load = asyncio.run(drive(url, body, requests, CONCURRENCY, False))
            after = cpu_seconds(pid)
            assert load.errors == 0 and before is not None and after is not None
            runs[ref].append({"total_us": (after - before) / len(load.latencies_ms) * 1e6})
    return runs


# --- the child: runs with the measured tree first on sys.path ---------------------------


async def measure_here(requests: int, logged: int = 0) -> dict[str, float]:
    import aiohttp
    from aiohttp.test_utils import TestServer

    import router.http.edge as edge
    from router.observe.recorder import RECORDER_KEY
    from router.server.app import create_app
    from router.config import parse_config
    from router.server.registry import REGISTRY
    from router.observe.logs import configure_logging
    from router.tools.mock_upstream import MockUpstream

    captured: list[tuple[Any, int, str | None]] = []
    build = edge.decision_from_context

    def keep(ctx: Any, status: int, code: str | None) -> Any:
        captured.append((ctx, status, code))
        return build(ctx, status, code)

    edge.decision_from_context = keep
    with tempfile.TemporaryDirectory() as tmp, open(os.devnull, "w") as devnull:
        writer = configure_logging("info", stream=devnull)
        upstream = TestServer(MockUpstream(record=False).app(), host="127.0.0.1")
        await upstream.start_server()
        config = parse_config(
            {
                "middlewares": list(REGISTRY.default_chain),
                "pinch": {"enabled": True, "budget_tokens": 8000, "keep_last_turns": 4},
                "session_cache": {"enabled": True},
                "classifier": {"provider": "mock", "model": "mock-classifier"},
                "decision_log": {"path": str(Path(tmp) / "decisions.sqlite3")},
                "providers": {"mock": {"base_url": str(upstream.make_url("/v1")), "api_key_env": "BENCH_PROVIDER_KEY"}},
                "models": [
                    {
                        "name": "bench-model", "provider": "mock", "upstream_model": "mock", "context_window": 2_000_000,
                        "max_output_tokens": 8192, "supports": {"tools": True, "vision": True, "json_mode": True}, "tiers": [1, 2, 3],
                    }
                ],
            },
            environ={"BENCH_PROVIDER_KEY": PROVIDER_KEY},
        )  # fmt: skip
        app = await create_app(config)
        proxy = TestServer(app, host="127.0.0.1")
        await proxy.start_server()
        async with aiohttp.ClientSession() as http:
            for _ in range(3):  # the first classifies; the others hit the classification cache, as most requests do
                async with http.post(proxy.make_url("/v1/chat/completions"), json=CHAT) as response:
                    assert response.status == 200, await response.text()
                    await response.read()
        await asyncio.sleep(0.05)  # the last request is recorded on the next turn of the loop
        recorder = app[RECORDER_KEY]
        ctx, status, code = captured[-1]
        edge.decision_from_context = build

        async def record(count: int) -> None:
            for i in range(count):
                ctx.request_id = edge.new_request_id()
                recorder.record(build(ctx, status, code))
                if i % YIELD_EVERY == YIELD_EVERY - 1:
                    await asyncio.sleep(0)

        for _ in range(0, logged, 5000):  # in steps the writer keeps up with: a full queue would drop rows
            await record(5000)
            await recorder.decision_log.flush()
        await record(2000)
        await recorder.decision_log.flush()
        gc.collect()
        process, loop_thread = time.process_time(), time.thread_time()
        await record(requests)
        loop_seconds = time.thread_time() - loop_thread
        await recorder.decision_log.flush()
        writer.stop(timeout=30)  # writes out every queued line
        total_seconds = time.process_time() - process
        assert recorder.decision_log.dropped == 0, "the decision log dropped rows: the measurement would flatter"
        await proxy.close()
        await upstream.close()
    return {
        "loop_us": loop_seconds / requests * 1e6,
        "threads_us": (total_seconds - loop_seconds) / requests * 1e6,
        "total_us": total_seconds / requests * 1e6,
    }


if __name__ == "__main__":
    raise SystemExit(main())
