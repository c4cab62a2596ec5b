"""`pinch-router demo --keep`: after the summary a proxy on the demo's decision log serves the dashboard of
the session it replayed, at the URL the summary ends with, until stopped."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

import aiohttp

from router.config import load_config
from router.tools.demo import SESSION_FILE, format_summary, keep_dashboard, run_demo
from router.tools.eval_pinch import SCENARIOS, SHARED_TRANSCRIPTS
from router.tools.transcripts import load_transcript

ROOT = Path(__file__).resolve().parents[3]
SMALL = SHARED_TRANSCRIPTS / "sweagent-gpt4__pydicom__pydicom-1458.json"


async def test_the_kept_proxy_shows_the_demos_session_at_the_printed_url(tmp_path: Path) -> None:
    config = load_config(ROOT / "config.yaml")
    cold = next(s for s in SCENARIOS if s.name == "cold")
    result = await run_demo(config, load_transcript(SMALL), cold, 8_000, tmp_path)
    assert "demo --keep" in format_summary(result, "config.yaml", tmp_path)
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
    stop.set()
    assert await kept == url
