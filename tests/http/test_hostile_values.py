"""Client values the proxy copies somewhere (a header, a translated body, an error message) are made
safe there (issue #27, items 1–3): a control character in a tool's name never reaches a header, a
number no double holds never breaks a translation, and an invalid value is never echoed whole.

Through a real loopback server (the proxy in-process on 127.0.0.1) to the mock upstream.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.support.config import make_config

RESPONSES, MESSAGES, CHAT = "/v1/responses", "/v1/messages", "/v1/chat/completions"


@pytest.fixture
async def served(proxy, mock_upstream):
    mock, url = mock_upstream
    return mock, await proxy(make_config(url))


def responses_body(**extra: Any) -> dict[str, Any]:
    return {"model": "auto", "store": False, "input": "hi", **extra}


def messages_body(**extra: Any) -> dict[str, Any]:
    return {"model": "auto", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], **extra}


@pytest.mark.parametrize(
    ("path", "body", "dropped"),
    [
        (RESPONSES, responses_body(tools=[{"type": "a\nb"}]), "tool a\\x0ab"),
        (RESPONSES, responses_body(tools=[{"type": "namespace", "name": "x\r\n\x00y\x7f"}]), "tool namespace:x\\x0d\\x0a\\x00y\\x7f"),
        (MESSAGES, messages_body(tools=[{"type": "web_search_20250305", "name": "a\nb"}]), "tool a\\x0ab"),
        (MESSAGES, messages_body(tools=[{"type": "custom_server_tool", "name": "caf\u00e9\u2028\x01"}]), "tool caf\\xe9\\u2028\\x01"),
    ],
    ids=["responses-type", "responses-namespace", "messages-name", "messages-name-unicode"],
)
async def test_a_control_character_in_a_dropped_tool_is_escaped_in_the_header_not_a_dropped_connection(served, path, body, dropped):
    _, client = served
    resp = await client.post(path, json=body)
    assert resp.status == 200, await resp.text()
    assert resp.headers["x-router-dropped"] == dropped
    assert (await resp.json())["id"]  # a whole answer reached the client


async def test_a_huge_dropped_tool_name_is_clipped_in_the_header(served):
    _, client = served
    resp = await client.post(RESPONSES, json=responses_body(tools=[{"type": "t" * 60_000}]))
    assert resp.status == 200
    header = resp.headers["x-router-dropped"]
    assert len(header) < 1100 and header.endswith("(60,005 characters)")


@pytest.mark.parametrize("literal", [b"1e400", b"-1e400", b"123456789012345678901234567890", b"1e-400"])
@pytest.mark.parametrize("path", [MESSAGES, RESPONSES])
@pytest.mark.parametrize("where", ["top", "tool-schema"])
async def test_a_number_no_double_holds_is_served_on_a_translated_path(served, path, where, literal):
    mock, client = served
    body = messages_body(x="@N@") if path == MESSAGES else responses_body(x="@N@")
    if where == "tool-schema":
        schema = {"type": "object", "properties": {"n": {"type": "number", "maximum": "@N@"}}}
        tool = {"name": "f", "input_schema": schema} if path == MESSAGES else {"type": "function", "name": "f", "parameters": schema}
        body = {**body, "tools": [tool]}
        del body["x"]
    raw = orjson.dumps(body).replace(b'"@N@"', literal)
    resp = await client.post(path, data=raw, headers={"Content-Type": "application/json"})
    text = await resp.text()
    assert resp.status == 200, text
    assert "Error" not in text and "infinity" not in text
    if where == "tool-schema" and literal.endswith(b"e400"):  # no double holds it: it reached the chat provider as written
        assert mock.received[-1].path == "/v1/chat/completions" and literal in mock.received[-1].raw


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (MESSAGES, messages_body(messages=[{"role": "r" * 1_000_000, "content": "hi"}])),
        (RESPONSES, responses_body(input=[{"type": "message", "role": "r" * 1_000_000, "content": "hi"}])),
        (CHAT, {"model": "auto", "messages": [{"role": "r" * 1_000_000, "content": "hi"}]}),
        (MESSAGES, messages_body(messages=[{"role": "\x00\n" * 500_000, "content": "hi"}])),
    ],
    ids=["messages-role", "responses-role", "chat-role", "messages-control-role"],
)
async def test_an_invalid_value_is_clipped_in_the_400_not_echoed_whole(served, path, body):
    _, client = served
    resp = await client.post(path, json=body)
    raw = await resp.read()
    assert resp.status == 400
    assert len(raw) < 1024, raw[:300]
    assert "1,000,000 characters" in raw.decode()  # the error still says what was wrong, and how long it was


async def test_count_tokens_clips_an_invalid_role_too(served):
    _, client = served
    resp = await client.post("/v1/messages/count_tokens", json={"model": "auto", "messages": [{"role": "r" * 1_000_000, "content": "hi"}]})
    assert resp.status == 400 and len(await resp.read()) < 1024


@pytest.mark.parametrize("path", [MESSAGES, RESPONSES])
async def test_a_translated_stream_that_echoes_such_a_number_still_ends_as_its_format_ends(served, path):
    _, client = served
    schema = {"type": "object", "required": ["@N@"]}
    tool = {"name": "f", "input_schema": schema} if path == MESSAGES else {"type": "function", "name": "f", "parameters": schema}
    body = (messages_body if path == MESSAGES else responses_body)(stream=True, tools=[tool])
    raw = orjson.dumps(body).replace(b'"@N@"', b"-1e400")
    resp = await client.post(path, data=raw, headers={"Content-Type": "application/json"})
    text = await resp.text()
    assert resp.status == 200
    # the Responses API's last event echoes the request's tools, -1e400 and all: it is still its end
    last = [line for line in text.splitlines() if line.startswith("event: ")][-1]
    assert last == ("event: message_stop" if path == MESSAGES else "event: response.completed"), text[-400:]
    assert "upstream_stream_interrupted" not in text


@pytest.mark.parametrize("stop", [5, True, {"a": "b"}])
@pytest.mark.parametrize("api", ["anthropic", "gemini"])
async def test_a_wrong_typed_field_a_translation_reads_is_a_400_naming_it_not_a_502(proxy, mock_upstream, api, stop):
    """chat's ``stop`` is a string or an array of strings; the translation to an Anthropic or Gemini provider
    reads it, and what it cannot carry is the client's 400 in the client's format (issue #42), never a 502."""
    mock, url = mock_upstream
    client = await proxy(make_config(url, providers={"mock": {"base_url": url.removesuffix("/v1"), "api": api}}))
    resp = await client.post(CHAT, json={"model": "auto", "messages": [{"role": "user", "content": "hi"}], "stop": stop})
    body = await resp.json()
    assert resp.status == 400, body
    assert (body["error"]["param"], body["error"]["type"]) == ("stop", "invalid_request_error")
    assert not mock.received
    resp = await client.post(CHAT, json={"model": "auto", "messages": [{"role": "user", "content": "hi"}], "stop": ["\n\n", "END"]})
    assert resp.status == 200  # and the ones it can carry go over
    sent = mock.received[-1].body
    assert (sent.get("stop_sequences") or sent["generationConfig"]["stopSequences"]) == ["\n\n", "END"]
