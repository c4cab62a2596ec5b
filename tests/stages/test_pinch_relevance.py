"""The pinch-relevance stage: ranking old tool results, the embeddings edge, fail-open, the cache.

Embeddings are mocked with aioresponses (see tests/relevance_fakes.py); the
proxy and the mock chat upstream are real loopback servers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from aioresponses import CallbackResult, aioresponses
from yarl import URL

from middlewares.pinch_relevance import PinchRelevance
from router.clients.embeddings import EmbeddingsClient, EmbeddingsError, embeddings_url
from router.config import ConfigError
from router.contract.chain import ChainError, validate_order
from router.contract.stage import run_stage
from router.core.results import Outcome, RELEVANCE, RelevanceStatus
from router.server.registry import REGISTRY
from router.tools.mock_upstream import MockUpstream
from tests.support.classifier_fakes import FakeClock
from tests.support.config import make_config
from tests.support.factories import assistant, make_ctx, system, tool
from tests.support.http_mocks import MockedResponse
from tests.support.relevance_fakes import (
    CHAIN,
    EMBED_BASE,
    EMBED_URL,
    ESTIMATOR,
    OLD_RESULTS,
    WITHOUT_ORDER_VERBATIM,
    FakeEmbedder,
    mocked_embeddings,
    relevance_config,
    result_text,
    session,
)
from tests.support.restore_session import FILE_VIEW
from tests.support.restore_session import history as restore_history
from tests.support.servers import ProxyFactory
from tests.support.stages import build_stage


def tool_contents(messages: list[dict[str, Any]]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in messages if m.get("role") == "tool"}


def verbatim(sent: list[dict[str, Any]], original: list[dict[str, Any]]) -> set[str]:
    """The tool_call_ids of old results that went upstream unchanged."""
    before, after = tool_contents(original), tool_contents(sent)
    return {call_id for call_id, _ in OLD_RESULTS if after[call_id] == before[call_id]}


async def send(client: Any, messages: list[dict[str, Any]]) -> aiohttp.ClientResponse:
    response = await client.post("/v1/chat/completions", json={"model": "auto", "messages": messages})
    assert response.status == 200, await response.text()
    return response


@asynccontextmanager
async def proxied(
    proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str], **relevance: Any
) -> AsyncIterator[tuple[TestClient[web.Request, web.Application], MockUpstream, aioresponses]]:
    """The proxy with pinch + relevance, its mock upstream, and the embeddings mock (nothing registered yet)."""
    upstream, url = mock_upstream
    client = await proxy(relevance_config(url, **relevance))
    with mocked_embeddings(url, client.make_url("/")) as mock:
        yield client, upstream, mock


def stage_for(http: aiohttp.ClientSession, **relevance: Any) -> PinchRelevance:
    return build_stage(PinchRelevance, relevance_config(**relevance), http=http, estimator=ESTIMATOR)


# --- relevance changes what survives -----------------------------------------------------


@pytest.mark.parametrize("api", ["openai", "ollama"])
async def test_old_relevant_result_survives_while_newer_irrelevant_ones_are_compressed(
    proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str], api: str
) -> None:
    fake = FakeEmbedder(api)
    messages = session()
    async with proxied(proxy, mock_upstream, api=api) as (client, upstream, mock):
        mock.post(EMBED_URL[api], callback=fake.answer, repeat=True)
        response = await send(client, messages)
    sent = upstream.received[-1].body["messages"]
    assert verbatim(sent, messages) == {"call_1"}  # three turns old, about the migration: kept
    assert "pinch-router removed" in tool_contents(sent)["call_2"]
    assert "pinch-router removed" in tool_contents(sent)["call_3"]
    assert tool_contents(sent)["call_4"] == tool_contents(messages)["call_4"]  # the in-progress turn
    assert int(response.headers["x-router-pinch-saved"]) > 0
    assert len(fake.calls) == 1  # one batched request: three queries (task, step, recent steps) and three candidates
    assert len(fake.calls[0]) == 6


async def test_without_relevance_the_oldest_old_results_are_compressed_first(proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str]) -> None:
    messages = session()
    async with proxied(proxy, mock_upstream, enabled=False) as (client, upstream, mock):
        await send(client, messages)
        assert not mock.requests.get(("POST", URL(EMBED_URL["openai"])))
    assert verbatim(upstream.received[-1].body["messages"], messages) == WITHOUT_ORDER_VERBATIM


async def test_with_a_provider_that_caches_nothing_a_compressed_view_the_agent_points_at_again_stays_compressed(
    proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str]
) -> None:
    """No cache means every request is a cold moment: restoring there would re-plan the prompt on every
    request (issue #26; docs/relevance.md), so the ledger holds, as with a warm cache."""
    upstream, url = mock_upstream
    relevance = {"enabled": True, "model": "fake-embed", "base_url": EMBED_BASE, "api": "openai", "min_candidates": 2}
    pinch = {"enabled": True, "budget_tokens": 3200, "keep_last_turns": 2, "max_summarize_chars": 400, "relevance": relevance, "first_sight": {"enabled": False}}
    config = make_config(url, middlewares=CHAIN, pinch=pinch, providers={"mock": {"base_url": url, "cache_lifetime_seconds": 0}})
    client = await proxy(config)
    fake = FakeEmbedder("openai")
    with mocked_embeddings(url, client.make_url("/")) as mock:
        mock.post(EMBED_URL["openai"], callback=fake.answer, repeat=True)
        await send(client, restore_history("ls docs"))  # nothing points at the file view yet: compressed
        assert upstream.received[-1].body["messages"][3]["content"] != FILE_VIEW
        # the agent now edits a function only the old view shows; the budget has room for the view
        await send(client, restore_history("sed -i s/render_page_7/render_home/ src/app/views.py && grep -n handler_7 src/app/views.py"))
    assert upstream.received[-1].body["messages"][3]["content"] != FILE_VIEW


@pytest.mark.parametrize("restore", [False, True])
async def test_at_a_cold_moment_restore_brings_the_view_back_only_when_it_is_on(
    proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str], restore: bool
) -> None:
    """``pinch.relevance.restore`` (off by default, #49): on, the cold moment re-plans the ledger in
    relevance order and the view the agent points at again comes back verbatim; off, the ledger is
    resent as it was and, nothing new being compressed, the cold moment asks the embedder nothing."""
    upstream, url = mock_upstream
    clock = FakeClock()
    relevance = {"enabled": True, "model": "fake-embed", "base_url": EMBED_BASE, "api": "openai", "min_candidates": 2, "restore": restore}
    pinch = {"enabled": True, "budget_tokens": 3200, "keep_last_turns": 2, "max_summarize_chars": 400, "relevance": relevance, "first_sight": {"enabled": False}}
    config = make_config(url, middlewares=CHAIN, pinch=pinch, providers={"mock": {"base_url": url, "cache_lifetime_seconds": 300}})
    client = await proxy(config, clock=clock)
    fake = FakeEmbedder("openai")
    with mocked_embeddings(url, client.make_url("/")) as mock:
        mock.post(EMBED_URL["openai"], callback=fake.answer, repeat=True)
        await send(client, restore_history("ls docs"))  # nothing points at the file view yet: compressed
        assert upstream.received[-1].body["messages"][3]["content"] != FILE_VIEW
        calls = len(fake.calls)
        clock.advance(400)  # idle beyond the provider's 300 s: the cache is cold
        await send(client, restore_history("sed -i s/render_page_7/render_home/ src/app/views.py && grep -n handler_7 src/app/views.py"))
        rows = (await (await client.get("/v1/decisions")).json())["data"]
    cold = max(rows, key=lambda row: row["ts"])
    assert (upstream.received[-1].body["messages"][3]["content"] == FILE_VIEW) is restore
    assert cold["pinch_restored"] == int(restore)
    if not restore:
        assert cold["pinch_newly_compressed"] == 0 and cold["relevance_status"] == "deferred" and len(fake.calls) == calls


@pytest.mark.parametrize("api", ["openai", "ollama"])
async def test_second_turn_embeds_only_the_new_result_and_the_new_step(
    proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str], api: str
) -> None:
    """Pruned afresh (no ledger), every request over the budget is ranked: the cache spares what it embedded before."""
    fake = FakeEmbedder(api)
    async with proxied(proxy, mock_upstream, api=api, ledger=False) as (client, upstream, mock):
        mock.post(EMBED_URL[api], callback=fake.answer, repeat=True)
        await send(client, session(turn=1))
        await send(client, session(turn=2))
    first, second = fake.calls
    assert len(first) == 6
    # the task (same last user message) and the three old results come from the cache; the step and the
    # recent steps before it are new
    assert second[0] == 'bash({"cmd":"pytest tests/test_migration.py"})\nStep 5.'
    assert second[1].startswith('bash({"cmd":"sed -i s/old/new/ migration.py"})')
    assert second[2:] == [result_text("network")]
    assert "call_1" in verbatim(upstream.received[-1].body["messages"], session(turn=2))  # the relevant old result


async def test_with_the_ledger_a_turn_that_compresses_nothing_new_embeds_nothing(
    proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str]
) -> None:
    """The ranking is deferred to pinch-prune and awaited only for a batch: the first turn's batch is
    ranked (the old relevant result survives), the warm second turn, over the budget on the ledger
    alone, compresses nothing new and asks the embedder nothing. Before, it embedded its new step."""
    fake = FakeEmbedder("openai")
    async with proxied(proxy, mock_upstream, api="openai") as (client, upstream, mock):
        mock.post(EMBED_URL["openai"], callback=fake.answer, repeat=True)
        await send(client, session(turn=1))
        await send(client, session(turn=2))
        rows = (await (await client.get("/v1/decisions")).json())["data"]
    assert len(fake.calls) == 1
    first, second = sorted(rows, key=lambda row: row["ts"])
    assert first["relevance_status"] == "ok" and first["pinch_newly_compressed"] > 0
    assert second["relevance_status"] == "deferred" and second["pinch_newly_compressed"] == 0
    assert verbatim(upstream.received[-1].body["messages"], session(turn=2)) == {"call_1"}


# --- fail open: any failure ⇒ uniform prune, a warning, and the request succeeds ------------


async def _hang(url: URL, **kwargs: Any) -> CallbackResult:
    await asyncio.Event().wait()  # never answers: the stage's timeout ends it
    raise AssertionError("unreachable")


def _nan_body(url: URL, **kwargs: Any) -> CallbackResult:
    # Python's json writes the NaN literal a Python-made server would send
    body = '{"data": [' + ", ".join(f'{{"index": {i}, "embedding": [NaN, 1.0, 0.0, 0.0]}}' for i in range(6)) + "]}"
    return CallbackResult(body=body, response_class=MockedResponse)


def _answer(vectors: list[Any]) -> dict[str, Any]:
    return {"payload": {"data": [{"index": i, "embedding": v} for i, v in enumerate(vectors)]}}


FAILURES: dict[str, tuple[dict[str, Any], str]] = {
    "timeout": ({"callback": _hang}, "timed out after 0.2s"),
    "client timeout": ({"exception": TimeoutError()}, "timed out"),
    "non-200": ({"status": 503, "payload": {"error": {"message": "model is loading"}}}, "answered 503: JSON body of 42 bytes"),
    "malformed JSON": ({"body": "{'data': oops"}, "not JSON"),
    "no data list": ({"payload": {"embeddings": [[1.0]]}}, "no 'data' list"),
    "wrong count": (_answer([[1.0, 0.0]] * 4), "expected 6 vectors, got 4"),
    "wrong dimensions": (_answer([[1.0, 0.0]] * 5 + [[1.0]]), "vector 5 has 1 dimensions"),
    "NaN": ({"callback": _nan_body}, "NaN or infinite"),
    "null in a vector": (_answer([[1.0, None]] * 6), "other than numbers"),
    "connection refused": ({"exception": aiohttp.ClientConnectionError("Connection refused")}, "Connection refused"),
}


@pytest.mark.parametrize("failure", list(FAILURES))
async def test_any_embeddings_failure_falls_back_to_uniform_prune(
    proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str], caplog: pytest.LogCaptureFixture, failure: str
) -> None:
    mocked, reason = FAILURES[failure]
    messages = session()
    caplog.set_level(logging.WARNING, logger="pinch_router")
    async with proxied(proxy, mock_upstream, timeout_seconds=0.2) as (client, upstream, mock):
        mock.post(EMBED_URL["openai"], **mocked)
        response = await send(client, messages)
    assert int(response.headers["x-router-pinch-saved"]) > 0
    assert verbatim(upstream.received[-1].body["messages"], messages) == WITHOUT_ORDER_VERBATIM  # no order: oldest first
    [warning] = [r for r in caplog.records if r.getMessage() == "relevance_unavailable"]
    assert warning.levelno == logging.WARNING
    assert reason in warning.reason  # type: ignore[attr-defined]


async def test_a_closed_port_is_unavailable_not_an_error(http: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture) -> None:
    stage = stage_for(http)  # nothing mocked: a real connection to 127.0.0.1:9 is refused
    ctx = make_ctx({"model": "auto", "messages": session()})
    record = await run_stage(stage, ctx)
    assert record.outcome is Outcome.FALLBACK
    assert ctx[RELEVANCE] is not None and ctx[RELEVANCE].status is RelevanceStatus.UNAVAILABLE
    assert ctx[RELEVANCE].order is None
    assert "127.0.0.1:9" in ctx[RELEVANCE].reason
    assert any(r.getMessage() == "relevance_unavailable" for r in caplog.records)


async def test_timeout_goes_through_the_adapter_and_fallback(http: aiohttp.ClientSession) -> None:
    stage = stage_for(http, timeout_seconds=0.05)
    ctx = make_ctx({"model": "auto", "messages": session()})
    with mocked_embeddings() as mock:
        mock.post(EMBED_URL["openai"], callback=_hang)
        record = await run_stage(stage, ctx)
    assert record.outcome is Outcome.TIMEOUT
    assert ctx[RELEVANCE] is not None
    assert (ctx[RELEVANCE].status, ctx[RELEVANCE].order) == (RelevanceStatus.UNAVAILABLE, None)
    assert ctx[RELEVANCE].reason == "timed out after 0.05s"


async def test_a_failed_call_is_not_cached_and_the_next_turn_tries_again(http: aiohttp.ClientSession) -> None:
    stage = stage_for(http)
    fake = FakeEmbedder("openai")
    with mocked_embeddings() as mock:
        mock.post(EMBED_URL["openai"], status=500, payload={"error": {"message": "busy"}})
        mock.post(EMBED_URL["openai"], callback=fake.answer)
        first, second = make_ctx({"model": "auto", "messages": session()}), make_ctx({"model": "auto", "messages": session()})
        await run_stage(stage, first)
        await run_stage(stage, second)
    assert first[RELEVANCE] is not None and first[RELEVANCE].status is RelevanceStatus.UNAVAILABLE
    assert second[RELEVANCE] is not None and second[RELEVANCE].status is RelevanceStatus.OK
    assert len(fake.calls[0]) == 6


# --- when it does not run --------------------------------------------------------------


async def test_below_min_candidates_makes_no_embeddings_call(proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str]) -> None:
    messages = session()
    async with proxied(proxy, mock_upstream, min_candidates=4) as (client, upstream, mock):  # the session has three
        await send(client, messages)
        assert mock.requests == {}
    assert verbatim(upstream.received[-1].body["messages"], messages) == WITHOUT_ORDER_VERBATIM


# No user message and no assistant text or tool calls: nothing to ask about.
QUERYLESS = [system("s")] + [m for i in range(4) for m in (assistant(""), tool(f"call_{i}", result_text("weather")))]


@pytest.mark.parametrize(
    ("messages", "relevance", "reason"),
    [
        (session(), {"min_candidates": 4}, "3 candidates, fewer than min_candidates 4"),
        (session(), {"enabled": False}, "relevance disabled"),
        (session()[:4], {}, "within budget"),
        (QUERYLESS, {}, "no query text"),
        # api local whose model is not there: skipped on every request (doctor warns once at start-up), not a
        # relevance_unavailable warning each time
        (session(), {"api": "local", "local_model_path": "/nonexistent/minilm"}, "the local embedder's file /nonexistent/minilm/model.onnx is missing"),
    ],
)
async def test_skipped_with_the_reason_and_no_call(
    http: aiohttp.ClientSession, messages: list[dict[str, Any]], relevance: dict[str, Any], reason: str
) -> None:
    stage = stage_for(http, **relevance)
    ctx = make_ctx({"model": "auto", "messages": messages})
    with mocked_embeddings() as mock:
        record = await run_stage(stage, ctx)
        assert mock.requests == {}
    assert record.outcome is Outcome.SKIPPED
    assert ctx[RELEVANCE] is not None and ctx[RELEVANCE].status is RelevanceStatus.SKIPPED
    assert reason in ctx[RELEVANCE].reason
    assert reason in record.detail


async def test_pinch_disabled_skips(http: aiohttp.ClientSession) -> None:
    config = make_config(middlewares=CHAIN, pinch={"enabled": False})
    stage = build_stage(PinchRelevance, config, http=http, estimator=ESTIMATOR)
    ctx = make_ctx({"model": "auto", "messages": session()})
    record = await run_stage(stage, ctx)
    assert (record.outcome, record.detail) == (Outcome.SKIPPED, "pinch disabled")


# --- what it records -------------------------------------------------------------------


async def test_records_order_and_embedded_vs_cached_counts_in_context_and_trace(http: aiohttp.ClientSession) -> None:
    stage = stage_for(http)
    fake = FakeEmbedder("openai")
    with mocked_embeddings() as mock:
        mock.post(EMBED_URL["openai"], callback=fake.answer, repeat=True)
        first = make_ctx({"model": "auto", "messages": session(turn=1)})
        first_record = await run_stage(stage, first)
        second = make_ctx({"model": "auto", "messages": session(turn=2)})
        second_record = await run_stage(stage, second)
    assert first[RELEVANCE] is not None and second[RELEVANCE] is not None
    assert first[RELEVANCE].status is RelevanceStatus.OK
    assert first[RELEVANCE].order == (1, 2, 0)  # stylesheet, weather (tie: older first), then migration
    assert (first[RELEVANCE].embedded, first[RELEVANCE].cached) == (6, 0)
    assert first_record.detail == "3 candidates ranked; 6 embedded, 0 cached"
    assert (second[RELEVANCE].embedded, second[RELEVANCE].cached) == (3, 4)  # the new step, recent steps and result
    assert second_record.detail == "4 candidates ranked; 3 embedded, 4 cached"
    # the new network result matches no query; the recent steps (which read the other three) lift them
    assert second[RELEVANCE].order == (3, 1, 2, 0)


async def test_identical_turn_is_served_from_the_cache_without_a_call(http: aiohttp.ClientSession) -> None:
    stage = stage_for(http)
    fake = FakeEmbedder("openai")
    with mocked_embeddings() as mock:
        mock.post(EMBED_URL["openai"], callback=fake.answer, repeat=True)
        for _ in range(3):
            ctx = make_ctx({"model": "auto", "messages": session()})
            await run_stage(stage, ctx)
    assert len(fake.calls) == 1
    assert ctx[RELEVANCE] is not None and (ctx[RELEVANCE].embedded, ctx[RELEVANCE].cached) == (0, 6)


async def test_candidate_texts_are_cut_blank_ones_never_sent_and_repeats_sent_once(http: aiohttp.ClientSession) -> None:
    stage = stage_for(http, max_candidate_chars=100)
    fake = FakeEmbedder("openai")
    messages = session()
    messages[5] = tool("call_2", "   ")  # a blank result
    messages[7] = tool("call_3", result_text("migration"))  # the same text as call_1
    with mocked_embeddings() as mock:
        mock.post(EMBED_URL["openai"], callback=fake.answer)
        ctx = make_ctx({"model": "auto", "messages": messages})
        await run_stage(stage, ctx)
    [texts] = fake.calls
    assert texts[3:] == [result_text("migration")[:100]]
    # the blank result saves nothing when compressed: it goes last; the two equal texts keep age order
    assert ctx[RELEVANCE] is not None and ctx[RELEVANCE].order == (0, 2, 1)


async def test_embeddings_api_key_is_sent_as_bearer(http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-embed")
    stage = stage_for(http, api_key_env="TEST_EMBED_KEY")
    fake = FakeEmbedder("openai")
    with mocked_embeddings() as mock:
        mock.post(EMBED_URL["openai"], callback=fake.answer)
        await run_stage(stage, make_ctx({"model": "auto", "messages": session()}))
    assert fake.headers[0]["Authorization"] == "Bearer sk-embed"


# --- the edge --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "base_url", "expected"),
    [
        ("openai", "http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1/embeddings"),
        ("openai", "http://127.0.0.1:8080/v1/", "http://127.0.0.1:8080/v1/embeddings"),
        ("ollama", "http://localhost:11434/v1", "http://localhost:11434/api/embed"),
        ("ollama", "http://localhost:11434", "http://localhost:11434/api/embed"),
    ],
)
def test_embeddings_url_by_api(api: str, base_url: str, expected: str) -> None:
    config = relevance_config(api=api, base_url=base_url)
    assert embeddings_url(config.embeddings_provider()) == expected


async def test_openai_answer_is_put_back_in_input_order_by_index(http: aiohttp.ClientSession) -> None:
    client = EmbeddingsClient(http, relevance_config().pinch.relevance)
    data = [{"index": 1, "embedding": [0.0, 1.0]}, {"index": 0, "embedding": [1.0, 0.0]}]
    with mocked_embeddings() as mock:
        mock.post(EMBED_URL["openai"], payload={"data": data})
        vectors = await client.embed(["first", "second"])
    assert vectors.tolist() == [[1.0, 0.0], [0.0, 1.0]]


@pytest.mark.parametrize("indexes", [(0, 0), (1, 2), (0, "1"), ("0", "1"), (0, None)])
async def test_openai_answer_with_bad_indexes_is_rejected(http: aiohttp.ClientSession, indexes: tuple[Any, Any]) -> None:
    client = EmbeddingsClient(http, relevance_config().pinch.relevance)
    data = [{"index": indexes[0], "embedding": [0.0, 1.0]}, {"index": indexes[1], "embedding": [1.0, 0.0]}]
    with mocked_embeddings() as mock:
        mock.post(EMBED_URL["openai"], payload={"data": data})
        with pytest.raises(EmbeddingsError, match="indexes"):
            await client.embed(["first", "second"])


@pytest.mark.parametrize("payload", [{"embedding": [1.0]}, [[1.0]], {"embeddings": "no"}])
async def test_ollama_answer_without_embeddings_is_rejected(http: aiohttp.ClientSession, payload: Any) -> None:
    client = EmbeddingsClient(http, relevance_config(api="ollama").pinch.relevance)
    with mocked_embeddings() as mock:
        mock.post(EMBED_URL["ollama"], payload=payload)
        with pytest.raises(EmbeddingsError):
            await client.embed(["first"])


# --- config and chain ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pinch", "message"),
    [
        ({"enabled": False, "relevance": {"enabled": True}}, "relevance.enabled: needs pinch.enabled"),
        ({"enabled": True, "relevance": {"timeout_seconds": 0}}, "pinch.relevance.timeout_seconds"),
        ({"enabled": True, "relevance": {"min_candidates": 0}}, "pinch.relevance.min_candidates"),
        ({"enabled": True, "relevance": {"max_candidate_chars": 0}}, "pinch.relevance.max_candidate_chars"),
        ({"enabled": True, "relevance": {"api": "cohere"}}, "pinch.relevance.api"),
        ({"enabled": True, "relevance": {"base_url": "not a url"}}, "pinch.relevance.base_url"),
        ({"enabled": True, "relevance": {"modle": "x"}}, "pinch.relevance.modle"),
        ({"enabled": True, "relevance": {"model": ""}}, "pinch.relevance.model"),
    ],
)
def test_bad_relevance_config_names_the_key(pinch: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_config(pinch=pinch)


def test_relevance_must_come_before_prune() -> None:
    with pytest.raises(ChainError, match="'pinch-prune' reads 'relevance', but 'pinch-relevance'"):
        validate_order(["pinch-prune", "pinch-relevance", "capability-gate", "upstream-forward"], REGISTRY.by_name)
    assert validate_order(CHAIN, REGISTRY.by_name)[1] is PinchRelevance
