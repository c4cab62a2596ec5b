"""The mock upstream: what it keeps of the requests it answers, and how it reads their numbers."""

from __future__ import annotations

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from router.core.tokens import TokenEstimator
from router.tools.mock_upstream import MockUpstream, SimulatedPromptCache
from tests.support.config import chat_body
@pytest.mark.parametrize(("record", "kept"), [(True, 1), (False, 0)])
async def test_only_a_recording_mock_keeps_the_requests_it_answered(record: bool, kept: int) -> None:
    mock = MockUpstream(record=record)
    async with TestClient(TestServer(mock.app(), host="127.0.0.1")) as client:
        resp = await client.post("/v1/chat/completions", json=chat_body())
        assert resp.status == 200
        assert (await resp.json())["choices"][0]["message"]["content"]
    assert len(mock.received) == kept


async def test_a_simulated_prompt_cache_reports_the_repeated_prefix_until_it_expires() -> None:
    now = [0.0]
    mock = MockUpstream(prompt_cache=SimulatedPromptCache(300, clock=lambda: now[0]))
    first = chat_body("a long opening question " * 50)
    second = {**first, "messages": [*first["messages"], {"role": "assistant", "content": "an answer"}, {"role": "user", "content": "more"}]}
    estimator = TokenEstimator()

    async def cached(body: dict) -> tuple[int, int]:
        resp = await client.post("/v1/chat/completions", json=body)
        usage = (await resp.json())["usage"]
        return usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"]

    async with TestClient(TestServer(mock.app(), host="127.0.0.1")) as client:
        assert await cached(first) == (estimator.prompt_tokens(first["messages"]), 0)
        now[0] = 300
        assert await cached(second) == (estimator.prompt_tokens(second["messages"]), estimator.prompt_tokens(first["messages"]))
        now[0] = 601  # idle longer than the lifetime: the entry is gone
        assert await cached(second) == (estimator.prompt_tokens(second["messages"]), 0)


@pytest.mark.parametrize("stream", [False, True])
async def test_an_integer_no_double_holds_in_a_chat_body_is_answered_not_a_500(stream: bool) -> None:
    """The mock reads an integer past a double's range as the infinity a provider parsing JSON numbers
    as doubles would (issue #42's grid: a 401-digit tool-call ``type`` the proxy passed through was
    the mock's own 500, which the proxy rightly made a 502); before, it kept the Python int and could
    not write the usage it reports."""
    calls = [{"id": "c", "type": "@N@", "function": {"name": "f", "arguments": "{}"}}]
    body = chat_body(stream=stream, messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": calls}])
    if stream:
        body["stream_options"] = {"include_usage": True}
    raw = orjson.dumps(body).replace(b'"@N@"', b"1" + b"0" * 400)
    async with TestClient(TestServer(MockUpstream(record=False).app(), host="127.0.0.1")) as client:
        resp = await client.post("/v1/chat/completions", data=raw, headers={"Content-Type": "application/json"})
        text = await resp.text()
    assert resp.status == 200, text
    assert text.rstrip().endswith("data: [DONE]") if stream else orjson.loads(text)["usage"]["prompt_tokens"] > 0


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("include", [7, 0.5, True])
async def test_a_field_of_a_type_the_answer_cannot_read_is_the_apis_400_not_a_500(stream: bool, include: object) -> None:
    """A field of a type the API refuses, that the mock's request checks do not name but its answer
    reads (the Responses API's ``include`` as a number, with reasoning asked for), is a 400 in the API's
    error shape, as the provider's schema check makes it (issue #42's grid: the mock's own 500, which
    the proxy rightly made a 502)."""
    body = {"model": "m", "input": "hi", "reasoning": {"effort": "low"}, "include": include, "stream": stream}
    async with TestClient(TestServer(MockUpstream(record=False).app(), host="127.0.0.1")) as client:
        resp = await client.post("/v1/responses", json=body)
        answer = await resp.json()
    assert resp.status == 400, answer
    assert answer["error"]["type"] == "invalid_request_error" and "not iterable" in answer["error"]["message"]


ROUTER_SCHEMA = {
    "type": "object",
    "properties": {"reasoning": {"type": "string"}, "model_choice": {"type": "string", "enum": ["flash", "pro"]}},
    "required": ["reasoning", "model_choice"],
}


async def test_a_request_for_a_json_schema_gets_an_instance_of_it_on_chat_and_ollama() -> None:
    """Gemini CLI's model-router call asks for a JSON schema (translated: chat's response_format, Ollama's
    format object); answered with a classification object instead, it printed a 65-line ZodError (#47)."""
    chat = chat_body(response_format={"type": "json_schema", "json_schema": {"name": "router", "schema": ROUTER_SCHEMA}})
    ollama = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "format": ROUTER_SCHEMA, "stream": False}
    async with TestClient(TestServer(MockUpstream(record=False).app(), host="127.0.0.1")) as client:
        answered = await (await client.post("/v1/chat/completions", json=chat)).json()
        native = await (await client.post("/api/chat", json=ollama)).json()
    for text in (answered["choices"][0]["message"]["content"], native["message"]["content"]):
        assert set(orjson.loads(text)) == {"reasoning", "model_choice"} and orjson.loads(text)["model_choice"] == "flash"


READ_FILE = {"type": "function", "function": {"name": "read_file", "description": "Reads a file. " * 200, "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}


@pytest.mark.parametrize("api", ["chat", "chat streamed", "ollama"])
async def test_the_reported_prompt_counts_the_tool_definitions_as_well_as_the_messages(api: str) -> None:
    """What the mock reports as the prompt is all it was sent — messages, the system prompt, and the tool
    definitions (1 token ≈ 4 bytes of their JSON, as its other APIs count): Claude Code decides to compact
    from that figure, and through the proxy it got the messages' share only and never compacted (#47)."""
    messages = [{"role": "system", "content": "You are a coding agent. " * 40}, {"role": "user", "content": "list the files"}]
    path = "/api/chat" if api == "ollama" else "/v1/chat/completions"

    async def prompt(tools: list) -> int:
        body = {"model": "m", "messages": messages, "tools": tools, "stream": api != "chat", "stream_options": {"include_usage": True}}
        resp = await client.post(path, json=body)
        lines = (await resp.text()).splitlines()
        if api == "ollama":
            return orjson.loads(lines[-1])["prompt_eval_count"]
        if api == "chat":
            return orjson.loads(lines[0])["usage"]["prompt_tokens"]
        return orjson.loads(next(line[6:] for line in lines if '"usage"' in line))["usage"]["prompt_tokens"]

    async with TestClient(TestServer(MockUpstream(record=False).app(), host="127.0.0.1")) as client:
        bare, with_tool = await prompt([]), await prompt([READ_FILE])
    assert bare >= len(orjson.dumps(messages)) // 4
    assert abs((with_tool - bare) - len(orjson.dumps(READ_FILE)) / 4) <= 1
