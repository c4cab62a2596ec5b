"""Benchmark: embedding latency and memory per result — the shipped local embedder against the HTTP stand-in.

For each embedder the whole ``pinch-relevance`` stage ranks the final request of
each shared transcript (every trim candidate, as a session's first over-budget
request does), timed per result:

* **cold cache**: a fresh stage cache, so every candidate and query is
  embedded (the model already loaded): what the first ranking of a session
  costs, and what each new tool result costs later;
* **warm cache**: the same request again, every vector cached: the steady
  state of a session (lookups, lexical evidence, ranking; no model run).

Memory, per embedder, each in a subprocess of its own so the figures do not mix:
the resident memory the model adds once loaded, the peak it adds while embedding
a cold batch, and the bytes the stage's embedding cache holds per result.

Embedders:

* ``hashed (HTTP)`` — the baseline: the mock upstream's hashed bag-of-words
  over loopback HTTP (what ``eval-pinch`` uses), measured in the same run;
* ``local int8`` — ``pinch.relevance.api: local``, the packaged all-MiniLM-L6-v2;
* ``local <dir>`` — with ``--model-dir``, e.g. an fp32 ONNX export of the same model.

    .venv/bin/python -m bench.bench_embeddings [--runs 3] [--model-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from bench.bench_relevance import bench_config, relevance_stage
from bench.harness import ROOT, TRANSCRIPTS, load_bodies, print_table
from router.core.embedding_cache import EmbeddingCache
from router.core.evidence import TermCache
from router.core.results import RelevanceStatus
from router.tools.eval_pinch import request_context
from router.tools.mock_upstream import MockUpstream

BUDGET = 1_000  # every request of the shared transcripts is over it: the stage always ranks


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def measure(embedder: str, model_dir: str | None, runs: int) -> dict[str, Any]:
    """One embedder's figures (run in its own process)."""
    bodies = load_bodies(TRANSCRIPTS)
    mock_runner = None
    if embedder == "hashed":
        mock_runner = web.AppRunner(MockUpstream().app(), access_log=None)
        await mock_runner.setup()
        site = web.TCPSite(mock_runner, "127.0.0.1", 0)
        await site.start()
        port = mock_runner.addresses[0][1]
        relevance: dict[str, Any] = {"api": "openai", "base_url": f"http://127.0.0.1:{port}/v1", "model": "hashed-bag-of-words"}
    else:
        relevance = {"api": "local", **({"local_model_path": model_dir} if model_dir else {})}
    config = bench_config(BUDGET, timeout_seconds=600, **relevance)
    contexts = [request_context(body["messages"], body.get("tools"), config.classifier.max_input_chars) for body in bodies.values()]
    try:
        async with aiohttp.ClientSession() as http:
            before = rss_mb()
            stage = relevance_stage(config, http)
            started = time.perf_counter()
            await stage.client.embed(["load the model"])  # the first call loads it
            load_seconds = time.perf_counter() - started
            loaded = rss_mb()
            cold: list[float] = []
            warm: list[float] = []
            results = 0
            cache_bytes = 0.0
            for run in range(runs):
                for ctx in contexts:
                    # fresh caches, the loaded model kept
                    stage.cache, stage.terms = EmbeddingCache(stage.settings.cache_entries), TermCache(stage.settings.cache_entries)
                    tracemalloc.start()
                    started = time.perf_counter()
                    await stage.run(ctx)
                    cold_seconds = time.perf_counter() - started
                    held, _ = tracemalloc.get_traced_memory()
                    tracemalloc.stop()
                    if ctx.relevance is None or ctx.relevance.status is not RelevanceStatus.OK:
                        raise RuntimeError(f"{embedder}: the stage did not rank: {ctx.relevance}")
                    count = len(ctx.relevance.order)
                    started = time.perf_counter()
                    await stage.run(ctx)
                    warm_seconds = time.perf_counter() - started
                    if ctx.relevance.embedded:
                        raise RuntimeError(f"{embedder}: the second run embedded {ctx.relevance.embedded} texts")
                    cold.append(cold_seconds * 1000 / count)
                    warm.append(warm_seconds * 1000 / count)
                    if run == 0:
                        results += count
                        cache_bytes += held
    finally:
        if mock_runner is not None:
            await mock_runner.cleanup()
    return {
        "embedder": embedder if model_dir is None else f"local {Path(model_dir).name}",
        "results": results,
        "load_seconds": load_seconds,
        "cold_ms": statistics.median(cold),
        "warm_ms": statistics.median(warm),
        "model_mb": loaded - before,
        "peak_mb": peak_rss_mb() - before,
        "cache_bytes": cache_bytes / max(results, 1),
    }


def run_one(embedder: str, model_dir: str | None, runs: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.bench_embeddings", "--one", embedder, "--runs", str(runs)]
    if model_dir:
        command += ["--model-dir", model_dir]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{embedder}: {done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--model-dir", help="also measure api: local with this folder (model.onnx + tokenizer.json)")
    parser.add_argument("--save", action="store_true", help="also write the table to bench/results/bench_embeddings.txt")
    parser.add_argument("--one", choices=["hashed", "local"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(asyncio.run(measure(args.one, args.model_dir, args.runs))))
        return 0
    rows = [run_one("hashed", None, args.runs), run_one("local", None, args.runs)]
    if args.model_dir:
        rows.append(run_one("local", args.model_dir, args.runs))
    base = rows[0]
    table = [
        f"pinch-relevance on the final request of each shared transcript ({base['results']} results), per result; median of {args.runs} runs",
        f"{'embedder':<20} {'load s':>7} {'cold ms':>8} {'× base':>7} {'warm ms':>8} {'× base':>7} {'model MB':>9} {'peak MB':>8} {'cache B/result':>15}",
    ]
    for row in rows:
        table.append(
            f"{row['embedder']:<20} {row['load_seconds']:>7.2f} {row['cold_ms']:>8.3f} {row['cold_ms'] / base['cold_ms']:>7.1f} "
            f"{row['warm_ms']:>8.3f} {row['warm_ms'] / base['warm_ms']:>7.1f} {row['model_mb']:>9.1f} {row['peak_mb']:>8.1f} {row['cache_bytes']:>15,.0f}"
        )
    table.append("cold: every text embedded (model loaded); warm: every vector cached. model MB: resident memory the loaded model adds;")
    table.append("peak MB: the most it adds while embedding; cache B/result: Python memory the stage's cache and ranking hold per result.")
    table.append(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    return print_table(__file__, table, args.save, argv)


if __name__ == "__main__":
    raise SystemExit(main())
