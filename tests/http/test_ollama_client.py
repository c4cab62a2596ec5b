"""End to end with the official ``ollama`` Python client (``ollama.AsyncClient``) pointed at the proxy instead of
Ollama: chat, chat streamed, a tool round trip (the model asks for the tool, the client sends its result
back, the model answers), generate, ``list()`` and ``show()``, and Ollama's errors as the client raises them.

One loopback mock stands in for both provider kinds: ``chat-main`` behind an OpenAI-compatible provider,
``ollama-main`` behind a native Ollama one (``native_chat: true``: the mock's ``/api/chat``), each reached
through chat; ``auto`` routes to the first. Every request leaves its decision row, as from any other client.
"""

from __future__ import annotations

import pytest
from ollama import AsyncClient, ResponseError

from router.observe.recorder import RECORDER_KEY
from tests.support.config import make_config, model_entry
from tests.support.misbehaving_upstream import MisbehavingUpstream

MODELS = ["auto", "chat-main", "ollama-main"]
ANSWER = "Hello from the mock upstream."
SHELL = {
    "type": "function",
    "function": {"name": "shell", "description": "Run a command", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
}
SUPPORTS = {"tools": True, "vision": True, "json_mode": True}


@pytest.fixture
async def ollama(proxy, mock_upstream):
    mock, url = mock_upstream
    providers = {"mock": {"base_url": url}, "mock-ollama": {"base_url": url.removesuffix("/v1"), "api": "ollama", "native_chat": True}}
    models = [model_entry("chat-main", supports=SUPPORTS), model_entry("ollama-main", provider="mock-ollama", upstream_model="mock", supports=SUPPORTS, context_window=8192)]
    client = await proxy(make_config(url, providers=providers, models=models))
    ollama = AsyncClient(host=str(client.make_url("")).rstrip("/"))
    yield ollama, mock, client
    await ollama._client.aclose()


@pytest.mark.parametrize("model", MODELS)
async def test_chat(ollama, model):
    client, _, proxy = ollama
    answer = await client.chat(model=model, messages=[{"role": "user", "content": "say hello"}])
    assert answer.message.role == "assistant" and answer.message.content.strip() == ANSWER
    assert answer.done is True and answer.done_reason == "stop" and answer.prompt_eval_count > 0 and answer.eval_count > 0
    rows = await proxy.server.app[RECORDER_KEY].decision_log.recent(1)
    assert rows[0]["wire_in"] == "ollama" and rows[0]["status"] == 200


@pytest.mark.parametrize("model", MODELS)
async def test_chat_stream(ollama, model):
    client, _, _ = ollama
    parts = [part async for part in await client.chat(model=model, messages=[{"role": "user", "content": "say hello"}], stream=True)]
    assert "".join(p.message.content for p in parts).strip() == ANSWER
    assert [p.done for p in parts] == [False] * (len(parts) - 1) + [True]
    assert parts[-1].done_reason == "stop" and parts[-1].eval_count > 0 and parts[-1].total_duration is not None


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_tool_round_trip(ollama, model, stream):
    """The model asks for the shell tool; the client runs it and sends the result back by the tool's name (the
    client keeps no call id); the model's answer quotes it."""
    client, mock, _ = ollama
    history: list = [{"role": "user", "content": "list the files"}]

    async def turn():
        if not stream:
            return (await client.chat(model=model, messages=history, tools=[SHELL])).message
        parts = [part async for part in await client.chat(model=model, messages=history, tools=[SHELL], stream=True)]
        calls = [call for part in parts for call in part.message.tool_calls or []]
        return parts[-1].message.model_copy(update={"content": "".join(p.message.content for p in parts), "tool_calls": calls or None})

    first = await turn()
    assert [(c.function.name, c.function.arguments) for c in first.tool_calls] == [("shell", {"command": "ls"})]
    history += [first, {"role": "tool", "content": "main.py\nnotes.txt", "tool_name": "shell"}]
    second = await turn()
    quotes = not (stream and model != "ollama-main")  # the mock's chat stream answers without quoting the result
    assert not second.tool_calls and second.content.startswith(ANSWER) and ("main.py\nnotes.txt" in second.content) == quotes
    sent = mock.received[-1].body["messages"]
    results = [m for m in sent if m["role"] == "tool"]
    calls = [call for m in sent if m["role"] == "assistant" for call in m.get("tool_calls") or []]
    assert len(results) == 1 and results[0]["content"] == "main.py\nnotes.txt" and results[0]["tool_call_id"] == calls[0]["id"]  # paired


async def test_generate(ollama):
    client, mock, _ = ollama
    answer = await client.generate(model="chat-main", prompt="say hello", system="be brief")
    assert answer.response.strip() == ANSWER and answer.done is True and answer.eval_count > 0
    assert [m["role"] for m in mock.received[-1].body["messages"]] == ["system", "user"]
    parts = [part async for part in await client.generate(model="ollama-main", prompt="say hello", stream=True)]
    assert "".join(p.response for p in parts).strip() == ANSWER and parts[-1].done is True


async def test_list_and_show(ollama):
    client, _, _ = ollama
    listed = await client.list()
    assert [m.model for m in listed.models] == ["chat-main", "ollama-main", "auto"]
    shown = await client.show("ollama-main")
    assert shown.modelinfo["pinch-router.context_length"] == 8192 and "tools" in shown.capabilities and "vision" in shown.capabilities
    assert "num_ctx 8192" in shown.parameters
    alias = await client.show("auto")
    assert {"completion", "tools", "vision"} <= set(alias.capabilities)


async def test_ollamas_errors_are_raised_by_the_client_with_their_status(ollama):
    client, _, _ = ollama
    with pytest.raises(ResponseError) as unknown:
        await client.show("no-such-model")
    assert unknown.value.status_code == 404 and "no-such-model" in unknown.value.error
    with pytest.raises(ResponseError) as pull:
        await client.pull("llama3")
    assert pull.value.status_code == 403 and "does not manage models" in pull.value.error
    with pytest.raises(ResponseError) as routed:
        await client.chat(model="no-such-model", messages=[{"role": "user", "content": "hi"}])
    assert routed.value.status_code == 404
    with pytest.raises(ResponseError) as empty:
        await client.chat(model="auto", messages=[])
    assert empty.value.status_code == 400 and "loads none" in empty.value.error


async def test_a_stream_kept_alive_through_a_silent_provider_still_parses_line_by_line(proxy):
    """The provider goes silent mid-stream: the client gets a space between lines (a blank line would be one the
    client's json.loads refuses), and every line, the next one with its leading space, parses."""
    from tests.http.test_stream_keepalive import CHAT_AFTER, CHAT_BEFORE, keepalive_config, stalling

    async with MisbehavingUpstream() as upstream:
        upstream.then(stalling(CHAT_BEFORE, CHAT_AFTER))
        client = await proxy(keepalive_config(upstream.url, {}))
        raw = await (await client.post("/api/chat", json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]})).read()
        upstream.then(stalling(CHAT_BEFORE, CHAT_AFTER))
        ollama = AsyncClient(host=str(client.make_url("")).rstrip("/"))
        parts = [part async for part in await ollama.chat(model="auto", messages=[{"role": "user", "content": "hi"}], stream=True)]
        await ollama._client.aclose()
    second = raw.split(b"\n")[1]
    assert len(second) - len(second.lstrip(b" ")) >= 2 and b"\n\n" not in raw  # the keep-alives, before the line after the silence
    assert "".join(p.message.content for p in parts) == "Hello" and parts[-1].done
