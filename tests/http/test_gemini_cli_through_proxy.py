"""Gemini CLI 0.61.0's captured requests (tests/data/agents/gemini-cli) through the proxy, and its side requests.

Sent as Gemini CLI sent them (headers, ``?alt=sse``), its model names routed (``routing.aliases: ["*"]``,
what the shipped config's aliases for Gemini CLI's default names do): passed through to a Gemini
provider (the mock checks the thought signatures Gemini CLI sends back), translated to a chat and to an
Anthropic one. Its first request of every turn is its model-router call — a ``generateContent`` to a
flash-lite model asking for a JSON complexity score, no tools: a side request that never decides the
session's category and never moves its prompt-cache clock.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from router.core.sse import data_payloads
from router.tools.mock_capture import REDACTED
from tests.http.test_agent_fixtures import NOT_REPLAYED, load
from tests.support.classifier_fakes import CATEGORIES, OLLAMA_CHAT_URL, FakeClock, classifier_config, classifier_payloads, mocked_classifier, ollama_reply, verdict
from tests.support.config import model_entry

CAPTURED = [
    "gemini-cli/0001-POST-v1beta-models-gemini-3-5-flash-lite-generateContent.json",  # its model-router call
    "gemini-cli/0002-POST-v1beta-models-gemini-3-8-flash-streamGenerateContent.json",  # the turn: a call
    "gemini-cli/0003-POST-v1beta-models-gemini-3-8-flash-streamGenerateContent.json",  # the result in: text
]
ROUTING = {"categories": CATEGORIES, "tiers": [1, 2, 3], "fallback_category": "coding_general", "fallback_tier": 2, "aliases": ["auto", "*"]}


def config(url: str, api: str, **sections: Any):
    provider = {"gemini": {"base_url": url, "api": "gemini"}, "openai": {"base_url": url}, "anthropic": {"base_url": url, "api": "anthropic"}}[api]
    return classifier_config(url, providers={"mock": provider, "classifier": {"base_url": "http://localhost:11434", "api": "ollama"}},
                             models=[model_entry("main", context_window=200_000)], routing=ROUTING, **sections)


def replayed(name: str, extra_headers: dict[str, str] | None = None) -> tuple[str, dict[str, Any], dict[str, str], dict[str, str]]:
    record = load(name)
    headers = {k: v for k, v in record["headers"].items() if k.lower() not in NOT_REPLAYED and not v.endswith(REDACTED)}
    return record["path"], record["body"], record["query"], {**headers, **(extra_headers or {})}


def answer_of(body: bytes, sse: bool) -> list[dict[str, Any]]:
    chunks = [orjson.loads(d) for d in data_payloads(body)] if sse else [orjson.loads(body)]
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    return [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]


@pytest.mark.parametrize("api", ["gemini", "openai", "anthropic"])
async def test_gemini_clis_requests_are_served_through_every_kind_of_provider(proxy, mock_upstream, api):
    mock, url = mock_upstream
    with mocked_classifier() as classifier:
        for _ in CAPTURED:
            classifier.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("coding_general", 2)))
        client = await proxy(config(url, api))
        answers = []
        for name in CAPTURED:
            path, body, query, headers = replayed(name)
            resp = await client.post(path, json=body, params=query, headers=headers)
            assert resp.status == 200, await resp.text()
            assert resp.headers["x-router-wire"] == f"gemini->{ {'gemini': 'gemini', 'openai': 'openai-chat', 'anthropic': 'anthropic-messages'}[api]}"
            answers.append(answer_of(await resp.read(), query.get("alt") == "sse"))
    router_call, turn, result_turn = answers
    assert "complexity_score" in orjson.loads("".join(p.get("text", "") for p in router_call if not p.get("thought"))) or api != "gemini"
    assert any("functionCall" in p for p in turn)
    assert "".join(p.get("text", "") for p in result_turn if not p.get("thought")).startswith("Hello from the mock upstream.")
    if api == "gemini":  # passed through: every byte as Gemini CLI sent it, its signatures verified by the mock
        assert [r.body for r in mock.received] == [load(n)["body"] for n in CAPTURED]


async def test_the_router_call_never_decides_the_sessions_category(proxy, mock_upstream):
    """With one session for both (a session header, e.g. set with GEMINI_CLI_CUSTOM_HEADERS), the router
    call (no tools) is classified on its own and never stored over the turns' classification."""
    _, url = mock_upstream
    session = {"x-router-session": "gemini-cli-session"}
    with mocked_classifier() as classifier:
        for category, tier in (("docs_writing", 1), ("debugging", 3), ("docs_writing", 1)):
            classifier.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict(category, tier)))
        client = await proxy(config(url, "gemini"), clock=FakeClock())

        async def send(name: str) -> tuple[str, str, str]:
            path, body, query, headers = replayed(name, session)
            resp = await client.post(path, json=body, params=query, headers=headers)
            assert resp.status == 200, await resp.text()
            await resp.read()
            return resp.headers["x-router-source"], resp.headers["x-router-category"], resp.headers["x-router-tier"]

        assert await send(CAPTURED[0]) == ("classifier", "docs_writing", "1")
        assert await send(CAPTURED[1]) == ("classifier", "debugging", "3")
        assert await send(CAPTURED[0]) == ("classifier", "docs_writing", "1")  # the next turn's router call: alone again
        assert await send(CAPTURED[2]) == ("cached", "debugging", "3")
        assert len(classifier_payloads(classifier)) == 3


async def test_without_a_session_header_the_router_call_is_a_session_of_its_own(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(config(url, "gemini", middlewares=["session-fingerprint", "capability-gate", "upstream-forward"]))
    sessions = []
    for name in CAPTURED:
        path, body, query, headers = replayed(name)
        resp = await client.post(path, json=body, params=query, headers=headers)
        await resp.read()
        sessions.append(resp.headers["x-router-session"])
    assert sessions[1] == sessions[2] != sessions[0]  # the turns share the fingerprint of their system prompt and first words


async def test_the_router_call_never_moves_the_sessions_cache_clock(proxy, mock_upstream):
    """The turns' cache is judged by the turns alone: a router call between them (same session) is no visit."""
    _, url = mock_upstream
    clock = FakeClock()
    pinch = {"enabled": True, "budget_tokens": 1000, "ledger": True}
    client = await proxy(config(url, "gemini", pinch=pinch, middlewares=["session-fingerprint", "pinch-prune", "capability-gate", "upstream-forward"]), clock=clock)

    async def send(name: str) -> str:
        path, body, query, headers = replayed(name, {"x-router-session": "s"})
        resp = await client.post(path, json=body, params=query, headers=headers)
        assert resp.status == 200
        await resp.read()
        rows = (await (await client.get("/v1/decisions", params={"session": "s", "limit": "1"})).json())["data"]
        return rows[0]["pinch_reason"]

    await send(CAPTURED[1])
    clock.advance(200)
    await send(CAPTURED[0])  # a router call 200 s later
    clock.advance(200)
    assert "idle 400s" in await send(CAPTURED[2])  # 400 s since the last turn: the router call kept nothing warm
