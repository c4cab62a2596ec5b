"""Keep-alives while the provider is silent mid-stream (``upstream.stream_keepalive_seconds``).

Claude Code, the SDKs and the proxies between them and us have idle timeouts; a long
prefill or thinking phase must not look like a dead connection. Once the head is
committed (with the first event), a client that has received nothing for the interval
gets its own format's keep-alive — Anthropic's ``ping`` event, an SSE comment for the
OpenAI formats — between whole events; the rest of the stream is unchanged. Every
upstream here is a raw loopback server that stalls in the middle of its stream.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from router.wire.anthropic_messages.errors import PING_EVENT
from router.core.sse import KEEP_ALIVE_COMMENT
from tests.support.config import chat_body, make_config, model_entry
from tests.support.misbehaving_upstream import MisbehavingUpstream, Writer

SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
STALL = 0.45
KEEPALIVE = 0.1


def chat_event(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return b"data: " + orjson.dumps({"id": "c1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + b"\n\n"


def anthropic_event(kind: str, **payload: Any) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **payload}) + b"\n\n"


CHAT_BEFORE = chat_event({"role": "assistant", "content": "Hel"})
CHAT_AFTER = chat_event({"content": "lo"}, "stop") + b"data: [DONE]\n\n"
MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-up", "content": [], "stop_reason": None, "usage": {"input_tokens": 12, "output_tokens": 1}}
ANTHROPIC_BEFORE = anthropic_event("message_start", message=MESSAGE)
ANTHROPIC_AFTER = (
    anthropic_event("content_block_start", index=0, content_block={"type": "text", "text": ""})
    + anthropic_event("content_block_delta", index=0, delta={"type": "text_delta", "text": "Hello"})
    + anthropic_event("content_block_stop", index=0)
    + anthropic_event("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 2})
    + anthropic_event("message_stop")
)
RESPONSE = {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}
RESPONSES_BEFORE = b"event: response.created\ndata: " + orjson.dumps({"type": "response.created", "response": RESPONSE}) + b"\n\n"
RESPONSES_AFTER = b"event: response.completed\ndata: " + orjson.dumps(
    {"type": "response.completed", "response": {**RESPONSE, "status": "completed", "usage": {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6}}}
) + b"\n\n"


def stalling(before: bytes, after: bytes, stall: float = STALL) -> Writer:
    """A stream that sends ``before``, goes silent for ``stall`` seconds, then sends ``after``."""

    async def write(writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + before)
        await writer.drain()
        await asyncio.sleep(stall)
        writer.write(after)
        await writer.drain()

    return write


def keepalive_config(url: str, provider: dict[str, Any], keepalive: float = KEEPALIVE, **upstream: Any) -> Any:
    return make_config(
        url,
        providers={"mock": {"base_url": url, **provider}},
        models=[model_entry("main", upstream_model="claude-up")],
        upstream={"connect_timeout_seconds": 2, "first_byte_timeout_seconds": 5, "idle_timeout_seconds": 5, "stream_keepalive_seconds": keepalive, **upstream},
    )


ANTHROPIC_REQUEST = {"model": "auto", "max_tokens": 100, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
RESPONSES_REQUEST = {"model": "auto", "stream": True, "input": "hi"}

# client path, request, provider settings, upstream stream (before, after the stall), the client's keep-alive
PASSTHROUGH = {
    "openai-chat": ("/v1/chat/completions", chat_body(stream=True), {}, CHAT_BEFORE, CHAT_AFTER, KEEP_ALIVE_COMMENT),
    "anthropic-messages": ("/v1/messages", ANTHROPIC_REQUEST, {"api": "anthropic"}, ANTHROPIC_BEFORE, ANTHROPIC_AFTER, PING_EVENT),
    "openai-responses": ("/v1/responses", RESPONSES_REQUEST, {"wire": "openai-responses"}, RESPONSES_BEFORE, RESPONSES_AFTER, KEEP_ALIVE_COMMENT),
}


@pytest.mark.parametrize("wire", list(PASSTHROUGH))
async def test_a_stream_silent_mid_way_gets_the_clients_keepalive_and_is_otherwise_unchanged(proxy, wire):
    path, request, provider, before, after, keepalive = PASSTHROUGH[wire]
    async with MisbehavingUpstream() as upstream:
        upstream.then(stalling(before, after))
        client = await proxy(keepalive_config(upstream.url, provider))
        resp = await client.post(path, json=request)
        assert resp.status == 200
        received = await resp.read()
    assert received.startswith(before + keepalive)  # the keep-alives come after the first event, between whole events
    assert received.count(keepalive) >= 2  # one per interval of silence (0.45 s at 0.1 s; fewer only on a stalled machine)
    assert received.replace(keepalive, b"") == before + after  # the provider's stream itself: byte for byte


async def test_a_translated_stream_keeps_an_anthropic_client_alive_with_ping_events(proxy):
    """Claude Code on an OpenAI-compatible model: silent prefill after the first chunk ⇒ ``ping`` events."""
    async with MisbehavingUpstream() as upstream:
        upstream.then(stalling(CHAT_BEFORE, CHAT_AFTER))
        client = await proxy(keepalive_config(upstream.url, {}))
        resp = await client.post("/v1/messages", json=ANTHROPIC_REQUEST)
        assert resp.status == 200
        received = await resp.read()
    events = [e for e in received.split(b"\n\n") if e]
    kinds = [e.split(b"\n", 1)[0].removeprefix(b"event: ").decode() for e in events]
    # the translation's own ping after message_start, then the keep-alives while the provider was silent
    assert kinds[:3] == ["message_start", "ping", "content_block_start"]
    first_text = kinds.index("content_block_delta")
    pings = kinds[first_text + 1 :].count("ping")
    assert pings >= 2 and kinds[-1] == "message_stop"
    assert all(e + b"\n\n" == PING_EVENT for e, k in zip(events, kinds, strict=True) if k == "ping")


async def test_no_keepalive_when_it_is_switched_off(proxy):
    async with MisbehavingUpstream() as upstream:
        upstream.then(stalling(CHAT_BEFORE, CHAT_AFTER))
        client = await proxy(keepalive_config(upstream.url, {}, keepalive=0))
        resp = await client.post("/v1/chat/completions", json=chat_body(stream=True))
        assert await resp.read() == CHAT_BEFORE + CHAT_AFTER


async def test_keepalives_never_keep_a_dead_upstream_open(proxy):
    """The idle gap counts the provider's silence alone: after it, the stream still ends with the error event."""
    async with MisbehavingUpstream() as upstream:
        upstream.then(stalling(ANTHROPIC_BEFORE, b"", stall=3))
        client = await proxy(keepalive_config(upstream.url, {"api": "anthropic"}, idle_timeout_seconds=0.5))
        resp = await client.post("/v1/messages", json=ANTHROPIC_REQUEST)
        received = await resp.read()
    assert received.startswith(ANTHROPIC_BEFORE + PING_EVENT)
    tail = received.replace(PING_EVENT, b"").removeprefix(ANTHROPIC_BEFORE)
    assert tail.startswith(b"event: error\n") and b"no data for 0.5s" in tail


async def test_no_keepalive_before_the_first_event_so_the_next_candidate_can_still_answer(proxy):
    """Heads are committed with the first event, not earlier for keep-alives: a candidate that is silent
    past the first-byte timeout still fails over, and the client gets the next one's stream and status.
    (The next candidate is on another provider: one that just timed out is not tried again in the request.)"""
    async with MisbehavingUpstream() as upstream:
        upstream.then(stalling(b"", CHAT_BEFORE + CHAT_AFTER, stall=2), stalling(CHAT_BEFORE, CHAT_AFTER, stall=0))
        config = make_config(
            upstream.url,
            providers={"mock": {"base_url": upstream.url}, "other": {"base_url": upstream.url}},
            models=[model_entry("first", quality=0.9), model_entry("second", provider="other", quality=0.1)],
            upstream={"connect_timeout_seconds": 2, "first_byte_timeout_seconds": 0.5, "idle_timeout_seconds": 5, "stream_keepalive_seconds": 0.05},
        )
        client = await proxy(config)
        resp = await client.post("/v1/chat/completions", json=chat_body(stream=True))
        assert resp.status == 200 and resp.headers["x-router-model"] == "second"
        assert await resp.read() == CHAT_BEFORE + CHAT_AFTER

