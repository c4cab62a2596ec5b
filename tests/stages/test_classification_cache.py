"""classification-cache: one classifier call per session, staleness, what is never cached.

Sessions are real agent conversations growing turn by turn (the session key is
the fingerprint of their opening). Time is a FakeClock injected into the app.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient

from middlewares.classification_cache import CACHED_CLASSIFICATION, ClassificationCache
from router.contract.stage import run_stage
from router.core.results import CLASSIFICATION, SESSION, Classification, ClassificationSource, Outcome, SessionKey
from router.core.tokens import TokenEstimator
from router.tools.mock_upstream import MockUpstream
from tests.support.agent_captures import CapturedRequest, captured, client_headers
from tests.support.classifier_fakes import (
    OLLAMA_CHAT_URL,
    FakeClock,
    agent_turn,
    classifier_config,
    classifier_payloads,
    mocked_classifier,
    ollama_reply,
    two_window_models,
    verdict,
)
from tests.support.config import model_entry
from tests.support.factories import make_ctx
from tests.support.servers import ProxyFactory

STALENESS_SECONDS = 20 * 60
TASK = "The payment webhook test fails with a KeyError"
OTHER_TASK = "Document the public API of the billing module"
from tests.support.stages import build_stage


async def send(client: TestClient[Any, Any], messages: list[dict[str, Any]], **headers: str) -> aiohttp.ClientResponse:
    response = await client.post("/v1/chat/completions", json={"model": "auto", "messages": messages}, headers=headers)
    assert response.status == 200, await response.text()
    return response


def source(response: aiohttp.ClientResponse) -> str:
    return response.headers["x-router-source"]


def classified(response: aiohttp.ClientResponse) -> tuple[str, str, str]:
    return (source(response), response.headers["x-router-category"], response.headers["x-router-tier"])


@pytest.fixture
async def upstream_url(mock_upstream: tuple[MockUpstream, str]) -> str:
    return mock_upstream[1]


async def test_first_turn_classifies_and_later_turns_of_the_session_are_cached(proxy: ProxyFactory, upstream_url: str) -> None:
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("debugging", 3)), repeat=True)
        client = await proxy(classifier_config(upstream_url), clock=FakeClock())
        first = await send(client, agent_turn(TASK, 1))
        second = await send(client, agent_turn(TASK, 2))
        third = await send(client, agent_turn(TASK, 3))
        assert len(classifier_payloads(mock)) == 1
    assert classified(first) == ("classifier", "debugging", "3")
    assert classified(second) == ("cached", "debugging", "3")
    assert classified(third) == ("cached", "debugging", "3")


async def test_another_session_classifies_again(proxy: ProxyFactory, upstream_url: str) -> None:
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("debugging", 3)))
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("docs_writing", 1)))
        client = await proxy(classifier_config(upstream_url), clock=FakeClock())
        await send(client, agent_turn(TASK, 1))
        other = await send(client, agent_turn(OTHER_TASK, 1))
        back = await send(client, agent_turn(TASK, 2))
        assert len(classifier_payloads(mock)) == 2
    assert classified(other) == ("classifier", "docs_writing", "1")
    assert classified(back) == ("cached", "debugging", "3")


async def test_explicit_session_header_shares_the_entry_across_different_openings(proxy: ProxyFactory, upstream_url: str) -> None:
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("debugging", 3)))
        client = await proxy(classifier_config(upstream_url), clock=FakeClock())
        await send(client, agent_turn(TASK, 1), **{"x-router-session": "abc"})
        second = await send(client, agent_turn(OTHER_TASK, 1), **{"x-router-session": "abc"})
        assert len(classifier_payloads(mock)) == 1
    assert source(second) == "cached"


async def test_after_the_staleness_window_the_next_turn_reclassifies_and_overwrites(proxy: ProxyFactory, upstream_url: str) -> None:
    clock = FakeClock()
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("debugging", 3)))
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("coding_general", 1)))
        client = await proxy(classifier_config(upstream_url), clock=clock)
        await send(client, agent_turn(TASK, 1))
        clock.advance(STALENESS_SECONDS - 1)
        last_fresh = await send(client, agent_turn(TASK, 2))
        clock.advance(2)  # reads did not renew the entry: it is now older than the window
        reclassified = await send(client, agent_turn(TASK, 3))
        clock.advance(60)
        after = await send(client, agent_turn(TASK, 4))
        assert len(classifier_payloads(mock)) == 2
    assert classified(last_fresh) == ("cached", "debugging", "3")
    assert classified(reclassified) == ("classifier", "coding_general", "1")
    assert classified(after) == ("cached", "coding_general", "1")


@pytest.mark.parametrize(
    "failure",
    [
        {"payload": ollama_reply('{"category": "cooking", "tier": 1}')},
        {"status": 503, "body": "loading model"},
        {"exception": aiohttp.ClientConnectionError("refused")},
    ],
    ids=["invalid-answer", "error-status", "unreachable"],
)
async def test_a_fallback_is_never_cached(proxy: ProxyFactory, upstream_url: str, failure: dict[str, Any]) -> None:
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, **failure)
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("debugging", 3)))
        client = await proxy(classifier_config(upstream_url), clock=FakeClock())
        first = await send(client, agent_turn(TASK, 1))
        second = await send(client, agent_turn(TASK, 2))
        third = await send(client, agent_turn(TASK, 3))
        assert len(classifier_payloads(mock)) == 2
    assert source(first) == "fallback"
    assert classified(second) == ("classifier", "debugging", "3")
    assert source(third) == "cached"


async def test_an_override_is_never_cached(proxy: ProxyFactory, upstream_url: str) -> None:
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("debugging", 3)))
        client = await proxy(classifier_config(upstream_url), clock=FakeClock())
        overridden = await send(client, agent_turn(TASK, 1), **{"x-router-category": "docs_writing", "x-router-tier": "1"})
        assert classifier_payloads(mock) == []
        second = await send(client, agent_turn(TASK, 2))
        assert len(classifier_payloads(mock)) == 1
    assert classified(overridden) == ("override", "docs_writing", "1")
    assert classified(second) == ("classifier", "debugging", "3")


async def test_an_override_on_a_cached_session_leaves_the_entry_alone(proxy: ProxyFactory, upstream_url: str) -> None:
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("debugging", 3)))
        client = await proxy(classifier_config(upstream_url), clock=FakeClock())
        await send(client, agent_turn(TASK, 1))
        overridden = await send(client, agent_turn(TASK, 2), **{"x-router-tier": "1"})
        third = await send(client, agent_turn(TASK, 3))
        assert len(classifier_payloads(mock)) == 1
    assert classified(overridden) == ("override", "coding_general", "1")
    assert classified(third) == ("cached", "debugging", "3")


async def test_disabled_cache_classifies_every_turn(proxy: ProxyFactory, upstream_url: str) -> None:
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("debugging", 3)), repeat=True)
        client = await proxy(classifier_config(upstream_url, cache=False), clock=FakeClock())
        responses = [await send(client, agent_turn(TASK, turn)) for turn in (1, 2, 3)]
        assert len(classifier_payloads(mock)) == 3
    assert [source(r) for r in responses] == ["classifier"] * 3


async def test_least_recently_used_session_is_evicted_beyond_max_entries(proxy: ProxyFactory, upstream_url: str) -> None:
    config = classifier_config(upstream_url, session_cache={"enabled": True, "max_entries": 1})
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("debugging", 3)), repeat=True)
        client = await proxy(config, clock=FakeClock())
        await send(client, agent_turn(TASK, 1))
        await send(client, agent_turn(OTHER_TASK, 1))
        again = await send(client, agent_turn(TASK, 2))
        assert len(classifier_payloads(mock)) == 3
    assert source(again) == "classifier"


# --- capabilities and context are measured fresh on cached turns -------------------


async def test_cached_turns_are_gated_on_their_own_needs(proxy: ProxyFactory, upstream_url: str) -> None:
    """An image on turn 5 and none on turn 6: both cached, each routed to a model that can serve it."""
    models = [
        model_entry("coder", supports={"tools": True, "vision": False, "json_mode": True}, quality=0.8),
        model_entry("seer", supports={"tools": True, "vision": True, "json_mode": True}, quality=0.4),
    ]
    screenshot = {
        "role": "user",
        "content": [
            {"type": "text", "text": "This is what the page looks like now."},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ],
    }
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("debugging", 2)))
        client = await proxy(classifier_config(upstream_url, models=models), clock=FakeClock())
        for turn in range(1, 5):
            await send(client, agent_turn(TASK, turn))
        with_image = await send(client, [*agent_turn(TASK, 5), screenshot])
        without_image = await send(client, agent_turn(TASK, 6))
        assert len(classifier_payloads(mock)) == 1
    assert (source(with_image), with_image.headers["x-router-model"]) == ("cached", "seer")
    assert (source(without_image), without_image.headers["x-router-model"]) == ("cached", "coder")


async def test_cached_turn_uses_the_measured_context_alone(proxy: ProxyFactory, upstream_url: str) -> None:
    big_file = {"role": "user", "content": "x" * 40_000}  # ~10k tokens: more than the small window
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("debugging", 2, tokens=50_000)))
        client = await proxy(classifier_config(upstream_url, models=two_window_models()), clock=FakeClock())
        estimated = await send(client, agent_turn(TASK, 1))
        small = await send(client, agent_turn(TASK, 2))
        large = await send(client, [*agent_turn(TASK, 3), big_file])
    assert (source(estimated), estimated.headers["x-router-model"]) == ("classifier", "large-window")
    assert (source(small), small.headers["x-router-model"]) == ("cached", "small-window")
    assert (source(large), large.headers["x-router-model"]) == ("cached", "large-window")


# --- the stage on its own ------------------------------------------------------------


def cache_stage(clock: FakeClock, enabled: bool = True) -> ClassificationCache:
    config = classifier_config(session_cache={"enabled": enabled})
    return build_stage(ClassificationCache, config, http=None, estimator=TokenEstimator(), clock=clock)  # type: ignore[arg-type]


async def test_hit_carries_only_category_and_tier() -> None:
    clock = FakeClock()
    stage = cache_stage(clock)
    first = make_ctx(messages=agent_turn(TASK, 1))
    first[SESSION] = SessionKey("s1", "fingerprint")
    first[CLASSIFICATION] = Classification("debugging", 3, ClassificationSource.CLASSIFIER, required_context_tokens=50_000)
    await stage.after(first)
    second = make_ctx(messages=agent_turn(TASK, 2))
    second[SESSION] = SessionKey("s1", "fingerprint")
    record = await run_stage(stage, second)
    assert (record.outcome, record.detail) == (Outcome.OK, "hit")
    assert second[CACHED_CLASSIFICATION] == Classification("debugging", 3, ClassificationSource.CACHED, required_context_tokens=None)
    assert second[CLASSIFICATION] is None  # the classifier is the one writer of the classification


@pytest.mark.parametrize(
    ("enabled", "session", "detail"),
    [(False, SessionKey("s1", "header"), "disabled"), (True, None, "no session key")],
)
async def test_stage_is_skipped_without_a_cache_or_a_session(enabled: bool, session: SessionKey | None, detail: str) -> None:
    stage = cache_stage(FakeClock(), enabled=enabled)
    ctx = make_ctx(messages=agent_turn(TASK, 1))
    ctx[SESSION] = session
    record = await run_stage(stage, ctx)
    assert (record.outcome, record.detail) == (Outcome.SKIPPED, detail)
    ctx[CLASSIFICATION] = Classification("debugging", 3, ClassificationSource.CLASSIFIER)
    await stage.after(ctx)
    assert stage.state.memory.size(stage.space) == 0  # type: ignore[attr-defined]


# --- side requests (opencode's real sequence) -------------------------------------------


async def test_opencodes_title_request_does_not_decide_the_category_of_its_tool_turns(proxy: ProxyFactory, upstream_url: str) -> None:
    """opencode 1.18.33 first asks for a title (no tools, same session id), then works with tools."""
    title, first_turn, second_turn = captured("opencode")
    assert not title.offers_tools and first_turn.offers_tools and second_turn.offers_tools
    assert title.headers["x-session-id"] == first_turn.headers["x-session-id"]
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("docs_writing", 1)))  # the title
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("debugging", 3)))  # the first tool turn
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("docs_writing", 1)))  # a later summary request
        client = await proxy(classifier_config(upstream_url), clock=FakeClock())

        async def replay(request: CapturedRequest) -> tuple[str, str, str]:
            response = await client.post("/v1/chat/completions", json=request.body, headers=client_headers(request))
            assert response.status == 200, await response.text()
            await response.read()
            return classified(response)

        assert await replay(title) == ("classifier", "docs_writing", "1")
        assert await replay(first_turn) == ("classifier", "debugging", "3")
        assert await replay(second_turn) == ("cached", "debugging", "3")
        # a later side request is classified on its own and never stored over the session's entry
        assert await replay(title) == ("classifier", "docs_writing", "1")
        assert await replay(second_turn) == ("cached", "debugging", "3")
        assert len(classifier_payloads(mock)) == 3


async def test_a_session_without_tools_is_cached_like_any_other(proxy: ProxyFactory, upstream_url: str) -> None:
    with mocked_classifier() as mock:
        mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("docs_writing", 1)), repeat=True)
        client = await proxy(classifier_config(upstream_url), clock=FakeClock())
        first = await send(client, agent_turn(TASK, 1), **{"x-session-id": "plain-chat"})
        second = await send(client, agent_turn(TASK, 2), **{"x-session-id": "plain-chat"})
        assert len(classifier_payloads(mock)) == 1
    assert source(first) == "classifier" and source(second) == "cached"
