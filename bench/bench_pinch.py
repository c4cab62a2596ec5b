"""Benchmark: token estimate and pinch vs. an orjson round trip of the same body.

For each shared transcript (tests/data/transcripts, a copy of ../shared/transcripts; or --transcripts DIR) and
one built from the largest by replicating its turns up to ~1M characters, it
times, as the median of --runs round-robin runs in this process:

* the baseline: ``orjson.loads`` + ``orjson.dumps`` of the request body
  (what the proxy pays anyway to read and forward it);
* ``estimate_prompt_tokens(messages, tools)`` (the gate's measurement);
* ``prune_context`` at each budget (pinch-prune's whole work, its own
  estimate included).

* ``ledger <budget>``: :func:`router.core.pinch_ledger.pinch_session` on the
  same body with a warm cache and the same budget, reapplying the ledger the
  session built when its turns were replayed one by one at that budget, each
  with a cold cache (a batch whenever over budget): a later request of a
  session. ``full <budget>``: the same with a ledger holding every old result,
  the most a ledger can hold (the worst case for reapplying).

Target: estimate + prune < the orjson round trip. Target (issue #11): a request
that reapplies a ledger costs no more than today's prune of the same body
("ledger" ≤ "prune" at each budget). A request measures its
prompt once: ``prune_context`` makes the estimate itself (or takes the one
pinch-relevance already made, ``ctx.measured_prompt``), and the gate reuses
pinch's exact final count. So what a request pays for estimate + prune is one
``prune_context`` call, the "path" column (the slower budget), which the target
is judged on; "est+prune" adds a second, separate estimate on top, as a request
would if it measured twice (none does).

``--against REV [REV ...]`` adds the before/after table: the path in this
tree and in each git revision (extracted with ``git archive``), each tree in
its own process (bench/pinch_path_timer.py), the trees taking turns for
``--rounds`` rounds, each round the median of ``--runs`` runs; a tree's figure
is the median of its rounds, so load on the machine hits every tree alike.

    .venv/bin/python -m bench.bench_pinch [--runs 25] [--budgets 20000 50000] [--against REV ... [--rounds 10]]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from time import perf_counter_ns
from typing import Any

import orjson

from bench.harness import ROOT, TRANSCRIPTS, load_bodies, with_scaled
from router.core.cache_timing import CacheState, CacheVerdict
from router.wire.openai_chat.pinch import prune_context
from router.core.pinch_ledger import EMPTY_LEDGER, Ledger
from router.wire.openai_chat.pinch import pinch_session
from router.core.tokens import estimate_prompt_tokens

KEEP_LAST_TURNS = 4
MAX_SUMMARIZE_CHARS = 4000
LOW_WATERMARK = 0.6
COLD = CacheState(CacheVerdict.COLD, "cache cold (new session)")
WARM = CacheState(CacheVerdict.WARM, "warm cache", requests=10)


def reapply(messages: list[Any], tools: Any, ledger: Ledger, budget: int) -> object:
    return pinch_session(
        messages, ledger, budget_tokens=budget, low_watermark=LOW_WATERMARK, keep_last_turns=KEEP_LAST_TURNS,
        max_summarize_chars=MAX_SUMMARIZE_CHARS, cache=WARM, tools=tools,
    )


def session_ledger(messages: list[Any], tools: Any, budget: int) -> Ledger:
    """The ledger a session ending in ``messages`` builds at ``budget``, turn by turn, each turn's cache cold."""
    ledger = EMPTY_LEDGER
    turns = [messages[:i] for i, m in enumerate(messages) if m.get("role") == "assistant" and i > 0] + [messages]
    for turn in turns:
        ledger = pinch_session(
            turn, ledger, budget_tokens=budget, low_watermark=LOW_WATERMARK, keep_last_turns=KEEP_LAST_TURNS,
            max_summarize_chars=MAX_SUMMARIZE_CHARS, cache=COLD, tools=tools,
        ).ledger
    return ledger


def interleaved_medians(works: dict[str, Callable[[], object]], runs: int) -> dict[str, float]:
    """Median milliseconds of each piece of work, run round-robin so load on the machine hits all alike."""
    for work in works.values():
        work()  # warm up
    times: dict[str, list[int]] = {name: [] for name in works}
    for _ in range(runs):
        for name, work in works.items():
            started = perf_counter_ns()
            work()
            times[name].append(perf_counter_ns() - started)
    return {name: statistics.median(samples) / 1e6 for name, samples in times.items()}


def bench(name: str, body: dict[str, Any], budgets: list[int], runs: int) -> dict[str, Any]:
    raw = orjson.dumps(body)
    messages, tools = body["messages"], body.get("tools")
    row: dict[str, Any] = {"name": name, "chars": len(raw), "messages": len(messages)}
    works: dict[str, Callable[[], object]] = {
        "orjson": lambda: orjson.dumps(orjson.loads(raw)),
        "estimate": lambda: estimate_prompt_tokens(messages, tools),
    }
    full = session_ledger(messages, tools, 0)
    ledgers = {budget: session_ledger(messages, tools, budget) for budget in budgets}
    for budget in budgets:
        works[f"prune {budget}"] = lambda b=budget: prune_context(messages, b, KEEP_LAST_TURNS, MAX_SUMMARIZE_CHARS, tools=tools)
        works[f"ledger {budget}"] = lambda b=budget: reapply(messages, tools, ledgers[b], b)
        works[f"full {budget}"] = lambda b=budget: reapply(messages, tools, full, b)
    medians = interleaved_medians(works, runs)
    row["orjson"], row["estimate"] = medians["orjson"], medians["estimate"]
    for kind in ("prune", "ledger", "full"):
        row[kind] = {budget: medians[f"{kind} {budget}"] for budget in budgets}
    row["reapplied"] = {budget: len(ledgers[budget]) for budget in budgets}
    row["full_reapplied"] = len(full)
    row["stats"] = {
        budget: prune_context(messages, budget, KEEP_LAST_TURNS, MAX_SUMMARIZE_CHARS, tools=tools)[1] for budget in budgets
    }
    row["path"] = max(row["prune"].values())  # prune counts the prompt itself; the gate reuses that count
    row["total"] = row["estimate"] + row["path"]
    return row


def path_against(revisions: list[str], bodies: dict[str, Any], budgets: list[int], runs: int, rounds: int) -> dict[str, dict[str, float]]:
    """The path (ms) per tree — this one, then each revision — per body, the trees taking turns (module doc)."""
    with tempfile.TemporaryDirectory(prefix="bench-pinch-") as tmp:
        trees = {"this tree": ROOT}
        for revision in revisions:
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision], capture_output=True, check=True).stdout
            trees[revision] = Path(tmp) / revision.replace("/", "_")
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(trees[revision], filter="data")
        bodies_file = Path(tmp) / "bodies.json"
        bodies_file.write_bytes(orjson.dumps(bodies))
        rounds_of: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for turn in range(rounds):
            # each tree goes first as often as last
            for name in list(trees) if turn % 2 == 0 else list(reversed(trees)):
                env = {**os.environ, "PYTHONPATH": str(trees[name]), "PYTHONHASHSEED": "0"}
                command = [sys.executable, str(ROOT / "bench" / "pinch_path_timer.py"), str(bodies_file), str(runs), *map(str, budgets)]
                out = subprocess.run(command, cwd=trees[name], env=env, capture_output=True, check=True).stdout
                rounds_of[name].append(orjson.loads(out))
    return {name: {body: statistics.median(r[body] for r in results) for body in bodies} for name, results in rounds_of.items()}


def print_against(paths: dict[str, dict[str, float]], runs: int, rounds: int) -> bool:
    """The before/after table; True when this tree's path is no slower than every revision's on every body."""
    this, *revisions = paths
    print(f"path before/after, ms: median of {rounds} rounds, each the median of {runs} runs, the trees taking turns")
    heads = "".join(f" {revision[:12]:>12} {'ratio':>6}" for revision in revisions)
    print(f"{'transcript':<44} {this:>10}{heads}  target (no slower)")
    met = True
    for body, ms in paths[this].items():
        ratios = [ms / paths[revision][body] for revision in revisions]
        ok = all(ratio <= 1.0 for ratio in ratios)
        met &= ok
        cells = "".join(f" {paths[revision][body]:>12.4f} {ratio:>5.3f}×" for revision, ratio in zip(revisions, ratios))
        print(f"{body[:44]:<44} {ms:>10.4f}{cells}  {'met' if ok else 'MISSED'}")
    print()
    print(f"target (the path no slower than in {', '.join(revisions)}): {'met on every transcript' if met else 'MISSED'}")
    return met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--budgets", type=int, nargs="+", default=[20_000, 50_000])
    parser.add_argument("--transcripts", type=Path, default=TRANSCRIPTS)
    parser.add_argument("--against", nargs="+", metavar="REV", default=[], help="also time the path in these git revisions, alternating (module doc)")
    parser.add_argument("--rounds", type=int, default=10, help="with --against: rounds of --runs runs per tree")
    args = parser.parse_args(argv)

    bodies = load_bodies(args.transcripts)
    if not bodies:
        print(f"no transcripts in {args.transcripts}", file=sys.stderr)
        return 1
    bodies = with_scaled(bodies)

    rows = [bench(name, body, args.budgets, args.runs) for name, body in bodies.items()]
    prune_heads = "".join(f" {f'prune {b // 1000}k':>9}" for b in args.budgets)
    print(f"median of {args.runs} runs, milliseconds; keep_last_turns={KEEP_LAST_TURNS}, max_summarize_chars={MAX_SUMMARIZE_CHARS}")
    print(f"{'transcript':<44} {'chars':>9} {'msgs':>5} {'orjson rt':>9} {'estimate':>9}{prune_heads} {'est+prune':>9} {'path':>7}  target (path)")
    for row in rows:
        prunes = "".join(f" {row['prune'][b]:>9.3f}" for b in args.budgets)
        verdict = "met" if row["path"] < row["orjson"] else "MISSED"
        print(
            f"{row['name'][:44]:<44} {row['chars']:>9,} {row['messages']:>5} {row['orjson']:>9.3f} "
            f"{row['estimate']:>9.3f}{prunes} {row['total']:>9.3f} {row['path']:>7.3f}  {verdict} ({row['path'] / row['orjson']:.2f}×)"
        )
    print()
    print("pinch result per budget (tokens before → after, compressed = elided + placeholders):")
    for row in rows:
        parts = [
            f"{b // 1000}k: {s.mode} {s.original_tokens}→{s.final_tokens} ({s.compressed} = {s.elided}+{s.placeholders})"
            for b, s in row["stats"].items()
        ]
        print(f"  {row['name'][:44]:<44} " + "; ".join(parts))
    met = all(row["path"] < row["orjson"] for row in rows)
    print()
    print(f"target (a request's estimate + prune < orjson loads+dumps of the same body): {'met on every transcript' if met else 'MISSED'}")
    print()
    print("a later request of a session: its ledger reapplied (warm cache) vs today's prune of the same body, ms;")
    print("ledger = the session's own ledger (its size in brackets), full = a ledger holding every old result")
    heads = "".join(f" {f'prune {b // 1000}k':>9} {f'ledger {b // 1000}k':>15} {f'full {b // 1000}k':>8}" for b in args.budgets)
    print(f"{'transcript':<44}{heads}  target (ledger <= prune)")
    met = True
    for row in rows:
        cells = "".join(
            f" {row['prune'][b]:>9.3f} {'[' + str(row['reapplied'][b]) + ']':>6} {row['ledger'][b]:>8.3f} {row['full'][b]:>8.3f}" for b in args.budgets
        )
        # judged where the session's ledger has something to reapply; an empty one takes prune's own path
        judged = [b for b in args.budgets if row["reapplied"][b]]
        if not judged:
            print(f"{row['name'][:44]:<44}{cells}  n/a (never over budget: nothing to reapply)")
            continue
        ok = all(row["ledger"][b] <= row["prune"][b] for b in judged)
        met &= ok
        ratio = max(row["ledger"][b] / row["prune"][b] for b in judged)
        print(f"{row['name'][:44]:<44}{cells}  {'met' if ok else 'MISSED'} ({ratio:.2f}×)")
    print()
    print(f"target (a request that reapplies its session's ledger costs no more than today's prune): {'met on every transcript' if met else 'MISSED'}")
    if args.against:
        print()
        print_against(path_against(args.against, bodies, args.budgets, args.runs, args.rounds), args.runs, args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
