"""The wire registry: which format a request, a path or a saved body is, from what each format declares."""

from __future__ import annotations

import pytest

from router.wire import adapters, body_format, chain_target, own_format, path_format, request_format
from router.wire.routes import match_route

ANTHROPIC = {"anthropic-version": "2023-06-01"}


@pytest.mark.parametrize(
    ("path", "headers", "wire"),
    [
        ("/v1/chat/completions", ANTHROPIC, "openai-chat"),  # the path decides, whatever the headers
        ("/v1/embeddings", ANTHROPIC, "openai-chat"),  # an OpenAI API the proxy does not serve is OpenAI's too
        ("/responses", ANTHROPIC, "openai-responses"),
        ("/v1/v1/messages", {}, "anthropic-messages"),  # at any depth
        ("/v1beta/models/auto:generateContent", ANTHROPIC, "gemini"),
        ("/v1/models/main:countTokens", {}, "gemini"),
        ("/v1beta/files/messages", {}, "gemini"),  # of several, the API named leftmost
        ("/v1/models", ANTHROPIC, "anthropic-messages"),  # a path that names no API: the client's header
        ("/v1/models", {}, "openai-chat"),  # else the proxy's own
        ("/nothing", {"x-goog-api-key": "k"}, "openai-chat"),  # a key header marks no error shape
    ],
)
def test_a_request_is_the_format_its_path_names_else_its_clients_header_says(path, headers, wire):
    assert request_format(path, headers).name == wire


def test_a_path_that_names_no_api_has_no_format_and_the_proxys_own_is_chat():
    assert path_format("/v1/models") is None and path_format("/v1/models/gpt-4o") is None
    assert own_format().name == "openai-chat"


@pytest.mark.parametrize(
    ("pattern", "path", "parts"),
    [
        ("/v1/messages", "/v1/messages", {}),
        ("/v1/messages", "/v1/messages/count_tokens", None),
        ("/v1beta/models/{model:[^/:]+}:{action:generateContent|streamGenerateContent}", "/v1beta/models/auto:streamGenerateContent", {"model": "auto", "action": "streamGenerateContent"}),
        ("/v1beta/models/{model:[^/:]+}:{action:generateContent|streamGenerateContent}", "/v1beta/models/auto:countTokens", None),
        ("/items/{item}", "/items/a.b", {"item": "a.b"}),
        ("/items/{item}", "/items/a/b", None),
    ],
)
def test_a_route_pattern_matches_as_aiohttp_matches_it(pattern, path, parts):
    assert match_route(pattern, path) == parts


@pytest.mark.parametrize("adapter", list(adapters().values()), ids=list(adapters()))
def test_every_endpoint_a_format_lists_is_a_route_it_declares(adapter):
    routes = [("POST", p) for p in adapter.paths] + [(e.method, e.path) for e in adapter.endpoints]
    for listed in adapter.api.listed:
        method, _, path = listed.partition(" ")
        concrete = path.replace("{model}", "some-model")
        assert any(m == method and match_route(p, concrete) is not None for m, p in routes), listed


@pytest.mark.parametrize("adapter", list(adapters().values()), ids=list(adapters()))
def test_a_saved_body_of_a_format_is_taken_as_sent_to_one_of_its_chain_paths(adapter):
    found = chain_target(adapter.api.saved_path)
    assert found is not None and found[0] is adapter


@pytest.mark.parametrize(
    ("body", "headers", "wire"),
    [
        ({"model": "auto", "messages": [{"role": "user", "content": "hi"}]}, {}, "openai-chat"),
        ({"messages": [{"role": "user", "content": "hi"}]}, ANTHROPIC, "anthropic-messages"),
        ({"system": "be brief", "messages": [{"role": "user", "content": "hi"}]}, {}, "anthropic-messages"),
        ({"input": "hi", "store": False}, {}, "openai-responses"),
        ({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}, {}, "gemini"),
        ({"messages": [], "contents": []}, {}, "openai-chat"),
    ],
)
def test_a_saved_body_is_the_format_that_claims_it_else_chat(body, headers, wire):
    assert body_format(body, headers).name == wire


def test_no_two_formats_declare_the_same_endpoint():
    routes = [(e.method, e.path) for a in adapters().values() for e in a.endpoints] + [("POST", p) for a in adapters().values() for p in a.paths]
    assert len(routes) == len(set(routes))
