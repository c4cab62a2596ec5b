"""The chat endpoint's edge: every bad input gets an OpenAI error with a fitting status."""

from __future__ import annotations

import gzip
import os
import re
import time
import zlib

import orjson
import pytest

from router.http.request_ids import RequestIds
from tests.support.config import chat_body, make_config
URL = "/v1/chat/completions"


def assert_openai_error(payload: dict, code: str | None = None) -> None:
    error = payload["error"]
    assert set(error) >= {"message", "type", "code"}
    assert isinstance(error["message"], str) and error["message"]
    if code is not None:
        assert error["code"] == code


@pytest.fixture
async def client(proxy, mock_upstream):
    _, url = mock_upstream
    return await proxy(make_config(url, server={"max_body_mb": 0.01}))


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"{not json", "invalid_json"),
        (b"\xff\xfe{}", "invalid_json"),
        (b"[" * 5000 + b"]" * 5000, "invalid_json"),
        (b"[]", "invalid_request"),
        (b'"just a string"', "invalid_request"),
    ],
)
async def test_malformed_json_is_400(client, raw, code):
    resp = await client.post(URL, data=raw, headers={"Content-Type": "application/json"})
    assert resp.status == 400
    assert_openai_error(await resp.json(), code)
    assert resp.headers["x-router-request-id"].startswith("req_")


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "auto"}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": "hello"}, "messages"),
        ({"messages": ["hello"]}, "messages[0]"),
        ({"messages": [{"content": "hi"}]}, "messages[0].role"),
        ({"messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 42}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": [{"text": "no type"}]}]}, "messages[0].content[0]"),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}, "messages[0].content[0].text"),
        ({"messages": [{"role": "tool", "content": "result"}]}, "messages[0].tool_call_id"),
        ({"messages": [{"role": "assistant", "tool_calls": {"id": "x"}}]}, "messages[0].tool_calls"),
        ({"messages": [{"role": "assistant", "tool_calls": [{"id": "x", "function": {"name": "f"}}]}]}, "messages[0].tool_calls[0].function.arguments"),
        ({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}]}, "messages[0].tool_calls[0].id"),
        ({"messages": [{"role": "user", "content": "hi", "tool_calls": []}]}, "messages[0].tool_calls"),
        ({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}, "x"]}]}, "messages[1].tool_calls[1]"),
        ({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [{"id": "a", "function": "f"}]}]}, "messages[1].tool_calls[0].function"),
        ({"messages": [{"role": "user", "content": "x"}], "tools": {"a": 1}}, "tools"),
        ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {}}]}, "tools[0].function.name"),
        ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": []}}]}, "tools[0].function.parameters"),
        ({"messages": [{"role": "user", "content": "x"}], "model": 7}, "model"),
        ({"messages": [{"role": "user", "content": "x"}], "stream": "yes"}, "stream"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": -5}, "max_tokens"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": True}, "max_tokens"),
        ({"messages": [{"role": "user", "content": "x"}], "response_format": "json"}, "response_format"),
        ({"messages": [{"role": "user", "content": "x"}], "response_format": {}}, "response_format.type"),
    ],
)
async def test_wrong_shapes_are_400_naming_the_field(client, body, param):
    resp = await client.post(URL, json=body)
    assert resp.status == 400
    payload = await resp.json()
    assert_openai_error(payload, "invalid_request")
    assert payload["error"]["param"] == param


async def test_wrong_content_type_is_415(client):
    resp = await client.post(URL, data=b'{"messages": []}', headers={"Content-Type": "text/plain"})
    assert resp.status == 415
    assert_openai_error(await resp.json(), "unsupported_media_type")


async def test_missing_content_type_is_415(client):
    resp = await client.post(URL, data=b"{}", headers={"Content-Type": ""})
    assert resp.status == 415


async def test_body_over_the_limit_is_413(client):
    big = chat_body("x" * 20_000)  # the fixture's limit is 0.01 MB
    resp = await client.post(URL, json=big)
    assert resp.status == 413
    assert_openai_error(await resp.json(), "request_too_large")


async def test_body_over_the_limit_without_content_length_is_413(client):
    async def chunks():
        for _ in range(30):
            yield b" " * 1000

    resp = await client.post(URL, data=chunks(), headers={"Content-Type": "application/json"})
    assert resp.status == 413


@pytest.mark.parametrize("piece", [1, 7, 1000], ids=["byte by byte", "7 bytes", "1000 bytes"])
async def test_a_body_sent_in_pieces_reaches_the_upstream_whole(client, mock_upstream, piece):
    mock, _ = mock_upstream
    raw = orjson.dumps(chat_body("é naïve ✓ " * 40))  # multi-byte characters split across pieces too

    async def pieces():
        for at in range(0, len(raw), piece):
            yield raw[at : at + piece]

    resp = await client.post(URL, data=pieces(), headers={"Content-Type": "application/json"})
    assert resp.status == 200
    assert mock.received[0].body["messages"] == orjson.loads(raw)["messages"]


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_a_compressed_body_that_inflates_past_the_limit_is_413(client, encoding):
    inflated = orjson.dumps(chat_body("x" * 20_000))  # twice the fixture's 0.01 MB once decoded
    packed = gzip.compress(inflated) if encoding == "gzip" else zlib.compress(inflated)
    assert len(packed) < 10_000
    resp = await client.post(URL, data=packed, headers={"Content-Type": "application/json", "Content-Encoding": encoding})
    assert resp.status == 413
    assert_openai_error(await resp.json(), "request_too_large")


async def test_unknown_fields_pass_through_untouched(client, mock_upstream):
    mock, _ = mock_upstream
    body = chat_body(
        "hi",
        temperature=0.2,
        seed=7,
        vendor_extension={"nested": [1, 2, {"x": None}]},
        stream_options=None,
    )
    body["messages"][0]["cache_control"] = {"type": "ephemeral"}
    body["messages"].append({"role": "assistant", "content": "ok", "reasoning_content": "thought"})
    body["messages"].append({"role": "user", "content": [{"type": "text", "text": "go"}, {"type": "future_part", "blob": 1}]})
    resp = await client.post(URL, json=body)
    assert resp.status == 200, await resp.text()
    sent = mock.received[-1].body
    assert sent["model"] == "up-main"
    for key in ("temperature", "seed", "vendor_extension", "stream_options"):
        assert sent[key] == body[key]
    assert sent["messages"] == body["messages"]


async def test_unknown_path_and_method_are_openai_errors(client):
    resp = await client.get("/v1/nothing-here")
    assert resp.status == 404
    assert_openai_error(await resp.json(), "not_found")
    resp = await client.get(URL)
    assert resp.status == 405
    assert_openai_error(await resp.json(), "method_not_allowed")


async def test_models_lists_catalogue_and_aliases(client):
    resp = await client.get("/v1/models")
    assert resp.status == 200
    payload = await resp.json()
    ids = [m["id"] for m in payload["data"]]
    assert payload["object"] == "list"
    assert ids == ["main", "auto"]


async def test_healthz(client):
    resp = await client.get("/healthz")
    assert resp.status == 200
    assert await resp.json() == {"status": "ok"}


async def test_missing_model_means_route_for_me(client):
    resp = await client.post(URL, json={"messages": [{"role": "user", "content": "hi"}]})
    assert resp.status == 200
    assert resp.headers["x-router-model"] == "main"


async def test_response_headers_say_what_happened(client):
    resp = await client.post(URL, json=chat_body())
    assert resp.headers["x-router-request-id"].startswith("req_")
    assert resp.headers["x-router-model"] == "main"
    assert resp.headers["x-router-tier"] == "2"
    assert float(resp.headers["x-router-overhead-ms"]) >= 0


async def test_a_served_request_leaves_no_reference_cycle_holding_its_context(proxy, mock_upstream):
    """The parsed body is freed by reference counting when the answer is done, not left to the cyclic GC."""
    import asyncio
    import gc

    from router.contract.context import RequestContext

    _, url = mock_upstream
    client = await proxy(make_config(url))
    await (await client.post(URL, json=chat_body())).read()  # warm-up: whatever is built lazily
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for stream in (False, True):
            resp = await client.post(URL, json=chat_body(stream=stream))
            assert resp.status == 200
            await resp.read()
        await asyncio.sleep(0.01)  # the recording callbacks
        gc.collect()
        left_to_the_gc = [obj for obj in gc.garbage if isinstance(obj, RequestContext)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert left_to_the_gc == []


# --- request ids: unguessable, unique, drawn from the OS in batches ------------------------------


def test_request_ids_are_the_millisecond_of_their_batch_then_96_random_bits_and_unique_across_batches():
    ids = RequestIds()
    before = time.time_ns() // 1_000_000
    drawn = [ids.next() for _ in range(3 * RequestIds.BATCH + 7)]
    after = time.time_ns() // 1_000_000
    assert all(re.fullmatch(r"req_[0-9a-f]{11}[0-9a-f]{24}", request_id) for request_id in drawn)
    assert all(before <= int(request_id[4:15], 16) <= after for request_id in drawn)
    assert len({request_id[15:] for request_id in drawn}) == len(drawn)  # the random part alone is unique


def test_request_ids_of_a_later_batch_sort_after_the_earlier_ones():
    """The decision log's primary key then grows at its end instead of anywhere in the file."""
    ids = RequestIds()
    earlier = [ids.next() for _ in range(RequestIds.BATCH)]
    time.sleep(0.002)
    later = [ids.next() for _ in range(RequestIds.BATCH)]
    assert max(earlier) < min(later)


def test_a_forked_worker_does_not_hand_out_its_parents_ids():
    ids = RequestIds()
    ids.next()  # the parent holds a partly used batch
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the worker
        os.write(write, ids.next().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    from_child = os.read(read, 64).decode()
    os.close(read)
    assert from_child.startswith("req_") and from_child != ids.next()
