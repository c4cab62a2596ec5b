"""Client API keys: with server.api_keys set, every endpoint but /healthz needs one."""

from __future__ import annotations

import pytest

from tests.support.config import chat_body, make_config
from tests.support.gemini_factories import gemini_body


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


# Where a client may send its key in the URL (`?key=`, as the Gemini API takes it): the Gemini API's own paths.
GEMINI_PATHS = [
    ("post", "/v1beta/models/main:generateContent", gemini_body()),
    ("post", "/v1/models/auto:generateContent", gemini_body()),
    ("post", "/v1beta/models/auto:countTokens", gemini_body()),
    ("get", "/v1beta/models", None),
    ("get", "/v1beta/models/main", None),
]


@pytest.mark.parametrize(("method", "path", "body"), GEMINI_PATHS)
async def test_a_key_in_the_url_is_accepted_on_the_gemini_apis_paths(client, method, path, body):
    resp = await getattr(client, method)(path, json=body, params={"key": "key-two"})
    assert resp.status == 200, await resp.text()


def openai_shaped(answer: dict) -> bool:
    return answer["error"]["code"] == "invalid_api_key"


def anthropic_shaped(answer: dict) -> bool:
    return answer["type"] == "error" and answer["error"]["type"] == "authentication_error"


@pytest.mark.parametrize(
    ("method", "path", "body", "shaped"),
    [
        ("post", "/v1/chat/completions", chat_body(), openai_shaped),
        ("post", "/v1/responses", {"model": "auto", "input": "hi"}, openai_shaped),
        ("post", "/v1/messages", {"model": "auto", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}, anthropic_shaped),
        ("get", "/metrics", None, openai_shaped),
        ("get", "/v1/decisions", None, openai_shaped),
        ("get", "/v1/models", None, openai_shaped),
    ],
)
async def test_a_key_in_the_url_authenticates_nowhere_else(client, method, path, body, shaped):
    """A key in a URL lands in access logs and proxies' logs: only the Gemini API's clients need it.
    Elsewhere it is as if no key was sent: 401 in the path's format, saying keys go in headers."""
    resp = await getattr(client, method)(path, json=body, params={"key": "key-one"})
    assert resp.status == 401
    answer = await resp.json()
    assert shaped(answer)
    assert "header" in answer["error"]["message"] and "?key=" in answer["error"]["message"]
    with_header = await getattr(client, method)(path, json=body, headers={"Authorization": "Bearer key-one"})
    assert with_header.status == 200
