"""upstream-forward: relaying, streaming, fallback before the first byte, timeouts, disconnects."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Iterator

import orjson
import pytest
from aiohttp import web

from bench.harness import free_port
from router.tools.mock_upstream import Behaviour, MockUpstream, stream_events
from tests.support.agent_captures import captured
from tests.support.config import chat_body, make_config, model_entry
from tests.support.servers import loopback_server

URL = "/v1/chat/completions"
TOOLS = [
    {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "grep", "parameters": {"type": "object"}}},
]


def two_providers(first_url: str, second_url: str, **upstream):
    """`primary` (better, so chosen first) on one provider, `backup` on another."""
    settings = {"connect_timeout_seconds": 1, "first_byte_timeout_seconds": 2, "idle_timeout_seconds": 2}
    settings.update(upstream)
    return make_config(
        providers={"one": {"base_url": first_url}, "two": {"base_url": second_url}},
        models=[model_entry("primary", provider="one", quality=0.9), model_entry("backup", provider="two", quality=0.1)],
        upstream=settings,
    )


@pytest.fixture
def refused_url() -> str:
    return f"http://127.0.0.1:{free_port()}/v1"


@pytest.fixture
def unanswered_connect_url() -> Iterator[str]:
    """A loopback port whose accept queue is full, so a new connection hangs in connect."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(s)
    yield f"http://127.0.0.1:{port}/v1"
    for s in [*fillers, listener]:
        s.close()


@pytest.fixture
async def second_upstream() -> AsyncIterator[tuple[MockUpstream, str]]:
    mock = MockUpstream()
    async with loopback_server(mock.app()) as url:
        yield mock, url


async def read_sse(resp) -> list[bytes]:
    body = await resp.read()
    return [event for event in body.split(b"\n\n") if event]


# --- plain relay ---------------------------------------------------------------


async def test_non_stream_answer_is_relayed_byte_for_byte(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(make_config(url))
    resp = await client.post(URL, json=chat_body("hi"))
    assert resp.status == 200
    payload = await resp.json()
    assert payload["choices"][0]["message"]["content"] == "Hello from the mock upstream."
    assert payload["model"] == "up-main"


async def test_provider_key_comes_from_its_env_var_and_client_headers_stay_behind(proxy, mock_upstream, monkeypatch):
    mock, url = mock_upstream
    monkeypatch.setenv("MOCK_PROVIDER_KEY", "sk-provider-secret")
    config = make_config(providers={"mock": {"base_url": url, "api_key_env": "MOCK_PROVIDER_KEY", "headers": {"X-Org": "acme"}}})
    client = await proxy(config)
    await client.post(URL, json=chat_body(), headers={"X-Client-Secret": "do-not-forward", "Cookie": "a=b"})
    sent = mock.received[0].headers
    assert sent["Authorization"] == "Bearer sk-provider-secret"
    assert sent["X-Org"] == "acme"
    assert "X-Client-Secret" not in sent and "Cookie" not in sent


@pytest.mark.parametrize(
    ("switch", "client_key", "expected"),
    [
        (True, None, "session"),  # the session key fills in
        (True, "agent-key", "agent-key"),  # the client's own is kept
        (False, "agent-key", "agent-key"),
        (False, None, None),  # switch off: nothing added
    ],
)
async def test_prompt_cache_key_is_the_clients_or_with_the_switch_the_session_key(proxy, mock_upstream, switch, client_key, expected):
    mock, url = mock_upstream
    client = await proxy(make_config(providers={"mock": {"base_url": url, "set_prompt_cache_key": switch}}))
    body = chat_body() if client_key is None else chat_body(prompt_cache_key=client_key)
    resp = await client.post(URL, json=body, headers={"x-router-session": "agent-session-7"})
    assert resp.status == 200
    sent = mock.received[0].body
    if expected is None:
        assert "prompt_cache_key" not in sent
    elif expected == "session":
        # the session key (a digest of the client's session header), the same on every turn
        await client.post(URL, json=chat_body("turn two"), headers={"x-router-session": "agent-session-7"})
        key = sent["prompt_cache_key"]
        assert isinstance(key, str) and key and "agent-session-7" not in key
        assert mock.received[1].body["prompt_cache_key"] == key
    else:
        assert sent["prompt_cache_key"] == expected


async def test_upstream_4xx_reaches_the_client_in_openai_format_without_fallback(proxy, mock_upstream, second_upstream):
    mock, url = mock_upstream
    backup, backup_url = second_upstream
    mock.then(Behaviour(status=400, body=b'{"error": {"message": "bad tool schema", "type": "invalid_request_error", "code": "x"}}'))
    client = await proxy(two_providers(url, backup_url))
    resp = await client.post(URL, json=chat_body())
    assert resp.status == 400
    assert (await resp.json())["error"]["message"] == "bad tool schema"
    assert backup.received == []


async def test_upstream_4xx_that_is_not_json_is_wrapped(proxy, mock_upstream):
    mock, url = mock_upstream
    mock.then(Behaviour(status=422, body=b"unprocessable, sorry"))
    client = await proxy(make_config(url))
    resp = await client.post(URL, json=chat_body())
    assert resp.status == 422
    error = (await resp.json())["error"]
    assert error["code"] == "upstream_422" and "unprocessable, sorry" in error["message"]


# --- streaming -------------------------------------------------------------------


async def test_stream_is_relayed_event_for_event_including_parallel_tool_calls_and_usage(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(make_config(url))
    body = chat_body("read two files", stream=True, tools=TOOLS, stream_options={"include_usage": True})
    resp = await client.post(URL, json=body)
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/event-stream")
    assert resp.headers["x-router-model"] == "main"
    received = await resp.read()
    expected = b"".join(stream_events(mock.received[0].body, Behaviour().text))
    assert received == expected  # never re-chunked, merged or rewritten
    usage_event = orjson.loads(received.split(b"\n\n")[-3].removeprefix(b"data: "))
    assert usage_event["choices"] == [] and usage_event["usage"]["total_tokens"] > 0


@pytest.mark.parametrize(
    "body",
    [captured("aider")[0].body, chat_body("read two files", stream=True, tools=TOOLS)],
    ids=["aider's real request", "parallel tool calls"],
)
async def test_usage_asked_for_on_the_clients_behalf_is_logged_but_not_relayed(proxy, mock_upstream, body):
    """aider streams without stream_options: the proxy asks for usage, and the client
    gets exactly the bytes the upstream sends when nobody asks for it."""
    mock, url = mock_upstream
    assert body["stream"] is True and "stream_options" not in body
    client = await proxy(make_config(url))
    resp = await client.post(URL, json=body)
    received = await resp.read()
    sent_upstream = mock.received[0].body
    assert sent_upstream["stream_options"] == {"include_usage": True}
    without_injection = {k: v for k, v in sent_upstream.items() if k != "stream_options"}
    assert received == b"".join(stream_events(without_injection, Behaviour().text))
    assert b'"usage"' not in received
    rows = (await (await client.get("/v1/decisions")).json())["data"]
    assert rows[0]["prompt_tokens"] and rows[0]["completion_tokens"] and rows[0]["total_tokens"]


async def test_other_stream_options_of_the_client_are_kept_when_usage_is_asked_for(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(make_config(url))
    resp = await client.post(URL, json=chat_body(stream=True, stream_options={"include_usage": False, "vendor_flag": 1}))
    await resp.read()
    assert mock.received[0].body["stream_options"] == {"include_usage": True, "vendor_flag": 1}
    assert b'"usage"' not in await resp.read()


async def test_a_non_stream_request_is_not_given_stream_options(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(make_config(url))
    await client.post(URL, json=chat_body())
    assert "stream_options" not in mock.received[0].body


async def test_first_event_reaches_the_client_before_the_upstream_finishes(proxy):
    release = asyncio.Event()

    async def slow_stream(request):
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'data: {"choices":[{"index":0,"delta":{"content":"first"}}]}\n\n')
        await asyncio.wait_for(release.wait(), 10)
        await response.write(b"data: [DONE]\n\n")
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", slow_stream)
    async with loopback_server(app) as url:
        client = await proxy(make_config(url))
        resp = await client.post(URL, json=chat_body(stream=True))
        first = await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5)
        assert b"first" in first
        assert not release.is_set()  # the upstream is still holding the rest
        release.set()
        assert (await resp.read()).endswith(b"data: [DONE]\n\n")


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [
        (Behaviour(cut_after_events=2), "connection to the provider broke"),
        (Behaviour(stall_after_events=2), "no data for 0.3s"),
    ],
)
async def test_a_failure_after_the_first_byte_ends_the_stream_with_an_error_event(proxy, mock_upstream, behaviour, reason):
    mock, url = mock_upstream
    mock.then(behaviour)
    client = await proxy(make_config(url, upstream={"idle_timeout_seconds": 0.3, "first_byte_timeout_seconds": 2}))
    resp = await client.post(URL, json=chat_body(stream=True))
    assert resp.status == 200
    events = await read_sse(resp)
    assert len(events) == 2 + 2  # two relayed events, the error event, [DONE]
    error = orjson.loads(events[-2].removeprefix(b"data: "))["error"]
    assert error["code"] == "upstream_stream_interrupted"
    assert reason in error["message"]
    assert events[-1] == b"data: [DONE]"


async def test_a_stream_that_closes_without_done_is_reported(proxy):
    async def short_stream(request):
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'data: {"choices":[]}\n\n')
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", short_stream)
    async with loopback_server(app) as url:
        client = await proxy(make_config(url))
        events = await read_sse(await client.post(URL, json=chat_body(stream=True)))
        assert b"closed the stream before [DONE]" in events[-2]
        assert events[-1] == b"data: [DONE]"


async def test_a_client_that_disconnects_cancels_the_upstream_stream(proxy, mock_upstream):
    mock, url = mock_upstream
    mock.then(Behaviour(event_delay=0.05, text=" ".join(["word"] * 200)))
    client = await proxy(make_config(url))
    resp = await client.post(URL, json=chat_body(stream=True))
    await resp.content.readuntil(b"\n\n")
    assert mock.open_streams == 1
    resp.close()  # the client goes away mid-stream
    for _ in range(100):
        if mock.open_streams == 0:
            break
        await asyncio.sleep(0.02)
    assert mock.open_streams == 0
    assert mock.cancelled_streams == 1


# --- fallback before the first byte --------------------------------------------------


async def test_connection_refused_falls_back_to_the_next_candidate(proxy, refused_url, second_upstream):
    backup, backup_url = second_upstream
    client = await proxy(two_providers(refused_url, backup_url))
    resp = await client.post(URL, json=chat_body(stream=True))
    assert resp.status == 200
    assert resp.headers["x-router-model"] == "backup"
    assert (await resp.read()).endswith(b"data: [DONE]\n\n")
    assert backup.received[0].body["model"] == "up-backup"


@pytest.mark.parametrize("status", [500, 502, 503, 529, 429, 404, 401])
async def test_failover_statuses_fall_back_before_the_first_byte(proxy, mock_upstream, second_upstream, status):
    mock, url = mock_upstream
    backup, backup_url = second_upstream
    mock.then(Behaviour(status=status))
    client = await proxy(two_providers(url, backup_url))
    resp = await client.post(URL, json=chat_body())
    assert resp.status == 200
    assert resp.headers["x-router-model"] == "backup"
    assert len(mock.received) == 1 and len(backup.received) == 1


async def test_first_byte_timeout_falls_back(proxy, mock_upstream, second_upstream):
    mock, url = mock_upstream
    _, backup_url = second_upstream
    mock.then(Behaviour(delay_before_head=3))
    # the backup's first byte must come within the same timeout, however loaded the machine: 1.5 s, not 0.3
    client = await proxy(two_providers(url, backup_url, first_byte_timeout_seconds=1.5))
    resp = await client.post(URL, json=chat_body(stream=True))
    assert resp.status == 200 and resp.headers["x-router-model"] == "backup"


async def test_a_stream_that_stalls_before_its_first_event_falls_back(proxy, mock_upstream, second_upstream):
    mock, url = mock_upstream
    _, backup_url = second_upstream
    mock.then(Behaviour(stall_after_events=0))
    # the backup's first byte must come within the same timeout, however loaded the machine: 1.5 s, not 0.3
    client = await proxy(two_providers(url, backup_url, first_byte_timeout_seconds=1.5))
    resp = await client.post(URL, json=chat_body(stream=True))
    assert resp.status == 200 and resp.headers["x-router-model"] == "backup"


async def test_connect_timeout_falls_back(proxy, unanswered_connect_url, second_upstream):
    _, backup_url = second_upstream
    client = await proxy(two_providers(unanswered_connect_url, backup_url, connect_timeout_seconds=0.2, first_byte_timeout_seconds=5))
    resp = await client.post(URL, json=chat_body())
    assert resp.status == 200 and resp.headers["x-router-model"] == "backup"


async def test_attempts_stop_at_max_attempts(proxy, mock_upstream, second_upstream):
    mock, url = mock_upstream
    backup, backup_url = second_upstream
    mock.then(Behaviour(status=500))
    client = await proxy(two_providers(url, backup_url, max_attempts=1))
    resp = await client.post(URL, json=chat_body())
    assert resp.status == 502
    assert backup.received == []


async def test_all_candidates_failing_is_a_502_naming_each_attempt(proxy, refused_url):
    other_refused = f"http://127.0.0.1:{free_port()}/v1"
    client = await proxy(two_providers(refused_url, other_refused))
    resp = await client.post(URL, json=chat_body())
    assert resp.status == 502
    error = (await resp.json())["error"]
    assert error["code"] == "upstream_unavailable"
    assert "primary via one" in error["message"] and "backup via two" in error["message"]
    assert "cannot connect" in error["message"]


async def test_all_candidates_timing_out_is_a_504(proxy, mock_upstream):
    mock, url = mock_upstream
    mock.then(Behaviour(delay_before_head=2))
    client = await proxy(make_config(url, upstream={"first_byte_timeout_seconds": 0.2}))
    resp = await client.post(URL, json=chat_body())
    assert resp.status == 504
    assert (await resp.json())["error"]["code"] == "upstream_timeout"


async def test_retry_after_within_the_bound_is_waited_out_then_retried(proxy, mock_upstream):
    mock, url = mock_upstream
    mock.then(Behaviour(status=429, headers={"Retry-After": "0.3"}))
    client = await proxy(make_config(url, upstream={"max_retry_after_seconds": 1}))
    started = time.monotonic()
    resp = await client.post(URL, json=chat_body())
    assert resp.status == 200
    assert len(mock.received) == 2
    assert time.monotonic() - started >= 0.3  # it waited at least as long as asked


async def test_retry_after_beyond_the_bound_is_relayed_as_429(proxy, mock_upstream):
    mock, url = mock_upstream
    mock.then(Behaviour(status=429, headers={"Retry-After": "120"}))
    client = await proxy(make_config(url, upstream={"max_retry_after_seconds": 1}))
    resp = await client.post(URL, json=chat_body())
    assert resp.status == 429
    assert resp.headers["Retry-After"] == "120"
    assert (await resp.json())["error"]["code"] == "upstream_rate_limited"
    assert len(mock.received) == 1


async def test_shipped_style_config_without_ollama_gets_a_clear_502_naming_the_provider(proxy, refused_url):
    config = make_config(providers={"ollama": {"base_url": refused_url, "api": "ollama"}}, models=[model_entry("local", provider="ollama")])
    client = await proxy(config)
    resp = await client.post(URL, json=chat_body())
    assert resp.status == 502
    message = (await resp.json())["error"]["message"]
    assert "via ollama" in message and refused_url in message


async def test_the_mock_upstream_stands_in_for_all_of_ollama(proxy, mock_upstream):
    """Shipped-style config (Ollama native classifier, Ollama embeddings) against the mock alone."""
    mock, url = mock_upstream
    config = make_config(
        providers={"ollama": {"base_url": url, "api": "ollama"}},
        models=[model_entry("local", provider="ollama")],
        middlewares=["session-fingerprint", "classification-cache", "classifier", "pinch-relevance", "pinch-prune", "capability-gate", "upstream-forward"],
        classifier={"provider": "ollama", "model": "tiny"},
        session_cache={"enabled": True},
        pinch={"enabled": True, "budget_tokens": 300, "keep_last_turns": 1, "relevance": {"enabled": True, "api": "ollama", "base_url": url}},
    )
    client = await proxy(config)
    messages = [{"role": "user", "content": "fix the parser"}]
    for i in range(3):
        messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": f'{{"n": {i}}}'}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"parser output {i} " * 200})
    messages.append({"role": "assistant", "content": "looking"})
    resp = await client.post(URL, json={"model": "auto", "messages": messages})
    assert resp.status == 200
    assert resp.headers["x-router-source"] == "classifier"
    assert resp.headers["x-router-category"] == "debugging"  # the mock classifies the turn's words: "fix the parser"
    assert int(resp.headers["x-router-pinch-saved"]) > 0
    assert {r.path for r in mock.received} == {"/api/chat", "/api/embed", "/v1/chat/completions"}
    row = (await (await client.get("/v1/decisions")).json())["data"][0]
    assert row["relevance_status"] == "ok" and row["pinch_mode"] == "relevance"


async def test_a_long_healthy_stream_outlives_every_timeout(proxy, mock_upstream):
    """No total timeout: 30 events 0.05 s apart (1.5 s) pass first-byte and idle limits of 0.3 s."""
    mock, url = mock_upstream
    mock.then(Behaviour(event_delay=0.05, text=" ".join(f"w{i}" for i in range(30))))
    client = await proxy(make_config(url, upstream={"first_byte_timeout_seconds": 0.3, "idle_timeout_seconds": 0.3}))
    resp = await client.post(URL, json=chat_body(stream=True))
    body = await resp.read()
    assert body.endswith(b"data: [DONE]\n\n")
    assert b"w29" in body and b"error" not in body


def test_a_failure_inside_the_stage_tells_the_client_where_to_look_not_the_exception():
    from middlewares.upstream_forward import UpstreamForward
    from tests.support.factories import make_ctx
    from tests.support.stages import build_stage

    stage = build_stage(UpstreamForward, make_config())
    ctx = make_ctx()
    stage.fallback(ctx, "JSONDecodeError: number is infinity when parsed as double: line 1 column 6 (char 5)")
    assert ctx.response is not None and ctx.response.status == 502
    message = orjson.loads(ctx.response.body)["error"]["message"]
    assert "JSONDecodeError" not in message and "infinity" not in message
    assert f"request id {ctx.request_id}" in message
