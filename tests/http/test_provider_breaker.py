"""A silent provider (accepts the connection, never answers) costs one first-byte timeout, then is skipped.

Issue #42, item 3: before, each model behind such a provider waited out the full first-byte timeout
in turn (2 × 120 s by default) before the client heard anything. Now a provider that timed out is not
tried again within the request, a per-provider circuit breaker marks it down for
``upstream.breaker.open_seconds`` (later requests skip it without contacting it), one request tries
it again after the window, and its answer closes the breaker. A stream's head has its own, shorter
timeout (``upstream.stream_first_byte_timeout_seconds``).

The silent provider is written here: an aiohttp server on a free loopback port that counts every
request it receives and, while ``silent``, never answers one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from router.tools.mock_upstream import Behaviour, stream_events
from tests.support.config import chat_body, make_config, model_entry

URL = "/v1/chat/completions"
COMPLETION = {
    "id": "x",
    "object": "chat.completion",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
}


class SilentProvider:
    """An OpenAI-compatible provider that takes every request and, while ``silent``, never answers it.

    ``contacts`` counts the requests that reached it; ``answer_after`` delays an answer once it speaks.
    """

    def __init__(self) -> None:
        self.silent = True
        self.answer_after = 0.0
        self.contacts = 0

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self.contacts += 1
        body = orjson.loads(await request.read())
        if self.silent:
            await asyncio.Event().wait()  # until the proxy hangs up (the server cancels the handler)
        await asyncio.sleep(self.answer_after)
        if not body.get("stream"):
            return web.json_response(COMPLETION)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in stream_events(body, "ok"):
            await response.write(event)
        await response.write_eof()
        return response


@pytest.fixture
async def silent() -> AsyncIterator[tuple[SilentProvider, str]]:
    provider = SilentProvider()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", provider.chat)
    server = TestServer(app, host="127.0.0.1", handler_cancellation=True)
    await server.start_server()
    try:
        yield provider, str(server.make_url("/v1"))
    finally:
        await server.close()


def settings(**upstream: Any) -> dict[str, Any]:
    """Timeouts of a second: small enough for a test, large enough for a loaded machine's loopback."""
    return {
        "connect_timeout_seconds": 1,
        "first_byte_timeout_seconds": 1,
        "stream_first_byte_timeout_seconds": 1,
        "idle_timeout_seconds": 5,
        **upstream,
    }


def two_models_on(url: str, backup_url: str | None = None, **upstream: Any):
    """`first` and `second` both on provider `silent`; with ``backup_url``, `backup` on provider `live` too."""
    providers = {"silent": {"base_url": url}}
    models = [model_entry("first", provider="silent", quality=0.9), model_entry("second", provider="silent", quality=0.7)]
    if backup_url is not None:
        providers["live"] = {"base_url": backup_url}
        models.append(model_entry("backup", provider="live", quality=0.1))
        upstream.setdefault("max_attempts", 3)
    return make_config(providers=providers, models=models, upstream=settings(**upstream))


async def timed_post(client, body: dict[str, Any], path: str = URL, **kwargs: Any) -> tuple[Any, float, dict[str, Any]]:
    started = time.monotonic()
    resp = await client.post(path, json=body, **kwargs)
    raw = await resp.read()
    payload = orjson.loads(raw) if resp.content_type == "application/json" else {"stream": raw}
    return resp, time.monotonic() - started, payload


async def metric(client, name: str) -> float | None:
    """The value of one series of ``/metrics`` (``name`` with its labels, as rendered), None when absent."""
    for line in (await (await client.get("/metrics")).text()).splitlines():
        series, _, value = line.rpartition(" ")
        if series == name:
            return float(value)
    return None


async def decisions(client) -> list[dict[str, Any]]:
    return (await (await client.get("/v1/decisions")).json())["data"]


# --- within one request ----------------------------------------------------------------------------


async def test_two_models_on_a_silent_provider_cost_one_first_byte_timeout_not_two(proxy, silent):
    provider, url = silent
    client = await proxy(two_models_on(url))
    resp, elapsed, payload = await timed_post(client, chat_body())
    assert resp.status == 504 and resp.headers["x-should-retry"] == "false"
    assert elapsed < 1 + 1  # one first-byte timeout, not one per model
    assert provider.contacts == 1  # `second` was never sent: its provider had just timed out
    message = payload["error"]["message"]
    assert "first via silent: no answer" in message
    assert "second via silent: skipped: provider silent did not answer" in message


async def test_a_stream_gets_the_same_treatment(proxy, silent):
    provider, url = silent
    client = await proxy(two_models_on(url))
    resp, elapsed, _ = await timed_post(client, chat_body(stream=True))
    assert resp.status == 504 and elapsed < 1 + 1 and provider.contacts == 1


async def test_with_the_breaker_off_a_provider_that_timed_out_is_still_not_tried_twice_in_one_request(proxy, silent):
    provider, url = silent
    client = await proxy(two_models_on(url, breaker={"open_seconds": 0}))
    for contacts in (1, 2):  # nothing carries over to the next request
        resp, _, _ = await timed_post(client, chat_body())
        assert resp.status == 504 and provider.contacts == contacts


# --- the breaker: across requests ------------------------------------------------------------------


async def test_within_the_window_the_next_request_skips_the_provider_without_contacting_it(proxy, silent):
    provider, url = silent
    client = await proxy(two_models_on(url, breaker={"open_seconds": 30}))
    await timed_post(client, chat_body())
    resp, elapsed, payload = await timed_post(client, chat_body())
    assert provider.contacts == 1  # the second request never reached it
    assert elapsed < 1  # loosely: skipping takes milliseconds; a contact would take the 1 s timeout
    assert resp.status == 503 and resp.headers["x-should-retry"] == "false"
    assert 1 <= int(resp.headers["Retry-After"]) <= 30
    error = payload["error"]
    assert error["code"] == "provider_down"
    assert "silent" in error["message"] and "tried again in" in error["message"]


async def test_an_anthropic_client_gets_the_skip_in_its_own_format(proxy, silent):
    provider, url = silent
    client = await proxy(two_models_on(url))
    await timed_post(client, chat_body())
    body = {"model": "auto", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    resp, _, payload = await timed_post(client, body, "/v1/messages")
    assert resp.status == 503 and resp.headers["x-should-retry"] == "false" and "Retry-After" in resp.headers
    assert payload["type"] == "error" and "silent" in payload["error"]["message"]
    assert provider.contacts == 1


async def test_a_provider_marked_down_is_skipped_for_one_on_another_provider_and_the_row_says_so(proxy, silent, mock_upstream):
    provider, url = silent
    backup, backup_url = mock_upstream
    client = await proxy(two_models_on(url, backup_url))
    first, _, _ = await timed_post(client, chat_body())
    assert first.status == 200 and first.headers["x-router-model"] == "backup"
    resp, elapsed, _ = await timed_post(client, chat_body())
    assert resp.status == 200 and resp.headers["x-router-model"] == "backup"
    assert elapsed < 1 and provider.contacts == 1 and len(backup.received) == 2
    rows = await decisions(client)  # newest first
    assert rows[0]["providers_down"] == ["silent"]
    assert [a["error"].split(":")[0] for a in rows[0]["attempts"][:2]] == ["skipped", "skipped"]
    assert "marked down" in rows[0]["attempts"][0]["error"]
    assert rows[1]["providers_down"] == ["silent"]  # the first request skipped `second` after `first` timed out
    assert await metric(client, 'pinch_router_provider_breaker_open{provider="silent"}') == 1.0
    assert await metric(client, 'pinch_router_provider_breaker_skips_total{provider="silent"}') == 2.0


async def test_after_the_window_one_request_tries_the_provider_and_its_answer_closes_the_breaker(proxy, silent):
    provider, url = silent
    client = await proxy(two_models_on(url, breaker={"open_seconds": 0.5}))
    await timed_post(client, chat_body())
    provider.silent = False  # it recovers
    await asyncio.sleep(0.6)  # the window passes: half-open
    resp, _, _ = await timed_post(client, chat_body())
    assert resp.status == 200 and provider.contacts == 2
    assert await metric(client, 'pinch_router_provider_breaker_open{provider="silent"}') == 0.0
    resp, _, _ = await timed_post(client, chat_body(stream=True))
    assert resp.status == 200 and provider.contacts == 3  # closed: every request goes to it again


async def test_while_one_request_tries_the_provider_again_the_others_still_skip_it(proxy, silent):
    provider, url = silent
    client = await proxy(two_models_on(url, breaker={"open_seconds": 0.3}))
    await timed_post(client, chat_body())
    await asyncio.sleep(0.4)
    probe = asyncio.ensure_future(timed_post(client, chat_body()))
    while provider.contacts < 2:  # the probe reached it (and hangs: still silent)
        await asyncio.sleep(0.01)
    resp, elapsed, _ = await timed_post(client, chat_body())
    assert resp.status == 503 and elapsed < 1 and provider.contacts == 2
    resp, _, _ = await probe
    assert resp.status == 504  # the probe timed out: the breaker opens again
    resp, _, _ = await timed_post(client, chat_body())
    assert resp.status == 503 and provider.contacts == 2


async def test_healthz_lists_the_providers_marked_down(proxy, silent):
    _, url = silent
    client = await proxy(two_models_on(url))
    assert await (await client.get("/healthz")).json() == {"status": "ok"}
    await timed_post(client, chat_body())
    health = await (await client.get("/healthz")).json()
    assert health["status"] == "ok"  # the proxy serves; a provider is down
    [down] = health["providers_down"]
    assert down["provider"] == "silent" and 0 < down["retry_in_seconds"] <= 30


async def test_doctor_shows_what_the_running_proxy_marked_down(proxy, silent):
    from router.server.doctor import running_proxy_findings

    _, url = silent
    config = two_models_on(url)
    client = await proxy(config)
    served = config.model_copy(update={"server": config.server.model_copy(update={"host": "127.0.0.1", "port": client.port})})
    [finding] = await running_proxy_findings(served, client.session)
    assert finding.ok and "no provider marked down" in finding.detail
    await timed_post(client, chat_body())
    [finding] = await running_proxy_findings(served, client.session)
    assert not finding.ok and finding.check == "provider silent (running proxy)"
    assert "marked down" in finding.detail and "tried again in" in finding.detail


async def test_doctor_says_so_when_no_proxy_runs(http):
    from bench.harness import free_port
    from router.server.doctor import running_proxy_findings

    config = make_config(server={"port": free_port()})
    [finding] = await running_proxy_findings(config, http)
    assert finding.ok and "not running" in finding.detail


# --- a stream's head has its own timeout -------------------------------------------------------------


async def test_a_streams_head_has_its_own_shorter_timeout(proxy, silent):
    provider, url = silent
    config = make_config(providers={"silent": {"base_url": url}}, models=[model_entry("only", provider="silent")],
                         upstream=settings(first_byte_timeout_seconds=5, stream_first_byte_timeout_seconds=0.3))  # fmt: skip
    client = await proxy(config)
    resp, elapsed, _ = await timed_post(client, chat_body(stream=True))
    assert resp.status == 504 and elapsed < 2  # not the 5 s a non-stream answer may take


async def test_a_non_stream_answer_keeps_the_longer_first_byte_timeout(proxy, silent):
    provider, url = silent
    provider.silent, provider.answer_after = False, 0.6
    config = make_config(providers={"silent": {"base_url": url}}, models=[model_entry("only", provider="silent")],
                         upstream=settings(first_byte_timeout_seconds=5, stream_first_byte_timeout_seconds=0.3))  # fmt: skip
    client = await proxy(config)
    resp, _, _ = await timed_post(client, chat_body())
    assert resp.status == 200


async def test_a_streams_first_event_after_a_prompt_head_keeps_the_longer_timeout(proxy, mock_upstream):
    """A reasoning model on chat completions streams nothing while it thinks: only the head is due early."""
    mock, url = mock_upstream
    mock.then(Behaviour(event_delay=0.6))
    client = await proxy(make_config(url, upstream=settings(first_byte_timeout_seconds=5, stream_first_byte_timeout_seconds=0.3)))
    resp = await client.post(URL, json=chat_body(stream=True))
    assert resp.status == 200 and (await resp.read()).endswith(b"data: [DONE]\n\n")
