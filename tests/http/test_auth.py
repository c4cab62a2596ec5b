"""Client API keys: with server.api_keys set, every endpoint but /healthz needs one."""

from __future__ import annotations

import pytest

from tests.support.config import chat_body, make_config
@pytest.fixture
async def client(proxy, mock_upstream):
    _, url = mock_upstream
    return await proxy(make_config(url, server={"api_keys": ["key-one", "key-two"]}))


@pytest.mark.parametrize(
    ("method", "path"),
    [("post", "/v1/chat/completions"), ("get", "/v1/models"), ("get", "/v1/unknown")],
)
@pytest.mark.parametrize("authorization", [None, "Bearer wrong", "key-one", "Basic key-one", "Bearer "])
async def test_requests_without_a_valid_key_get_401(client, method, path, authorization):
    headers = {"Authorization": authorization} if authorization is not None else {}
    resp = await getattr(client, method)(path, json=chat_body(), headers=headers)
    assert resp.status == 401
    assert (await resp.json())["error"]["code"] == "invalid_api_key"


@pytest.mark.parametrize("key", ["key-one", "key-two"])
async def test_any_configured_key_is_accepted(client, key):
    resp = await client.post("/v1/chat/completions", json=chat_body(), headers={"Authorization": f"Bearer {key}"})
    assert resp.status == 200


async def test_healthz_needs_no_key(client):
    assert (await client.get("/healthz")).status == 200


async def test_the_client_key_is_never_forwarded_upstream(client, mock_upstream):
    mock, _ = mock_upstream
    await client.post("/v1/chat/completions", json=chat_body(), headers={"Authorization": "Bearer key-one"})
    sent = mock.received[-1].headers
    assert "key-one" not in " ".join(sent.values())
    assert "Authorization" not in sent
