"""End to end with the official openai SDK pointed at the running proxy."""

from __future__ import annotations

import openai
import pytest

from tests.support.config import make_config
TOOLS = [
    {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "grep", "parameters": {"type": "object", "properties": {}}}},
]


@pytest.fixture
async def sdk(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(make_config(url, server={"api_keys": ["local-key"]}))
    async with openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="local-key", max_retries=0) as sdk:
        yield sdk


async def test_non_stream(sdk):
    raw = await sdk.chat.completions.with_raw_response.create(model="auto", messages=[{"role": "user", "content": "hi"}])
    completion = raw.parse()
    assert completion.choices[0].message.content == "Hello from the mock upstream."
    assert raw.headers["x-router-model"] == "main"


async def test_stream_with_usage(sdk):
    stream = await sdk.chat.completions.create(
        model="auto", messages=[{"role": "user", "content": "hi"}], stream=True, stream_options={"include_usage": True}
    )
    text = ""
    usage = None
    async for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        if chunk.usage:
            usage = chunk.usage
    assert text.strip() == "Hello from the mock upstream."
    assert usage is not None and usage.total_tokens > 0


async def test_tool_call_round_trip(sdk):
    messages = [{"role": "user", "content": "read the files"}]
    first = await sdk.chat.completions.create(model="auto", messages=messages, tools=TOOLS)
    calls = first.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["read_file", "grep"]
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    for call in calls:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": f"result of {call.function.name}"})
    second = await sdk.chat.completions.create(model="auto", messages=messages, tools=TOOLS)
    assert "result of grep" in second.choices[0].message.content


async def test_streamed_parallel_tool_calls_reassemble(sdk):
    stream = await sdk.chat.completions.create(model="auto", messages=[{"role": "user", "content": "go"}], tools=TOOLS, stream=True)
    calls: dict[int, dict[str, str]] = {}
    async for chunk in stream:
        for delta in chunk.choices[0].delta.tool_calls or []:
            call = calls.setdefault(delta.index, {"name": "", "arguments": ""})
            call["name"] += delta.function.name or ""
            call["arguments"] += delta.function.arguments or ""
    assert calls == {0: {"name": "read_file", "arguments": '{"n":0}'}, 1: {"name": "grep", "arguments": '{"n":1}'}}


async def test_sdk_sees_proxy_errors_as_typed_exceptions(sdk):
    with pytest.raises(openai.NotFoundError) as info:
        await sdk.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "hi"}])
    assert info.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError):
        await sdk.chat.completions.create(model="auto", messages=[{"role": "wizard", "content": "hi"}])
