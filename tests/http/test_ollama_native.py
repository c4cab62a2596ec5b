"""Ollama's native chat (``api: ollama``, ``native_chat: true``) against a loopback server speaking its NDJSON.

The client speaks OpenAI chat throughout; the proxy sends ``/api/chat`` with
``options.num_ctx`` = the model's ``context_window`` and translates the answer back.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web

from router.config import ConfigError
from tests.support.config import chat_body, make_config, model_entry
from tests.support.servers import loopback_server
Line = dict[str, Any]


def text_lines(*pieces: str, prompt: int = 42, output: int = 7) -> list[Line]:
    lines: list[Line] = [{"model": "qwen", "message": {"role": "assistant", "content": p}, "done": False} for p in pieces]
    lines.append({"model": "qwen", "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop", "prompt_eval_count": prompt, "eval_count": output})
    return lines


def tool_call_lines() -> list[Line]:
    call = {"function": {"name": "read_file", "arguments": {"path": "a.py"}}}
    return [
        {"model": "qwen", "message": {"role": "assistant", "content": "", "tool_calls": [call]}, "done": False},
        {"model": "qwen", "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop", "prompt_eval_count": 30, "eval_count": 5},
    ]


class NativeOllama:
    """Answers /api/chat with the lines it is given (streamed as NDJSON, or the last one whole)."""

    def __init__(self) -> None:
        self.lines: list[Line] = text_lines("Hel", "lo")
        self.received: list[dict[str, Any]] = []
        self.paths: list[str] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/api/chat", self.chat)
        app.router.add_post("/v1/chat/completions", self.chat)
        return app

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self.paths.append(request.path)
        body = await request.json()
        self.received.append(body)
        if not body.get("stream"):
            whole = {**self.lines[-1], "message": {"role": "assistant", "content": "".join(l["message"].get("content", "") for l in self.lines if "message" in l)}}
            calls = [c for l in self.lines for c in l.get("message", {}).get("tool_calls", [])]
            if calls:
                whole["message"]["tool_calls"] = calls
            if thinking := "".join(l["message"].get("thinking", "") for l in self.lines if "message" in l):
                whole["message"]["thinking"] = thinking
            return web.json_response(whole)
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        for line in self.lines:
            await response.write(orjson.dumps(line) + b"\n")
            await asyncio.sleep(0)
        await response.write_eof()
        return response


@pytest.fixture
async def ollama() -> AsyncIterator[tuple[NativeOllama, str]]:
    mock = NativeOllama()
    async with loopback_server(mock.app()) as url:
        yield mock, url


def native_config(url: str, native: bool = True, windows: tuple[int, ...] = (32_768,), vision: bool = False):
    supports = {"tools": True, "vision": vision, "json_mode": True}
    return make_config(
        url,
        providers={"mock": {"base_url": url, "api": "ollama", "native_chat": native}},
        models=[model_entry(f"m{i}", context_window=w, quality=0.9 - i / 10, supports=supports) for i, w in enumerate(windows)],
    )


def sse_chunks(body: bytes) -> list[Any]:
    return [orjson.loads(line[6:]) if line != b"data: [DONE]" else "[DONE]" for line in body.split(b"\n") if line.startswith(b"data: ")]


async def test_a_streamed_answer_becomes_chat_sse_with_text_and_usage(proxy, ollama):
    mock, url = ollama
    client = await proxy(native_config(url))
    response = await client.post("/v1/chat/completions", json=chat_body(stream=True, stream_options={"include_usage": True}, temperature=0.3, max_tokens=100))
    assert response.status == 200 and response.content_type == "text/event-stream"
    chunks = sse_chunks(await response.read())
    assert mock.paths == ["/api/chat"]
    sent = mock.received[0]
    assert sent["options"] == {"temperature": 0.3, "num_predict": 100, "num_ctx": 32_768}
    assert sent["stream"] is True and sent["model"] == "up-m0" and sent["messages"] == [{"role": "user", "content": "hello"}]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1] if c["choices"]) == "Hello"
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1] if c["choices"]][-1] == "stop"
    assert chunks[-2]["usage"] == {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}
    assert chunks[-1] == "[DONE]"


async def test_without_include_usage_the_client_gets_no_usage_chunk_but_the_log_has_it(proxy, ollama):
    mock, url = ollama
    client = await proxy(native_config(url))
    response = await client.post("/v1/chat/completions", json=chat_body(stream=True))
    chunks = sse_chunks(await response.read())
    assert all(c == "[DONE]" or c["choices"] for c in chunks)
    rows = (await (await client.get("/v1/decisions")).json())["data"]
    assert (rows[0]["prompt_tokens"], rows[0]["completion_tokens"]) == (42, 7)


async def test_streamed_tool_calls_arrive_as_chat_tool_call_deltas(proxy, ollama):
    mock, url = ollama
    mock.lines = tool_call_lines()
    client = await proxy(native_config(url))
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
    response = await client.post("/v1/chat/completions", json=chat_body(stream=True, tools=tools))
    chunks = [c for c in sse_chunks(await response.read()) if c != "[DONE]"]
    calls = [call for c in chunks for call in c["choices"][0]["delta"].get("tool_calls", [])]
    assert [{k: v for k, v in call.items() if k != "id"} for call in calls] == [
        {"index": 0, "type": "function", "function": {"name": "read_file", "arguments": '{"path":"a.py"}'}}
    ]
    assert calls[0]["id"].startswith("call_") and calls[0]["id"].endswith("_0")
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert mock.received[0]["tools"] == tools


@pytest.mark.parametrize("stream", [True, False])
async def test_every_answers_tool_calls_have_ids_of_their_own(proxy, ollama, stream):
    """Ollama gives its calls no ids; made up as "call_0" in every answer, a session's calls shared them,
    and a client answers each call by its id (Anthropic wants them unique in the conversation)."""
    mock, url = ollama
    client = await proxy(native_config(url))
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
    ids = []
    for _ in range(2):
        mock.lines = tool_call_lines()
        response = await client.post("/v1/chat/completions", json=chat_body(stream=stream, tools=tools))
        if stream:
            chunks = [c for c in sse_chunks(await response.read()) if c != "[DONE]"]
            ids += [call["id"] for c in chunks for call in c["choices"][0]["delta"].get("tool_calls", [])]
        else:
            ids += [call["id"] for call in (await response.json())["choices"][0]["message"]["tool_calls"]]
    assert len(ids) == 2 and len(set(ids)) == 2


async def test_a_tool_round_trip_is_sent_in_ollamas_native_shape(proxy, ollama):
    mock, url = ollama
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"dir": "."}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
    ]
    client = await proxy(native_config(url, vision=True))
    response = await client.post("/v1/chat/completions", json={"model": "auto", "messages": messages, "response_format": {"type": "json_object"}})
    assert response.status == 200
    sent = mock.received[-1]
    assert sent["messages"] == [
        {"role": "user", "content": "look", "images": ["QUJD"]},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "function": {"name": "ls", "arguments": {"dir": "."}}}]},
        {"role": "tool", "content": "a.py", "tool_name": "ls", "tool_call_id": "c1"},
    ]
    assert sent["format"] == "json"


async def test_a_whole_answer_becomes_a_chat_completion_with_usage(proxy, ollama):
    mock, url = ollama
    client = await proxy(native_config(url))
    response = await client.post("/v1/chat/completions", json=chat_body())
    answer = await response.json()
    assert response.status == 200 and mock.received[0]["stream"] is False
    assert answer["object"] == "chat.completion" and answer["choices"][0]["message"] == {"role": "assistant", "content": "Hello", "refusal": None}
    assert answer["choices"][0]["finish_reason"] == "stop" and answer["choices"][0]["logprobs"] is None  # as OpenAI sends them
    assert answer["usage"] == {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}


async def test_a_mid_stream_error_ends_the_clients_stream_with_an_error_event(proxy, ollama):
    mock, url = ollama
    mock.lines = [text_lines("Hel")[0], {"error": "model runner crashed"}]
    client = await proxy(native_config(url))
    response = await client.post("/v1/chat/completions", json=chat_body(stream=True))
    chunks = sse_chunks(await response.read())
    assert chunks[0]["choices"][0]["delta"]["content"] == "Hel"
    assert "model runner crashed" in chunks[-2]["error"]["message"] and chunks[-1] == "[DONE]"


async def test_num_ctx_is_each_models_own_window_on_every_request(proxy, ollama):
    mock, url = ollama
    config = native_config(url, windows=(8_192, 65_536))
    client = await proxy(config)
    for model in ("m0", "m1", "m0"):
        assert (await client.post("/v1/chat/completions", json=chat_body(model=model))).status == 200
    assert [body["options"]["num_ctx"] for body in mock.received] == [8_192, 65_536, 8_192]


async def test_without_native_chat_ollama_gets_the_openai_compatible_request(proxy, ollama):
    mock, url = ollama
    mock_answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}

    async def compatible(request: web.Request) -> web.Response:
        mock.paths.append(request.path)
        mock.received.append(await request.json())
        return web.json_response(mock_answer)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", compatible)
    async with loopback_server(app) as url:
        client = await proxy(native_config(url, native=False))
        response = await client.post("/v1/chat/completions", json=chat_body())
        assert (await response.json()) == mock_answer
    assert mock.paths == ["/v1/chat/completions"] and "options" not in mock.received[0]


def test_native_chat_is_only_for_ollama():
    with pytest.raises(ConfigError, match=r"providers\.mock: native_chat: only an `api: ollama` provider"):
        make_config(providers={"mock": {"base_url": "http://127.0.0.1:9/v1", "native_chat": True}})


async def test_an_ollama_client_error_reaches_the_client_as_an_openai_error(proxy):
    async def refuses(request: web.Request) -> web.Response:
        return web.json_response({"error": "model 'up-m0' not found, try pulling it first"}, status=400)

    app = web.Application()
    app.router.add_post("/api/chat", refuses)
    async with loopback_server(app) as url:
        client = await proxy(native_config(url))
        response = await client.post("/v1/chat/completions", json=chat_body())
        error = (await response.json())["error"]
    assert response.status == 400 and error["code"] == "upstream_400"
    assert "model 'up-m0' not found" in error["message"]


@pytest.mark.parametrize("stream", [True, False])
async def test_the_ids_ollama_gives_its_calls_are_the_ids_the_client_gets(proxy, ollama, stream):
    """Ollama 0.12.10 and later give each call an id (``call_`` and 8 random characters) and take it back on
    the result; a made-up id instead would not be the one Ollama knows the call by."""
    mock, url = ollama
    mock.lines = tool_call_lines()
    mock.lines[0]["message"]["tool_calls"][0] = {"id": "call_p7o2gz50", "function": {"index": 0, **mock.lines[0]["message"]["tool_calls"][0]["function"]}}
    client = await proxy(native_config(url))
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
    response = await client.post("/v1/chat/completions", json=chat_body(stream=stream, tools=tools))
    if stream:
        calls = [call for c in sse_chunks(await response.read()) if c != "[DONE]" for call in c["choices"][0]["delta"].get("tool_calls", [])]
    else:
        calls = (await response.json())["choices"][0]["message"]["tool_calls"]
    assert [(call["id"], call["function"]["name"], call["function"]["arguments"]) for call in calls] == [("call_p7o2gz50", "read_file", '{"path":"a.py"}')]


def thinking_lines() -> list[Line]:
    thoughts = [{"model": "qwen", "message": {"role": "assistant", "content": "", "thinking": t}, "done": False} for t in ("The user ", "says hi.")]
    return [*thoughts, *text_lines("Hel", "lo")]


async def test_a_thinking_models_streamed_thinking_arrives_as_reasoning_content_deltas_before_the_text(proxy, ollama):
    """A recent Ollama sends a thinking model's thinking (qwen3, gpt-oss, …) in ``message.thinking``, not in
    the content; dropped, a client that shows or sends back reasoning never saw it."""
    mock, url = ollama
    mock.lines = thinking_lines()
    client = await proxy(native_config(url))
    chunks = [c for c in sse_chunks(await (await client.post("/v1/chat/completions", json=chat_body(stream=True))).read()) if c != "[DONE]"]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert [d.get("reasoning_content") for d in deltas if "reasoning_content" in d] == ["The user ", "says hi."]
    assert "".join(d.get("content", "") for d in deltas) == "Hello"
    assert max(i for i, d in enumerate(deltas) if "reasoning_content" in d) < min(i for i, d in enumerate(deltas) if "content" in d)


async def test_a_whole_answers_thinking_is_the_messages_reasoning_content(proxy, ollama):
    mock, url = ollama
    mock.lines = thinking_lines()
    client = await proxy(native_config(url))
    message = (await (await client.post("/v1/chat/completions", json=chat_body())).json())["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "Hello", "reasoning_content": "The user says hi.", "refusal": None}


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
async def test_an_assistants_reasoning_goes_back_to_ollama_as_its_thinking(proxy, ollama, key):
    mock, url = ollama
    messages = [
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": None, key: "I should run ls.", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
    ]
    client = await proxy(native_config(url))
    assert (await client.post("/v1/chat/completions", json={"model": "auto", "messages": messages})).status == 200
    assert mock.received[-1]["messages"][1] == {"role": "assistant", "content": "", "thinking": "I should run ls.", "tool_calls": [{"id": "c1", "function": {"name": "ls", "arguments": {}}}]}


async def test_codexs_responses_to_a_thinking_ollama_model_get_a_reasoning_item_and_the_call(proxy, mock_upstream):
    """Codex (Responses) → chat → Ollama's native chat: the thinking becomes a reasoning item with its summary,
    the call a function_call with the id Ollama gave it and its arguments as a JSON string."""
    from router.tools.mock_upstream import Behaviour

    mock, url = mock_upstream
    mock.default = Behaviour(thinking="I should list the files", tool_commands=("ls",))
    client = await proxy(native_config(url))
    shell = {"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}
    response = await client.post("/v1/responses", json={"model": "auto", "input": "list the files", "tools": [shell]})
    assert response.status == 200
    reasoning, call = (await response.json())["output"]
    assert reasoning["type"] == "reasoning" and reasoning["summary"] == [{"type": "summary_text", "text": "I should list the files"}]
    assert call["type"] == "function_call" and call["name"] == "exec_command" and orjson.loads(call["arguments"]) == {"cmd": "ls"}
    assert re.fullmatch(r"call_[0-9a-f]{8}", call["call_id"])  # the mock's, as Ollama's: not one the proxy made up (call_<12 hex>_0)


@pytest.mark.parametrize(
    ("arguments", "native"),
    [('{"dir": "."}', {"dir": "."}), ("", {}), ('{"dir": ', {"arguments": '{"dir": '}), ("[1, 2]", {"arguments": "[1, 2]"})],
    ids=["JSON text", "empty", "cut-off JSON", "JSON but not an object"],
)
async def test_a_calls_arguments_go_to_ollama_as_an_object_and_nothing_of_them_is_lost(proxy, ollama, arguments, native):
    """Ollama refuses arguments that are not an object (a 400 for the whole request); text that is not a
    JSON object goes wrapped, as in the Anthropic translation, not dropped."""
    mock, url = ollama
    messages = [
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
    ]
    client = await proxy(native_config(url))
    assert (await client.post("/v1/chat/completions", json={"model": "auto", "messages": messages})).status == 200
    assert mock.received[-1]["messages"][1]["tool_calls"][0]["function"]["arguments"] == native
