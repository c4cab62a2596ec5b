"""Child of ``bench_pinch --against``: times the pinch path in whichever tree ``router`` is imported from.

    python bench/pinch_path_timer.py BODIES.json RUNS BUDGET [BUDGET ...]

Run with the tree to measure first on ``PYTHONPATH``. It imports nothing but
``router.core.pinch.prune_context`` (there since before the neutral view) and
orjson, so it runs in older trees too. Prints one JSON object: each body's
path — the median milliseconds of one ``prune_context`` call at the slower
budget, the budgets taking turns over ``RUNS`` runs.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from time import perf_counter_ns

import orjson

from router.wire.openai_chat.pinch import prune_context

KEEP_LAST_TURNS = 4  # as bench_pinch
MAX_SUMMARIZE_CHARS = 4000


def main(argv: list[str]) -> int:
    bodies = orjson.loads(Path(argv[0]).read_bytes())
    runs, budgets = int(argv[1]), [int(b) for b in argv[2:]]
    path: dict[str, float] = {}
    for name, body in bodies.items():
        messages, tools = body["messages"], body.get("tools")
        times: dict[int, list[int]] = {budget: [] for budget in budgets}
        for budget in budgets:
            prune_context(messages, budget, KEEP_LAST_TURNS, MAX_SUMMARIZE_CHARS, tools=tools)  # warm up
        for _ in range(runs):
            for budget in budgets:
                started = perf_counter_ns()
                prune_context(messages, budget, KEEP_LAST_TURNS, MAX_SUMMARIZE_CHARS, tools=tools)
                times[budget].append(perf_counter_ns() - started)
        path[name] = max(statistics.median(samples) for samples in times.values()) / 1e6
    sys.stdout.write(orjson.dumps(path).decode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
