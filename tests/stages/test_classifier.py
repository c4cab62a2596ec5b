"""The classifier stage: wire formats, fail-open fallback, overrides, measured context, config."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from middlewares.classifier import Classifier
from router.config import ConfigError
from router.contract.chain import ChainError, validate_order
from router.contract.stage import run_stage
from router.core.results import CLASSIFICATION, Classification, ClassificationSource, Outcome
from router.core.tokens import TokenEstimator
from router.server.registry import REGISTRY
from router.tools.mock_upstream import MockUpstream
from tests.support.classifier_fakes import (
    OLLAMA_CHAT_URL,
    OPENAI_CHAT_URL,
    agent_turn,
    classifier_config,
    classifier_payloads,
    mocked_classifier,
    ollama_reply,
    openai_reply,
    two_window_models,
    verdict,
)
from tests.support.config import chat_body
from tests.support.factories import make_ctx
from tests.support.servers import ProxyFactory

FALLBACK = {"x-router-source": "fallback", "x-router-category": "coding_general", "x-router-tier": "2"}
from tests.support.stages import build_stage
from middlewares.classification_cache import CACHED_CLASSIFICATION


def routed(response: aiohttp.ClientResponse) -> dict[str, str]:
    return {name: response.headers.get(name, "") for name in ("x-router-source", "x-router-category", "x-router-tier")}


def classifier_stage(http: aiohttp.ClientSession, **config: Any) -> Classifier:
    cfg = classifier_config(**config)
    return build_stage(Classifier, cfg, http=http, estimator=TokenEstimator())


# --- wire formats -------------------------------------------------------------


async def test_ollama_classifier_uses_native_chat_with_num_ctx(proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str]) -> None:
    _, url = mock_upstream
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("debugging", 3)))
        client = await proxy(classifier_config(url, api="ollama"))
        response = await client.post("/v1/chat/completions", json=chat_body("The login test fails with a KeyError"))
        assert response.status == 200
        assert routed(response) == {"x-router-source": "classifier", "x-router-category": "debugging", "x-router-tier": "3"}
        [sent] = classifier_payloads(mock, OLLAMA_CHAT_URL)
    assert sent["model"] == "tiny-classifier"
    assert sent["format"] == "json"
    assert sent["stream"] is False
    assert sent["options"]["num_ctx"] == 8192
    assert "The login test fails with a KeyError" in sent["messages"][-1]["content"]


async def test_openai_classifier_asks_for_a_json_object(proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str]) -> None:
    _, url = mock_upstream
    with mocked_classifier() as mock:
        mock.post(OPENAI_CHAT_URL, payload=openai_reply(verdict("docs_writing", 1)))
        client = await proxy(classifier_config(url, api="openai"))
        response = await client.post("/v1/chat/completions", json=chat_body("Write the README"))
        assert routed(response) == {"x-router-source": "classifier", "x-router-category": "docs_writing", "x-router-tier": "1"}
        [sent] = classifier_payloads(mock, OPENAI_CHAT_URL)
    assert sent["response_format"] == {"type": "json_object"}
    assert "num_ctx" not in sent and "options" not in sent


async def test_classifier_sees_the_previous_assistant_step(http: aiohttp.ClientSession) -> None:
    stage = classifier_stage(http)
    ctx = make_ctx(messages=agent_turn("Fix the flaky test", turn=3))
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict()))
        await run_stage(stage, ctx)
        [sent] = classifier_payloads(mock)
    prompt = sent["messages"][-1]["content"]
    assert "Fix the flaky test" in prompt
    assert 'bash({"cmd": "ls 2"})' in prompt


# --- fail open ------------------------------------------------------------------

MALFORMED = [
    "",
    "I think this is debugging.",
    "```json\n```",
    '["debugging", 3]',
    '{"category": "debugging", "tier": 3',
    '{"tier": 3}',
    '{"category": "cooking", "tier": 3}',
    '{"category": "debugging", "tier": "hard"}',
    '{"category": "debugging", "tier": 7}',
    '{"category": "debugging", "tier": 2.5}',
    '{"category": 42, "tier": 1}',
    "<think>it is {probably debugging",
]


@pytest.mark.parametrize("answer", MALFORMED)
async def test_malformed_answer_falls_back(http: aiohttp.ClientSession, answer: str) -> None:
    stage = classifier_stage(http)
    ctx = make_ctx(messages=agent_turn("do something", turn=1))
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(answer))
        record = await run_stage(stage, ctx)
    assert record.outcome is Outcome.FALLBACK  # answered, then rejected: not an error
    assert ctx[CLASSIFICATION] == Classification("coding_general", 2, ClassificationSource.FALLBACK)


async def test_malformed_answer_is_served_with_the_fallback(proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str]) -> None:
    _, url = mock_upstream
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply('{"category": "cooking", "tier": 9}'))
        client = await proxy(classifier_config(url))
        response = await client.post("/v1/chat/completions", json=chat_body("do something"))
        assert len(classifier_payloads(mock)) == 1
    assert response.status == 200
    assert routed(response) == FALLBACK


@pytest.mark.parametrize(
    "failure",
    [
        {"status": 500, "payload": {"error": {"message": "model not loaded"}}},
        {"status": 404, "body": "not found"},
        {"status": 200, "body": "<html>proxy login</html>"},
        {"status": 200, "payload": {"done": True}},  # no message in the envelope
        {"exception": aiohttp.ClientConnectionError("refused")},
    ],
    ids=["500", "404", "not-json", "no-message", "connection-refused"],
)
async def test_classifier_error_falls_back_and_is_traced(http: aiohttp.ClientSession, failure: dict[str, Any]) -> None:
    stage = classifier_stage(http)
    ctx = make_ctx(messages=agent_turn("fix it", turn=1))
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, **failure)
        record = await run_stage(stage, ctx)
    assert record.outcome is Outcome.ERROR
    assert ctx[CLASSIFICATION] == Classification("coding_general", 2, ClassificationSource.FALLBACK)


async def test_invalid_answer_is_traced_as_fallback_with_its_reason(http: aiohttp.ClientSession) -> None:
    stage = classifier_stage(http)
    ctx = make_ctx(messages=agent_turn("fix it", turn=1))
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply('{"category": "cooking", "tier": 1}'))
        record = await run_stage(stage, ctx)
    assert record.outcome is Outcome.FALLBACK
    assert "unknown category 'cooking'" in record.detail
    assert ctx[CLASSIFICATION] is not None and ctx[CLASSIFICATION].source is ClassificationSource.FALLBACK


async def test_slow_classifier_times_out_into_the_fallback(http: aiohttp.ClientSession) -> None:
    never = asyncio.Event()

    async def hang(url: Any, **kwargs: Any) -> None:
        await never.wait()

    stage = classifier_stage(http, timeout_seconds=0.05)
    ctx = make_ctx(messages=agent_turn("fix it", turn=1))
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, callback=hang)
        record = await run_stage(stage, ctx)
    assert record.outcome is Outcome.TIMEOUT
    assert ctx[CLASSIFICATION] == Classification("coding_general", 2, ClassificationSource.FALLBACK)


async def test_nothing_to_classify_falls_back_without_a_call(http: aiohttp.ClientSession) -> None:
    stage = classifier_stage(http)
    ctx = make_ctx(messages=[{"role": "system", "content": "You are terse."}])
    with mocked_classifier() as mock:
        record = await run_stage(stage, ctx)
        assert classifier_payloads(mock) == []
    assert record.outcome is Outcome.FALLBACK
    assert ctx[CLASSIFICATION] is not None and ctx[CLASSIFICATION].source is ClassificationSource.FALLBACK


async def test_a_cached_classification_is_routed_on_without_asking_the_classifier(http: aiohttp.ClientSession) -> None:
    stage = classifier_stage(http)
    ctx = make_ctx(messages=agent_turn("fix it", turn=2))
    cached = Classification("debugging", 3, ClassificationSource.CACHED)
    ctx[CACHED_CLASSIFICATION] = cached
    with mocked_classifier() as mock:
        record = await run_stage(stage, ctx)
        assert classifier_payloads(mock) == []
    assert record.outcome is Outcome.SKIPPED
    assert ctx[CLASSIFICATION] is cached


# --- overrides ------------------------------------------------------------------


async def post_without_classifier(proxy: ProxyFactory, upstream_url: str, headers: dict[str, str]) -> aiohttp.ClientResponse:
    """One request through the proxy; the classifier must not be asked."""
    with mocked_classifier() as mock:
        client = await proxy(classifier_config(upstream_url))
        response = await client.post("/v1/chat/completions", json=chat_body(), headers=headers)
        assert classifier_payloads(mock) == []
    return response


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"x-router-category": "docs_writing", "x-router-tier": "1"}, ("docs_writing", "1")),
        ({"x-router-category": "debugging"}, ("debugging", "2")),
        ({"x-router-tier": "3"}, ("coding_general", "3")),
    ],
    ids=["both", "category-alone", "tier-alone"],
)
async def test_override_headers_win_without_a_classifier_call(
    proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str], headers: dict[str, str], expected: tuple[str, str]
) -> None:
    response = await post_without_classifier(proxy, mock_upstream[1], headers)
    assert response.status == 200
    category, tier = expected
    assert routed(response) == {"x-router-source": "override", "x-router-category": category, "x-router-tier": tier}


async def test_override_beats_a_cached_classification(http: aiohttp.ClientSession) -> None:
    stage = classifier_stage(http)
    ctx = make_ctx(messages=agent_turn("fix it", turn=2), headers={"x-router-tier": "1"})
    ctx[CACHED_CLASSIFICATION] = Classification("debugging", 3, ClassificationSource.CACHED)
    await run_stage(stage, ctx)
    assert ctx[CLASSIFICATION] == Classification("coding_general", 1, ClassificationSource.OVERRIDE)


@pytest.mark.parametrize(
    ("headers", "param"),
    [
        ({"x-router-category": "cooking"}, "x-router-category"),
        ({"x-router-tier": "9"}, "x-router-tier"),
        ({"x-router-category": "debugging", "x-router-tier": "hard"}, "x-router-tier"),
    ],
)
async def test_invalid_override_is_a_400_in_openai_format(
    proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str], headers: dict[str, str], param: str
) -> None:
    upstream, url = mock_upstream
    response = await post_without_classifier(proxy, url, headers)
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "invalid_override"
    assert error["param"] == param
    assert error["message"].startswith(f"{param}: ")
    assert upstream.received == []


# --- measured context -------------------------------------------------------------


@pytest.mark.parametrize(
    ("estimate", "model"),
    [(None, "small-window"), (2_000, "small-window"), (50_000, "large-window"), (10**9, "large-window")],
    ids=["no-estimate", "small-estimate", "large-estimate", "absurd-estimate-capped"],
)
async def test_gate_uses_the_larger_of_estimate_and_measured_size(
    proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str], estimate: int | None, model: str
) -> None:
    _, url = mock_upstream
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("debugging", 2, estimate)))
        client = await proxy(classifier_config(url, models=two_window_models()))
        response = await client.post("/v1/chat/completions", json=chat_body("short question"))
    assert response.status == 200
    assert response.headers["x-router-model"] == model


async def test_measured_size_alone_can_need_the_large_window(proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str]) -> None:
    _, url = mock_upstream
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("debugging", 2, 100)))
        client = await proxy(classifier_config(url, models=two_window_models()))
        response = await client.post("/v1/chat/completions", json=chat_body("x" * 40_000))  # ~10k tokens
    assert response.headers["x-router-model"] == "large-window"


# --- configuration ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("classifier", "path"),
    [
        ({"timeout_seconds": 0}, "classifier.timeout_seconds"),
        ({"num_ctx": 0}, "classifier.num_ctx"),
        ({"max_input_chars": -1}, "classifier.max_input_chars"),
        ({"model": ""}, "classifier.model"),
        ({"provider": "nowhere"}, "classifier.provider: unknown provider 'nowhere'"),
        ({"temperature": 0}, "classifier.temperature"),
    ],
)
def test_invalid_classifier_settings_stop_start_up_naming_the_key(classifier: dict[str, Any], path: str) -> None:
    settings = {"provider": "classifier", **classifier}
    with pytest.raises(ConfigError, match=path):
        classifier_config(classifier=settings)


@pytest.mark.parametrize(
    ("session_cache", "path"),
    [({"staleness_minutes": 0}, "session_cache.staleness_minutes"), ({"max_entries": 0}, "session_cache.max_entries")],
)
def test_invalid_session_cache_settings_stop_start_up(session_cache: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError, match=path):
        classifier_config(session_cache=session_cache)


def test_session_cache_is_off_by_default() -> None:
    assert classifier_config(session_cache={}).session_cache.enabled is False


def test_classifier_must_come_after_the_cache() -> None:
    order = ["session-fingerprint", "classifier", "classification-cache", "capability-gate", "upstream-forward"]
    with pytest.raises(ChainError, match="'classifier' reads 'cached_classification', but 'classification-cache'"):
        validate_order(order, REGISTRY.by_name)


def test_cache_needs_the_session_stage_first() -> None:
    order = ["classification-cache", "session-fingerprint", "classifier", "capability-gate", "upstream-forward"]
    with pytest.raises(ChainError, match="'classification-cache' requires 'session'"):
        validate_order(order, REGISTRY.by_name)


async def test_proxy_serves_when_the_classifier_is_unreachable(proxy: ProxyFactory, mock_upstream: tuple[MockUpstream, str]) -> None:
    _, url = mock_upstream
    with mocked_classifier():  # nothing registered: every classifier call is refused
        client = await proxy(classifier_config(url))
        response = await client.post("/v1/chat/completions", json=chat_body())
    assert response.status == 200
    assert routed(response) == FALLBACK
