"""Claude Code's API to a local Ollama model on its native chat (``native_chat: true``): two translations in a row."""

from __future__ import annotations

import orjson

from tests.anthropic_factories import BASH
from tests.test_ollama_native import native_config, ollama, tool_call_lines  # noqa: F401 - ollama is a fixture

REQUEST = {"model": "auto", "max_tokens": 500, "messages": [{"role": "user", "content": "hi"}]}


def events(raw: bytes) -> list[dict]:
    return [orjson.loads(line[6:]) for line in raw.split(b"\n") if line.startswith(b"data: ")]


async def test_a_streamed_answer_comes_back_as_anthropic_events_with_ollamas_usage(proxy, ollama):  # noqa: F811
    mock, url = ollama
    client = await proxy(native_config(url))
    response = await client.post("/v1/messages", json={**REQUEST, "stream": True})
    assert response.status == 200 and response.headers["x-router-wire"] == "anthropic-messages->ollama-chat"
    got = events(await response.read())
    assert [e["type"] for e in got] == ["message_start", "ping", "content_block_start", "content_block_delta", "content_block_delta",
                                        "content_block_stop", "message_delta", "message_stop"]
    assert "".join(e["delta"]["text"] for e in got if e["type"] == "content_block_delta") == "Hello"
    assert got[0]["message"]["usage"]["input_tokens"] > 0
    assert got[-2]["usage"]["input_tokens"] == 42 and got[-2]["usage"]["output_tokens"] == 7
    assert mock.paths == ["/api/chat"] and mock.received[0]["options"]["num_ctx"] == 32_768


async def test_a_tool_call_and_a_whole_answer(proxy, ollama):  # noqa: F811
    mock, url = ollama
    mock.lines = tool_call_lines()
    client = await proxy(native_config(url))
    response = await client.post("/v1/messages", json={**REQUEST, "tools": [BASH]})
    message = await response.json()
    assert message["type"] == "message" and message["stop_reason"] == "tool_use"
    ((block,),) = [message["content"]]
    assert {k: v for k, v in block.items() if k != "id"} == {"type": "tool_use", "name": "read_file", "input": {"path": "a.py"}}
    assert block["id"].startswith("call_") and block["id"].endswith("_0")
    assert mock.received[0]["tools"][0]["function"]["name"] == "Bash"
