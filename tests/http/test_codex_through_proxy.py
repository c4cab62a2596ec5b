"""Codex CLI's captured requests (tests/data/agents/codex) through the proxy to a chat-completions mock.

Sent as Codex sent them, headers included: each is translated to chat, answered
in Responses events Codex can read (a call to its shell tool on the first
request of a prompt, text once the output is in), and filed under Codex's own
session id from its ``session-id`` header.
"""

from __future__ import annotations

import pytest
from router.tools.mock_answers import MOCK_SUMMARY
from router.tools.mock_capture import REDACTED
from router.wire.openai_responses.compaction import SUMMARY_LEAD_IN, decode_summary
from tests.support.config import make_config, model_entry
from tests.http.test_agent_fixtures import NOT_REPLAYED, load
from tests.support.wire_factories import sse_events

CODEX = [f"codex/000{n}-POST-v1-responses.json" for n in (1, 2, 3, 4)]


def codex_config(url: str):
    """The captured model name (``mock-model``) routes like ``auto``."""
    return make_config(url, models=[model_entry("main", context_window=128_000)], routing={"aliases": ["auto", "mock-model"]})


@pytest.mark.parametrize("name", CODEX)
async def test_a_captured_codex_request_is_served_through_chat(proxy, mock_upstream, name):
    mock, url = mock_upstream
    client = await proxy(codex_config(url))
    record = load(name)
    headers = {k: v for k, v in record["headers"].items() if k.lower() not in NOT_REPLAYED and not v.endswith(REDACTED)}
    response = await client.post("/v1/responses", json=record["body"], headers=headers)
    assert response.status == 200, await response.text()
    assert response.headers["x-router-session"] and response.headers["x-router-dropped"] == "tool namespace:multi_agent_v1, tool web_search"
    events = sse_events(await response.read())
    names = [n for n, _ in events]
    assert names[:2] == ["response.created", "response.in_progress"] and names[-1] == "response.completed"
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    output = events[-1][1]["response"]["output"]
    sent = mock.received[-1].body
    if sent["messages"][-1]["role"] == "tool":  # the output of Codex's call is in: it gets text
        assert [o["type"] for o in output] == ["message"]
    else:
        assert [(o["type"], o["name"], o["arguments"]) for o in output] == [("function_call", "exec_command", '{"cmd":"ls"}')]
    assert "encrypted_content" not in str(sent) and "reasoning" not in sent


async def test_codex_requests_share_one_session_from_its_header(proxy, mock_upstream, http):
    _, url = mock_upstream
    client = await proxy(codex_config(url))
    sessions = set()
    for name in CODEX:
        record = load(name)
        headers = {k: v for k, v in record["headers"].items() if k.lower() not in NOT_REPLAYED and not v.endswith(REDACTED)}
        response = await client.post("/v1/responses", json=record["body"], headers=headers)
        await response.read()
        sessions.add(response.headers["x-router-session"])
    assert len(sessions) == 1
    rows = (await (await client.get("/v1/decisions", params={"session": sessions.pop()})).json())["data"]
    assert len(rows) == 4 and {r["session_source"] for r in rows} == {"header"}
    assert {(r["wire_in"], r["wire_out"]) for r in rows} == {("openai-responses", "openai-chat")}



COMPACTED = [f"compaction/codex-openai-provider/000{n}-POST-v1-responses.json" for n in (2, 3)]


async def test_a_compaction_a_chat_model_wrote_reaches_a_responses_provider_as_its_summary(proxy, mock_upstream):
    """Codex on OpenAI's provider compacts (its captured compaction_trigger) through a chat model, so the proxy makes the
    compaction item; a later turn of the session routed to a Responses provider carries that item, which the provider
    cannot read (the mock refuses it as OpenAI refuses encrypted content it did not make): it gets the summary as a
    user message where the item stood, and answers the turn."""
    mock, url = mock_upstream
    providers = {"chat": {"base_url": url}, "responses": {"base_url": url, "wire": "openai-responses"}}
    models = [model_entry(name, provider=provider, context_window=128_000) for name, provider in (("chat-main", "chat"), ("resp-main", "responses"))]
    client = await proxy(make_config(url, providers=providers, models=models))
    trigger, later = (load(name) for name in COMPACTED)
    headers = {k: v for k, v in trigger["headers"].items() if k.lower() not in NOT_REPLAYED and not v.endswith(REDACTED)}
    response = await client.post("/v1/responses", json={**trigger["body"], "model": "chat-main"}, headers=headers)
    assert response.status == 200, await response.text()
    (made,) = [i for i in sse_events(await response.read())[-1][1]["response"]["output"] if i["type"] == "compaction"]
    at = next(i for i, item in enumerate(later["body"]["input"]) if item["type"] == "compaction")
    items = [made if i == at else item for i, item in enumerate(later["body"]["input"])]
    response = await client.post("/v1/responses", json={**later["body"], "model": "resp-main", "input": items}, headers=headers)
    assert response.status == 200, await response.text()
    sent = mock.received[-1]
    assert sent.path == "/v1/responses" and not [item for item in sent.body["input"] if item.get("type") == "compaction"]
    assert sent.body["input"][at] == {"type": "message", "role": "user", "content": [{"type": "input_text", "text": SUMMARY_LEAD_IN + decode_summary(made["encrypted_content"])}]}
    assert MOCK_SUMMARY in sent.body["input"][at]["content"][0]["text"]
    output = sse_events(await response.read())[-1][1]["response"]["output"]
    assert [item["type"] for item in output if item["type"] != "reasoning"] == ["message"]  # answered, not run again
