"""Measurement: which new results should a batch compress first when there is no relevance order?

Replays each shared transcript (tests/data/transcripts, or --transcripts DIR)
turn by turn as one session through :func:`router.core.pinch_ledger.pinch_session`
— the pure core, with the ledger carried from turn to turn and the cache state
from a simulated clock — once per :class:`BatchOrder`, and prices what was
sent with ``router.tools.pinch_measures`` (Anthropic's prices; the same definitions
``eval-pinch`` uses). Scenarios: *warm* (requests 10 s apart), *cold* (every
10th request after the 300 s cache lifetime), *window* (warm, a 32,768-token
window). Per transcript, budget and order it prints the session's cost and
fresh (uncached) tokens relative to no pinch, and the unchanged-prefix share;
the order with the lower cost (then fewer fresh tokens) wins the row.

    .venv/bin/python -m bench.bench_batch_order [--budgets 20000 40000]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.harness import TRANSCRIPTS
from router.core.cache_timing import cache_state
from router.tools.pinch_measures import ANTHROPIC, SentRequest, SessionCost, price_session, unchanged_prefix_tokens
from router.core.pinch_ledger import EMPTY_LEDGER, BatchOrder, WindowLimit
from router.wire.openai_chat.pinch import pinch_session
from router.core.tokens import DEFAULT_ESTIMATOR
from router.tools.transcripts import Transcript, load_transcript

KEEP_LAST_TURNS, MAX_SUMMARIZE_CHARS, LOW_WATERMARK, COLD_BATCH_FROM = 4, 4000, 0.6, 0.9
MIN_OUTPUT_TOKENS = 1024
SCENARIOS = ("warm", "cold", "window")


def replay(transcript: Transcript, budget: int, scenario: str, order: BatchOrder | None) -> SessionCost:
    """The session priced; ``order`` None: no pinch."""
    window = 32_768 if scenario == "window" else 1_000_000
    windows = (WindowLimit("replay", "p", window, window - MIN_OUTPUT_TOKENS),)
    ledger, last_seen, now, previous = EMPTY_LEDGER, None, 0.0, None
    sent: list[SentRequest] = []
    for turn, messages in enumerate(transcript.turn_requests()):
        gap = 400.0 if scenario == "cold" and turn and turn % 10 == 0 else 10.0
        now += gap
        out: list[Any] = messages
        if order is not None:
            cache = cache_state(now=now, last_seen=last_seen, last_provider="p", provider="p", lifetime_seconds=ANTHROPIC.lifetime_seconds, requests=turn)
            result = pinch_session(
                messages, ledger, budget_tokens=budget, low_watermark=LOW_WATERMARK, keep_last_turns=KEEP_LAST_TURNS,
                max_summarize_chars=MAX_SUMMARIZE_CHARS, cache=cache, windows=windows, batch_order=order, tools=transcript.tools,
                cold_batch_from=COLD_BATCH_FROM,
            )
            out, ledger, last_seen = result.messages, result.ledger, now
        tokens = DEFAULT_ESTIMATOR.prompt_tokens(out, transcript.tools)
        sent.append(SentRequest(tokens, unchanged_prefix_tokens(previous, out, DEFAULT_ESTIMATOR, transcript.tools), gap))
        previous = out
    return price_session(sent, ANTHROPIC)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budgets", type=int, nargs="+", default=[20_000, 40_000])
    parser.add_argument("--transcripts", type=Path, default=TRANSCRIPTS)
    args = parser.parse_args(argv)
    paths = sorted(p for p in args.transcripts.glob("*.json") if not p.name.endswith(".meta.json"))
    orders = list(BatchOrder)
    heads = "".join(f" {f'{o} cost':>12} {'fresh':>6} {'prefix':>7}" for o in orders)
    print(f"{'scenario':<8} {'budget':>6} {'transcript':<40}{heads}  cheaper")
    wins = dict.fromkeys(orders, 0)
    for scenario in SCENARIOS:
        for budget in args.budgets:
            for path in paths:
                transcript = load_transcript(path)
                base = replay(transcript, budget, scenario, None)
                costs = {order: replay(transcript, budget, scenario, order) for order in orders}
                cells = "".join(
                    f" {c.cost / base.cost:>12.3f} {c.fresh_tokens / base.fresh_tokens:>6.2f} {c.prefix_share:>7.1%}" for c in costs.values()
                )
                ranked = sorted(orders, key=lambda o: (round(costs[o].cost, 6), costs[o].fresh_tokens))
                tie = round(costs[ranked[0]].cost, 6) == round(costs[ranked[1]].cost, 6) and costs[ranked[0]].fresh_tokens == costs[ranked[1]].fresh_tokens
                if not tie:
                    wins[ranked[0]] += 1
                print(f"{scenario:<8} {budget:>6} {transcript.name[:40]:<40}{cells}  {'tie' if tie else ranked[0]}")
    print()
    print("rows won: " + ", ".join(f"{order} {count}" for order, count in wins.items()) + " (the rest tie)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
