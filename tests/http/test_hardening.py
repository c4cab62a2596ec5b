"""Hardening (issue #17): what a misbehaving upstream or a hostile client can send never leaks a key,
grows memory without bound, redirects the proxy, or gets a 5xx.

Network cases run through real loopback servers: the proxy under test, and
:class:`tests.support.misbehaving_upstream.MisbehavingUpstream`, which answers at the
byte level with whatever a test scripts.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import re
import zlib
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestServer

from router.config import ConfigError, parse_config
from router.core.retry_after import parse_retry_after
from router.core.sse import EventTooLarge, SseRelay
from router.tools.mock_upstream import Behaviour, MockUpstream
from router.wire.openai_chat.adapter import OPENAI_CHAT_ADAPTER
from tests.support.config import chat_body, make_config, model_entry
from tests.support.misbehaving_upstream import (
    COMPLETION,
    MisbehavingUpstream,
    endless,
    gzip_bomb,
    http_answer,
    trickle,
)

PROVIDER_KEY = "sk-provider-SECRET-0123456789"
TASK = "please refactor the secret-plan module of project nightingale"
URL = "/v1/chat/completions"


@pytest.fixture(autouse=True)
def provider_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_PROVIDER_KEY", PROVIDER_KEY)  # keys are read from the environment per use


def keyed_config(upstream_url: str, **sections: Any):
    raw: dict[str, Any] = {
        "middlewares": ["session-fingerprint", "capability-gate", "upstream-forward"],
        "providers": {"mock": {"base_url": upstream_url, "api_key_env": "TEST_PROVIDER_KEY"}},
        "models": [model_entry("main")],
        "upstream": {"connect_timeout_seconds": 2, "first_byte_timeout_seconds": 5, "idle_timeout_seconds": 5},
        "decision_log": {"path": ":memory:"},
    }
    raw.update(sections)
    return parse_config(raw, environ={"TEST_PROVIDER_KEY": PROVIDER_KEY})


async def decisions(client) -> list[dict[str, Any]]:
    await asyncio.sleep(0.05)  # recording happens just after the answer
    resp = await client.get("/v1/decisions", params={"limit": "100"})
    return (await resp.json())["data"]


async def everything_written(client, resp, caplog) -> str:
    rows = await decisions(client)
    return "\n".join([await resp.text(), str(dict(resp.headers)), orjson.dumps(rows).decode(), caplog.text, *(str(r.__dict__) for r in caplog.records)])


# ---- 1. the key never leaks from aiohttp's own parse errors -------------------------------------------------

KEY = PROVIDER_KEY.encode()
MALFORMED = {
    "bad status line": b"HTTP/1.1 2x0 " + KEY + b"\r\nContent-Length: 2\r\n\r\n{}",
    "header over 8 KB": http_answer(headers={"X-Echo": PROVIDER_KEY + "A" * 9000}),
    "invalid header character": b"HTTP/1.1 200 OK\r\nX-E\x01" + KEY + b": v\r\nContent-Length: 2\r\n\r\n{}",
    "data past Connection: close": b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1 200 " + KEY + b"\r\n\r\n",
    "bad chunk size": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nZZ" + KEY + b"\r\n",
}


@pytest.mark.parametrize("answer", MALFORMED.values(), ids=MALFORMED.keys())
async def test_a_key_echoed_in_malformed_http_appears_nowhere(proxy, caplog, answer):
    caplog.set_level(logging.DEBUG)
    async with MisbehavingUpstream() as upstream:
        upstream.then(answer)
        client = await proxy(keyed_config(upstream.url))
        resp = await client.post(URL, json=chat_body())
        assert resp.status == 502
        written = await everything_written(client, resp, caplog)
    assert PROVIDER_KEY not in written
    assert "ClientResponseError" in written  # the failure is still named
    assert KEY in upstream.requests[0]  # and the provider did get its key


async def test_every_log_line_is_redacted_whatever_logged_it(proxy, caplog):
    caplog.set_level(logging.INFO)
    await proxy(keyed_config("http://127.0.0.1:9/v1"))  # the pass is installed while the app runs
    try:
        raise ValueError(f"dependency said {PROVIDER_KEY}")
    except ValueError:
        logging.getLogger("pinch_router.anything").exception("oops %s", PROVIDER_KEY, extra={"detail": f"echo {PROVIDER_KEY}"})
    record = caplog.records[-1]
    assert PROVIDER_KEY not in record.getMessage() and PROVIDER_KEY not in record.detail
    assert PROVIDER_KEY not in record.exception and "[redacted]" in record.exception


class KeptRows:
    def __init__(self) -> None:
        self.rows: list[Any] = []

    def submit(self, row: Any) -> bool:
        self.rows.append(row)
        return True


@pytest.mark.parametrize("field", ["attempt error", "stage detail", "relevance reason", "stream error", "requested model", "rejection"])
def test_the_redaction_pass_covers_every_foreign_text_of_a_decision(field, caplog):
    from router.core.redaction import Redactor
    from router.core.results import Attempt, Outcome, Rejection, StageRecord
    from router.observe.decision_record import Decision
    from router.observe.metrics import Metrics
    from router.observe.recorder import Recorder

    leak = f"echo {PROVIDER_KEY} echo"
    values = {
        "attempt error": {"attempts": (Attempt("main", "mock", 502, leak),)},
        "stage detail": {"stages": (StageRecord("classifier", Outcome.ERROR, 1.0, leak),)},
        "relevance reason": {"relevance_reason": leak},
        "stream error": {"stream_error": leak},
        "requested model": {"requested_model": leak},
        "rejection": {"rejected": (Rejection("main", (leak,)),)},
    }[field]
    kept = KeptRows()
    recorder = Recorder(Metrics(["main"], ["c"]), kept, None, clock=lambda: 0.0, wall_clock=lambda: 0.0, redactor=Redactor([PROVIDER_KEY]))  # type: ignore[arg-type]
    recorder.record(Decision(request_id="req_1", ts=0.0, status=502, duration_ms=1.0, **values))
    stored = repr(kept.rows[0])
    assert PROVIDER_KEY not in stored and "echo [redacted] echo" in stored


# ---- 2. bounded upstream bodies, gzip inflation capped ----------------------------------------------------------


async def test_a_gzip_bomb_stops_at_the_response_cap(proxy):
    bomb = gzip_bomb(64 * 1024 * 1024)  # 64 MiB of zeros in ~64 KB
    async with MisbehavingUpstream() as upstream:
        upstream.then(http_answer(headers={"Content-Encoding": "gzip"}, body=bomb))
        client = await proxy(make_config(upstream.url, upstream={"max_response_mb": 1}))
        resp = await client.post(URL, json=chat_body())
        assert resp.status == 502
        assert "larger than 1 MB" in (await resp.json())["error"]["message"]


async def test_an_oversize_body_without_a_length_is_cut_at_the_cap(proxy):
    chunk = b"%x\r\n%s\r\n" % (65536, b" " * 65536)
    async with MisbehavingUpstream() as upstream:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        upstream.then(endless(head, chunk))  # an endless body: only the cap can end it
        client = await proxy(make_config(upstream.url, upstream={"max_response_mb": 2}))
        resp = await client.post(URL, json=chat_body())
        assert resp.status == 502
        assert "upstream.max_response_mb" in (await resp.json())["error"]["message"]


async def test_a_gzip_answer_within_the_cap_is_served(proxy):
    async with MisbehavingUpstream() as upstream:
        upstream.then(http_answer(headers={"Content-Encoding": "gzip"}, body=gzip.compress(COMPLETION)))
        client = await proxy(make_config(upstream.url))
        resp = await client.post(URL, json=chat_body())
        assert resp.status == 200
        assert (await resp.json())["choices"][0]["message"]["content"] == "ok"


# ---- 3. redirects are never followed ------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_an_upstream_redirect_is_a_failure_and_is_not_followed(proxy, mock_upstream, status):
    elsewhere, elsewhere_url = mock_upstream
    async with MisbehavingUpstream() as upstream:
        location = f"{elsewhere_url}/chat/completions"
        upstream.then(http_answer(f"HTTP/1.1 {status} Moved".encode(), {"Location": location}, b""))
        client = await proxy(make_config(upstream.url))
        resp = await client.post(URL, json=chat_body(TASK))
        assert resp.status == 502
        assert f"answered {status}: a redirect elsewhere, not followed" in (await resp.json())["error"]["message"]
    assert elsewhere.received == []


@pytest.mark.parametrize("dependency", ["classifier", "embeddings"])
async def test_classifier_and_embeddings_redirects_are_not_followed(proxy, mock_upstream, dependency):
    elsewhere, elsewhere_url = mock_upstream
    async with MisbehavingUpstream() as upstream:
        upstream.then(http_answer(b"HTTP/1.1 307 Temporary Redirect", {"Location": f"{elsewhere_url}/chat/completions"}, b""))
        chain = ["session-fingerprint", "classifier", "capability-gate", "upstream-forward"]
        sections: dict[str, Any] = {"middlewares": chain, "classifier": {"provider": "side"}}
        providers = {"mock": {"base_url": elsewhere_url}, "side": {"base_url": upstream.url}}
        if dependency == "embeddings":
            chain = ["session-fingerprint", "pinch-relevance", "pinch-prune", "capability-gate", "upstream-forward"]
            relevance = {"enabled": True, "base_url": upstream.url, "min_candidates": 1}
            sections = {"middlewares": chain, "pinch": {"enabled": True, "budget_tokens": 10, "keep_last_turns": 1, "relevance": relevance}}
        client = await proxy(make_config(elsewhere_url, providers=providers, **sections))
        body = {"model": "auto", "messages": [
            {"role": "user", "content": TASK},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "x " * 500},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "next"},
        ]}
        resp = await client.post(URL, json=body)
        assert resp.status == 200  # the dependency fell back
        assert len(upstream.requests) == 1
    assert [r.path for r in elsewhere.received] == ["/v1/chat/completions"]  # only the real chat call went there
    # the ranking is pinch-prune's to await (#44): its batch asked for it
    stage = next(s for s in (await decisions(client))[0]["stages"] if s["stage"] in ("classifier", "pinch-prune"))
    assert "answered 307: a redirect, not followed" in stage["detail"]


# ---- 4. a client that stops reading a stream is dropped, freeing its upstream ------------------------------------


async def test_a_stream_client_that_stops_reading_is_dropped_and_its_upstream_released(proxy):
    event = b"data: " + orjson.dumps({"choices": [{"index": 0, "delta": {"content": "x" * 16000}}]}) + b"\n\n"
    async with MisbehavingUpstream() as upstream:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        upstream.then(endless(head, event))  # streams as fast as the proxy takes it
        client = await proxy(make_config(upstream.url, upstream={"client_write_timeout_seconds": 0.5}))
        reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
        body = orjson.dumps(chat_body(stream=True))
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        try:
            rows: list[dict[str, Any]] = []
            for _ in range(100):  # never reading: the proxy must give up on us by itself
                await asyncio.sleep(0.1)
                rows = await decisions(client)
                if rows:
                    break
            assert rows and rows[0]["status"] == 499
            metrics = await (await client.get("/metrics")).text()
            assert "pinch_router_upstream_responses_open 0.0" in metrics
        finally:
            writer.close()


# ---- 5. one SSE line without an end is bounded -------------------------------------------------------------------


async def test_an_endless_sse_line_is_cut_at_the_event_cap(proxy):
    async with MisbehavingUpstream() as upstream:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\ndata: "
        upstream.then(endless(head, b"y" * 65536))
        client = await proxy(make_config(upstream.url, upstream={"max_stream_event_mb": 1}))
        resp = await client.post(URL, json=chat_body(stream=True))
        assert resp.status == 502  # before the first event: no byte reached the client yet
        assert "upstream.max_stream_event_mb" in (await resp.json())["error"]["message"]


@pytest.mark.parametrize("framing", [b"\n\n", b"\r\n\r\n", b"\r\r"], ids=["lf", "crlf", "cr"])
def test_event_boundaries_split_across_chunks_are_found_when_only_new_bytes_are_scanned(framing):
    stream = b"".join(b"data: {\"n\": %d}" % i + framing for i in range(5)) + b"data: [DONE]" + framing
    relay = SseRelay(OPENAI_CHAT_ADAPTER)
    out = b"".join(relay.feed(stream[i : i + 1]) for i in range(len(stream)))  # a byte at a time
    assert out == stream and relay.done and relay.pending == bytearray()


def test_an_event_that_never_ends_raises_at_the_bound():
    relay = SseRelay(OPENAI_CHAT_ADAPTER, max_event_bytes=1024 * 1024)
    relay.feed(b"data: ")
    with pytest.raises(EventTooLarge, match="upstream.max_stream_event_mb"):
        for _ in range(17):  # 17 x 64 KiB > 1 MiB
            relay.feed(b"y" * 65536)
    assert len(relay.pending) <= 1024 * 1024 + 65536 + 6


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("inf", 86_400.0), ("1e999", 86_400.0), ("99999999999", 86_400.0), ("-5", 0.0), ("Fri, 31 Dec 9999 23:59:59 GMT", 86_400.0), ("7", 7.0)],
)
def test_retry_after_is_bounded_to_a_day(header, seconds):
    assert parse_retry_after(header, 0) == seconds


# ---- 6. deep nesting is a 400 naming the limit -------------------------------------------------------------------


def nested(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


PLACES = {
    "message key": lambda v: chat_body() | {"messages": [{"role": "user", "content": "hi", "extra": v}]},
    "unknown top-level field": lambda v: chat_body(vendor=v),
    "tools[].parameters": lambda v: chat_body(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "x": v}}}]),
    "content part": lambda v: chat_body() | {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "x": v}]}]},
}


@pytest.mark.parametrize("depth", [250, 254, 600, 1021, 5000])
@pytest.mark.parametrize("place", PLACES.values(), ids=PLACES.keys())
async def test_deep_nesting_anywhere_is_a_400_never_a_5xx(proxy, mock_upstream, place, depth):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    raw = orjson.dumps(place(nested(depth))) if depth < 250 else _deep_json(place, depth)
    resp = await client.post(URL, data=raw, headers={"Content-Type": "application/json"})
    assert resp.status == 400
    assert (await resp.json())["error"]["code"] in ("json_too_deep", "invalid_json")


def _deep_json(place: Any, depth: int) -> bytes:
    """orjson cannot write these bodies (that is the point); splice the nesting in as text."""
    marker = "__NESTED__"
    text = orjson.dumps(place(marker)).decode()
    inner = "[" * depth + "1" + "]" * depth
    return text.replace(f'"{marker}"', inner).encode()


async def test_nesting_within_the_limit_is_served_unchanged(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(make_config(url, server={"max_json_depth": 64}))
    resp = await client.post(URL, json=chat_body(vendor=nested(50)))
    assert resp.status == 200
    assert mock.received[0].body["vendor"] == nested(50)
    resp = await client.post(URL, json=chat_body(vendor=nested(70)))
    assert resp.status == 400
    assert "server.max_json_depth" in (await resp.json())["error"]["message"]


@pytest.mark.parametrize("order", ["invalid first", "deep first"])
async def test_a_too_deep_body_is_refused_as_that_whatever_else_is_wrong(proxy, mock_upstream, order):
    """The chat edge validates the messages before its depth walk; the depth's answer still comes first."""
    _, url = mock_upstream
    client = await proxy(make_config(url, server={"max_json_depth": 16}))
    messages = [{"role": "robot", "content": "x"}, {"role": "user", "content": "hi", "extra": nested(14)}]
    body = chat_body() | {"messages": messages if order == "invalid first" else messages[::-1]}
    resp = await client.post(URL, json=body)
    assert resp.status == 400
    assert (await resp.json())["error"]["code"] == "json_too_deep"
    resp = await client.post(URL, json=body | {"messages": [m for m in messages if "extra" not in m]})
    assert (await resp.json())["error"]["param"] == "messages[0].role"


# Where each wire's own check, which runs before the depth walk, reads a value it expects to be
# flat: a nested one there is still the depth's 400 (issue #42), not a 5xx of Python's recursion
# limit (a string of a list nested ~980 deep) or orjson's (it writes at most 254 levels).
WIRE_PLACES = {
    "gemini contents[].role": ("/v1beta/models/auto:generateContent", {"contents": [{"role": "__NESTED__", "parts": [{"text": "hi"}]}]}),
    "gemini functionResponse.response": (
        "/v1beta/models/auto:generateContent",
        {"contents": [{"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"output": "__NESTED__"}}}]}]},
    ),
    "responses reasoning id": ("/v1/responses", {"model": "auto", "input": [{"type": "reasoning", "id": "__NESTED__", "summary": []}, {"role": "user", "content": "hi"}]}),
    "messages role": ("/v1/messages", {"model": "auto", "max_tokens": 5, "messages": [{"role": "__NESTED__", "content": "hi"}]}),
    "chat role": (URL, chat_body() | {"messages": [{"role": "__NESTED__", "content": "hi"}]}),
}


@pytest.mark.parametrize("depth", [254, 600, 978, 1017])
@pytest.mark.parametrize(("path", "body"), WIRE_PLACES.values(), ids=WIRE_PLACES.keys())
async def test_deep_nesting_where_a_wire_reads_a_flat_value_is_the_depth_400(proxy, mock_upstream, path, body, depth):
    mock, url = mock_upstream
    client = await proxy(make_config(url))
    raw = orjson.dumps(body).replace(b'"__NESTED__"', b"[" * depth + b'"x"' + b"]" * depth)
    resp = await client.post(path, data=raw, headers={"Content-Type": "application/json"})
    assert resp.status == 400, await resp.text()
    assert "server.max_json_depth" in await resp.text()
    assert not mock.received


async def test_a_suspect_number_beside_usual_messages_goes_upstream_as_written(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(make_config(url))
    raw = orjson.dumps(chat_body() | {"messages": [{"role": "user", "content": "hi", "seed": "#"}]}).replace(b'"#"', b"123456789012345678901234567890")
    resp = await client.post(URL, data=raw, headers={"Content-Type": "application/json"})
    assert resp.status == 200
    assert b"123456789012345678901234567890" in mock.received[0].raw


# ---- 7. other edge 5xx -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
@pytest.mark.parametrize("path", [URL, "/v1/outcome"])
async def test_plain_json_labelled_compressed_is_a_400(proxy, mock_upstream, encoding, path):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    headers = {"Content-Type": "application/json", "Content-Encoding": encoding}
    resp = await client.post(path, data=orjson.dumps(chat_body()), headers=headers)
    assert resp.status == 400
    assert (await resp.json())["error"]["code"] == "invalid_content_encoding"


@pytest.mark.parametrize("encode", [gzip.compress, zlib.compress], ids=["gzip", "deflate"])
async def test_a_compressed_body_is_decoded(proxy, mock_upstream, encode):
    mock, url = mock_upstream
    client = await proxy(make_config(url))
    encoding = "gzip" if encode is gzip.compress else "deflate"
    resp = await client.post(URL, data=encode(orjson.dumps(chat_body(TASK))), headers={"Content-Type": "application/json", "Content-Encoding": encoding})
    assert resp.status == 200
    assert mock.received[0].body["messages"][0]["content"] == TASK


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-15)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize(
    ("encoding", "packed"),
    [
        ("gzip", gzip.compress(orjson.dumps(chat_body(TASK)))[:-8]),  # every byte of the JSON, no trailer (CRC32, length)
        ("gzip", gzip.compress(orjson.dumps(chat_body(TASK)))[:-3]),
        ("deflate", zlib.compress(orjson.dumps(chat_body(TASK)))[:-4]),  # no Adler-32
        ("gzip", gzip.compress(orjson.dumps(chat_body(TASK))) + b"trailing garbage"),
    ],
    ids=["gzip-without-trailer", "gzip-half-a-trailer", "deflate-without-checksum", "gzip-then-garbage"],
)
@pytest.mark.parametrize("path", [URL, "/v1/outcome", "/v1/messages/count_tokens"])
async def test_a_compressed_body_cut_short_is_a_400_not_served(proxy, mock_upstream, encoding, packed, path):
    mock, url = mock_upstream
    client = await proxy(make_config(url))
    resp = await client.post(path, data=packed, headers={"Content-Type": "application/json", "Content-Encoding": encoding})
    assert resp.status == 400, await resp.text()
    error = (await resp.json())["error"]
    assert error.get("code", "invalid_content_encoding") == "invalid_content_encoding"  # Anthropic's errors have none
    assert "cut short" in error["message"] or "does not match the bytes" in error["message"]
    assert mock.received == []


@pytest.mark.parametrize(
    ("encoding", "packed"),
    [
        ("gzip", gzip.compress(orjson.dumps(chat_body(TASK))[:40]) + gzip.compress(orjson.dumps(chat_body(TASK))[40:])),  # two members
        ("deflate", raw_deflate(orjson.dumps(chat_body(TASK)))),  # without the zlib header, as some clients send it
        ("x-gzip", gzip.compress(orjson.dumps(chat_body(TASK)))),
    ],
    ids=["gzip-two-members", "raw-deflate", "x-gzip"],
)
async def test_compressed_bodies_gzip_itself_reads_are_decoded(proxy, mock_upstream, encoding, packed):
    mock, url = mock_upstream
    client = await proxy(make_config(url))
    resp = await client.post(URL, data=packed, headers={"Content-Type": "application/json", "Content-Encoding": encoding})
    assert resp.status == 200, await resp.text()
    assert mock.received[0].body["messages"][0]["content"] == TASK


@pytest.mark.parametrize("limit", ["%C2%B2", "1" * 5000, "٣", "-1", "0", "1001", "1e3"])
async def test_odd_decision_limits_are_a_400(proxy, mock_upstream, limit):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    resp = await client.get(f"/v1/decisions?limit={limit}")
    assert resp.status == 400
    assert (await resp.json())["error"]["param"] == "limit"


async def raw_exchange(port: int, request: bytes, read_timeout: float = 5) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(65536), read_timeout)
    finally:
        writer.close()


def status_and_json(answer: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), orjson.loads(body)


@pytest.mark.parametrize("path", [URL, "/v1/models", "/v1/decisions", "/metrics"])
async def test_non_utf8_authorization_is_a_401(proxy, mock_upstream, path):
    _, url = mock_upstream
    client = await proxy(make_config(url, server={"api_keys": ["client-key-0123"]}))
    answer = await raw_exchange(client.port, f"GET {path} HTTP/1.1\r\nHost: x\r\n".encode() + b"Authorization: Bearer \xff\xfe\x80\r\nContent-Length: 0\r\n\r\n")
    status, body = status_and_json(answer)
    assert status == 401
    assert body["error"]["code"] == "invalid_api_key"


# ---- 8. message content never reaches the decision log or the log ------------------------------------------------


async def test_dependencies_echoing_the_task_keep_it_out_of_the_log_and_decisions(proxy, caplog):
    caplog.set_level(logging.DEBUG)
    echo = orjson.dumps({"error": {"message": f"cannot process: {TASK}", "type": "invalid_request", "code": "bad_input"}})
    chat = MockUpstream().then(Behaviour(status=503, body=echo))
    server = TestServer(chat.app(), host="127.0.0.1")
    await server.start_server()
    try:
        async with MisbehavingUpstream() as side:  # the classifier, then the embeddings endpoint
            side.then(*[http_answer(b"HTTP/1.1 500 Oops", body=echo)] * 2)
            chat_url = str(server.make_url("/v1"))
            config = make_config(
                chat_url,
                middlewares=["session-fingerprint", "classifier", "pinch-relevance", "pinch-prune", "capability-gate", "upstream-forward"],
                providers={"mock": {"base_url": chat_url}, "side": {"base_url": side.url}},
                models=[model_entry("main", quality=0.9), model_entry("backup")],
                classifier={"provider": "side"},
                pinch={"enabled": True, "budget_tokens": 10, "keep_last_turns": 1, "relevance": {"enabled": True, "base_url": side.url, "min_candidates": 1}},
            )
            client = await proxy(config)
            body = {"model": "auto", "messages": [
                {"role": "user", "content": TASK},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "lines " * 300},
                {"role": "assistant", "content": "done"},
                {"role": "user", "content": TASK},
            ]}
            resp = await client.post(URL, json=body)
            assert resp.status == 200  # classifier and relevance fell back, the chat failed over
            assert len(side.requests) == 2
            rows = await decisions(client)
    finally:
        await server.close()
    row = rows[0]
    logged = caplog.text + "".join(str(r.__dict__) for r in caplog.records)
    stored = orjson.dumps(row).decode()
    assert "nightingale" not in stored and "nightingale" not in logged
    # what is kept: the status and the error's type and code
    assert "answered 503: type invalid_request, code bad_input" in row["attempts"][0]["error"]
    assert "answered 500: type invalid_request, code bad_input" in row["relevance_reason"]
    classifier = next(s for s in row["stages"] if s["stage"] == "classifier")
    assert "answered 500: type invalid_request, code bad_input" in classifier["detail"]


# ---- 11. a trickling request body is timed out -------------------------------------------------------------------


async def test_a_stalled_request_body_is_a_408(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(make_config(url, server={"body_timeout_seconds": 0.5}))
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"mod"
    status, body = status_and_json(await raw_exchange(client.port, head))
    assert status == 408
    assert body["error"]["code"] == "request_timeout"


# ---- 12. a slow but steady non-stream answer is not cut -----------------------------------------------------------


async def test_a_non_stream_answer_is_read_under_the_idle_gap_not_a_total(proxy):
    async with MisbehavingUpstream() as upstream:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(COMPLETION)
        upstream.then(trickle(head, COMPLETION, every=1.6 / len(COMPLETION)))  # ~1.6 s in all, a byte at a time
        client = await proxy(make_config(upstream.url, upstream={"idle_timeout_seconds": 0.5, "first_byte_timeout_seconds": 5}))
        resp = await client.post(URL, json=chat_body())
        assert resp.status == 200
        assert await resp.read() == COMPLETION


# ---- 13. an absurd tier override is a 400 -------------------------------------------------------------------------


@pytest.mark.parametrize("tier", ["9" * 5000, "1" * 12])
async def test_a_tier_override_of_thousands_of_digits_is_invalid_override(proxy, mock_upstream, tier):
    _, url = mock_upstream
    chain = ["session-fingerprint", "classifier", "capability-gate", "upstream-forward"]
    client = await proxy(make_config(url, middlewares=chain, classifier={"provider": "mock"}))
    resp = await client.post(URL, json=chat_body(), headers={"x-router-tier": tier})
    assert resp.status == 400
    error = (await resp.json())["error"]
    assert (error["code"], error["param"]) == ("invalid_override", "x-router-tier")
    assert len(error["message"]) < 200


# ---- 14. request bodies in flight are bounded --------------------------------------------------------------------


async def test_bodies_beyond_the_in_flight_budget_get_503_with_retry_after(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(make_config(url, server={"max_body_mb": 1, "max_bodies_in_flight_mb": 1.5}))
    big = chat_body(vendor="x" * 900_000)  # bulk the prompt estimate does not count
    mock.then(Behaviour(delay_before_head=1.0))
    first = asyncio.ensure_future(client.post(URL, json=big))
    await asyncio.sleep(0.3)  # the first holds its 0.9 MB while its upstream thinks
    second = await client.post(URL, json=big)
    assert second.status == 503
    assert second.headers["Retry-After"] == "1"
    assert (await second.json())["error"]["code"] == "server_busy"
    assert (await first).status == 200
    assert (await client.post(URL, json=big)).status == 200  # given back when the first finished


# ---- 15. client input is never echoed whole -----------------------------------------------------------------------


async def test_a_huge_model_name_is_clipped_in_the_404_and_the_decision(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    name = "m" * 3_000_000
    resp = await client.post(URL, json=chat_body(model=name))
    assert resp.status == 404
    assert len(await resp.read()) < 2000
    row = (await decisions(client))[0]
    assert len(row["requested_model"]) < 200 and "3,000,000 characters" in row["requested_model"]


@pytest.mark.parametrize(
    ("path", "body"),
    [(URL, {"model": "auto", "messages": [{"role": "r" * 1_000_000, "content": "hi"}]}), ("/v1/outcome", {"request_id": "i" * 1_000_000, "success": True})],
    ids=["role", "outcome request_id"],
)
async def test_other_echoed_client_values_are_clipped(proxy, mock_upstream, path, body):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    resp = await client.post(path, json=body)
    assert resp.status in (400, 404)
    assert len(await resp.read()) < 2000


# ---- 16. framing errors answer the error object; a 401 is logged and counted -------------------------------------

FRAMING = {
    "header over 8 KB": (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 9000 + b"\r\n\r\n", 431, "header_too_large"),
    "bad request line": (b"POST /v1/chat/completions HTTP/1.1 xx\r\n\r\n", 400, "bad_http_request"),
    "invalid header character": (b"POST / HTTP/1.1\r\nHost: x\r\nX-\x01A: 1\r\n\r\n", 400, "bad_http_request"),
}


@pytest.mark.parametrize(("request_bytes", "status", "code"), FRAMING.values(), ids=FRAMING.keys())
async def test_framing_errors_answer_the_openai_error_object(proxy, mock_upstream, request_bytes, status, code):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    answer = await raw_exchange(client.port, request_bytes)
    assert b"application/json" in answer.partition(b"\r\n\r\n")[0]
    got_status, body = status_and_json(answer)
    assert (got_status, body["error"]["code"]) == (status, code)
    metrics = await (await client.get("/metrics")).text()
    assert f'pinch_router_refused_total{{reason="{code}"}} 1.0' in metrics


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-A: " + b"a" * 9000 + b"\r\nContent-Length: 2\r\n\r\n{}",
        b"POST /v1/v1/messages HTTP/1.1\r\nHost: x\r\nanthropic-version: 2023-06-01\r\nX-A: " + b"a" * 9000 + b"\r\nContent-Length: 2\r\n\r\n{}",
    ],
    ids=["messages path", "anthropic-version header"],
)
async def test_a_framing_error_to_a_messages_client_is_in_anthropics_shape(proxy, mock_upstream, request_bytes):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    got_status, body = status_and_json(await raw_exchange(client.port, request_bytes))
    assert got_status == 431 and body["type"] == "error" and "8190-byte limit" in body["error"]["message"]


async def test_a_framing_error_whose_head_came_in_two_reads_is_in_the_paths_format(proxy, mock_upstream):
    """The request line in one write, the header too long in the next: still the Gemini path's error (Google's);
    after an answered request on the same connection, the refused request's path, not the answered one's."""
    _, url = mock_upstream
    client = await proxy(make_config(url))
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    try:
        writer.write(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        await reader.readexactly(int(re.search(rb"Content-Length: (\d+)", head, re.IGNORECASE).group(1)))
        writer.write(b"POST /v1beta/models/auto:generateContent HTTP/1.1\r\nHost: x\r\n")
        await writer.drain()
        await asyncio.sleep(0.05)  # two reads on the proxy's side
        writer.write(b"X-A: " + b"a" * 9000 + b"\r\n\r\n")
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(65536), 5)
    finally:
        writer.close()
    status, body = status_and_json(answer)
    assert status == 431 and body["error"]["status"] == "INVALID_ARGUMENT" and body["error"]["details"][0]["reason"] == "HEADER_TOO_LARGE"


def test_a_refused_requests_path_is_the_last_request_line_read():
    from router.http.framing_errors import refused_path

    assert refused_path(b"POST /v1beta/models/a:generateContent?alt=sse HTTP/1.1\r\nX-A: aaa") == "/v1beta/models/a:generateContent"
    assert refused_path(b"GET /health HTTP/1.1\r\n\r\n\nPOST /v1/messages HTTP/1.1\r\n") == "/v1/messages"
    assert refused_path(b"\x16\x03\x01 garbage") == "/" and refused_path(b"") == "/"


@pytest.mark.parametrize("expect", [b"\xff", b"200-ok"])
async def test_an_expectation_the_proxy_cannot_meet_is_a_417_error_object_logged_and_counted(proxy, mock_upstream, expect):
    """aiohttp answers an unknown ``Expect`` before any middleware: in plain text, and with a 500 for one that is
    no UTF-8 (its message echoed the value); now the path's error object (issue #42), on every path."""
    _, url = mock_upstream
    client = await proxy(make_config(url))
    answer = await raw_exchange(client.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: " + expect + b"\r\n\r\n")
    assert b"application/json" in answer.partition(b"\r\n\r\n")[0]
    status, body = status_and_json(answer)
    assert (status, body["error"]["code"]) == (417, "expectation_failed")
    assert "100-continue" in body["error"]["message"]
    metrics = await (await client.get("/metrics")).text()
    assert 'pinch_router_refused_total{reason="expectation_failed"} 1.0' in metrics


async def test_expect_100_continue_is_still_met(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    body = orjson.dumps(chat_body())
    head = f"POST {URL} HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    try:
        writer.write(head.encode())
        await writer.drain()
        assert await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5) == b"HTTP/1.1 100 Continue\r\n\r\n"
        writer.write(body)
        await writer.drain()
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize("coding", ["br", "zstd"])
async def test_a_body_in_a_coding_the_proxy_does_not_decode_is_a_415(proxy, mock_upstream, coding):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    request_bytes = f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Encoding: {coding}\r\nContent-Length: 2\r\n\r\n{{}}".encode()
    got_status, body = status_and_json(await raw_exchange(client.port, request_bytes))
    assert (got_status, body["error"]["code"]) == (415, "unsupported_content_encoding")
    assert [row["error_code"] for row in await decisions(client)] == ["unsupported_content_encoding"]


async def test_a_401_leaves_a_log_line_and_a_metric(proxy, mock_upstream, caplog):
    caplog.set_level(logging.INFO)
    _, url = mock_upstream
    client = await proxy(make_config(url, server={"api_keys": ["client-key-0123"]}))
    resp = await client.post(URL, json=chat_body(), headers={"Authorization": "Bearer wrong"})
    assert resp.status == 401
    assert any(r.getMessage() == "unauthorized" for r in caplog.records)
    anthropic = await client.post("/v1/messages", json={"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}, headers={"x-api-key": "wrong"})
    body = await anthropic.json()
    assert anthropic.status == 401 and body["error"]["type"] == "authentication_error"
    # Anthropic's errors carry a request id (body and header): the one its log line names
    assert [r.request_id for r in caplog.records if r.getMessage() == "unauthorized"][-1] == body["request_id"] == anthropic.headers["request-id"]
    metrics = await (await client.get("/metrics", headers={"Authorization": "Bearer client-key-0123"})).text()
    assert 'pinch_router_refused_total{reason="unauthorized"} 2.0' in metrics  # both refusals


# ---- 17. numbers pass through untouched ----------------------------------------------------------------------------

NUMBERS = {
    "big int": b"123456789012345678901234567890",
    "negative big int": b"-98765432109876543210",
    "underflow": b"1e-400",
    "overflow": b"1e400",
    "negative zero float": b"-0.0",
    "u64 max": b"18446744073709551615",
    "ordinary": b"0.25",
}


@pytest.mark.parametrize("literal", NUMBERS.values(), ids=NUMBERS.keys())
async def test_numbers_reach_the_upstream_as_the_client_wrote_them(proxy, literal):
    body = b'{"model": "auto", "messages": [{"role": "user", "content": "hi"}], "seed": ' + literal + b', "x": {"v": [' + literal + b"]}}"
    async with MisbehavingUpstream() as upstream:  # records the raw bytes (and can read what a double cannot)
        client = await proxy(make_config(upstream.url))
        resp = await client.post(URL, data=body, headers={"Content-Type": "application/json"})
        assert resp.status == 200
    sent = upstream.requests[0]
    assert b'"seed":' + literal + b"," in sent
    assert b'"x":{"v":[' + literal + b"]}" in sent


# ---- 18. odd upstream answers are failures, not answers ----------------------------------------------------------


@pytest.mark.parametrize(
    "odd",
    [
        http_answer(b"HTTP/1.1 204 No Content", body=b""),
        http_answer(b"HTTP/1.1 599 Whatever"),
        http_answer(b"HTTP/1.1 200 OK", body=b"<html>not json</html>"),
        http_answer(b"HTTP/1.1 201 Created"),
    ],
    ids=["204", "599", "non-JSON 200", "201"],
)
async def test_odd_upstream_answers_fail_over_and_are_logged_as_failures(proxy, odd):
    async with MisbehavingUpstream() as upstream:
        upstream.then(odd)  # the first candidate; the second gets a normal answer
        client = await proxy(make_config(upstream.url, models=[model_entry("main", quality=0.9), model_entry("backup")]))
        resp = await client.post(URL, json=chat_body())
        assert resp.status == 200
        assert resp.headers["x-router-model"] == "backup"
        attempts = (await decisions(client))[0]["attempts"]
    assert attempts[0]["model"] == "main" and attempts[0]["error"]
    assert attempts[1] == {"model": "backup", "provider": "mock", "status": 200, "error": ""}


@pytest.mark.parametrize("retry_after", ["inf", "1e999", "99999999999", "-5", "nan"])
async def test_a_wild_retry_after_is_bounded(proxy, retry_after):
    async with MisbehavingUpstream() as upstream:
        upstream.then(http_answer(b"HTTP/1.1 429 Too Many", {"Retry-After": retry_after}, b'{"error": {"message": "slow down"}}'))
        client = await proxy(make_config(upstream.url, upstream={"max_attempts": 1}))
        resp = await client.post(URL, json=chat_body())
    assert resp.status == 429
    relayed = resp.headers.get("Retry-After")
    assert relayed is None or (relayed.isdigit() and int(relayed) <= 86_400)


# ---- also: a provider pointing back at the proxy -------------------------------------------------------------------


@pytest.mark.parametrize("base_url", ["http://127.0.0.1:8787/v1", "http://localhost:8787/v1", "http://[::1]:8787/v1"])
def test_a_provider_that_points_back_at_the_proxy_is_refused(base_url):
    with pytest.raises(ConfigError, match=r"providers\.mock\.base_url: .* is this proxy itself"):
        make_config(base_url, server={"port": 8787})


def test_a_provider_on_another_port_is_fine():
    assert make_config("http://127.0.0.1:8788/v1", server={"port": 8787}).providers["mock"].url == "http://127.0.0.1:8788/v1"
