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


async def send_all(proxy: Any, url: str, agent: str, model: str, resent_mb: float, times: int = 1) -> tuple[list[dict], str]:
    client = await proxy(two_wire_config(url, middlewares=CHAIN, pinch=PINCH, server={"resent_bodies_mb": resent_mb}))
    for request in (request for request in turns(agent) for _ in range(times)):
        body = {**request["body"], "model": model}
        path = request["path"].split("?")[0]
        if "/models/" in path:  # Gemini names the model in the path
            head, _, method = path.rpartition(":")
            path = f"{head.rsplit('/', 1)[0]}/{model}:{method}"
        response = await client.post(path, data=orjson.dumps(body), headers={"content-type": "application/json", "x-api-key": "local-key", "x-session-id": agent})
        assert response.status == 200, await response.text()
        await response.read()
    rows = (await (await client.get("/v1/decisions", headers={"x-api-key": "local-key"})).json())["data"]
    metrics = await (await client.get("/metrics", headers={"x-api-key": "local-key"})).text()
    return sorted(rows, key=lambda row: row["ts"]), metrics


@pytest.mark.parametrize(
    ("agent", "model", "wire", "openings"),
    [
        ("claude-code-tool-turns", "claude-main", "anthropic-messages", 1),
        ("claude-code", "chat-main", "anthropic-messages", 1),
        ("codex-tool-turns", "chat-main", "openai-responses", 1),
        ("aider-turns", "chat-main", "openai-chat", 1),
        ("pi", "chat-main", "openai-chat", 1),
        ("gemini-cli", "chat-main", "gemini", 2),  # its first request picks a model: a conversation of its own
    ],
)
async def test_each_later_turn_resumes_the_one_before_and_goes_out_as_parsed_whole(proxy, mock, agent, model, wire, openings):
    upstream, url = mock
    rows, metrics = await send_all(proxy, url, agent, model, 32)
    resumed_sent = [(r.path, r.raw) for r in upstream.received]
    upstream.received.clear()
    plain_rows, _ = await send_all(proxy, url, agent, model, 0)
    assert [(r.path, r.raw) for r in upstream.received] == resumed_sent  # every byte upstream the same
    for row, plain in zip(rows, plain_rows):
        assert (row["tokens_before"], row["tokens_after"], row["pinch_compressed"]) == (plain["tokens_before"], plain["tokens_after"], plain["pinch_compressed"])
    resumed = [row["resumed_elements"] for row in rows]
    assert resumed[:openings] == [0] * openings and all(n > 0 for n in resumed[openings:]), resumed  # each later turn took the one before's messages
    assert [row["resumed_elements"] for row in plain_rows] == [None] * len(plain_rows)  # off: nothing kept
    assert f'pinch_router_request_bodies_total{{parse="resumed",wire="{wire}"}} {len(rows) - openings}.0' in metrics
    assert f'pinch_router_request_bodies_total{{parse="whole",wire="{wire}"}} {openings}.0' in metrics


@pytest.mark.parametrize(("agent", "model"), [("claude-code-tool-turns", "claude-main"), ("codex-tool-turns", "chat-main"), ("aider-turns", "chat-main")])
async def test_a_turn_sent_again_goes_out_as_the_bytes_it_went_out_as_before(proxy, mock, agent, model):
    """Each turn sent twice (an agent's retry): the second finds the ledger's decisions and the array
    sent upstream on the body it resumes (router.core.pinch_ledger.LedgerMemo, KnownBody.sent) and
    takes them again; every byte upstream is what the same turns parsed whole send."""
    upstream, url = mock
    await send_all(proxy, url, agent, model, 32, times=2)
    resumed_sent = [(r.path, r.raw) for r in upstream.received]
    upstream.received.clear()
    await send_all(proxy, url, agent, model, 0, times=2)
    assert [(r.path, r.raw) for r in upstream.received] == resumed_sent
    assert resumed_sent[1::2] == resumed_sent[0::2]  # and the retry is its turn's bytes again
