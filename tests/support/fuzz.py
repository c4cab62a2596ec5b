"""What the fuzz tests share (issue #42): the proxy with one model of every provider type, many raw
bodies sent at once, each answer held to what a client may expect (below 500, not dropped, an error
small and in its wire's format, a 200 whole), and the decision rows counted against the requests.

The proxy, its mock upstream and the sending client share one event loop, so the bodies go out
``CONCURRENCY`` at a time on the client's pooled connections: a request waiting on a socket (a
stream, the classifier) lets the next one be parsed instead of idling the loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp.test_utils import TestClient

from router.config import Config
from router.server.registry import REGISTRY
from router.observe.recorder import RECORDER_KEY
from router.tools.mock_upstream import MockUpstream
from tests.support.config import make_config, model_entry
from tests.support.servers import loopback_server

CONCURRENCY = 16
# The timeouts that judge the client are long: its request head within server.head_timeout_seconds
# of the connection opening, its next request within server.keepalive_timeout_seconds, its reading
# of a stream within upstream.client_write_timeout_seconds. The sending client runs on the proxy's
# own event loop, so whatever that loop runs delays the client too, and those timeouts took the
# proxy's lateness for the client's: under load (two suites on the 2 cores) a request now and then
# failed as ServerDisconnectedError. With the proxy's timeouts 20x shorter, 58 of 2,000 mutated
# bodies were dropped so, each on a connection the proxy closed by its head timeout (43) or its
# keep-alive timeout (15) before the client, waiting its turn on the loop, had written a byte; with
# these three long and the rest 20x shorter, none (the 502s and 504s left are those timeouts working).
# A real client's head is in the socket whatever the proxy's loop does, and is read late rather than
# refused (router/http/connections.py); tests/http/test_connections.py holds these timeouts to their word.
CLIENT_TIMEOUT_SECONDS = 300
MAX_ERROR_BODY = 4096
# the provider types each client wire is served by (a pass-through or a registered translation:
# router/translate/registry.py); a Responses provider serves Responses clients only
SERVED_BY = {
    "chat": ["chat-main", "claude-main", "ollama-main", "gemini-main"],
    "messages": ["claude-main", "chat-main", "ollama-main", "gemini-main"],
    "responses": ["responses-main", "chat-main", "claude-main", "ollama-main", "gemini-main"],
    "gemini": ["gemini-main", "chat-main", "claude-main", "ollama-main"],
    "ollama": ["ollama-main", "chat-main", "claude-main", "gemini-main"],  # Ollama's API as a client's: always translated
}
CHAT, MESSAGES, RESPONSES = "/v1/chat/completions", "/v1/messages", "/v1/responses"
GEMINI_ACTIONS = ("generateContent", "streamGenerateContent?alt=sse", "streamGenerateContent")


@pytest.fixture
async def upstream_url() -> AsyncIterator[str]:
    """The mock upstream, keeping no copy of the requests (thousands, some of a megabyte)."""
    async with loopback_server(MockUpstream(record=False).app()) as url:
        yield url


def every_provider_config(url: str) -> Config:
    """Every stage on (the classifier and embeddings on the mock, pinch with a small budget) and one
    model of each provider type, all on the mock upstream at ``url``."""
    root = url.removesuffix("/v1")
    supports = {"tools": True, "vision": True, "json_mode": True}
    providers = {
        "chat": {"base_url": url},
        "anth": {"base_url": root, "api": "anthropic"},
        "ollama": {"base_url": root, "api": "ollama", "native_chat": True},
        "resp": {"base_url": url, "wire": "openai-responses"},
        "gem": {"base_url": root, "api": "gemini"},
    }
    # one model of each provider type: openai-compatible, anthropic, ollama-native, responses, gemini
    names = {"chat-main": "chat", "claude-main": "anth", "ollama-main": "ollama", "responses-main": "resp", "gemini-main": "gem"}
    return make_config(
        url,
        middlewares=list(REGISTRY.default_chain),
        providers=providers,
        models=[model_entry(name, provider=provider, supports=supports, context_window=2_000_000, max_output_tokens=64_000) for name, provider in names.items()],
        classifier={"provider": "ollama", "model": "mock", "timeout_seconds": 2},
        session_cache={"enabled": True},
        # a 1 MB body through every stage and the mock on a loaded 2-core machine can take more than
        # the test default's 5 s to its first byte: a 504 there is the timeout working, not the fuzz's finding
        upstream={
            "connect_timeout_seconds": 30,
            "first_byte_timeout_seconds": 60,
            "stream_first_byte_timeout_seconds": 60,
            "idle_timeout_seconds": 60,
            "client_write_timeout_seconds": CLIENT_TIMEOUT_SECONDS,
        },
        server={"head_timeout_seconds": CLIENT_TIMEOUT_SECONDS, "keepalive_timeout_seconds": CLIENT_TIMEOUT_SECONDS},
        pinch={"enabled": True, "budget_tokens": 4000, "keep_last_turns": 1, "relevance": {"enabled": True, "provider": "ollama", "model": "mock"}},
    )


@dataclass(slots=True)
class Answer:
    """One request's fate: its status and body, or ``dropped`` naming how the connection failed."""

    tag: Any  # what the caller sent, to say which body failed
    path: str
    status: int = 0
    body: bytes = b""
    request_id: str | None = None
    content_type: str = ""
    dropped: str | None = None


async def send_all(client: TestClient[Any, Any], requests: Iterable[tuple[Any, str, bytes]], concurrency: int = CONCURRENCY) -> list[Answer]:
    """POST each ``(tag, path, raw body)``, ``concurrency`` at a time; the answers in the order sent.

    ``requests`` is drawn lazily, so a generator of large bodies holds only those in flight."""
    gate = asyncio.Semaphore(concurrency)

    async def one(tag: Any, path: str, raw: bytes) -> Answer:
        answer = Answer(tag, path)
        try:
            async with client.post(path, data=raw, headers={"Content-Type": "application/json"}) as resp:
                answer.status, answer.request_id, answer.content_type = resp.status, resp.headers.get("x-router-request-id"), resp.content_type
                answer.body = await resp.read()
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            answer.dropped = type(exc).__name__
        finally:
            gate.release()
        return answer

    tasks = []
    for tag, path, raw in requests:
        await gate.acquire()
        tasks.append(asyncio.ensure_future(one(tag, path, raw)))
    return list(await asyncio.gather(*tasks))


def error_in_format(wire: str, raw: bytes) -> bool:
    """Whether ``raw`` is an error body in ``wire``'s own format."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    if not isinstance(body, dict):
        return False
    if wire == "messages":
        return body.get("type") == "error" and isinstance(body.get("error"), dict) and isinstance(body["error"].get("message"), str)
    if wire == "ollama":  # Ollama's {"error": "<message>"}
        return isinstance(body.get("error"), str)
    if wire == "gemini":  # Google's {"error": {"code", "message", "status"}}
        error = body.get("error")
        return isinstance(error, dict) and isinstance(error.get("message"), str) and isinstance(error.get("code"), int) and isinstance(error.get("status"), str)
    return isinstance(body.get("error"), dict) and isinstance(body["error"].get("message"), str)


def faults(wire: str, answers: list[Answer], only_400: bool = False) -> list[tuple[Any, Any, bytes]]:
    """What went wrong, an entry per answer: a dropped connection, a status ≥ 500 (any but 400 when
    ``only_400``), an error over 4 KB or not in ``wire``'s format, a 200 not whole (:func:`whole_answer`)."""
    found: list[tuple[Any, Any, bytes]] = []
    for a in answers:
        if a.dropped is not None:
            found.append((a.tag, f"dropped: {a.dropped}", b""))
        elif a.status >= 500 or (only_400 and a.status != 400):
            found.append((a.tag, a.status, a.body[:300]))
        elif a.status >= 400 and (len(a.body) > MAX_ERROR_BODY or not error_in_format(wire, a.body)):
            found.append((a.tag, f"{a.status} error of {len(a.body)} bytes", a.body[:300]))
        elif not whole_answer(wire, a):
            found.append((a.tag, f"{a.path}: a 200 not whole", a.body[-300:]))
    return found


# the events a stream of each wire may end with (its end, or the error event the proxy ends a broken one with)
LAST_EVENTS = {"messages": {b"message_stop", b"error"}, "responses": {b"response.completed", b"response.incomplete", b"response.failed", b"error"}}


def whole_answer(wire: str, answer: Answer) -> bool:
    """Whether a 200 arrived whole, however the provider's answer went: a JSON body parses (Gemini's
    stream without ``alt=sse`` is one JSON array), a stream's every event is whole and its last one
    ends it as its format does (chat's ``[DONE]``, Anthropic's ``message_stop``, a Responses terminal
    event, an error event)."""
    if answer.status != 200:
        return True
    raw = answer.body.replace(b"\r\n", b"\n")  # Gemini's events end in CRLF
    if answer.content_type == "application/x-ndjson":  # Ollama's stream: a JSON object a line, the last done (or an error)
        lines = [json_value(line) for line in raw.split(b"\n")[:-1]]
        return raw.endswith(b"\n") and all(isinstance(line, dict) for line in lines) and bool(lines) and (lines[-1].get("done") is True or "error" in lines[-1])
    if answer.content_type != "text/event-stream":
        return isinstance(json_value(raw), list if answer.path.endswith(":streamGenerateContent") else dict)
    if not raw.endswith(b"\n\n"):
        return False
    lines = raw.split(b"\n")
    if wire == "chat":
        return lines[-3] == b"data: [DONE]"
    if wire == "gemini":  # no end event: every one must be whole JSON
        return all(isinstance(json_value(line[6:]), dict) for line in lines if line.startswith(b"data: "))
    events = [line[7:] for line in lines if line.startswith(b"event: ")]
    return bool(events) and events[-1] in LAST_EVENTS[wire]


def json_value(raw: bytes) -> Any:
    """``raw`` parsed, numbers no double holds too (an answer may echo the client's ``1e400``); None if it is not JSON."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(raw)
    except ValueError:
        return None


async def assert_a_row_each(client: TestClient[Any, Any], answers: list[Answer]) -> int:
    """Every answered request has its decision row, and the log holds no other (nor lost or dropped
    one): rows == requests. A row is queued on the loop's next turn after its answer and written in
    batches on the log's thread, so this waits (at most 10 s) for the count to reach the answers'
    (``recent`` flushes first). Returns the count."""
    log = client.server.app[RECORDER_KEY].decision_log
    assert log is not None, "the decision log is off"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while len(rows := await log.recent(len(answers) + 100)) < len(answers) and loop.time() < deadline:
        await asyncio.sleep(0.05)
    logged = {row["request_id"] for row in rows}
    missing = [a.tag for a in answers if a.request_id not in logged]
    assert (len(rows), missing) == (len(answers), []), f"{len(rows)} rows for {len(answers)} requests; without one: {missing[:5]}"
    assert log.dropped == log.lost == 0, (log.dropped, log.lost)
    return len(rows)
