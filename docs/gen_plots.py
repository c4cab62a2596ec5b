"""The pinch page's charts, drawn by the docs build (docs/hooks.py) from a replay, never by hand.

The demo's session (``router.tools.demo.DEFAULT_TRANSCRIPT``) is replayed by eval-pinch on the shipped
config.yaml in the cold-gaps scenario at the shipped budget, every pinch mode, and
``router.tools.pinch_plot.write_plots`` draws it: what ``pinch-router eval-pinch --scenario cold
--budget 24000 --plot DIR <transcript>`` writes. ``python -m docs.gen_plots DIR`` writes them to DIR.
"""

from __future__ import annotations

import asyncio
import io
import logging
import sys
from pathlib import Path

from router.config import load_config
from router.tools.demo import DEFAULT_SCENARIO, DEFAULT_TRANSCRIPT
from router.tools.eval_pinch import SCENARIOS, run_eval
from router.tools.pinch_plot import write_plots
from router.tools.transcripts import load_transcript

ROOT = Path(__file__).resolve().parents[1]


def draw(directory: Path) -> list[Path]:
    config = load_config(ROOT / "config.yaml", environ={})
    scenario = next(s for s in SCENARIOS if s.name == DEFAULT_SCENARIO)
    logging.getLogger("pinch_router").setLevel(logging.ERROR)  # the stages' warnings are the report's business
    results = asyncio.run(
        run_eval(config, [load_transcript(DEFAULT_TRANSCRIPT)], io.StringIO(), io.StringIO(), budgets=[config.pinch.budget_tokens], scenarios=[scenario])
    )
    return write_plots(results, directory)


if __name__ == "__main__":
    for path in draw(Path(sys.argv[1])):
        print(path)
