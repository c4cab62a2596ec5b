"""Benchmark: the in-process embedders side by side — batch latency on one core, cold start, memory, held-out quality.

The batch is what a session's first ranking embeds (issue #49): one query and 30 real
tool results of the shared transcripts cut to 2,000 characters (31 texts). Each
candidate runs in a subprocess of its own, pinned to one CPU (``--cpu``, default 1),
so the figures do not mix; the candidates take turns for ``--rounds`` rounds, so a
burst of load on the shared machine hits them alike:

* **batch ms p50 / p99**: wall time of one batch (``--batches`` per round, each a
  different window of results), and **cpu ms**: the process's CPU time for it (what
  the batch costs where the core is shared); **ms/text**: the p50 over 31; **1st cpu**:
  the CPU time of a process's first batch (the static embedder's word memory empty);
* **cold s**: from nothing loaded (libraries not imported) to the first vector;
* **RSS MB**: what the loaded embedder adds to the process, and **peak MB**: the
  most it adds while embedding the batches.

Candidates:

* ``minilm`` — ``local_model: minilm``, today's: all-MiniLM-L6-v2 int8 on ONNX Runtime, 256 tokens;
* ``minilm-128`` — the same model tuned: 128 tokens, all graph optimisations, texts
  sorted by length in batches of 8, no memory arena (a reference, not shipped);
* ``static`` — ``local_model: static``, the default: the same model's token table, averaged;
* ``wordllama`` — WordLlama's ``l2_supercat_256`` table (the ``wordllama`` wheel, MIT), averaged
  over its Llama-2 BPE tokens (measured when the wheel is installed; not shipped).

``--quality`` also replays the held-out transcripts (``--transcripts``, default
``../shared/transcripts-more``) with eval-pinch for each candidate (no cache and cold
gaps, 20k and 40k, the ledger on), through a loopback embeddings endpoint with a
vector cache, and prints the share of later-referenced old results relevance keeps
verbatim, recency's at the same tokens, and the uniform prune's. Slow (minutes per candidate).

    .venv/bin/python -m bench.bench_embeddings [--rounds 3] [--batches 10] [--quality] [--save]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import ROOT, TRANSCRIPTS, load_bodies, percentile, print_table

BATCH_TEXTS = 31
TEXT_CHARS = 2_000
HELD_OUT = ROOT.parent / "shared" / "transcripts-more"
CANDIDATES = ("minilm", "minilm-128", "static", "wordllama")
Encode = Callable[[Sequence[str]], Any]


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def batches(count: int) -> list[list[str]]:
    """``count`` batches of one query and 30 tool results of at least 2,000 characters, cut to 2,000."""
    bodies = load_bodies(TRANSCRIPTS)
    results = [
        m["content"][:TEXT_CHARS]
        for body in bodies.values()
        for m in body["messages"]
        if m.get("role") == "tool" and isinstance(m.get("content"), str) and len(m["content"]) >= TEXT_CHARS
    ]
    tasks = [next(m["content"] for m in body["messages"] if m.get("role") == "user")[:TEXT_CHARS] for body in bodies.values()]
    return [[tasks[i % len(tasks)], *(results[(i * 7 + j) % len(results)] for j in range(BATCH_TEXTS - 1))] for i in range(count)]


def wordllama_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("wordllama") is not None


def load_candidate(name: str) -> Encode:
    """The candidate's encoder (texts -> normalised vectors); every import happens here, so cold start counts it."""
    if name in ("minilm", "static"):
        from router.clients.local_embeddings import load_encoder

        return load_encoder(None, name)
    if name == "minilm-128":
        return _tuned_minilm()
    if name == "wordllama":
        return _wordllama()
    raise SystemExit(f"unknown candidate {name}")


def _tuned_minilm(max_tokens: int = 128, batch: int = 8) -> Encode:
    import onnxruntime
    from tokenizers import Tokenizer

    from router.clients.local_embeddings import packaged_files

    model, tokenizer_file = packaged_files()
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.enable_truncation(max_tokens)
    tokenizer.enable_padding()
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_cpu_mem_arena = False
    session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])

    def encode(texts: Sequence[str]) -> Any:
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), 384))
        for start in range(0, len(order), batch):
            chunk = order[start : start + batch]
            encoded = tokenizer.encode_batch([texts[i] for i in chunk])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
            pooled = (hidden * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
            out[chunk] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out

    return encode


def _wordllama() -> Encode:
    """WordLlama's packaged table and tokenizer, read from the wheel's files (its loader would try to download the tokenizer)."""
    import importlib.util

    from safetensors import safe_open
    from tokenizers import Tokenizer
    from wordllama.inference import WordLlamaInference

    spec = importlib.util.find_spec("wordllama")
    assert spec is not None and spec.origin is not None
    root = Path(spec.origin).parent
    with safe_open(str(root / "weights" / "l2_supercat_256.safetensors"), framework="np", device="cpu") as f:
        table = f.get_tensor("embedding.weight")
    model = WordLlamaInference(table, Tokenizer.from_file(str(root / "tokenizers" / "l2_supercat_tokenizer_config.json")))
    return lambda texts: model.embed(list(texts), norm=True).astype(np.float64)


def measure(name: str, count: int, cpu: int | None) -> dict[str, Any]:
    """One candidate's figures, in this process (pinned to ``cpu``)."""
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})
    work = batches(count)
    import router.clients.local_embeddings  # noqa: F401 — the proxy imports it at start-up: not part of a cold start

    before = rss_mb()
    started, used = time.perf_counter(), time.process_time()
    encode = load_candidate(name)
    first = encode(["load the model"])
    cold, cold_cpu = time.perf_counter() - started, time.process_time() - used
    loaded = rss_mb()
    wall: list[float] = []
    cpu_times: list[float] = []
    for texts in work:
        started, used = time.perf_counter(), time.process_time()
        vectors = encode(texts)
        cpu_times.append((time.process_time() - used) * 1000)
        wall.append((time.perf_counter() - started) * 1000)
        if len(vectors) != len(texts) or not np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3):
            raise RuntimeError(f"{name}: {len(vectors)} vectors for {len(texts)} texts, or not normalised")
    return {
        "name": name, "dimensions": int(np.asarray(first).shape[1]), "cold_s": cold, "cold_cpu_s": cold_cpu, "wall_ms": wall, "cpu_ms": cpu_times,
        "rss_mb": loaded - before, "peak_mb": peak_rss_mb() - before,
    }


def run_one(name: str, count: int, cpu: int | None) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.bench_embeddings", "--one", name, "--batches", str(count)]
    if cpu is not None:
        command += ["--cpu", str(cpu)]
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{name}: {done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


async def held_out_quality(name: str, transcripts: list[str]) -> dict[str, tuple[float, float, float, int]]:
    """(relevance %, recency %, uniform %, referenced) per "scenario budget", the ledger on, with this candidate's vectors."""
    from aiohttp import web

    from bench.minilm_embeddings_server import Embedder, make_app
    from router.config import load_config
    from router.tools import eval_pinch as ev
    from router.tools.transcripts import load_transcript

    embedder = Embedder(load_candidate(name))
    runner = web.AppRunner(make_app(embedder), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    memo: dict[str, Any] = {}  # each distinct text embedded once across scenarios and budgets
    raw_embed = embedder.embed

    async def embed(texts: list[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in memo]
        if missing:
            memo.update(zip(missing, await raw_embed(missing), strict=True))
        return [memo[t] for t in texts]

    embedder.embed = embed  # type: ignore[method-assign]
    relevance = {"enabled": True, "api": "openai", "base_url": f"http://127.0.0.1:{port}/v1", "model": f"bench-{name}", "timeout_seconds": 600}
    shipped = load_config(ROOT / "router" / "starter_config.yaml", environ={})  # the shipped settings, relevance pointed here
    settings = type(shipped.pinch.relevance).model_validate({**shipped.pinch.relevance.model_dump(), **relevance})
    config = shipped.model_copy(update={"pinch": shipped.pinch.model_copy(update={"relevance": settings})})
    uniform, ranked = (next(m for m in ev.MODES if m.name == f"{kind}, ledger on") for kind in ("uniform", "relevance"))
    scenarios = [s for s in ev.SCENARIOS if s.name in ("nocache", "cold")]
    try:
        results = await ev.run_eval(
            config, [load_transcript(Path(t)) for t in transcripts], io.StringIO(), io.StringIO(),
            budgets=(20_000, 40_000), scenarios=scenarios, modes=(uniform, ranked), own_embeddings=True,
        )
    finally:
        await runner.cleanup()
    figures = {}
    for scenario in scenarios:
        for budget in (20_000, 40_000):
            r = results.ratios(results.transcripts, scenario, budget, ranked)
            u = results.ratios(results.transcripts, scenario, budget, uniform)
            figures[f"{scenario.name} {budget // 1000}k"] = (100 * r.quality.share, 100 * r.quality.recency_share, 100 * u.quality.share, r.quality.referenced)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=10, help="batches per candidate and round")
    parser.add_argument("--cpu", type=int, default=1, help="the CPU each candidate's process is pinned to (-1: not pinned)")
    parser.add_argument("--only", action="append", choices=CANDIDATES, help="measure only these (repeatable)")
    parser.add_argument("--quality", action="store_true", help="also replay the held-out transcripts with each candidate (slow)")
    parser.add_argument("--transcripts", default=str(HELD_OUT), help="the held-out transcripts' folder (--quality)")
    parser.add_argument("--save", action="store_true", help="also write the table to bench/results/bench_embeddings.txt")
    parser.add_argument("--one", choices=CANDIDATES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cpu = None if args.cpu < 0 else args.cpu
    if args.one:
        print(json.dumps(measure(args.one, args.batches, cpu)))
        return 0
    names = [n for n in (args.only or CANDIDATES) if n != "wordllama" or wordllama_available()]
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for _ in range(args.rounds):
        for name in names:
            runs[name].append(run_one(name, args.batches, cpu))
    quality: dict[str, dict[str, tuple[float, float, float, int]]] = {}
    if args.quality:
        transcripts = sorted(str(p) for p in Path(args.transcripts).glob("*.json") if not p.name.endswith(".meta.json"))
        quality = {name: asyncio.run(held_out_quality(name, transcripts)) for name in names}
    table = [
        f"{BATCH_TEXTS} texts of {TEXT_CHARS:,} characters a batch (one query, 30 tool results of the shared transcripts); "
        f"{args.rounds} rounds × {args.batches} batches, each candidate in its own process{f' on CPU {cpu}' if cpu is not None else ''}",
        f"{'embedder':<11} {'dims':>4} {'batch ms p50':>12} {'p99':>7} {'cpu ms p50':>10} {'1st cpu':>7} {'ms/text':>7} {'× static':>8} {'cold s':>6} {'cpu s':>5} {'RSS MB':>6} {'peak MB':>7}",
    ]
    static_cpu = statistics.median(x for r in runs.get("static", []) for x in r["cpu_ms"]) if "static" in runs else None
    for name in names:
        wall = sorted(x for r in runs[name] for x in r["wall_ms"])
        cpu_ms = statistics.median(x for r in runs[name] for x in r["cpu_ms"])
        p50 = statistics.median(wall)
        times = f"{cpu_ms / static_cpu:>8.0f}" if static_cpu else f"{'-':>8}"
        table.append(
            f"{name:<11} {runs[name][0]['dimensions']:>4} {p50:>12.1f} {percentile(wall, 99):>7.1f} {cpu_ms:>10.1f} {statistics.median(r['cpu_ms'][0] for r in runs[name]):>7.1f} {p50 / BATCH_TEXTS:>7.2f} {times} "
            f"{statistics.median(r['cold_s'] for r in runs[name]):>6.2f} {statistics.median(r['cold_cpu_s'] for r in runs[name]):>5.2f} "
            f"{statistics.median(r['rss_mb'] for r in runs[name]):>6.0f} "
            f"{statistics.median(r['peak_mb'] for r in runs[name]):>7.0f}"
        )
    table.append("cold s (cpu s): libraries imported, model read, first vector, wall (CPU); RSS MB: what the loaded embedder adds; peak MB: the most while embedding.")
    if quality:
        keys = list(next(iter(quality.values())))
        table += ["", f"held-out quality ({args.transcripts}, the ledger on): referenced old results kept verbatim, relevance / recency at its tokens / uniform"]
        table.append(f"{'embedder':<11} " + " ".join(f"{k:>22}" for k in keys))
        for name, figures in quality.items():
            table.append(f"{name:<11} " + " ".join(f"{f[0]:>6.1f} /{f[1]:>5.1f} /{f[2]:>5.1f} ({f[0] - f[1]:+.1f})" for f in figures.values()))
        table.append("(+x.x): relevance's lead over recency at equal tokens; references per column: " + ", ".join(f"{k} {f[3]}" for k, f in next(iter(quality.values())).items()))
    table.append(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    return print_table(__file__, table, args.save, argv)


if __name__ == "__main__":
    raise SystemExit(main())
