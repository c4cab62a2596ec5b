"""Keys never leak: not in logs, decision rows, error bodies or /metrics; upstream URLs come only from config."""

from __future__ import annotations

import logging

import pytest

from router.config import parse_config
from router.tools.mock_upstream import Behaviour
from tests.support.config import chat_body, make_config
PROVIDER_KEY = "sk-provider-SECRET-0123456789"
CLIENT_KEY = "client-SECRET-9876543210"
URL = "/v1/chat/completions"


async def test_keys_appear_nowhere_the_proxy_writes(proxy, mock_upstream, caplog, monkeypatch):
    mock, url = mock_upstream
    monkeypatch.setenv("TEST_PROVIDER_KEY", PROVIDER_KEY)
    raw = {
        "middlewares": ["session-fingerprint", "capability-gate", "upstream-forward"],
        "providers": {"mock": {"base_url": url, "api_key_env": "TEST_PROVIDER_KEY"}},
        "models": [{"name": "main", "provider": "mock", "upstream_model": "up", "context_window": 9000, "max_output_tokens": 100, "tiers": [1, 2, 3]}],
        "server": {"api_keys": ["${TEST_CLIENT_KEY}"]},
        "decision_log": {"path": ":memory:"},
    }
    config = parse_config(raw, {"TEST_CLIENT_KEY": CLIENT_KEY})
    caplog.set_level(logging.DEBUG)
    client = await proxy(config)
    auth = {"Authorization": f"Bearer {CLIENT_KEY}"}
    written: list[str] = []

    async def call(**kwargs):
        resp = await client.post(URL, **kwargs)
        written.append(await resp.text())
        written.append(str(dict(resp.headers)))

    await call(json=chat_body(), headers=auth)
    await call(json=chat_body(stream=True), headers=auth)
    await call(json=chat_body(), headers={"Authorization": f"Bearer {CLIENT_KEY}x"})  # wrong key: 401
    await call(json=chat_body(), headers={"Authorization": f"Bearer {PROVIDER_KEY}"})  # someone tries the provider key
    # providers that echo the key they were sent, in a failover status and in a relayed 4xx
    echo = f'{{"error": {{"message": "Incorrect API key provided: {PROVIDER_KEY}", "type": "auth"}}}}'.encode()
    mock.then(Behaviour(status=401, body=echo))
    await call(json=chat_body(), headers=auth)
    mock.then(Behaviour(status=400, body=echo))
    await call(json=chat_body(), headers=auth)
    mock.then(Behaviour(status=400, body=f"plain text {PROVIDER_KEY}".encode()))
    await call(json=chat_body(), headers=auth)
    await call(data=b"{broken", headers={**auth, "Content-Type": "application/json"})
    # and in an answer, whole and streamed
    mock.then(Behaviour(text=f"your key is {PROVIDER_KEY}"), Behaviour(text=f"your key is {PROVIDER_KEY}"))
    await call(json=chat_body(), headers=auth)
    assert "your key is [redacted]" in written[-2]
    await call(json=chat_body(stream=True), headers=auth)
    assert "[redacted]" in written[-2]  # the streamed answer, event by event

    written.append(await (await client.get("/v1/decisions", params={"limit": "100"}, headers=auth)).text())
    written.append(await (await client.get("/metrics", headers=auth)).text())
    written.append(caplog.text)
    written.extend(str(record.__dict__) for record in caplog.records)
    everything = "\n".join(written)
    assert "Incorrect API key provided: [redacted]" in everything  # the echo was seen, and redacted
    assert PROVIDER_KEY not in everything
    assert CLIENT_KEY not in everything
    # and the provider did get its key
    assert mock.received[0].headers["Authorization"] == f"Bearer {PROVIDER_KEY}"


@pytest.mark.parametrize(
    "extra",
    [
        {"base_url": "http://127.0.0.1:1/v1", "api_base": "http://127.0.0.1:1", "url": "http://127.0.0.1:1"},
        {"provider": "elsewhere", "extra_headers": {"Host": "evil"}},
    ],
)
async def test_no_request_field_or_header_redirects_the_proxy(proxy, mock_upstream, extra):
    mock, url = mock_upstream
    client = await proxy(make_config(url))
    headers = {"Host": "127.0.0.1:1", "X-Forwarded-Host": "127.0.0.1:1", "X-Upstream-Url": "http://127.0.0.1:1/v1", "Forwarded": "host=127.0.0.1:1"}
    resp = await client.post(URL, json=chat_body(**extra), headers=headers)
    assert resp.status == 200
    assert len(mock.received) == 1  # it went to the configured upstream, and only there
    sent = mock.received[0]
    assert sent.path == "/v1/chat/completions"
    assert "X-Forwarded-Host" not in sent.headers and "X-Upstream-Url" not in sent.headers


async def test_cookies_a_provider_sets_never_reach_later_requests(mock_upstream):
    """The shared upstream session keeps no cookies (one client's must not ride on another's)."""
    from aiohttp import web
    from aiohttp.test_utils import TestClient, TestServer

    from router.server.app import create_app

    seen_cookies: list[str] = []

    async def chat(request: web.Request) -> web.Response:
        seen_cookies.append(request.headers.get("Cookie", ""))
        response = web.json_response({"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]})
        response.set_cookie("session", "client-a-secret")
        return response

    upstream = web.Application()
    upstream.router.add_post("/v1/chat/completions", chat)
    server = TestServer(upstream, host="localhost")  # a hostname: aiohttp's default jar keeps cookies for those
    await server.start_server()
    client = TestClient(TestServer(await create_app(make_config(str(server.make_url("/v1")))), host="127.0.0.1"))
    await client.start_server()
    try:
        for _ in range(2):
            assert (await client.post(URL, json=chat_body())).status == 200
        assert seen_cookies == ["", ""]
    finally:
        await client.close()
        await server.close()
