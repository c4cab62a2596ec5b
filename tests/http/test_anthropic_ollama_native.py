"""Claude Code's API to a local Ollama model on its native chat (``native_chat: true``): two translations in a row."""

from __future__ import annotations

import orjson

from tests.support.anthropic_factories import BASH
from tests.http.test_ollama_native import native_config, ollama, tool_call_lines  # noqa: F401 - ollama is a fixture

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


async def test_claude_codes_tool_loop_reaches_the_native_mock_in_a_shape_ollama_takes(proxy, mock_upstream):
    """Claude Code's loop as captured through the proxy to the mock's native ``/api/chat`` (which refuses what
    Ollama's decoding refuses): three turns of tool_use → tool_result, each call answered by the id Ollama
    gave it, its arguments an object, its result naming the call and the tool."""
    from router.tools.mock_upstream import Behaviour

    mock, url = mock_upstream
    mock.default = Behaviour(tool_commands=("cat part1.txt", "cat part2.txt"))
    client = await proxy(native_config(url))
    messages: list[dict] = [{"role": "user", "content": [{"type": "text", "text": "read the parts"}]}]
    for turn in range(3):
        response = await client.post("/v1/messages", json={**REQUEST, "messages": messages, "tools": [BASH], "stream": turn == 1})
        assert response.status == 200
        if turn == 1:
            got = events(await response.read())
            start = next(e["content_block"] for e in got if e["type"] == "content_block_start")
            arguments = "".join(e["delta"]["partial_json"] for e in got if e["type"] == "content_block_delta")
            content = [{**start, "input": orjson.loads(arguments)}]
        else:
            content = (await response.json())["content"]
        if turn == 2:
            assert content == [{"type": "text", "text": "Hello from the mock upstream. (tool said: part 2)"}]
            break
        (block,) = content
        assert block["type"] == "tool_use" and block["input"] == {"command": f"cat part{turn + 1}.txt"}
        messages += [{"role": "assistant", "content": content},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": f"part {turn + 1}"}]}]
    sent = [r.body for r in mock.received if r.path == "/api/chat" and r.body.get("tools")]
    given = [m["tool_calls"][0] for m in sent[1]["messages"] + sent[2]["messages"][-2:] if m.get("tool_calls")]
    results = [m for m in sent[2]["messages"] if m["role"] == "tool"]
    assert [call["id"] for call in given] == [block["id"] for m in messages if m["role"] == "assistant" for block in m["content"]]
    assert all(call["id"].startswith("call_") and call["function"]["arguments"]["command"] for call in given)
    assert [(r["tool_call_id"], r["tool_name"], r["content"]) for r in results] == [(c["id"], "Bash", f"part {n}") for n, c in enumerate(given, 1)]


async def test_a_thinking_local_models_thinking_comes_back_to_claude_code_and_goes_back_to_ollama(proxy, mock_upstream):
    """A model that needs its reasoning back on tool turns (``reasoning_content: true``; gpt-oss on Ollama):
    Ollama's ``message.thinking`` reaches Claude Code as a thinking block, and the block Claude Code sends
    back with the tool result reaches Ollama as the assistant's ``thinking``."""
    from router.tools.mock_upstream import Behaviour
    from tests.support.config import make_config, model_entry
    mock, url = mock_upstream
    mock.default = Behaviour(thinking="I should list the files", tool_commands=("ls",))
    config = make_config(url, providers={"mock": {"base_url": url, "api": "ollama", "native_chat": True}}, models=[model_entry("gpt-oss", reasoning_content=True)])
    client = await proxy(config)
    messages: list[dict] = [{"role": "user", "content": "list"}]
    answer = await (await client.post("/v1/messages", json={**REQUEST, "messages": messages, "tools": [BASH]})).json()
    thinking, call = answer["content"]
    assert thinking["type"] == "thinking" and thinking["thinking"] == "I should list the files" and call["type"] == "tool_use"
    messages += [{"role": "assistant", "content": answer["content"]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "a.py"}]}]
    response = await client.post("/v1/messages", json={**REQUEST, "messages": messages, "tools": [BASH]})
    assert response.status == 200
    sent = [r.body for r in mock.received if r.path == "/api/chat" and r.body.get("tools")][-1]
    assert sent["messages"][1]["thinking"] == "I should list the files" and sent["messages"][1]["tool_calls"][0]["id"] == call["id"]
