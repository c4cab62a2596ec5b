"""Thousands of generated malformed requests: every one gets a 4xx OpenAI error, never a 5xx.

The proxy and its mock upstream run on their own event loop in a thread; the
hypothesis tests talk to them with plain blocking HTTP, so each generated
request really crosses a socket.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.server.app import create_app
from router.tools.mock_upstream import MockUpstream
from tests.support.config import make_config
FUZZ = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


class ServedProxy:
    """The proxy on a background loop; ``post`` sends raw bytes and returns (status, body)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.port = self._run(self._start())
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    async def _start(self) -> int:
        self.upstream = TestServer(MockUpstream().app(), host="127.0.0.1")
        await self.upstream.start_server()
        config = make_config(str(self.upstream.make_url("/v1")), server={"max_body_mb": 1})
        self.proxy = TestServer(await create_app(config), host="127.0.0.1")
        await self.proxy.start_server()
        return self.proxy.port

    async def _stop(self) -> None:
        await self.proxy.close()
        await self.upstream.close()

    def post(self, body: bytes, content_type: str | None = "application/json") -> tuple[int, bytes]:
        headers = {"Content-Type": content_type} if content_type is not None else {}
        try:
            self.conn.request("POST", "/v1/chat/completions", body=body, headers=headers)
            response = self.conn.getresponse()
            return response.status, response.read()
        except (http.client.HTTPException, OSError):
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            raise

    def close(self) -> None:
        self.conn.close()
        self._run(self._stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def served() -> Iterator[ServedProxy]:
    proxy = ServedProxy()
    yield proxy
    proxy.close()


def assert_refused_properly(status: int, body: bytes) -> None:
    assert 400 <= status < 500, (status, body[:300])
    error = orjson.loads(body)["error"]
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["type"], str) and isinstance(error["code"], str)


def encode(value: Any) -> bytes:
    """Stdlib json: unlike orjson it writes integers of any size, which clients may send."""
    return json.dumps(value).encode()


def assert_handled(status: int, body: bytes) -> None:
    """A generated body may happen to be valid (200); anything else is a clean 4xx."""
    if status != 200:
        assert_refused_properly(status, body)


json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
roles = st.sampled_from(["user", "assistant", "system", "tool", "developer", "robot", "", "USER", None, 3])
contents = st.one_of(
    st.text(max_size=30),
    st.none(),
    json_values,
    st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url", 7, None])}, optional={"text": json_values}), max_size=3),
)
tool_calls = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "id": st.text(max_size=5) | st.integers(),
            "type": st.just("function"),
            "function": st.fixed_dictionaries({}, optional={"name": st.text(max_size=5) | st.none(), "arguments": json_values}),
        },
    ),
    max_size=3,
) | json_scalars
messages = st.fixed_dictionaries(
    {},
    optional={"role": roles, "content": contents, "tool_calls": tool_calls, "tool_call_id": json_scalars, "name": json_values},
)
chat_bodies = st.fixed_dictionaries(
    {},
    optional={
        "model": st.sampled_from(["auto", "main", "unknown-model", "", None, 42]),
        "messages": st.lists(messages, max_size=4) | json_values,
        "stream": st.booleans() | json_scalars,
        "max_tokens": st.integers(min_value=-(10**6), max_value=10**30) | json_scalars,
        "tools": st.lists(json_values, max_size=3) | json_scalars,
        "response_format": json_values,
        "stream_options": json_values,
    },
)


@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes_are_refused_cleanly(served, raw):
    assert_handled(*served.post(raw))


@FUZZ
@given(json_values)
def test_any_json_value_is_refused_or_served_never_crashes(served, value):
    assert_handled(*served.post(encode(value)))


@FUZZ
@given(chat_bodies)
def test_near_valid_chat_bodies_are_refused_or_served(served, body):
    assert_handled(*served.post(encode(body)))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.sampled_from(["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "", None, "application/jsonx"]), st.binary(max_size=50))
def test_wrong_content_types_are_415(served, content_type, raw):
    status, body = served.post(raw, content_type)
    assert status == 415
    assert_refused_properly(status, body)


@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 100_000,
        b'{"messages": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        b'{"messages": [{"role": "user", "content": "\xed\xa0\x80"}]}',  # a lone surrogate, invalid UTF-8
        b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1e400}',
        b'{"messages": [{"role": "user", "content": "hi"}]}' + b" " * (1024 * 1024 + 1),
    ],
)
def test_pathological_bodies_are_refused(served, raw):
    assert_refused_properly(*served.post(raw))


def test_a_good_request_still_succeeds_after_the_storm(served):
    status, body = served.post(orjson.dumps({"model": "auto", "messages": [{"role": "user", "content": "still there?"}]}))
    assert status == 200
    assert orjson.loads(body)["choices"][0]["message"]["content"]
