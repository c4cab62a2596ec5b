"""Thousands of mutated Gemini bodies on generateContent and streamGenerateContent: none gets a 5xx, every
refusal is in Google's shape (``{"error": {"code", "message", "status"}}``).

The bodies start from Gemini CLI 0.61.0's captured requests (tests/data/agents/gemini-cli) and have one to
three mutations each: a value anywhere replaced by another JSON value, a key removed, a key added. They go,
by a model name in the path, to a Gemini provider (passed through; the mock checks what Gemini checks) or
to a chat provider (translated), and to every framing (a whole answer, SSE, the JSON array). The proxy and
its mock run on their own loop in a thread (tests/http/test_fuzz_edge.py's ``ServedProxy``).
"""

from __future__ import annotations

import copy
import http.client
import json
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.server.app import create_app
from router.tools.mock_upstream import MockUpstream
from tests.http.test_agent_fixtures import load
from tests.http.test_fuzz_edge import ServedProxy, json_values
from tests.support.gemini_factories import gemini_and_chat_config

EXAMPLES = 700
# function_scoped_fixture: _a_whole_storm_each wraps each test's whole run, as meant (once a test, not an example)
FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
SEEDS = [load(f"gemini-cli/{name}")["body"] for name in (
    "0001-POST-v1beta-models-gemini-3-5-flash-lite-generateContent.json",
    "0002-POST-v1beta-models-gemini-3-8-flash-streamGenerateContent.json",
    "0003-POST-v1beta-models-gemini-3-8-flash-streamGenerateContent.json",
)]
PATHS = [
    f"/v1beta/models/{model}:{action}"
    for model in ("auto", "gem-main", "chat-main", "no-such-model")
    for action in ("generateContent", "streamGenerateContent?alt=sse", "streamGenerateContent")
]
SENT = {"count": 0}


class ServedGemini(ServedProxy):
    async def _start(self) -> int:
        self.upstream = TestServer(MockUpstream(record=False).app(), host="127.0.0.1")
        await self.upstream.start_server()
        config = gemini_and_chat_config(str(self.upstream.make_url("/v1")), server={"max_body_mb": 1})
        self.proxy = TestServer(await create_app(config), host="127.0.0.1")
        await self.proxy.start_server()
        return self.proxy.port

    def post_to(self, path: str, body: bytes) -> tuple[int, bytes]:
        try:
            self.conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            response = self.conn.getresponse()
            return response.status, response.read()
        except (http.client.HTTPException, OSError):
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            raise


GOOD = orjson.dumps({"contents": [{"role": "user", "parts": [{"text": "still there?"}]}]})


@pytest.fixture(scope="module")
def served() -> Iterator[ServedGemini]:
    proxy = ServedGemini()
    yield proxy
    proxy.close()


@pytest.fixture(autouse=True)
def _a_whole_storm_each(request: pytest.FixtureRequest, served: ServedGemini) -> Iterator[None]:
    """Each fuzz test sent nearly all its bodies, and the proxy still serves a good request after them —
    checked per test: the suite's workers share a module's tests out (a check of the module's total
    at its end failed whenever its tests ran on two workers)."""
    before = SENT["count"]
    yield
    if getattr(request.function, "is_hypothesis_test", False):
        assert SENT["count"] - before >= EXAMPLES * 0.9, SENT["count"] - before
        status, body = served.post_to(PATHS[0], GOOD)
        assert status == 200 and orjson.loads(body)["candidates"][0]["content"]["parts"]


def paths_in(value: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value (keys and indexes from the top)."""
    out = [here]
    if isinstance(value, dict):
        for key, inner in value.items():
            out += paths_in(inner, (*here, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            out += paths_in(inner, (*here, index))
    return out


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    body = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 3))):
        places = paths_in(body)
        place = draw(st.sampled_from(places))
        if not place:
            continue
        parent = body
        for step in place[:-1]:
            parent = parent[step]
        kind = draw(st.sampled_from(["replace", "remove", "add"]))
        last = place[-1]
        if kind == "replace":
            parent[last] = draw(json_values)
        elif kind == "remove":
            del parent[last]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["role", "parts", "text", "functionCall", "functionResponse", "inlineData", "thought", "thoughtSignature", "id", "name", "args", "response", "x"]))] = draw(json_values)
        else:
            parent.insert(last, draw(json_values))
    return body


def assert_handled(status: int, body: bytes) -> None:
    SENT["count"] += 1
    assert status < 500, (status, body[:400])
    if status == 200:
        return
    error = orjson.loads(body)["error"]
    assert error["code"] == status and isinstance(error["message"], str) and error["message"] and error["status"].isupper(), error


@FUZZ
@given(mutated(), st.sampled_from(PATHS))
def test_mutated_gemini_cli_bodies_get_an_answer_or_a_google_error(served, body, path):
    assert_handled(*served.post_to(path, json.dumps(body).encode()))


@FUZZ
@given(json_values, st.sampled_from(PATHS))
def test_any_json_value_gets_an_answer_or_a_google_error(served, value, path):
    assert_handled(*served.post_to(path, json.dumps(value).encode()))


@FUZZ
@given(st.fixed_dictionaries({}, optional={
    "contents": st.lists(st.fixed_dictionaries({}, optional={"role": st.sampled_from(["user", "model", "function", "system", None, 3]),
                                                            "parts": st.lists(json_values, max_size=3) | json_values}), max_size=4) | json_values,
    "systemInstruction": json_values, "tools": st.lists(json_values, max_size=2) | json_values, "generationConfig": json_values, "toolConfig": json_values,
}), st.sampled_from(PATHS))
def test_near_valid_gemini_bodies_get_an_answer_or_a_google_error(served, body, path):
    assert_handled(*served.post_to(path, json.dumps(body).encode()))


def test_a_good_request_succeeds(served):
    status, body = served.post_to(PATHS[0], GOOD)
    assert status == 200 and orjson.loads(body)["candidates"][0]["content"]["parts"]
