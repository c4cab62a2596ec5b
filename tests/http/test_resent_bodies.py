"""An agent's turns, each resending the conversation before it, through the proxy: each later turn is
parsed from what it adds (router.core.resent_prefix), said in the decision log and the metrics, and
every byte sent upstream is what the same turns parse whole would send."""

from __future__ import annotations

import glob
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.anthropic_factories import two_wire_config

AGENTS = Path(__file__).resolve().parents[1] / "data" / "agents"
PINCH = {"enabled": True, "budget_tokens": 300, "keep_last_turns": 1, "max_summarize_chars": 400}
CHAIN = ["session-fingerprint", "pinch-prune", "capability-gate", "upstream-forward"]


def turns(agent: str) -> list[dict[str, Any]]:
    """An agent's captured requests of one session, in order: path, headers, body."""
    if (AGENTS / f"{agent}.jsonl").exists():
        return [json.loads(line) for line in (AGENTS / f"{agent}.jsonl").read_text().splitlines() if line.strip()]
    return [json.loads(Path(p).read_text()) for p in sorted(glob.glob(str(AGENTS / agent / "*.json")))]


@pytest.fixture
def mock(mock_upstream, monkeypatch):
    monkeypatch.setenv("MOCK_PROVIDER_KEY", "provider-secret")
    return mock_upstream


async def send_all(proxy: Any, url: str, agent: str, model: str, resent_mb: float) -> tuple[list[dict], str]:
    client = await proxy(two_wire_config(url, middlewares=CHAIN, pinch=PINCH, server={"resent_bodies_mb": resent_mb}))
    for request in turns(agent):
        body = {**request["body"], "model": model}
        path = request["path"].split("?")[0]
        response = await client.post(path, data=orjson.dumps(body), headers={"content-type": "application/json", "x-api-key": "local-key", "x-session-id": agent})
        assert response.status == 200, await response.text()
        await response.read()
    rows = (await (await client.get("/v1/decisions", headers={"x-api-key": "local-key"})).json())["data"]
    metrics = await (await client.get("/metrics", headers={"x-api-key": "local-key"})).text()
    return sorted(rows, key=lambda row: row["ts"]), metrics


@pytest.mark.parametrize(
    ("agent", "model", "wire"),
    [
        ("claude-code-tool-turns", "claude-main", "anthropic-messages"),
        ("claude-code", "chat-main", "anthropic-messages"),
        ("codex-tool-turns", "chat-main", "openai-responses"),
        ("aider-turns", "chat-main", "openai-chat"),
        ("pi", "chat-main", "openai-chat"),
    ],
)
async def test_each_later_turn_resumes_the_one_before_and_goes_out_as_parsed_whole(proxy, mock, agent, model, wire):
    upstream, url = mock
    rows, metrics = await send_all(proxy, url, agent, model, 32)
    resumed_sent = [(r.path, r.raw) for r in upstream.received]
    upstream.received.clear()
    plain_rows, _ = await send_all(proxy, url, agent, model, 0)
    assert [(r.path, r.raw) for r in upstream.received] == resumed_sent  # every byte upstream the same
    for row, plain in zip(rows, plain_rows):
        assert (row["tokens_before"], row["tokens_after"], row["pinch_compressed"]) == (plain["tokens_before"], plain["tokens_after"], plain["pinch_compressed"])
    resumed = [row["resumed_elements"] for row in rows]
    assert resumed[0] == 0 and all(n > 0 for n in resumed[1:]), resumed  # each later turn took the one before's messages
    assert [row["resumed_elements"] for row in plain_rows] == [None] * len(plain_rows)  # off: nothing kept
    assert f'pinch_router_request_bodies_total{{parse="resumed",wire="{wire}"}} {len(rows) - 1}.0' in metrics
    assert f'pinch_router_request_bodies_total{{parse="whole",wire="{wire}"}} 1.0' in metrics
