"""Benchmark: pinch-relevance's own work per turn vs. an orjson round trip of the same body.

For each shared transcript's final request (and one scaled to ~1M characters,
as in bench_pinch.py) it times, as the median of --runs interleaved runs:

* the baseline: what the proxy pays anyway for a pinched request —
  ``orjson.loads`` + ``orjson.dumps`` of the body plus ``prune_context`` at
  the same budget (pinch-prune's work, which relevance only steers);
* ``rank_with_evidence`` alone: the ranking of issue #26 — cosine similarity of the
  turn's three 384-d queries (task, step, recent steps) to every candidate,
  the lexical evidence of the names the task and the 16 recent steps use (terms
  memoised as in the stage, so a steady-state turn extracts none afresh), the
  savings, and the candidates the newest steps point at;
* the whole ``pinch-relevance`` stage on a warm cache — the steady state of a
  session, where every text is already embedded: token estimate, candidate
  list, text cuts, sha256 cache keys and ranking. The embeddings call itself
  is the model's time, not the ranking's: ``bench/bench_embeddings.py``
  measures it for the shipped local embedder.

Target: the warm stage < the baseline (ranking at most doubles the proxy's
own CPU work on a pinched request). Vectors are random: timing does not
depend on them.

    .venv/bin/python -m bench.bench_relevance [--runs 25] [--budget 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import orjson

from bench.bench_pinch import interleaved_medians
from bench.harness import TRANSCRIPTS, load_bodies, with_scaled
from middlewares.pinch_relevance import QUERY_STEPS, PinchRelevance
from router.config import Config, parse_config
from router.core.results import RELEVANCE, RelevanceStatus
from router.core.content import content_text
from router.wire.openai_chat.pinch import prune_context
from router.core.evidence import TermCache
from router.core.relevance import rank_with_evidence, similarities
from router.core.turns import candidate_results
from router.wire.openai_chat.view import trim_candidates
from router.tools.eval_pinch import request_context
from router.server.registry import stage_builder
from router.state.session_store import LocalStore

DIMENSIONS = 384  # all-MiniLM-L6-v2
KEEP_LAST_TURNS = 4


def bench_config(budget: int, **relevance: Any) -> Config:
    """Relevance and pinch before the gate, at ``budget``; ``relevance``: settings over the defaults."""
    return parse_config(
        {
            "middlewares": ["pinch-relevance", "pinch-prune", "capability-gate", "upstream-forward"],
            "providers": {"mock": {"base_url": "http://127.0.0.1:9/v1"}},
            "models": [{"name": "m", "provider": "mock", "upstream_model": "m", "context_window": 10**7, "max_output_tokens": 1, "tiers": [1, 2, 3]}],
            "pinch": {
                "enabled": True,
                "budget_tokens": budget,
                "keep_last_turns": KEEP_LAST_TURNS,
                "relevance": {"enabled": True, "base_url": "http://127.0.0.1:9/v1", **relevance},
            },
        },
        environ={},
    )


def warm(stage: PinchRelevance, messages: list[dict[str, Any]], queries: list[str]) -> int:
    """Fill the stage's cache with a random vector for every text it will look up."""
    rng = np.random.default_rng(0)
    cut = stage.settings.max_candidate_chars
    texts = queries + [content_text(messages[i].get("content"))[:cut] for i in trim_candidates(messages, KEEP_LAST_TURNS)]
    for text in texts:
        stage.cache.put(stage.settings.model, text, rng.normal(size=DIMENSIONS))
    return len(texts) - len(queries)


def relevance_stage(config: Config, http: aiohttp.ClientSession) -> PinchRelevance:
    """The pinch-relevance stage built as the server builds it (its deps from the config), session state in memory."""
    return stage_builder(config, http=http, clock=time.monotonic, state=LocalStore())(PinchRelevance)  # type: ignore[return-value]


async def bench(name: str, body: dict[str, Any], budget: int, runs: int, http: aiohttp.ClientSession) -> dict[str, Any]:
    config = bench_config(budget)
    stage = relevance_stage(config, http)
    messages, tools = body["messages"], body.get("tools")
    ctx = request_context(messages, tools, config.classifier.max_input_chars)
    turn = ctx.view.turn_text
    queries = [q for q in (turn.task, turn.step, "\n".join(turn.recent[:QUERY_STEPS])) if q.strip()]
    candidates = warm(stage, messages, queries)
    raw = orjson.dumps(body)
    rng = np.random.default_rng(1)
    query_vectors, candidate_vectors = rng.normal(size=(len(queries), DIMENSIONS)), rng.normal(size=(candidates, DIMENSIONS))
    results = ctx.view.conversation.tool_results()
    positions = candidate_results(ctx.view.conversation, KEEP_LAST_TURNS)
    texts = [content_text(results[p].content) for p in positions]
    held = set(positions)
    others = [content_text(r.content) for i, r in enumerate(results) if i not in held]
    terms = TermCache(100_000)

    def rank() -> None:
        rank_with_evidence(texts, others, turn, config.pinch.max_summarize_chars, similarities(query_vectors, candidate_vectors).tolist(), terms.terms)

    def stage_run() -> None:
        # the stage never awaits on a warm cache, so driving the coroutine by hand runs it whole
        coroutine = stage.run(ctx)
        try:
            coroutine.send(None)
        except StopIteration:
            return
        raise RuntimeError("the stage awaited: the cache was not warm")

    medians = interleaved_medians(
        {
            "orjson": lambda: orjson.dumps(orjson.loads(raw)),
            "prune": lambda: prune_context(messages, budget, KEEP_LAST_TURNS, config.pinch.max_summarize_chars, estimator=stage.estimator, tools=tools),
            "rank": rank,
            "stage": stage_run,
        },
        runs,
    )
    status = ctx[RELEVANCE].status if ctx[RELEVANCE] is not None else None
    baseline = medians["orjson"] + medians["prune"]
    return {"name": name, "chars": len(raw), "candidates": candidates, "status": status, "baseline": baseline, **medians}


async def run(args: argparse.Namespace) -> int:
    bodies = load_bodies(args.transcripts)
    if not bodies:
        print(f"no transcripts in {args.transcripts}", file=sys.stderr)
        return 1
    bodies = with_scaled(bodies)
    async with aiohttp.ClientSession() as http:  # never used: the cache is warm
        rows = [await bench(name, body, args.budget, args.runs, http) for name, body in bodies.items()]
    print(f"median of {args.runs} runs, milliseconds; budget {args.budget}, keep_last_turns {KEEP_LAST_TURNS}, {DIMENSIONS}-d vectors")
    print(f"{'transcript':<44} {'chars':>9} {'cands':>5} {'orjson rt':>9} {'prune':>8} {'rank':>8} {'stage':>8} {'ranked':>7}  target")
    for row in rows:
        verdict = "met" if row["stage"] < row["baseline"] else "MISSED"
        print(
            f"{row['name'][:44]:<44} {row['chars']:>9,} {row['candidates']:>5} {row['orjson']:>9.3f} {row['prune']:>8.3f} "
            f"{row['rank']:>8.3f} {row['stage']:>8.3f} {'yes' if row['status'] is RelevanceStatus.OK else 'no':>7}  {verdict} ({row['stage'] / row['baseline']:.2f}×)"
        )
    met = all(row["stage"] < row["baseline"] for row in rows)
    print(f"\ntarget (warm pinch-relevance < orjson loads+dumps + prune_context of the same body): {'met on every transcript' if met else 'MISSED'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--budget", type=int, default=10_000)
    parser.add_argument("--transcripts", type=Path, default=TRANSCRIPTS)
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
