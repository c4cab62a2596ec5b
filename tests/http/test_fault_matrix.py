"""The fault matrix (issue 7): each neighbour of the proxy, each way it fails, end to end.

Every cell sends one agent turn through the running proxy with the full chain
(session-fingerprint → classification-cache → classifier → pinch-relevance →
pinch-prune → capability-gate → upstream-forward; session cache, pinch and
relevance on, the turn over ``pinch.budget_tokens`` so relevance runs), then
reads the request's row from ``GET /v1/decisions``. The neighbours are real
loopback servers, so every timeout is a real wait on a real socket: the
classifier and the embeddings endpoint (:class:`Neighbours`, one scripted
fault each) and the chat upstream (:class:`MockUpstream` and its Behaviour).
A connection-refused neighbour is a free loopback port nobody listens on.

| neighbour   | fault                          | documented behaviour                                          |
|-------------|--------------------------------|---------------------------------------------------------------|
| classifier  | timeout, 500, garbage, refused | 200 with routing.fallback_* (source fallback), never cached   |
| embeddings  | timeout, 500, malformed JSON,  | 200, relevance unavailable with the reason, uniform prune,    |
|             | wrong dimensions, NaN          | a ``relevance_unavailable`` warning                           |
| upstream    | refused, 500, first-byte       | the next candidate answers; attempts list both                |
|             | timeout                        |                                                               |
| upstream    | 429, Retry-After within bound  | waited out, same candidate retried, 200                       |
| upstream    | 429, Retry-After beyond bound  | 429 upstream_rate_limited relayed with Retry-After            |
| upstream    | mid-stream cut, idle gap       | 200 stream ends with an upstream_stream_interrupted event and |
|             |                                | [DONE]; the row has stream_error                              |
| upstream    | malformed SSE event            | relayed byte for byte (the proxy never parses or re-encodes   |
|             |                                | events), the stream goes on to [DONE]; no stream_error        |
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bench.harness import free_port
from router.config import Config
from router.server.registry import REGISTRY
from router.wire.openai_chat.stream import is_usage_only_event
from router.tools.mock_upstream import Behaviour, MockUpstream, stream_events
from tests.support.classifier_fakes import CATEGORIES, ollama_reply, verdict
from tests.support.servers import ProxyFactory
from tests.support.config import make_config, model_entry
from tests.support.relevance_fakes import BUDGET, LOW_WATERMARK, OLD_RESULTS, WITHOUT_ORDER_VERBATIM, session, topic_vector

URL = "/v1/chat/completions"
FAULT_TIMEOUT = 0.3  # every timeout a cell provokes; healthy calls get HEALTHY_TIMEOUT
SHORT_RETRY_AFTER = 0.3  # seconds, within upstream.max_retry_after_seconds = 1
HEALTHY_TIMEOUT = 5.0
CLASSIFIED = ("debugging", 3)  # what the healthy classifier answers
FALLBACK = ("coding_general", 2)  # routing.fallback_category / fallback_tier
# What MockUpstream writes for Behaviour(malformed_after_events=n): one event that is not JSON.
MALFORMED_EVENT = b'data: {"choices": [ this is not json\n\n'

Answer = tuple[int, bytes]  # an HTTP status and body


# --- the neighbours: a classifier and an embeddings endpoint on loopback -----------------------


def _embeddings(vectors: list[list[float]]) -> bytes:
    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    # the stdlib writes NaN as the bare literal, as a Python-made server would
    return json.dumps({"object": "list", "model": "fake-embed", "data": data}).encode()


def _healthy_embeddings(texts: list[str]) -> Answer:
    return 200, _embeddings([topic_vector(t) for t in texts])


def _one_vector_longer(texts: list[str]) -> Answer:
    vectors = [topic_vector(t) for t in texts]
    vectors[-1] = [*vectors[-1], 0.0]
    return 200, _embeddings(vectors)


def _a_nan_in_every_vector(texts: list[str]) -> Answer:
    return 200, _embeddings([[float("nan"), *topic_vector(t)[1:]] for t in texts])


HANG = "timeout"  # a fault every neighbour can have: accept the request, never answer in time
CLASSIFIER_ANSWERS: dict[str, Answer] = {
    "healthy": (200, orjson.dumps(ollama_reply(verdict(*CLASSIFIED)))),
    "http-500": (500, b'{"error": "model runner has crashed"}'),
    "garbage-body": (200, b"<html><body>captive portal: please log in</body></html>"),
    "wrong-json": (200, orjson.dumps(ollama_reply('{"category": "cooking", "tier": 9}'))),
}
EMBEDDINGS_ANSWERS: dict[str, Callable[[list[str]], Answer]] = {
    "healthy": _healthy_embeddings,
    "http-500": lambda texts: (500, b'{"error": {"message": "embedding model has crashed"}}'),
    "malformed-json": lambda texts: (200, b'{"object": "list", "data": [{"index": 0, "embedding": [0.1, '),
    "wrong-dimensions": _one_vector_longer,
    "nan": _a_nan_in_every_vector,
}


@dataclass
class Neighbours:
    """The proxy's two helper models on one loopback server, each healthy or with one fault.

    ``POST /classifier/api/chat``: an Ollama-native classifier answering ``CLASSIFIED``.
    ``POST /embed/v1/embeddings``: an OpenAI-style endpoint with the topic-count fake model.
    A hanging handler waits for ``released`` (set at teardown), so nothing sleeps on a clock.
    """

    classifier_fault: str = "healthy"
    embeddings_fault: str = "healthy"
    classifier_calls: int = 0
    embeddings_calls: int = 0
    released: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/classifier/api/chat", self.classify)
        app.router.add_post("/embed/v1/embeddings", self.embed)
        return app

    async def classify(self, request: web.Request) -> web.Response:
        self.classifier_calls += 1
        await request.read()
        if self.classifier_fault == HANG:
            await self.released.wait()
        status, body = CLASSIFIER_ANSWERS.get(self.classifier_fault, CLASSIFIER_ANSWERS["healthy"])
        return web.Response(status=status, body=body, content_type="application/json")

    async def embed(self, request: web.Request) -> web.Response:
        self.embeddings_calls += 1
        texts = orjson.loads(await request.read())["input"]
        if self.embeddings_fault == HANG:
            await self.released.wait()
        status, body = EMBEDDINGS_ANSWERS.get(self.embeddings_fault, _healthy_embeddings)(texts)
        return web.Response(status=status, body=body, content_type="application/json")


@pytest.fixture
async def neighbours() -> AsyncIterator[tuple[Neighbours, str]]:
    """Healthy Neighbours on a free loopback port; yields (neighbours, base URL)."""
    fake = Neighbours()
    server = TestServer(fake.app(), host="127.0.0.1")
    await server.start_server()
    try:
        yield fake, str(server.make_url("")).rstrip("/")
    finally:
        fake.released.set()
        await server.close()


# --- the proxy under test ----------------------------------------------------------------------


def primary_and_backup() -> list[dict[str, Any]]:
    """`primary` (better, so tried first) on provider `one`, `backup` on provider `two`.

    The two providers may share one MockUpstream: its script is consumed in request
    order, so the primary gets the scripted fault and the backup the normal answer;
    ``upstream_model`` in the received bodies says who was asked.
    """
    return [model_entry("primary", provider="one", quality=0.9), model_entry("backup", provider="two", quality=0.1)]


def full_chain_config(
    neighbours_url: str,
    providers: dict[str, str],
    models: list[dict[str, Any]],
    *,
    classifier_url: str | None = None,
    classifier_timeout: float = HEALTHY_TIMEOUT,
    relevance_timeout: float = HEALTHY_TIMEOUT,
    **upstream: float,
) -> Config:
    """Every stage on, the neighbours at ``neighbours_url``, chat providers by name → base URL."""
    relevance = {
        "enabled": True,
        "model": "fake-embed",
        "base_url": f"{neighbours_url}/embed/v1",
        "api": "openai",
        "min_candidates": 2,
        "timeout_seconds": relevance_timeout,
    }
    chat_providers: dict[str, Any] = {name: {"base_url": url} for name, url in providers.items()}
    chat_providers["classifier"] = {"base_url": classifier_url or f"{neighbours_url}/classifier", "api": "ollama"}
    timeouts = {"connect_timeout_seconds": 1, "first_byte_timeout_seconds": HEALTHY_TIMEOUT, "idle_timeout_seconds": HEALTHY_TIMEOUT}
    return make_config(
        middlewares=list(REGISTRY.default_chain),  # every stage, in the documented order
        providers=chat_providers,
        models=models,
        routing={"categories": CATEGORIES, "tiers": [1, 2, 3], "fallback_category": FALLBACK[0], "fallback_tier": FALLBACK[1]},
        classifier={"provider": "classifier", "model": "tiny-classifier", "timeout_seconds": classifier_timeout},
        session_cache={"enabled": True},
        pinch={
            "enabled": True, "budget_tokens": BUDGET, "low_watermark": LOW_WATERMARK, "keep_last_turns": 1, "max_summarize_chars": 400,
            "relevance": relevance, "first_sight": {"enabled": False},  # it would fold the results' repeated lines below the budget
        },
        upstream={**timeouts, **upstream},
    )


@dataclass(frozen=True)
class Served:
    """What the client got for one turn, and the decision row the proxy logged for it."""

    status: int
    headers: Mapping[str, str]  # case-insensitive, as received
    body: bytes
    row: dict[str, Any]

    def stage(self, name: str) -> dict[str, Any]:
        return next(s for s in self.row["stages"] if s["stage"] == name)

    def events(self) -> list[bytes]:
        return [event + b"\n\n" for event in self.body.split(b"\n\n") if event]


async def send_turn(client: TestClient[web.Request, web.Application], *, stream: bool = False, session_id: str = "fault-cell") -> Served:
    """One over-budget agent turn (the relevance session), read to the end, with its decision row."""
    body = {"model": "auto", "messages": session(), "stream": stream}
    response = await client.post(URL, json=body, headers={"x-session-id": session_id})
    payload = await response.read()
    request_id = response.headers["x-router-request-id"]
    return Served(response.status, response.headers, payload, await decision_row(client, request_id))


async def decision_row(client: TestClient[web.Request, web.Application], request_id: str) -> dict[str, Any]:
    """The request's row; the edge records it as the response completes, so allow it a moment."""
    for _ in range(50):
        listing = await client.get("/v1/decisions", params={"limit": "20"})
        assert listing.status == 200
        rows = [row for row in (await listing.json())["data"] if row["request_id"] == request_id]
        if rows:
            return rows[0]
        await asyncio.sleep(0.02)
    raise AssertionError(f"no decision row for {request_id}")


def assert_answered_by(served: Served, model: str) -> None:
    assert served.status == 200
    assert served.headers["x-router-model"] == model
    assert (served.row["status"], served.row["error_code"], served.row["model"]) == (200, None, model)
    assert served.row["upstream_status"] == 200


def assert_neighbours_healthy(served: Served) -> None:
    """The classifier and relevance stages did their normal work (the fault was elsewhere)."""
    assert (served.row["category"], served.row["tier"], served.row["source"]) == (*CLASSIFIED, "classifier")
    assert (served.row["relevance_status"], served.row["pinch_mode"]) == ("ok", "relevance")


def assert_compressed_uniformly(served: Served) -> None:
    """Without an order, pinch still compresses (fail closed): the oldest old results first, down to the budget."""
    assert served.row["pinch_mode"] == "uniform"
    assert served.row["pinch_compressed"] == len(OLD_RESULTS) - len(WITHOUT_ORDER_VERBATIM)  # the oldest first, down to the budget
    assert int(served.headers["x-router-pinch-saved"]) > 0


# --- baseline: what every cell deviates from ----------------------------------------------------


async def test_healthy_neighbours_classify_once_per_session_and_prune_by_relevance(
    proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str], neighbours: tuple[Neighbours, str]
) -> None:
    _, chat_url = mock_upstream
    fake, neighbours_url = neighbours
    client = await proxy(full_chain_config(neighbours_url, {"one": chat_url, "two": chat_url}, primary_and_backup()))
    first = await send_turn(client)
    second = await send_turn(client)
    assert_answered_by(first, "primary")
    assert_neighbours_healthy(first)
    assert first.row["attempts"] == [{"model": "primary", "provider": "one", "status": 200, "error": ""}]
    assert first.row["pinch_compressed"] < len(OLD_RESULTS)  # the relevant old result stayed verbatim
    assert fake.embeddings_calls == 1
    assert second.row["source"] == "cached" and second.stage("classifier")["outcome"] == "skipped"
    assert fake.classifier_calls == 1


# --- classifier faults: fall back, never cache the fallback ---------------------------------------


@dataclass(frozen=True)
class NeighbourCell:
    """One fault of a helper model (classifier or embeddings) and how its stage records it."""

    fault: str  # a key of CLASSIFIER_ANSWERS / EMBEDDINGS_ANSWERS, HANG, or "connection-refused"
    outcome: str  # the stage's outcome in the trace
    reason: str  # a fragment of the recorded reason (trace detail, relevance_reason, warning)


CLASSIFIER_CELLS = [
    NeighbourCell(HANG, "timeout", f"timed out after {FAULT_TIMEOUT}s"),
    NeighbourCell("http-500", "error", "answered 500: JSON body of 37 bytes"),
    NeighbourCell("garbage-body", "error", "the answer is not JSON"),
    NeighbourCell("wrong-json", "fallback", "unknown category 'cooking'"),
    NeighbourCell("connection-refused", "error", "Cannot connect to host"),
]


@pytest.mark.parametrize("cell", CLASSIFIER_CELLS, ids=[c.fault for c in CLASSIFIER_CELLS])
async def test_classifier_fault_falls_back_and_is_logged(
    proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str], neighbours: tuple[Neighbours, str], cell: NeighbourCell
) -> None:
    _, chat_url = mock_upstream
    fake, neighbours_url = neighbours
    refused = cell.fault == "connection-refused"
    fake.classifier_fault = cell.fault
    classifier_url = f"http://127.0.0.1:{free_port()}" if refused else None
    config = full_chain_config(
        neighbours_url,
        {"one": chat_url, "two": chat_url},
        primary_and_backup(),
        classifier_url=classifier_url,
        classifier_timeout=FAULT_TIMEOUT,
    )
    client = await proxy(config)

    turns = [await send_turn(client), await send_turn(client)]  # the same session twice

    for served in turns:
        assert_answered_by(served, "primary")
        assert (served.headers["x-router-category"], served.headers["x-router-source"]) == (FALLBACK[0], "fallback")
        assert served.headers["x-router-tier"] == str(FALLBACK[1])
        assert (served.row["category"], served.row["tier"], served.row["source"]) == (*FALLBACK, "fallback")
        classifier = served.stage("classifier")
        assert classifier["outcome"] == cell.outcome
        assert cell.reason in classifier["detail"]
        assert served.stage("classification-cache")["detail"] == "miss"  # the fallback was not cached
        assert served.row["relevance_status"] in ("ok", "deferred")  # the other stages went on as usual (no batch: no ranking)
    assert fake.classifier_calls == (0 if refused else 2)  # asked again on the second turn


# --- embeddings faults: relevance unavailable, uniform prune, a warning --------------------------


EMBEDDINGS_CELLS = [  # the outcome the ranking had when pinch-relevance awaited it itself, before #44 deferred it
    NeighbourCell(HANG, "timeout", f"timed out after {FAULT_TIMEOUT}s"),
    NeighbourCell("http-500", "fallback", "answered 500: JSON body of 53 bytes"),
    NeighbourCell("malformed-json", "fallback", "the answer is not JSON"),
    NeighbourCell("wrong-dimensions", "fallback", "has 5 dimensions, vector 0 has 4"),
    NeighbourCell("nan", "fallback", "holds a NaN or infinite value"),
]


@pytest.mark.parametrize("cell", EMBEDDINGS_CELLS, ids=[c.fault for c in EMBEDDINGS_CELLS])
async def test_embeddings_fault_prunes_uniformly_and_is_logged(
    proxy: ProxyFactory,
    mock_upstream: tuple[MockUpstream, str],
    neighbours: tuple[Neighbours, str],
    caplog: pytest.LogCaptureFixture,
    cell: NeighbourCell,
) -> None:
    mock, chat_url = mock_upstream
    fake, neighbours_url = neighbours
    fake.embeddings_fault = cell.fault
    config = full_chain_config(
        neighbours_url, {"one": chat_url, "two": chat_url}, primary_and_backup(), relevance_timeout=FAULT_TIMEOUT
    )
    client = await proxy(config)
    caplog.set_level(logging.WARNING, logger="pinch_router")

    served = await send_turn(client)

    assert_answered_by(served, "primary")
    assert served.row["source"] == "classifier"  # the classifier was not affected
    # deferred to pinch-prune (#44): the batch awaited the ranking, which failed open to oldest first
    assert served.stage("pinch-relevance")["outcome"] == "ok"
    assert "oldest first: relevance unavailable" in served.stage("pinch-prune")["detail"]
    assert served.row["relevance_status"] == "unavailable"
    assert cell.reason in served.row["relevance_reason"]
    assert_compressed_uniformly(served)
    sent = {m["tool_call_id"]: m["content"] for m in mock.received[-1].body["messages"] if m["role"] == "tool"}
    original = {m["tool_call_id"]: m["content"] for m in session() if m["role"] == "tool"}
    assert {call_id for call_id, _ in OLD_RESULTS if sent[call_id] == original[call_id]} == WITHOUT_ORDER_VERBATIM
    [warning] = [r for r in caplog.records if r.getMessage() == "relevance_unavailable"]
    assert warning.levelno == logging.WARNING
    assert cell.reason in warning.reason  # type: ignore[attr-defined]
    assert warning.request_id == served.row["request_id"]  # type: ignore[attr-defined]
    assert fake.embeddings_calls == 1


# --- upstream faults before the first byte: the next candidate answers ---------------------------


@dataclass(frozen=True)
class FailoverCell:
    fault: str
    behaviour: Behaviour | None  # what the primary's provider does; None: nothing listens there
    status: int | None  # the failed attempt's HTTP status in the row
    error: str  # a fragment of the failed attempt's error


FAILOVER_CELLS = [
    FailoverCell("connection-refused", None, None, "cannot connect to"),
    FailoverCell("http-500", Behaviour(status=500), 500, "answered 500: type mock, code 500"),
    FailoverCell("first-byte-timeout", Behaviour(delay_before_head=FAULT_TIMEOUT * 4), None, f"within {FAULT_TIMEOUT:g}s"),
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("cell", FAILOVER_CELLS, ids=[c.fault for c in FAILOVER_CELLS])
async def test_upstream_fault_before_the_first_byte_falls_over_to_the_next_candidate(
    proxy: ProxyFactory,
    mock_upstream: tuple[MockUpstream, str],
    neighbours: tuple[Neighbours, str],
    cell: FailoverCell,
    stream: bool,
) -> None:
    mock, chat_url = mock_upstream
    _, neighbours_url = neighbours
    primary_url = f"http://127.0.0.1:{free_port()}/v1" if cell.behaviour is None else chat_url
    if cell.behaviour is not None:
        mock.then(cell.behaviour)
    config = full_chain_config(
        neighbours_url, {"one": primary_url, "two": chat_url}, primary_and_backup(), first_byte_timeout_seconds=FAULT_TIMEOUT
    )
    client = await proxy(config)

    served = await send_turn(client, stream=stream)

    assert_answered_by(served, "backup")
    assert_neighbours_healthy(served)
    if stream:
        assert served.events()[-1] == b"data: [DONE]\n\n"
    else:
        assert orjson.loads(served.body)["model"] == "up-backup"
    failed, answered = served.row["attempts"]
    assert (failed["model"], failed["provider"], failed["status"]) == ("primary", "one", cell.status)
    assert cell.error in failed["error"]
    assert answered == {"model": "backup", "provider": "two", "status": 200, "error": ""}
    assert served.row["candidates"] == ["primary", "backup"]
    assert [r.body["model"] for r in mock.received] == ([] if cell.behaviour is None else ["up-primary"]) + ["up-backup"]


# --- upstream 429 with Retry-After ----------------------------------------------------------------


async def test_upstream_429_within_max_retry_after_is_waited_out_and_retried(
    proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str], neighbours: tuple[Neighbours, str]
) -> None:
    mock, chat_url = mock_upstream
    _, neighbours_url = neighbours
    mock.then(Behaviour(status=429, headers={"Retry-After": str(SHORT_RETRY_AFTER)}))
    only_primary = primary_and_backup()[:1]
    client = await proxy(full_chain_config(neighbours_url, {"one": chat_url}, only_primary, max_retry_after_seconds=1))

    started = time.monotonic()
    served = await send_turn(client)

    assert time.monotonic() - started >= SHORT_RETRY_AFTER  # it waited at least as long as asked
    assert_answered_by(served, "primary")
    assert_neighbours_healthy(served)
    rate_limited, answered = served.row["attempts"]
    assert (rate_limited["model"], rate_limited["status"]) == ("primary", 429)
    assert "answered 429" in rate_limited["error"]
    assert answered == {"model": "primary", "provider": "one", "status": 200, "error": ""}
    assert len(mock.received) == 2


async def test_upstream_429_beyond_max_retry_after_is_relayed_with_retry_after(
    proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str], neighbours: tuple[Neighbours, str]
) -> None:
    mock, chat_url = mock_upstream
    _, neighbours_url = neighbours
    mock.then(Behaviour(status=429, headers={"Retry-After": "120"}))
    only_primary = primary_and_backup()[:1]
    client = await proxy(full_chain_config(neighbours_url, {"one": chat_url}, only_primary, max_retry_after_seconds=1))

    served = await send_turn(client)

    assert served.status == 429
    assert served.headers["Retry-After"] == "120"
    error = orjson.loads(served.body)["error"]
    assert (error["type"], error["code"]) == ("rate_limit_error", "upstream_rate_limited")
    assert "primary via one" in error["message"]
    assert (served.row["status"], served.row["error_code"]) == (429, "upstream_rate_limited")
    [rate_limited] = served.row["attempts"]
    assert (rate_limited["model"], rate_limited["status"]) == ("primary", 429)
    assert len(mock.received) == 1  # not retried: the wait is longer than the bound


# --- upstream faults after the first byte: the stream ends with an error event -------------------


@dataclass(frozen=True)
class StreamBreakCell:
    fault: str
    behaviour: Behaviour
    reason: str  # a fragment of the error event's message and of the row's stream_error


STREAM_BREAK_CELLS = [
    StreamBreakCell("mid-stream-cut", Behaviour(cut_after_events=2), "connection to the provider broke"),
    StreamBreakCell("idle-gap", Behaviour(stall_after_events=2), f"no data for {FAULT_TIMEOUT:g}s"),
]


@pytest.mark.parametrize("cell", STREAM_BREAK_CELLS, ids=[c.fault for c in STREAM_BREAK_CELLS])
async def test_upstream_fault_after_the_first_byte_ends_the_stream_with_an_error_event(
    proxy: ProxyFactory,
    mock_upstream: tuple[MockUpstream, str],
    neighbours: tuple[Neighbours, str],
    cell: StreamBreakCell,
) -> None:
    mock, chat_url = mock_upstream
    _, neighbours_url = neighbours
    mock.then(cell.behaviour)
    config = full_chain_config(
        neighbours_url, {"one": chat_url, "two": chat_url}, primary_and_backup(), idle_timeout_seconds=FAULT_TIMEOUT
    )
    client = await proxy(config)

    served = await send_turn(client, stream=True)

    assert_answered_by(served, "primary")  # the head was already sent: no fallback after the first byte
    assert_neighbours_healthy(served)
    sent_by_upstream = stream_events(mock.received[0].body, Behaviour().text)
    *relayed, error_event, done = served.events()
    assert relayed == sent_by_upstream[:2]
    error = orjson.loads(error_event.removeprefix(b"data: "))["error"]
    assert (error["type"], error["code"]) == ("upstream_error", "upstream_stream_interrupted")
    assert cell.reason in error["message"]
    assert done == b"data: [DONE]\n\n"
    assert cell.reason in served.row["stream_error"]
    assert served.row["attempts"] == [{"model": "primary", "provider": "one", "status": 200, "error": ""}]
    assert len(mock.received) == 1


async def test_upstream_malformed_sse_event_is_relayed_unchanged_and_the_stream_completes(
    proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str], neighbours: tuple[Neighbours, str]
) -> None:
    """The relay cuts the stream into whole events and forwards their bytes; it never parses
    or re-encodes an event, so a malformed one is the client's to see, like any other."""
    mock, chat_url = mock_upstream
    _, neighbours_url = neighbours
    mock.then(Behaviour(malformed_after_events=2))
    client = await proxy(full_chain_config(neighbours_url, {"one": chat_url, "two": chat_url}, primary_and_backup()))

    served = await send_turn(client, stream=True)

    assert_answered_by(served, "primary")
    assert_neighbours_healthy(served)
    # less the usage chunk, which the proxy asked for on the client's behalf and does not relay
    sent_by_upstream = [e for e in stream_events(mock.received[0].body, Behaviour().text) if not is_usage_only_event(e)]
    assert served.events() == [*sent_by_upstream[:2], MALFORMED_EVENT, *sent_by_upstream[2:]]
    assert served.events()[-1] == b"data: [DONE]\n\n"
    assert served.row["stream_error"] == ""
    assert served.row["attempts"] == [{"model": "primary", "provider": "one", "status": 200, "error": ""}]
    follow_up = await send_turn(client, stream=True)  # the proxy is still serving
    assert_answered_by(follow_up, "primary")
