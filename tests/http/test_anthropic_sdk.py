"""End to end with the official ``anthropic`` SDK (and ``openai`` to an Anthropic model) through the proxy.

One loopback mock speaks both APIs: ``claude-main`` sits behind an ``api: anthropic``
provider (the request passes through; what the proxy did not change must arrive as
the client sent it), ``chat-main`` behind an OpenAI-compatible one (request and
answer translated, event by event when streamed).
"""

from __future__ import annotations

from typing import Any

import aiohttp
import anthropic
import openai
import orjson
import pytest

from router.wire.anthropic_messages.view import count_input_tokens
from router.tools.mock_anthropic import events as mock_events
from router.tools.mock_anthropic import answer as mock_answer
from router.tools.mock_answers import seal
from router.tools.mock_upstream import Behaviour
from tests.support.anthropic_factories import BASH, PNG, captured, image, text, tool_result, tool_use
from tests.support.anthropic_factories import two_wire_config

BETAS = "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,effort-2025-11-24"
CACHED = {"type": "ephemeral", "ttl": "1h", "scope": "global"}


@pytest.fixture
def mock(mock_upstream, monkeypatch):
    monkeypatch.setenv("MOCK_PROVIDER_KEY", "provider-secret")
    return mock_upstream


@pytest.fixture
async def proxy_url(proxy, mock) -> str:
    client = await proxy(two_wire_config(mock[1]))
    return str(client.make_url("")).rstrip("/")


@pytest.fixture
async def sdk(proxy_url):
    async with anthropic.AsyncAnthropic(base_url=proxy_url, api_key="local-key", max_retries=0) as client:
        yield client


def upstream_requests(mock, path: str) -> list[Any]:
    return [r for r in mock[0].received if r.path == path]


def history() -> list[dict[str, Any]]:
    """A tool round trip as Claude Code sends it back: thinking with its signature, cache markers with ttl and scope."""
    thought = "The user wants the files. I will call Bash."
    return [
        {"role": "user", "content": [text("list the files", cache_control=CACHED)]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": thought, "signature": seal(thought)}, tool_use("toolu_1")]},
        {"role": "user", "content": [tool_result("toolu_1", "main.py\nnotes.txt", is_error=False, cache_control=CACHED)]},
    ]


# ---- to an Anthropic-format provider: passed through


async def test_non_stream_passes_through_byte_faithfully(sdk, mock):
    messages = history()
    raw = await sdk.messages.with_raw_response.create(
        model="claude-main", max_tokens=2000, messages=messages, tools=[BASH], system=[text("be brief", cache_control=CACHED)],
        thinking={"type": "enabled", "budget_tokens": 1024}, extra_headers={"anthropic-beta": BETAS},
        extra_body={"context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}},
    )
    message = await raw.parse()
    assert message.content[-1].text == "Hello from the mock upstream. (tool said: main.py\nnotes.txt)"
    assert raw.headers["x-router-model"] == "claude-main"
    (sent,) = upstream_requests(mock, "/v1/messages")
    assert sent.headers["anthropic-beta"] == BETAS
    assert sent.headers["anthropic-version"] == sdk.default_headers["anthropic-version"]  # the SDK's own, newer one
    assert sent.headers["x-api-key"] == "provider-secret" and "Authorization" not in sent.headers
    assert sent.body["model"] == "claude-up"
    assert sent.body["messages"] == messages and sent.body["system"] == [text("be brief", cache_control=CACHED)]
    assert sent.body["context_management"] == {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}
    # compared as bytes: the signature and the cache markers are the very bytes the SDK sent
    assert orjson.dumps(messages[1]["content"][0]) in sent.raw
    assert orjson.dumps(messages[2]["content"][0]) in sent.raw


async def test_stream_is_relayed_event_by_event_unchanged(proxy_url, mock):
    request = {"model": "claude-main", "max_tokens": 2000, "stream": True, "tools": [BASH],
               "messages": [{"role": "user", "content": "list the files"}], "thinking": {"type": "enabled", "budget_tokens": 1024}}
    async with aiohttp.ClientSession() as http:
        # Claude Code's own headers: Accept application/json although it streams
        headers = {"x-api-key": "local-key", "anthropic-version": "2023-06-01", "Accept": "application/json"}
        async with http.post(f"{proxy_url}/v1/messages?beta=true", json=request, headers=headers) as response:
            assert response.status == 200 and response.content_type == "text/event-stream"
            received = await response.read()
    (sent,) = upstream_requests(mock, "/v1/messages")
    expected = b"".join(mock_events(sent.body, mock_answer(sent.body, "Hello from the mock upstream.")))
    assert received == expected


async def test_stream_with_the_sdk_rebuilds_the_tool_call(sdk):
    async with sdk.messages.stream(model="claude-main", max_tokens=1000, tools=[BASH], messages=[{"role": "user", "content": "go"}]) as stream:
        message = await stream.get_final_message()
    assert message.stop_reason == "tool_use"
    assert message.content[0].type == "tool_use" and message.content[0].name == "Bash"
    assert message.content[0].input == {"command": "ls"}  # rebuilt by the SDK from the relayed input_json_delta
    assert message.usage.input_tokens > 0


async def test_a_tool_round_trip(sdk):
    first = await sdk.messages.create(model="claude-main", max_tokens=1000, tools=[BASH], messages=[{"role": "user", "content": "list"}])
    call = next(b for b in first.content if b.type == "tool_use")
    messages = [{"role": "user", "content": "list"}, {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                {"role": "user", "content": [tool_result(call.id, "a.py b.py")]}]
    second = await sdk.messages.create(model="claude-main", max_tokens=1000, tools=[BASH], messages=messages)
    assert "a.py b.py" in second.content[-1].text


async def test_an_image_goes_through_as_sent(sdk, mock):
    content = [text("what is this?"), image()]
    await sdk.messages.create(model="claude-main", max_tokens=100, messages=[{"role": "user", "content": content}])
    (sent,) = upstream_requests(mock, "/v1/messages")
    assert sent.body["messages"][0]["content"] == content


async def test_count_tokens_counts_with_the_one_estimator(sdk, mock):
    request = captured("claude-code-tui/0015-POST-v1-messages-count-tokens.json")["body"]
    counted = await sdk.messages.count_tokens(model=request["model"], messages=request["messages"], tools=request["tools"])
    assert counted.input_tokens == count_input_tokens(request) > 1000
    assert upstream_requests(mock, "/v1/messages/count_tokens") == []  # answered by the proxy itself


async def test_errors_come_in_anthropics_shape(sdk, proxy_url):
    with pytest.raises(anthropic.BadRequestError) as bad:
        await sdk.messages.create(model="claude-main", max_tokens=0, messages=[{"role": "user", "content": "hi"}])
    body = bad.value.body
    assert isinstance(body, dict) and body["error"] == {"type": "invalid_request_error", "message": "max_tokens: Field required (a positive integer)"}
    # the SDK reads the request-id header as the error's request_id: the body's, the proxy's id of the request
    assert body["type"] == "error" and body["request_id"] == bad.value.request_id == bad.value.response.headers["x-router-request-id"]
    async with anthropic.AsyncAnthropic(base_url=proxy_url, api_key="wrong", max_retries=0) as stranger:
        with pytest.raises(anthropic.AuthenticationError) as denied:
            await stranger.messages.create(model="claude-main", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert denied.value.body["error"]["type"] == "authentication_error"


async def test_the_sdks_bearer_auth_is_accepted(proxy_url):
    async with anthropic.AsyncAnthropic(base_url=proxy_url, auth_token="local-key", max_retries=0) as bearer:
        message = await bearer.messages.create(model="claude-main", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert message.content[0].text == "Hello from the mock upstream."


async def test_no_capable_model_is_an_anthropic_error_naming_the_need(sdk):
    with pytest.raises(anthropic.BadRequestError) as refused:
        await sdk.messages.create(model="plain", max_tokens=10, tools=[BASH], messages=[{"role": "user", "content": "hi"}])
    assert refused.value.body["type"] == "error" and refused.value.body["error"]["type"] == "invalid_request_error"
    assert "tools" in refused.value.body["error"]["message"]


# ---- to an OpenAI-compatible provider: translated


async def test_translated_non_stream(sdk, mock):
    message = await sdk.messages.create(model="chat-main", max_tokens=1000, system=[text("be brief", cache_control=CACHED)],
                                        messages=[{"role": "user", "content": [text("what is this?"), image()]}])
    assert message.type == "message" and message.content[0].text == "Hello from the mock upstream."
    assert message.model == "chat-main" and message.stop_reason == "end_turn" and message.usage.input_tokens > 0
    (sent,) = upstream_requests(mock, "/v1/chat/completions")
    assert sent.headers["Authorization"] == "Bearer provider-secret"
    assert sent.body["model"] == "chat-up" and sent.body["max_tokens"] == 1000
    assert sent.body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]},
    ]


async def test_translated_stream_event_by_event(proxy_url, mock):
    request = {"model": "chat-main", "max_tokens": 1000, "stream": True, "tools": [BASH], "messages": [{"role": "user", "content": "list the files"}]}
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{proxy_url}/v1/messages", json=request, headers={"x-api-key": "local-key"}) as response:
            assert response.status == 200
            raw = await response.read()
    events = [orjson.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: ")]
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["message_start", "ping"] and kinds[-2:] == ["message_delta", "message_stop"]
    assert events[0]["message"]["usage"]["input_tokens"] > 0
    starts = [e for e in events if e["type"] == "content_block_start"]
    assert starts and all(s["content_block"]["type"] == "tool_use" for s in starts)
    for start in starts:
        fragments = [e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta" and e["index"] == start["index"]]
        assert isinstance(orjson.loads("".join(fragments)), dict)  # valid JSON rebuilt from input_json_delta
    assert kinds.count("content_block_stop") == len(starts)
    assert events[-2]["delta"]["stop_reason"] == "tool_use" and events[-2]["usage"]["output_tokens"] > 0
    (sent,) = upstream_requests(mock, "/v1/chat/completions")
    assert sent.body["tools"][0]["function"]["name"] == "Bash" and sent.body["stream_options"] == {"include_usage": True}


async def test_translated_tool_round_trip_with_the_sdk_stream(sdk, mock):
    async with sdk.messages.stream(model="chat-main", max_tokens=1000, tools=[BASH], messages=[{"role": "user", "content": "go"}]) as stream:
        first = await stream.get_final_message()
    call = next(b for b in first.content if b.type == "tool_use")
    assert isinstance(call.input, dict) and first.usage.input_tokens > 0
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                {"role": "user", "content": [tool_result(call.id, "a.py b.py")]}]
    second = await sdk.messages.create(model="chat-main", max_tokens=1000, tools=[BASH], messages=messages)
    assert "a.py b.py" in second.content[-1].text
    sent = upstream_requests(mock, "/v1/chat/completions")[-1]
    assert [m["role"] for m in sent.body["messages"]] == ["user", "assistant", "tool"]
    assert sent.body["messages"][2] == {"role": "tool", "tool_call_id": call.id, "content": "a.py b.py"}


async def test_a_translated_stream_that_breaks_ends_in_an_error_event(proxy_url, mock):
    mock[0].then(Behaviour(cut_after_events=2))
    request = {"model": "chat-main", "max_tokens": 100, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{proxy_url}/v1/messages", json=request, headers={"x-api-key": "local-key"}) as response:
            raw = await response.read()
    events = [orjson.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: ")]
    assert events[0]["type"] == "message_start" and events[-1]["type"] == "error"
    assert "message_stop" not in [e["type"] for e in events]


# ---- the openai SDK to an Anthropic-format provider


@pytest.fixture
async def openai_sdk(proxy_url):
    async with openai.AsyncOpenAI(base_url=f"{proxy_url}/v1", api_key="local-key", max_retries=0) as client:
        yield client


CHAT_TOOLS = [{"type": "function", "function": {"name": "Bash", "parameters": BASH["input_schema"]}}]


async def test_openai_sdk_to_an_anthropic_model(openai_sdk, mock):
    completion = await openai_sdk.chat.completions.create(model="claude-main", messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
    assert completion.choices[0].message.content == "Hello from the mock upstream."
    assert completion.usage.prompt_tokens > 0
    (sent,) = upstream_requests(mock, "/v1/messages")
    assert sent.body == {"model": "claude-up", "messages": [{"role": "user", "content": [text("hi")]}], "system": "be brief", "max_tokens": 64000}
    assert sent.headers["x-api-key"] == "provider-secret" and sent.headers["anthropic-version"] == "2023-06-01"


async def test_openai_sdk_stream_and_tool_round_trip_to_an_anthropic_model(openai_sdk, mock):
    stream = await openai_sdk.chat.completions.create(model="claude-main", messages=[{"role": "user", "content": "go"}], tools=CHAT_TOOLS,
                                                      stream=True, stream_options={"include_usage": True})
    calls: dict[int, dict[str, str]] = {}
    usage = finish = None
    async for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for call in choice.delta.tool_calls or []:
                entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] += call.id or ""
                entry["name"] += (call.function.name or "") if call.function else ""
                entry["arguments"] += (call.function.arguments or "") if call.function else ""
    assert finish == "tool_calls" and usage is not None and usage.prompt_tokens > 0
    (call,) = calls.values()
    assert call["name"] == "Bash" and isinstance(orjson.loads(call["arguments"]), dict)
    messages = [{"role": "user", "content": "go"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": call["id"], "type": "function", "function": {"name": "Bash", "arguments": call["arguments"]}}]},
                {"role": "tool", "tool_call_id": call["id"], "content": "a.py b.py"}]
    second = await openai_sdk.chat.completions.create(model="claude-main", messages=messages, tools=CHAT_TOOLS)
    assert "a.py b.py" in second.choices[0].message.content
    sent = upstream_requests(mock, "/v1/messages")[-1]
    assert sent.body["messages"][2] == {"role": "user", "content": [tool_result(call["id"], "a.py b.py")]}


# ---- upstream errors, in the client's format


async def test_an_anthropic_providers_own_400_reaches_the_client_as_it_came(sdk, mock):
    error = {"type": "error", "error": {"type": "invalid_request_error", "message": "messages.1.content.0: Invalid `signature` in `thinking` block"}}
    mock[0].then(Behaviour(status=400, body=orjson.dumps(error)))
    with pytest.raises(anthropic.BadRequestError) as bad:
        await sdk.messages.create(model="claude-main", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert bad.value.body == error


async def test_a_chat_providers_400_reaches_an_anthropic_client_in_anthropics_shape(sdk, mock):
    mock[0].then(Behaviour(status=400, body=orjson.dumps({"error": {"message": "context too long", "type": "invalid_request_error", "code": None}})))
    with pytest.raises(anthropic.BadRequestError) as bad:
        await sdk.messages.create(model="chat-main", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert bad.value.body["type"] == "error" and bad.value.body["error"]["type"] == "invalid_request_error"
    assert "context too long" in bad.value.body["error"]["message"]


async def test_overloaded_providers_end_in_an_anthropic_api_error(sdk, mock):
    mock[0].then(Behaviour(status=529), Behaviour(status=529))
    with pytest.raises(anthropic.APIStatusError) as failed:
        await sdk.messages.create(model="claude-main", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert failed.value.status_code == 502
    assert failed.value.body["type"] == "error" and failed.value.body["error"]["type"] == "api_error"
    assert "claude-main via anth" in failed.value.body["error"]["message"]
