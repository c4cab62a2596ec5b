"""Regenerate the `pinch-router top` screenshots in docs/ (top.svg, top-detail.svg, and their text: top.txt, top-detail.txt).

Runs everything in one process on loopback: a mock upstream (which also
answers as the classifier), a proxy with a demo catalogue, a mix of requests
(plain, tools, a pinched agent transcript, a failover, a refusal, header
overrides, a reported failure), then the TUI headless at 120x30.

    .venv/bin/python docs/capture_top.py
"""

from __future__ import annotations

import asyncio
import html
import logging
import re
from pathlib import Path
from typing import Any

import orjson
from aiohttp.test_utils import TestClient, TestServer

from router.server.app import create_app
from router.server.registry import REGISTRY
from router.tools.mock_upstream import Behaviour, MockUpstream
from router.tools.top import DecisionFeed, DecisionScreen, TopApp

DOCS = Path(__file__).resolve().parent
TRANSCRIPT = Path(__file__).resolve().parent.parent / "tests" / "data" / "transcripts" / "sweagent-gpt4__pydicom__pydicom-1458.json"
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}]


def model(name: str, upstream: str, tiers: list[int], quality: float, tools: bool = True, window: int = 32768) -> dict[str, Any]:
    return {
        "name": name,
        "provider": "local",
        "upstream_model": upstream,
        "context_window": window,
        "max_output_tokens": 4096,
        "supports": {"tools": tools, "vision": not tools, "json_mode": True},
        "tool_proficiency": 0.6 if tools else 0.0,
        "tiers": tiers,
        "quality": quality,
    }


def demo_config(upstream_url: str) -> Any:
    return REGISTRY.parse_config(
        {
            "providers": {"local": {"base_url": upstream_url}},
            "models": [
                model("local-coder", "qwen2.5-coder:7b", [1, 2], 0.5),
                model("local-reasoner", "qwen3:14b", [2, 3], 0.7, window=40960),
                model("local-vision", "llama3.2-vision:11b", [1, 2], 0.4, tools=False),
            ],
            "classifier": {"provider": "local", "model": "qwen2.5:3b"},
            "session_cache": {"enabled": True},
            "pinch": {"enabled": True, "budget_tokens": 8000, "keep_last_turns": 3},
            "decision_log": {"path": ":memory:"},
        },
        environ={},
    )


async def send_demo_traffic(client: TestClient, mock: MockUpstream) -> None:
    url = "/v1/chat/completions"

    async def chat(body: dict[str, Any], **headers: str) -> str:
        resp = await client.post(url, json=body, headers=headers)
        await resp.read()
        return resp.headers["x-router-request-id"]

    def ask(text: str, **extra: Any) -> dict[str, Any]:
        return {"model": "auto", "messages": [{"role": "user", "content": text}], **extra}

    transcript = orjson.loads(TRANSCRIPT.read_bytes())
    await chat(ask("write a README section about install"), **{"x-router-category": "docs_writing", "x-router-tier": "1"})
    await chat(ask("why does test_numpy fail?", tools=TOOLS, stream=True), **{"x-session-id": "agent-1"})
    await chat(ask("and now fix it", tools=TOOLS, stream=True), **{"x-session-id": "agent-1"})
    failed = await chat(transcript, **{"x-session-id": "pydicom"})
    await client.post("/v1/outcome", json={"request_id": failed, "success": False, "reason": "tests still fail"})
    await chat({**transcript, "stream": True}, **{"x-session-id": "pydicom"})
    await chat(ask("describe this screenshot", model="local-vision", tools=TOOLS))  # refused: no tools
    mock.then(Behaviour(status=503))  # the classifier call gets the 503: a fallback classification
    await chat(ask("rename the helper", tools=TOOLS))
    mock.then(Behaviour(), Behaviour(status=500))  # classifier fine, first candidate fails: failover
    await chat(ask("refactor the parser", tools=TOOLS), **{"x-session-id": "agent-2"})
    await chat(ask("add type hints to utils.py", tools=TOOLS), **{"x-router-category": "coding_general", "x-router-tier": "3"})


_CELL = re.compile(r'<text class="[^"]*" x="([\d.]+)" y="[\d.]+" textLength="[\d.]+" clip-path="url\(#[\w-]+-line-(\d+)\)">([^<]*)</text>')
CELL_WIDTH = 12.2  # textual's SVG export: pixels per terminal column


def screen_text(svg: str) -> str:
    """The terminal's text in a textual SVG screenshot, line by line (the README quotes it)."""
    rows: dict[int, list[str]] = {}
    for x, line, text in _CELL.findall(svg):
        row = rows.setdefault(int(line), [])
        column = round(float(x) / CELL_WIDTH)
        row.extend(" " * (column - len(row)))
        row[column:] = list(html.unescape(text).replace("\xa0", " "))
    return "\n".join("".join(rows.get(i, [])).rstrip() for i in range(max(rows) + 1)) + "\n"


def save(app: TopApp, name: str) -> None:
    app.save_screenshot(f"{name}.svg", str(DOCS))
    (DOCS / f"{name}.txt").write_text(screen_text((DOCS / f"{name}.svg").read_text()))


async def capture() -> None:
    mock = MockUpstream()
    upstream = TestServer(mock.app(), host="127.0.0.1")
    await upstream.start_server()
    proxy = TestClient(TestServer(await create_app(demo_config(str(upstream.make_url("/v1")))), host="127.0.0.1"))
    await proxy.start_server()
    try:
        await send_demo_traffic(proxy, mock)
        app = TopApp(DecisionFeed(str(proxy.make_url("")).rstrip("/")), interval=60)
        async with app.run_test(size=(120, 30)) as pilot:
            await app.poll()
            await pilot.pause()
            save(app, "top")
            await pilot.press("down", "down", "down", "down", "down", "enter")
            await pilot.pause()
            assert isinstance(app.screen, DecisionScreen)
            save(app, "top-detail")
    finally:
        await proxy.close()
        await upstream.close()
    print(f"wrote {DOCS}/top.svg, top-detail.svg and their text, top.txt, top-detail.txt")


if __name__ == "__main__":
    logging.getLogger("pinch_router").addHandler(logging.NullHandler())  # the demo's stage fallbacks are intended
    asyncio.run(capture())
