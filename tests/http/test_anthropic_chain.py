"""Claude Code's own requests through the whole proxy: session, pinch, and the wire in and out everywhere."""

from __future__ import annotations

import copy
import json

import orjson

from router.core.retrieve import RETRIEVE_TOOL
from router.wire.anthropic_messages.retrieve import with_tool
import pytest
from multidict import CIMultiDict, CIMultiDictProxy

from router.tools.explain import explain_request, render_explanation
from router.tools.decision_text import decision_detail
from router.tools.mock_answers import MOCK_SUMMARY
from tests.support.anthropic_factories import AGENTS, captured, streamed_message, two_wire_config
from tests.support.wire_factories import sse_events
from router.core.results import PINCH as PINCH_STATS

PINCH = {"enabled": True, "budget_tokens": 200, "keep_last_turns": 1, "max_summarize_chars": 400}
CHAIN = ["session-fingerprint", "pinch-prune", "capability-gate", "upstream-forward"]


@pytest.fixture
def mock(mock_upstream, monkeypatch):
    monkeypatch.setenv("MOCK_PROVIDER_KEY", "provider-secret")
    return mock_upstream


def claude_code_request(model: str, *, long_result: bool = False) -> tuple[dict, dict]:
    """Claude Code's 4th captured request (two tool round trips, thinking, reminders), pinned to ``model``."""
    request = captured("claude-code/0004-POST-v1-messages.json")
    body = copy.deepcopy(request["body"])
    body["model"] = model
    if long_result:  # the first round trip's result, now old enough to be compressed
        body["messages"][3]["content"][0]["content"] = "main.py\nnotes.txt\n" + "x" * 5000
    headers = {k: v for k, v in request["headers"].items() if k.lower() not in ("host", "content-length", "connection", "accept-encoding", "x-api-key")}
    return body, {**headers, "x-api-key": "local-key"}


async def decisions(client) -> list[dict]:
    return (await (await client.get("/v1/decisions", headers={"x-api-key": "local-key"})).json())["data"]


async def test_claude_codes_request_passes_through_with_only_model_limit_and_old_results_changed(proxy, mock):
    client = await proxy(two_wire_config(mock[1], middlewares=CHAIN, pinch=PINCH))
    body, headers = claude_code_request("claude-main", long_result=True)
    response = await client.post("/v1/messages?beta=true", data=orjson.dumps(body), headers=headers)
    raw = await response.read()
    assert response.status == 200 and raw.rstrip().endswith(b'data: {"type":"message_stop"}')
    assert int(response.headers["x-router-pinch-saved"]) > 1000
    assert response.headers["x-router-wire"] == "anthropic-messages->anthropic-messages"
    assert "x-router-dropped" not in response.headers  # passed through: nothing to drop
    (sent,) = [r for r in mock[0].received if r.path == "/v1/messages"]
    assert sent.headers["anthropic-beta"] == headers["anthropic-beta"] and sent.headers["anthropic-version"] == "2023-06-01"
    old_result = sent.body["messages"][3]["content"][0]
    assert old_result["tool_use_id"] == "toolu_mock_2" and len(old_result["content"]) < 1000
    expected = copy.deepcopy(body)
    expected["model"] = "claude-up"
    expected["max_tokens"] = 64000  # Claude Code's 128000 clamped to the model's limit, never refused
    expected["messages"][3]["content"][0]["content"] = old_result["content"]
    expected = with_tool(expected, RETRIEVE_TOOL)  # pinch_retrieve declared after Claude Code's tools (lossy first sight)
    assert sent.body == expected  # thinking signatures, cache_control, metadata, context_management: as sent
    assert orjson.dumps(body["messages"][2]["content"][0]) in sent.raw  # a thinking block, byte for byte


async def test_the_session_is_claude_codes_and_the_record_shows_the_wires(proxy, mock):
    client = await proxy(two_wire_config(mock[1]))
    body, headers = claude_code_request("chat-main")
    del headers["X-Claude-Code-Session-Id"]  # then the session part of metadata.user_id, the same id
    response = await client.post("/v1/messages", data=orjson.dumps(body), headers=headers)
    await response.read()
    assert response.status == 200 and response.headers["x-router-wire"] == "anthropic-messages->openai-chat"
    with_header = await client.post("/v1/messages", data=orjson.dumps(body), headers=claude_code_request("chat-main")[1])
    await with_header.read()
    assert response.headers["x-router-session"] == with_header.headers["x-router-session"]
    first, second = (await decisions(client))[::-1]
    assert (first["session_source"], second["session_source"]) == ("metadata", "header")
    assert (first["wire_in"], first["wire_out"]) == ("anthropic-messages", "openai-chat")
    assert "wire        anthropic-messages → openai-chat, translated" in decision_detail(first)
    metrics = await (await client.get("/metrics", headers={"x-api-key": "local-key"})).text()
    assert 'pinch_router_wire_requests_total{wire_in="anthropic-messages",wire_out="openai-chat"} 2.0' in metrics


async def test_explain_reads_a_claude_code_request_and_names_the_translation(mock):
    body, headers = claude_code_request("chat-main", long_result=True)
    config = two_wire_config(mock[1], middlewares=CHAIN, pinch=PINCH)
    ctx = await explain_request(config, body, CIMultiDictProxy(CIMultiDict(headers)))
    text = render_explanation(ctx, config)
    assert ctx.view.wire == "anthropic-messages" and ctx[PINCH_STATS] is not None and ctx[PINCH_STATS].compressed == 1
    assert "would go to chat-main (anthropic-messages → openai-chat, translated)" in text
    assert "needs       tools, thinking, " in text  # Claude Code asks thinking: {type: adaptive}


async def test_a_server_tool_a_chat_provider_cannot_run_is_dropped_and_named(proxy, mock):
    client = await proxy(two_wire_config(mock[1]))
    body, headers = claude_code_request("chat-main")
    body["tools"] = [*body["tools"], {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}]
    response = await client.post("/v1/messages", data=orjson.dumps(body), headers=headers)
    await response.read()
    assert response.status == 200 and response.headers["x-router-dropped"] == "tool web_search"
    (sent,) = [r for r in mock[0].received if r.path == "/v1/chat/completions"]
    assert "web_search" not in {t["function"]["name"] for t in sent.body["tools"]}
    (row,) = await decisions(client)
    assert row["wire_dropped"] == "tool web_search"
    assert "wire        anthropic-messages → openai-chat, translated, dropped tool web_search" in decision_detail(row)


@pytest.mark.parametrize("reasoning_content", [False, True])
async def test_thinking_goes_to_a_chat_model_as_reasoning_content_only_when_it_needs_it(proxy, mock, reasoning_content):
    client = await proxy(two_wire_config(mock[1], reasoning_content=reasoning_content))
    body, headers = claude_code_request("chat-main")
    response = await client.post("/v1/messages", data=orjson.dumps(body), headers=headers)
    await response.read()
    (sent,) = [r for r in mock[0].received if r.path == "/v1/chat/completions"]
    assistants = [m for m in sent.body["messages"] if m["role"] == "assistant"]
    expected = "The user wants something only a tool can tell. I will call Bash."
    assert [m.get("reasoning_content") for m in assistants][0] == (expected if reasoning_content else None)


@pytest.mark.parametrize("pinched", [False, True], ids=["as sent", "pinched"])
async def test_message_start_states_the_prompt_the_chain_counted_for_a_chat_model(proxy, mock, pinched):
    """Translated to a chat model, the stream's message_start carries the input tokens before the
    provider's usage comes: the chain's own count of the prompt as it went upstream (pinch's
    tokens after, else count_tokens' answer for the same body) with the configured estimator."""
    client = await proxy(two_wire_config(mock[1], middlewares=CHAIN, pinch={**PINCH, "enabled": pinched}, tokens={"image_tokens": 300}))
    body, headers = claude_code_request("chat-main", long_result=True)
    body["messages"][0]["content"] = [*body["messages"][0]["content"], {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]
    counted = await client.post("/v1/messages/count_tokens", data=orjson.dumps({k: v for k, v in body.items() if k != "max_tokens"}), headers=headers)
    response = await client.post("/v1/messages?beta=true", data=orjson.dumps(body), headers=headers)
    assert response.status == 200 and counted.status == 200
    start = next(data for name, data in sse_events(await response.read()) if name == "message_start")
    (row,) = await decisions(client)
    expected = row["tokens_after"] if pinched else (await counted.json())["input_tokens"]
    assert start["message"]["usage"]["input_tokens"] == expected
    if pinched:
        assert row["tokens_after"] < row["tokens_before"]  # the long old result went compressed


@pytest.mark.parametrize("folder", ["compaction/claude-code", "compaction/claude-code-auto"])
async def test_claude_codes_compaction_gets_the_summary_from_an_anthropic_provider(proxy, mock, folder):
    """Claude Code 2.1.332's /compact and auto-compact, passed through to the mock's Anthropic API: each summarising
    request is answered with the summary, in the <summary> block it asks for, and no tool call — what Claude Code
    keeps as the compacted conversation (the mock answered it as any turn before: a Bash call); the request after
    an auto-compact (the summary first, then the call and result it kept) is answered, not run again."""
    client = await proxy(two_wire_config(mock[1]))
    records = [captured(f"{folder}/{path.name}") for path in sorted((AGENTS / folder).glob("*.json"))]
    for record in records:
        headers = {k: v for k, v in record["headers"].items() if k.lower() not in ("host", "content-length", "connection", "accept-encoding", "x-api-key")}
        body = {**record["body"], "model": "claude-main"}
        response = await client.post("/v1/messages?beta=true", data=orjson.dumps(body), headers={**headers, "x-api-key": "local-key"})
        assert response.status == 200, await response.text()
        assert response.headers["x-router-wire"] == "anthropic-messages->anthropic-messages"
        content = streamed_message(await response.read())["content"]
        texts, calls = [b["text"] for b in content if b["type"] == "text"], [b for b in content if b["type"] == "tool_use"]
        if "Your task is to create a detailed summary" in json.dumps(record["body"]["messages"][-1]):
            assert texts == [f"<summary>\n{MOCK_SUMMARY}\n</summary>"] and calls == []
        elif MOCK_SUMMARY in json.dumps(record["body"]["messages"][0]):
            assert texts and calls == []
