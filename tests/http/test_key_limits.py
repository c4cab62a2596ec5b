"""Limits per client key (issue #45), through the proxy in-process: admitted before the upstream is
called, holding an estimate so that concurrent requests cannot overshoot; refused 429 in the
client's own format with Retry-After, naming the limit and the key; charged the upstream's usage
when the answer ends — streams included, and a client that leaves mid-stream too.

The upstream (the loopback mock) reports 50 prompt and 50 completion tokens for every answer, at
$1 and $2 per million: an answer costs 100 tokens and $0.00015, so each budget below allows ten.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from router.tools import mock_anthropic
from router.tools.mock_upstream import Behaviour
from tests.support.classifier_fakes import FakeClock
from tests.support.config import make_config, model_entry
from tests.support.gemini_factories import gemini_body, user
from tests.support.wire_factories import anthropic_body, anthropic_user, input_message, responses_body

ALICE, BOB, OPS = "alice-key-0123456789", "bob-key-9876543210", "ops-key-5555555555"
USAGE = {"prompt_tokens": 50, "completion_tokens": 50, "total_tokens": 100}
NOON = 1_741_953_600.0  # 2025-03-14T12:00:00Z: every request of a test in one minute
BUDGETS_FOR_TEN = {"requests_per_minute": 10, "tokens_per_minute": 1000, "usd_per_day": 0.0015}
OUTPUT = 100  # the output limit every request asks for: its hold is its prompt and these
TEXT = "fix the failing test"

# Each client wire: its path, a body (whole and streamed), and how its 429 reads.
WIRES: dict[str, tuple[str, str, dict[str, Any], dict[str, Any]]] = {
    "openai-chat": (
        "/v1/chat/completions",
        "/v1/chat/completions",
        {"model": "auto", "messages": [{"role": "user", "content": TEXT}], "max_tokens": OUTPUT},
        {"stream": True},
    ),
    "anthropic-messages": ("/v1/messages", "/v1/messages", anthropic_body(anthropic_user(TEXT), max_tokens=OUTPUT), {"stream": True}),
    "openai-responses": ("/v1/responses", "/v1/responses", responses_body(input_message("user", TEXT), max_output_tokens=OUTPUT), {"stream": True}),
    "gemini": (
        "/v1beta/models/auto:generateContent",
        "/v1beta/models/auto:streamGenerateContent?alt=sse",
        gemini_body(user(TEXT), generationConfig={"maxOutputTokens": OUTPUT}),
        {},
    ),
}


def refusal_of(wire: str, body: dict[str, Any]) -> str:
    """The message of a 429 as ``wire``'s clients read it, after checking its shape."""
    if wire == "anthropic-messages":
        assert body["type"] == "error" and body["error"]["type"] == "rate_limit_error"
        return body["error"]["message"]
    if wire == "gemini":
        assert body["error"]["code"] == 429 and body["error"]["status"] == "RESOURCE_EXHAUSTED"
        return body["error"]["message"]
    assert body["error"]["code"] == "key_limit_exceeded" and body["error"]["type"] == "rate_limit_error"
    return body["error"]["message"]


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def limited_config(url: str, limits: dict[str, Any] | None, **sections: Any):
    keys = [
        {"name": "alice", "key": ALICE, **({"limits": limits} if limits else {})},
        {"name": "bob", "key": BOB},
        {"name": "ops", "key": OPS, "role": "admin"},
    ]
    return make_config(
        url,
        server={"api_keys": keys},
        routing={"aliases": ["auto", "*"]},
        models=[model_entry("main", cost_per_mtok={"input": 1.0, "output": 2.0})],
        **sections,
    )


async def keys_report(client, key: str = OPS) -> dict[str, dict[str, Any]]:
    response = await client.get("/v1/keys", headers=auth(key))
    assert response.status == 200
    return {row["name"]: row for row in (await response.json())["data"]}


async def settled(client, name: str = "alice") -> dict[str, Any]:
    """The key's row once no request of it holds anything (its last answer's charge landed)."""
    while True:
        row = (await keys_report(client))[name]
        if row["held"]["tokens"] == 0:
            return row
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("limit", BUDGETS_FOR_TEN)
@pytest.mark.parametrize("wire", WIRES)
async def test_fifty_at_once_against_a_budget_for_ten_serve_at_most_eleven_the_rest_429_in_the_clients_format(proxy, mock_upstream, wire, limit):
    mock, url = mock_upstream
    mock.default = Behaviour(delay_before_head=0.3, usage=USAGE)  # every admitted request is still in flight when the others come
    client = await proxy(limited_config(url, {limit: BUDGETS_FOR_TEN[limit]}), wall_clock=FakeClock(NOON))
    path, _, body, _ = WIRES[wire]
    answers = await asyncio.gather(*(client.post(path, json=body, headers=auth(ALICE)) for _ in range(50)))
    statuses = [answer.status for answer in answers]
    served = statuses.count(200)
    assert 5 <= served <= 11 and statuses.count(429) == 50 - served, statuses
    assert len(mock.received) == served  # a refused request never reached the upstream
    for answer in answers:
        if answer.status == 429:
            message = refusal_of(wire, orjson.loads(await answer.read()))
            assert f"key 'alice' is over its limit {limit}" in message and ALICE not in message
            assert int(answer.headers["Retry-After"]) >= 1
    # what each served answer was charged adds up to what the budget allows, at most one request more
    used = (await settled(client))["used"][limit]
    assert used == pytest.approx(served * {"requests_per_minute": 1, "tokens_per_minute": 100, "usd_per_day": 0.00015}[limit])


async def test_another_keys_budget_is_its_own(proxy, mock_upstream):
    mock, url = mock_upstream
    mock.default = Behaviour(usage=USAGE)
    client = await proxy(limited_config(url, {"requests_per_minute": 2}), wall_clock=FakeClock(NOON))
    path, _, body, _ = WIRES["openai-chat"]
    statuses = [(await client.post(path, json=body, headers=auth(key))).status for key in (ALICE, ALICE, ALICE, BOB, BOB, BOB)]
    assert statuses == [200, 200, 429, 200, 200, 200]  # bob has no limits


async def test_a_spent_budget_says_when_its_window_ends_and_a_days_tells_the_sdks_not_to_retry(proxy, mock_upstream):
    mock, url = mock_upstream
    mock.default = Behaviour(usage=USAGE)
    clock = FakeClock(NOON + 15)  # 45 s left of the minute, 12 hours of the day
    client = await proxy(limited_config(url, {"requests_per_minute": 1, "usd_per_day": 0.0001}), wall_clock=clock)
    path, _, body, _ = WIRES["openai-chat"]
    assert (await client.post(path, json=body, headers=auth(ALICE))).status == 200
    await settled(client)
    refused = await client.post(path, json=body, headers=auth(ALICE))
    assert refused.status == 429 and refused.headers["Retry-After"] == str(12 * 3600 - 15)  # the day's, the longer wait
    assert refused.headers["x-should-retry"] == "false"
    assert "usd_per_day (0.000100 USD): 0.000150 USD used today (UTC)" in refusal_of("openai-chat", await refused.json())
    clock.advance(12 * 3600)  # the next day: a new budget
    assert (await client.post(path, json=body, headers=auth(ALICE))).status == 200


@pytest.mark.parametrize("wire", WIRES)
async def test_a_streamed_answer_is_charged_the_usage_its_upstream_reported_at_its_end(proxy, mock_upstream, wire):
    mock, url = mock_upstream
    mock.default = Behaviour(usage=USAGE)
    client = await proxy(limited_config(url, {"tokens_per_minute": 100_000}), wall_clock=FakeClock(NOON))
    _, path, body, streamed = WIRES[wire]
    response = await client.post(path, json={**body, **streamed}, headers=auth(ALICE))
    assert response.status == 200 and response.content_type == "text/event-stream"
    await response.read()
    row = await settled(client)
    assert row["used"]["tokens_per_minute"] == 100 and row["used"]["usd_per_day"] == pytest.approx(0.00015)
    assert row["used"]["requests_per_minute"] == 1


@pytest.mark.parametrize("wire", ["openai-chat", "anthropic-messages"])
async def test_a_client_that_leaves_mid_stream_is_charged_the_estimate_of_what_it_did_not_get_reported(proxy, mock_upstream, wire):
    mock, url = mock_upstream
    mock.default = Behaviour(event_delay=0.1, text=" ".join(["word"] * 200), usage=USAGE)  # the usage would come at the end
    client = await proxy(limited_config(url, {"tokens_per_minute": 100_000}), wall_clock=FakeClock(NOON))
    _, path, body, streamed = WIRES[wire]
    response = await client.post(path, json={**body, **streamed}, headers=auth(ALICE))
    assert response.status == 200
    await response.content.readany()  # the first events
    held = (await keys_report(client))["alice"]["held"]
    assert held["tokens"] > OUTPUT  # the prompt and the output limit
    response.close()  # the client leaves
    row = await settled(client)
    assert row["used"]["tokens_per_minute"] == held["tokens"]  # no usage came: the estimate
    assert row["used"]["usd_per_day"] == pytest.approx(held["usd"])
    assert mock.received  # it did reach the upstream


async def test_a_client_that_leaves_mid_stream_is_charged_the_prompt_its_upstream_reported_at_the_start(proxy, mock_upstream):
    """Anthropic's stream reports the prompt in its first event: that figure is charged, and the
    whole output limit (the output counted so far says nothing of what the provider bills)."""
    mock, url = mock_upstream
    mock.default = Behaviour(event_delay=0.1, text=" ".join(["word"] * 200))
    providers = {"mock": {"base_url": url.removesuffix("/v1"), "api": "anthropic"}}
    client = await proxy(limited_config(url, {"tokens_per_minute": 100_000}, providers=providers), wall_clock=FakeClock(NOON))
    _, path, body, streamed = WIRES["anthropic-messages"]
    response = await client.post(path, json={**body, **streamed}, headers=auth(ALICE))
    assert response.status == 200
    assert b"message_start" in await response.content.readany()
    held = (await keys_report(client))["alice"]["held"]["tokens"]
    response.close()
    reported = mock_anthropic.input_tokens(mock.received[-1].body)
    assert reported != held - OUTPUT  # the provider counts the prompt otherwise than the proxy's estimate
    assert (await settled(client))["used"]["tokens_per_minute"] == reported + OUTPUT


async def test_a_key_without_limits_is_counted_never_refused_and_keys_shows_each_user_its_own(proxy, mock_upstream):
    mock, url = mock_upstream
    mock.default = Behaviour(usage=USAGE)
    client = await proxy(limited_config(url, {"usd_per_month": 10}), wall_clock=FakeClock(NOON))
    path, _, body, _ = WIRES["openai-chat"]
    for key in (ALICE, BOB, BOB):
        assert (await client.post(path, json=body, headers=auth(key))).status == 200
    await settled(client)
    everyone = await keys_report(client, OPS)
    assert list(everyone) == ["alice", "bob", "ops"]
    assert everyone["bob"]["role"] == "user" and everyone["ops"]["role"] == "admin"
    assert everyone["bob"]["limits"] == dict.fromkeys(BUDGETS_FOR_TEN | {"usd_per_month": 0}, None)
    assert everyone["bob"]["used"]["requests_per_minute"] == 2 and everyone["bob"]["used"]["tokens_per_minute"] == 200
    assert everyone["alice"]["limits"]["usd_per_month"] == 10 and everyone["alice"]["used"]["usd_per_month"] == pytest.approx(0.00015)
    assert list(await keys_report(client, BOB)) == ["bob"]  # a user key sees its own only
    assert list(await keys_report(client, ALICE)) == ["alice"]


async def test_metrics_count_cost_and_refusals_by_key_name(proxy, mock_upstream):
    mock, url = mock_upstream
    mock.default = Behaviour(usage=USAGE)
    client = await proxy(limited_config(url, {"requests_per_minute": 1}), wall_clock=FakeClock(NOON))
    path, _, body, _ = WIRES["openai-chat"]
    for key in (ALICE, ALICE, ALICE, BOB):
        await client.post(path, json=body, headers=auth(key))
    await settled(client)
    text = await (await client.get("/metrics", headers=auth(OPS))).text()
    assert 'pinch_router_client_limited_total{client="alice",limit="requests_per_minute"} 2.0' in text
    assert 'pinch_router_client_cost_usd_total{client="alice"} 0.00015' in text
    assert 'pinch_router_client_cost_usd_total{client="bob"} 0.00015' in text
    assert 'pinch_router_client_requests_total{client="alice",status="429"} 2.0' in text
    assert ALICE not in text


async def test_without_client_keys_there_is_nothing_to_limit_or_list(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    response = await client.get("/v1/keys")
    assert response.status == 200 and await response.json() == {"object": "list", "counts": "none", "data": []}
