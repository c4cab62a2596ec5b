"""The official openai SDK's ``client.responses.create`` through the proxy, to both kinds of provider.

To a chat-completions provider the proxy translates: the request the mock
receives is asserted as chat, and the answer's event sequence event by event.
To a provider that speaks the Responses API (``wire: openai-responses``) it
passes through: the body the mock receives is the client's but for ``model``,
and the stream reaches the client byte for byte as the mock sent it.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
import orjson
import pytest

from router.tools import mock_responses
from router.tools.mock_upstream import Behaviour
from tests.support.config import make_config, model_entry
from tests.support.wire_factories import WEB_SEARCH_TOOL, sse_events

TOOLS = [
    {"type": "function", "name": "read_file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
]
IMAGE = "data:image/png;base64,iVBORw0KGgo="
TEXT_EVENTS = ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]
TEXT_END = ["response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"]


def config(url: str, wire: str) -> Any:
    vision = model_entry("main", supports={"tools": True, "vision": True, "json_mode": True})
    return make_config(url, providers={"mock": {"base_url": url, "wire": wire}}, models=[vision], server={"api_keys": ["local-key"]})


@pytest.fixture(params=["openai-chat", "openai-responses"])
async def setup(request, proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(config(url, request.param))
    base = str(client.make_url("/v1"))
    async with openai.AsyncOpenAI(base_url=base, api_key="local-key", max_retries=0) as sdk:
        yield sdk, mock, request.param, base


async def test_non_stream(setup):
    sdk, mock, wire, _ = setup
    raw = await sdk.responses.with_raw_response.create(model="auto", input="hi", store=False, max_output_tokens=50_000)
    response = raw.parse()
    assert response.output_text == "Hello from the mock upstream."
    assert response.status == "completed" and response.usage is not None and response.usage.input_tokens > 0
    assert raw.headers["x-router-model"] == "main"
    assert raw.headers["x-router-wire"] == f"openai-responses->{wire}"
    sent = mock.received[-1]
    if wire == "openai-chat":
        assert sent.path == "/v1/chat/completions"
        assert sent.body == {"model": "up-main", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4000}
    else:
        assert sent.path == "/v1/responses"
        assert sent.body == {"model": "up-main", "input": "hi", "store": False, "max_output_tokens": 4000}  # only the model and the clamp changed


async def test_stream_event_by_event(setup):
    sdk, mock, wire, _ = setup
    stream = await sdk.responses.create(model="auto", input=[{"role": "user", "content": "hi"}], store=False, stream=True)
    events = [event async for event in stream]
    types = [e.type for e in events]
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert types == TEXT_EVENTS + ["response.output_text.delta"] * len(deltas) + TEXT_END
    assert "".join(deltas).strip() == "Hello from the mock upstream."  # the chat mock streams words with their space
    assert [e.sequence_number for e in events] == list(range(len(events)))
    completed = events[-1].response
    assert completed.output_text == "".join(deltas) and completed.usage.total_tokens > 0
    if wire == "openai-chat":
        assert mock.received[-1].body["stream"] is True and mock.received[-1].body["stream_options"] == {"include_usage": True}


async def test_passthrough_relays_the_stream_byte_for_byte(proxy, mock_upstream, http: aiohttp.ClientSession):
    mock, url = mock_upstream
    client = await proxy(config(url, "openai-responses"))
    body = {"model": "auto", "input": "hi", "store": False, "stream": True, "reasoning": {"summary": "auto"}, "include": ["reasoning.encrypted_content"]}
    response = await client.post("/v1/responses", json=body, headers={"Authorization": "Bearer local-key"})
    got = await response.read()
    sent = mock.received[-1].body
    expected = b"".join(mock_responses.events(sent, mock_responses.answer(sent, "Hello from the mock upstream.")))
    assert got == expected
    assert sent == {**body, "model": "up-main"}


def _mock_arguments(wire: str, sent: dict[str, Any]) -> str:
    """The arguments the mock gave its call: the chat mock numbers them, the Responses mock fills the schema."""
    if wire == "openai-chat":
        return '{"n":0}'
    return mock_responses.answer(sent, "").tool_call.arguments_json


async def test_a_function_call_round_trip(setup):
    sdk, mock, wire, _ = setup
    first = await sdk.responses.create(model="auto", input="read notes.txt", tools=TOOLS, store=False)
    calls = [item for item in first.output if item.type == "function_call"]
    assert [c.name for c in calls] == ["read_file"] and isinstance(orjson.loads(calls[0].arguments), dict)
    assert calls[0].arguments == _mock_arguments(wire, mock.received[-1].body)
    history: list[Any] = [{"role": "user", "content": "read notes.txt"}]
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history += [{"type": "function_call_output", "call_id": c.call_id, "output": "the notes say hi"} for c in calls]
    second = await sdk.responses.create(model="auto", input=history, tools=TOOLS, store=False)
    assert "the notes say hi" in second.output_text
    sent = mock.received[-1].body
    if wire == "openai-chat":
        assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "tool"]
        assert sent["messages"][1]["tool_calls"][0]["id"] == calls[0].call_id
        assert sent["messages"][2] == {"role": "tool", "tool_call_id": calls[0].call_id, "content": "the notes say hi"}
        assert sent["tools"] == [{"type": "function", "function": {k: v for k, v in TOOLS[0].items() if k != "type"}}]
    else:
        assert sent["input"][1:] == history[1:]


async def test_a_streamed_function_call(setup):
    sdk, mock, wire, _ = setup
    stream = await sdk.responses.create(model="auto", input="read notes.txt", tools=TOOLS, store=False, stream=True)
    events = [event async for event in stream]
    types = [e.type for e in events]
    assert types[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert types[-3:] == ["response.function_call_arguments.done", "response.output_item.done", "response.completed"]
    arguments = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    done = next(e for e in events if e.type == "response.output_item.done")
    assert done.item.type == "function_call" and done.item.name == "read_file" and done.item.arguments == arguments
    assert events[-1].response.output[0].arguments == arguments == _mock_arguments(wire, mock.received[-1].body)


async def test_an_image_input(setup):
    sdk, mock, wire, _ = setup
    content = [{"type": "input_text", "text": "what is this?"}, {"type": "input_image", "image_url": IMAGE, "detail": "low"}]
    response = await sdk.responses.create(model="auto", input=[{"role": "user", "content": content}], store=False)
    assert response.output_text == "Hello from the mock upstream."
    sent = mock.received[-1].body
    if wire == "openai-chat":
        assert sent["messages"][0]["content"] == [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": IMAGE, "detail": "low"}}]
    else:
        assert sent["input"][0]["content"] == content


async def test_an_image_needs_a_vision_model(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(make_config(url, server={"api_keys": ["local-key"]}))  # the one model has no vision
    async with openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="local-key", max_retries=0) as sdk:
        content = [{"type": "input_image", "image_url": IMAGE}]
        with pytest.raises(openai.BadRequestError) as caught:
            await sdk.responses.create(model="auto", input=[{"role": "user", "content": content}], store=False)
    assert "does not support images" in caught.value.message


async def test_server_side_state_is_refused_naming_the_field(setup):
    sdk, mock, _, _ = setup
    with pytest.raises(openai.BadRequestError) as caught:
        await sdk.responses.create(model="auto", input="hi", previous_response_id="resp_123")
    assert caught.value.param == "previous_response_id" and "'store': false" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        await sdk.responses.create(model="auto", input="hi", store=True)
    assert caught.value.param == "store"
    assert mock.received == []  # refused before any upstream was asked


async def test_tools_a_chat_provider_cannot_run_are_dropped_and_named(setup):
    sdk, mock, wire, _ = setup
    raw = await sdk.responses.with_raw_response.create(model="auto", input="hi", tools=[*TOOLS, WEB_SEARCH_TOOL], store=False)
    if wire == "openai-chat":
        assert raw.headers["x-router-dropped"] == "tool web_search"
        assert [t["function"]["name"] for t in mock.received[-1].body["tools"]] == ["read_file"]
    else:
        assert "x-router-dropped" not in raw.headers
        assert mock.received[-1].body["tools"] == [*TOOLS, WEB_SEARCH_TOOL]


async def test_cached_tokens_reach_the_responses_usage(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(config(url, "openai-chat"))
    usage = {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105, "prompt_tokens_details": {"cached_tokens": 64}}
    mock.then(Behaviour(usage=usage), Behaviour(usage=usage))
    async with openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="local-key", max_retries=0) as sdk:
        whole = await sdk.responses.create(model="auto", input="hi", store=False)
        stream = await sdk.responses.create(model="auto", input="hi", store=False, stream=True)
        streamed = [e async for e in stream][-1].response
    for response in (whole, streamed):
        assert response.usage.input_tokens == 100 and response.usage.input_tokens_details.cached_tokens == 64
        assert response.usage.output_tokens == 5


@pytest.mark.parametrize("wire", ["openai-chat", "openai-responses"])
async def test_a_stream_cut_by_the_upstream_ends_with_an_error_event(proxy, mock_upstream, wire):
    mock, url = mock_upstream
    client = await proxy(config(url, wire))
    mock.then(Behaviour(cut_after_events=4))
    body = {"model": "auto", "input": "hi", "store": False, "stream": True}
    response = await client.post("/v1/responses", json=body, headers={"Authorization": "Bearer local-key"})
    events = sse_events(await response.read())
    name, data = events[-1]
    assert name == "error" and data["code"] == "upstream_stream_interrupted"
    assert events[0][0] == "response.created" and "response.completed" not in [n for n, _ in events]


async def test_a_passed_through_stream_logs_the_usage_of_response_completed(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(config(url, "openai-responses"))
    body = {"model": "auto", "input": "hi", "store": False, "stream": True}
    response = await client.post("/v1/responses", json=body, headers={"Authorization": "Bearer local-key"})
    events = sse_events(await response.read())
    usage = events[-1][1]["response"]["usage"]
    rows = (await (await client.get("/v1/decisions", headers={"Authorization": "Bearer local-key"})).json())["data"]
    assert (rows[0]["prompt_tokens"], rows[0]["completion_tokens"]) == (usage["input_tokens"], usage["output_tokens"])
    assert rows[0]["cached_tokens"] == usage["input_tokens_details"]["cached_tokens"]


async def test_a_chat_client_cannot_be_sent_to_a_responses_provider(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(config(url, "openai-responses"))
    body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}
    response = await client.post("/v1/chat/completions", json=body, headers={"Authorization": "Bearer local-key"})
    assert response.status == 502
    assert "no translation from openai-chat to openai-responses" in (await response.json())["error"]["message"]
    assert mock.received == []
