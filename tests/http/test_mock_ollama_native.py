"""The mock's native ``/api/chat``: tool calls as a recent Ollama answers them, and what Ollama refuses."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from router.tools.mock_upstream import Behaviour, MockUpstream

SHELL = {"type": "function", "function": {"name": "Bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}


def native_body(messages: list[dict[str, Any]], stream: bool | None = None, tools: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "qwen3:14b", "messages": messages, **({"tools": [SHELL]} if tools else {})}
    return body if stream is None else {**body, "stream": stream}


def called(call_id: str, command: str) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "function": {"index": 0, "name": "Bash", "arguments": {"command": command}}}]}


async def lines_of(client: TestClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    response = await client.post("/api/chat", json=body)
    assert response.status == 200 and response.content_type == "application/x-ndjson"
    return [orjson.loads(line) for line in (await response.read()).splitlines() if line.strip()]


@pytest.fixture
async def client():
    mock = MockUpstream(Behaviour(tool_commands=("cat part1.txt", "cat part2.txt")))
    async with TestClient(TestServer(mock.app(), host="127.0.0.1")) as client:
        yield client


async def test_offered_tools_are_called_in_one_line_with_object_arguments_an_id_and_an_index(client) -> None:
    lines = await lines_of(client, native_body([{"role": "user", "content": "read them"}]))  # no stream: Ollama streams
    call_line, last = lines
    [call] = call_line["message"]["tool_calls"]
    assert call["function"] == {"index": 0, "name": "Bash", "arguments": {"command": "cat part1.txt"}}
    assert call["id"].startswith("call_") and call_line["done"] is False
    assert last["done"] is True and last["done_reason"] == "stop" and last["message"] == {"role": "assistant", "content": ""}
    assert last["prompt_eval_count"] > 0 and last["eval_count"] == 1


async def test_the_tool_command_turns_are_followed_then_the_answer_quotes_the_last_result(client) -> None:
    turn = [{"role": "user", "content": "read them"}]
    first = (await lines_of(client, native_body(turn)))[0]["message"]["tool_calls"][0]
    turn += [called(first["id"], "cat part1.txt"), {"role": "tool", "content": "part one", "tool_name": "Bash"}]
    second = (await lines_of(client, native_body(turn)))[0]["message"]["tool_calls"][0]
    assert second["function"]["arguments"] == {"command": "cat part2.txt"} and second["id"] != first["id"]
    turn += [called(second["id"], "cat part2.txt"), {"role": "tool", "content": "part two", "tool_name": "Bash"}]
    text = "".join(line["message"]["content"] for line in await lines_of(client, native_body(turn)))
    assert text == "Hello from the mock upstream. (tool said: part two)"


async def test_stream_false_gets_one_object_with_the_whole_message(client) -> None:
    response = await client.post("/api/chat", json=native_body([{"role": "user", "content": "read them"}], stream=False))
    answer = await response.json()
    assert response.content_type == "application/json" and answer["done"] is True and answer["done_reason"] == "stop"
    assert answer["message"]["tool_calls"][0]["function"]["arguments"] == {"command": "cat part1.txt"}
    plain = await (await client.post("/api/chat", json=native_body([{"role": "user", "content": "hi"}], stream=False, tools=False))).json()
    assert plain["message"] == {"role": "assistant", "content": "Hello from the mock upstream."}


@pytest.mark.parametrize(
    ("message", "refusal"),
    [
        ({**called("call_1", "ls"), "tool_calls": [{"function": {"name": "Bash", "arguments": '{"command": "ls"}'}}]},
         "cannot unmarshal string into Go struct field ChatRequest.messages.tool_calls.function.arguments of type api.ToolCallFunctionArguments"),
        ({"role": "user", "content": [{"type": "text", "text": "hi"}]}, "cannot unmarshal array into Go struct field ChatRequest.messages.content of type string"),
    ],
    ids=["arguments as a JSON string", "content as a list of parts"],
)
async def test_what_ollamas_decoding_refuses_is_a_400_in_its_words(client, message: dict[str, Any], refusal: str) -> None:
    response = await client.post("/api/chat", json=native_body([{"role": "user", "content": "go"}, message]))
    assert response.status == 400
    assert refusal in (await response.json())["error"]


async def test_a_thinking_mock_streams_its_thinking_first_and_joins_it_in_a_whole_answer() -> None:
    mock = MockUpstream(Behaviour(thinking="I will list it", tool_commands=("ls",)))
    async with TestClient(TestServer(mock.app(), host="127.0.0.1")) as client:
        lines = await lines_of(client, native_body([{"role": "user", "content": "list"}]))
        assert [line["message"].get("thinking") for line in lines[:4]] == ["I ", "will ", "list ", "it"]
        assert lines[4]["message"]["tool_calls"][0]["function"]["arguments"] == {"command": "ls"}
        whole = await (await client.post("/api/chat", json=native_body([{"role": "user", "content": "list"}], stream=False))).json()
        assert whole["message"]["thinking"] == "I will list it" and whole["message"]["tool_calls"]
