"""`pinch-router demo --keep`: after the summary a proxy on the demo's decision log serves the dashboard of
the session it replayed, at the URL the summary ends with, until stopped."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

import aiohttp

from router.config import Config, load_config
from router.tools.decision_text import format_dollars
from router.tools.demo import SESSION_FILE, format_summary, keep_dashboard, run_demo
from router.tools.eval_pinch import SCENARIOS, SHARED_TRANSCRIPTS
from router.tools.transcripts import load_transcript

ROOT = Path(__file__).resolve().parents[3]
SMALL = SHARED_TRANSCRIPTS / "sweagent-gpt4__pydicom__pydicom-1458.json"


def priced(config: Config) -> Config:
    """The config with every model at Anthropic-like prices and Opus as the reference."""
    raw = config.model_dump(mode="json")
    raw["models"] = [{**m, "cost_per_mtok": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}} for m in raw["models"]]
    raw["dashboard"] = {**raw["dashboard"], "reference_prices": {"claude-opus-4-5": {"input": 5.0, "output": 25.0}}, "reference_model": "claude-opus-4-5"}
    return Config.model_validate(raw)


async def test_the_kept_proxy_shows_the_demos_session_at_the_printed_url(tmp_path: Path) -> None:
    config = priced(load_config(ROOT / "config.yaml"))
    cold = next(s for s in SCENARIOS if s.name == "cold")
    result = await run_demo(config, load_transcript(SMALL), cold, 8_000, tmp_path)
    summary = format_summary(result, "config.yaml", tmp_path)
    assert "demo --keep" in summary
    out, stop = io.StringIO(), asyncio.Event()
    kept = asyncio.create_task(keep_dashboard(config, tmp_path / SESSION_FILE, out, stop))
    while "dashboard:" not in out.getvalue():
        await asyncio.sleep(0.05)
        assert not kept.done(), kept.exception()
    url = re.search(r"dashboard: (\S+)", out.getvalue()).group(1)
    base, session = re.fullmatch(r"(http://127\.0\.0\.1:\d+)/ui/#/session/([0-9a-f]+)", url).groups()
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base}/ui/") as page:
            assert page.status == 200 and "dashboard.js" in await page.text()
        async with http.get(f"{base}/ui/api/session", params={"key": session}) as answer:
            turns = (await answer.json())["data"]
    assert len(turns) == 12 and sum((t["tokens_before"] or 0) - (t["tokens_after"] or 0) for t in turns) > 0
    # the summary's dollars are the dashboard's for the session: spent and saved by pinch, to the cent
    spent, unpinched = turns[-1]["spent_so_far"], turns[-1]["unpinched_so_far"]
    assert spent > 0 and unpinched != spent  # (on this short cold session pinch's rewrites cost more than they save)
    line = next(line for line in summary.splitlines() if "dollars" in line)
    assert f"{format_dollars(spent)} spent with pinch; saved {format_dollars(unpinched - spent)} by pinch" in line
    routing = sum(t["reference"] - t["cost"] for t in turns if t["reference"] is not None)
    assert routing > 0 and f"{format_dollars(routing)} by routing" in line
    stop.set()
    assert await kept == url
