"""Paths the proxy does not serve: a 404 that says what is served, counted and logged; the root answers."""

from __future__ import annotations

import logging

import pytest

from router.http.unknown_paths import SUPPORTED_ENDPOINTS
from tests.support.config import chat_body, make_config
async def unknown_path_count(client, api: str) -> float:
    text = await (await client.get("/metrics")).text()
    line = next((l for l in text.splitlines() if l.startswith(f'pinch_router_unknown_path_requests_total{{api="{api}"}}')), None)
    return float(line.rsplit(" ", 1)[1]) if line else 0.0


@pytest.mark.parametrize(
    ("method", "path", "api", "named"),
    [
        # a served API at the wrong depth (a base URL without /v1, or with one too many) is told where it is
        ("POST", "/messages", "anthropic_messages", "the Anthropic Messages API is served at POST /v1/messages, not /messages"),
        ("POST", "/v1/v1/messages", "anthropic_messages", "set the client's base URL to http://<host>:<port> (no /v1)"),
        ("POST", "/responses", "openai_responses", "the OpenAI Responses API is served at POST /v1/responses, not /responses"),
        ("POST", "/v1/embeddings", "openai_embeddings", "the OpenAI embeddings API (/v1/embeddings) is not served by pinch-router yet"),
        ("POST", "/chat/completions", "other", "POST /chat/completions is not an endpoint of pinch-router"),
        ("GET", "/v1/nothing-here", "other", "GET /v1/nothing-here is not an endpoint of pinch-router"),
    ],
)
async def test_an_unknown_path_is_a_404_listing_the_endpoints_counted_and_logged(proxy, path, method, api, named, caplog):
    client = await proxy(make_config())
    before = await unknown_path_count(client, api)
    with caplog.at_level(logging.WARNING, logger="pinch_router.app"):
        response = await client.request(method, path, json=chat_body())
    answer = await response.json()
    error = answer["error"]
    if "/messages" in path:  # a Messages client's base URL gone wrong: told in Anthropic's shape, as a 400, which Claude Code shows
        assert response.status == 400
        assert answer["type"] == "error" and error["type"] == "invalid_request_error"
    else:
        assert response.status == 404
        assert error["type"] == "invalid_request_error" and error["code"] == "not_found"
    assert named in error["message"]
    assert all(endpoint in error["message"] for endpoint in SUPPORTED_ENDPOINTS)
    assert await unknown_path_count(client, api) == before + 1
    (record,) = [r for r in caplog.records if r.getMessage() == "unknown_path"]
    assert (record.method, record.path, record.api) == (method, path, api)


@pytest.mark.parametrize("method", ["GET", "HEAD"])
async def test_the_root_answers_200(proxy, method):
    client = await proxy(make_config(server={"api_keys": ["k"]}))  # a health check needs no key
    response = await client.request(method, "/")
    assert response.status == 200
    if method == "GET":
        assert (await response.json())["endpoints"] == list(SUPPORTED_ENDPOINTS)


async def test_every_listed_endpoint_is_served(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    for endpoint in SUPPORTED_ENDPOINTS:
        method, path = endpoint.split(" ")
        response = await client.request(method, path, json=chat_body() if path == "/v1/chat/completions" else {})
        assert response.status != 404, endpoint


async def test_a_wrong_method_on_a_served_path_stays_405(proxy):
    client = await proxy(make_config())
    response = await client.get("/v1/chat/completions")
    assert response.status == 405


async def test_an_error_to_a_messages_shaped_request_is_in_anthropics_shape_wherever_it_is_raised(proxy):
    """A ``/messages`` path at any depth is Anthropic's (ANTHROPIC_BASE_URL ending in /v1 makes Claude Code ask
    /v1/v1/messages), and an ``anthropic-version`` header marks an Anthropic client on a path that names no API (a
    path of its own that is no endpoint, a refused key on /v1/models) — never on another API's path (issue #42)."""
    client = await proxy(make_config(server={"api_keys": ["k"]}))
    anthropic = {"anthropic-version": "2023-06-01", "x-api-key": "k"}
    unknown = await client.post("/v1/complete", json={}, headers=anthropic)
    assert unknown.status == 404 and (await unknown.json())["error"]["type"] == "not_found_error"
    refused = await client.post("/v1/messages", json={}, headers={"anthropic-version": "2023-06-01", "x-api-key": "wrong"})
    body = await refused.json()
    assert refused.status == 401 and body == {
        "type": "error", "error": {"type": "authentication_error", "message": refused_message(await refused.read())}, "request_id": refused.headers["request-id"],
    }
    refused_elsewhere = await client.get("/v1/models", headers={"anthropic-version": "2023-06-01"})
    assert refused_elsewhere.status == 401 and (await refused_elsewhere.json())["type"] == "error"
    openai = await client.post("/v1/complete", json={}, headers={"Authorization": "Bearer k"})
    assert openai.status == 404 and (await openai.json())["error"]["code"] == "not_found"  # other clients: OpenAI's
    chat_path = await client.post("/v1/chat/completions", json={}, headers={"anthropic-version": "2023-06-01", "x-api-key": "wrong"})
    assert chat_path.status == 401 and (await chat_path.json())["error"]["code"] == "invalid_api_key"  # the path's: OpenAI's


def refused_message(body: bytes) -> str:
    import orjson

    return orjson.loads(body)["error"]["message"]


@pytest.mark.parametrize("method", ["GET", "HEAD"])
async def test_claude_codes_hello_probe_is_answered_not_logged_as_an_unknown_path(proxy, method, caplog):
    client = await proxy(make_config(server={"api_keys": ["k"]}))
    before = await unknown_path_count(client, "other")
    with caplog.at_level(logging.WARNING, logger="pinch_router.app"):
        response = await client.request(method, "/api/hello", headers={"anthropic-version": "2023-06-01"})
    assert response.status == 200
    assert not [r for r in caplog.records if r.getMessage() == "unknown_path"]
    assert await unknown_path_count(client, "other") == before
