"""The Gemini API through the proxy, in-process: its paths, its errors, pass-through and translation, pinch, limits.

One loopback mock speaks both APIs: ``gem-main`` behind an ``api: gemini`` provider (passed through; the
mock refuses a missing or altered thought signature as Gemini 3 does), ``chat-main`` behind an
OpenAI-compatible one.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest

from router.tools.mock_gemini import call_signature
from router.wire.gemini.parts import SKIP_SIGNATURE
from tests.support.gemini_factories import TOOLS, call, gemini_and_chat_config, gemini_body, model, response, user

GENERATE = "/v1beta/models/{}:generateContent"
STREAM = "/v1beta/models/{}:streamGenerateContent?alt=sse"


@pytest.fixture
async def served(proxy, mock_upstream, monkeypatch):
    monkeypatch.setenv("MOCK_PROVIDER_KEY", "provider-secret")
    mock, url = mock_upstream
    return await proxy(gemini_and_chat_config(url)), mock


def assert_google_error(status: int, body: bytes, expected_status: int) -> dict[str, Any]:
    error = orjson.loads(body)["error"]
    assert status == expected_status and error["code"] == expected_status and isinstance(error["message"], str) and error["status"].isupper()
    return error


def signed_history() -> list[dict[str, Any]]:
    """A tool round trip as the Gemini mock answered it: its call signed, the result given."""
    made = call(call_id="call_mock_1_0")
    made["thoughtSignature"] = call_signature(made["functionCall"])
    return [user("list the files"), model(made), user(response("main.py\nnotes.txt", call_id="call_mock_1_0"))]


@pytest.mark.parametrize("path", [GENERATE, STREAM, "/v1/models/{}:generateContent", "/v1beta/models/{}:streamGenerateContent"])
@pytest.mark.parametrize("name", ["auto", "gem-main", "chat-main"])
async def test_every_path_and_model_name_is_served(served, path, name):
    client, _ = served
    resp = await client.post(path.format(name), json=gemini_body(user("hi")))
    body = await resp.read()
    assert resp.status == 200, body
    assert resp.headers["x-router-model"] == ("gem-main" if name == "auto" else name)
    assert resp.headers["x-router-wire"] == ("gemini->gemini" if name != "chat-main" else "gemini->openai-chat")
    if "alt=sse" in path:
        assert resp.content_type == "text/event-stream" and body.startswith(b"data: {")
    elif "stream" in path:  # Google's JSON array, without alt=sse
        chunks = orjson.loads(body)
        assert resp.content_type == "application/json" and chunks[-1]["candidates"][0]["finishReason"] == "STOP"
        assert "".join(p.get("text", "") for c in chunks for p in c["candidates"][0]["content"]["parts"]).startswith("Hello")
    else:
        assert orjson.loads(body)["candidates"][0]["content"]["parts"][0]["text"].startswith("Hello")


async def test_the_decision_row_names_the_wire_and_the_session_is_the_fingerprint(served):
    client, _ = served
    for _ in range(2):
        resp = await client.post(GENERATE.format("chat-main"), json=gemini_body(user("hi"), systemInstruction={"parts": [{"text": "be brief"}]}))
        await resp.read()
    rows = (await (await client.get("/v1/decisions", params={"session": resp.headers["x-router-session"]})).json())["data"]
    assert [(r["wire_in"], r["wire_out"], r["session_source"], r["requested_model"]) for r in rows] == [("gemini", "openai-chat", "fingerprint", "chat-main")] * 2


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "reason"),
    [
        ("POST", GENERATE.format("no-such-model"), gemini_body(), 404, "model_not_found"),
        ("POST", "/v1beta/models/auto:bogus", gemini_body(), 404, "not_found"),
        ("GET", GENERATE.format("auto"), None, 405, "method_not_allowed"),
        ("POST", GENERATE.format("auto"), {"contents": []}, 400, "invalid_request"),
        ("POST", GENERATE.format("auto"), {"contents": [{"role": "system", "parts": [{"text": "x"}]}]}, 400, "invalid_request"),
        ("POST", GENERATE.format("auto"), {"contents": [{"parts": []}]}, 400, "invalid_request"),
        ("POST", GENERATE.format("auto"), [1, 2], 400, "invalid_request"),
        ("POST", "/v1beta/files", {}, 404, "not_found"),
    ],
)
async def test_every_refusal_on_a_gemini_path_is_in_googles_shape(served, method, path, body, status, reason):
    client, _ = served
    resp = await client.request(method, path, json=body)
    error = assert_google_error(resp.status, await resp.read(), status)
    if status != 405:
        assert error["details"][0]["reason"] == reason.upper()  # UPPER_SNAKE_CASE, as ErrorInfo's reasons are


async def test_malformed_json_and_a_wrong_content_type_are_googles_errors_too(served):
    client, _ = served
    resp = await client.post(GENERATE.format("auto"), data=b'{"contents": [', headers={"Content-Type": "application/json"})
    assert_google_error(resp.status, await resp.read(), 400)
    resp = await client.post(GENERATE.format("auto"), data=b"hi", headers={"Content-Type": "text/plain"})
    assert_google_error(resp.status, await resp.read(), 415)


async def test_the_key_comes_as_gemini_clients_send_it_and_is_never_logged(proxy, mock_upstream, caplog):
    _, url = mock_upstream
    client = await proxy(gemini_and_chat_config(url, server={"api_keys": ["right-key"]}))
    caplog.set_level(logging.INFO)
    for headers, query, status in [({"x-goog-api-key": "right-key"}, {}, 200), ({}, {"key": "right-key"}, 200),
                                   ({"x-goog-api-key": "wrong-key"}, {}, 401), ({}, {"key": "wrong-key"}, 401), ({}, {}, 401)]:
        resp = await client.post(GENERATE.format("chat-main"), json=gemini_body(), headers=headers, params=query)
        body = await resp.read()
        if status == 401:
            assert_google_error(resp.status, body, 401)
        else:
            assert resp.status == 200, body
    # the proxy's own log lines (the test server's access log is not the proxy's: `serve` runs without one)
    logged = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records if r.name.startswith("pinch_router"))
    assert "unauthorized" in logged and "wrong-key" not in logged and "right-key" not in logged


async def test_count_tokens_and_the_model_lists(served):
    client, mock = served
    before = len(mock.received)
    resp = await client.post("/v1beta/models/auto:countTokens", json=gemini_body(user("how many tokens is this?")))
    assert resp.status == 200 and (await resp.json())["totalTokens"] > 0 and len(mock.received) == before
    resp = await client.post("/v1beta/models/auto:countTokens", json={"generateContentRequest": {"model": "models/auto", **gemini_body(user("x"))}})
    assert (await resp.json())["totalTokens"] > 0
    resp = await client.post("/v1beta/models/auto:countTokens", json={"contents": "no"})
    assert_google_error(resp.status, await resp.read(), 400)
    listed = await (await client.get("/v1beta/models")).json()
    assert [m["name"] for m in listed["models"]] == ["models/gem-main", "models/chat-main", "models/auto"]
    one = await (await client.get("/v1beta/models/gem-main")).json()
    assert one["inputTokenLimit"] == 32_000 and "generateContent" in one["supportedGenerationMethods"]
    resp = await client.get("/v1beta/models/nope")
    assert_google_error(resp.status, await resp.read(), 404)
    # GET /v1/models: the OpenAI list, but Google's for a client that sends its key as Gemini's do
    assert (await (await client.get("/v1/models")).json())["object"] == "list"
    assert "models" in await (await client.get("/v1/models", headers={"x-goog-api-key": "k"})).json()
    assert "models" in await (await client.get("/v1/models", params={"key": "k"})).json()


async def test_passed_through_the_body_arrives_as_the_client_sent_it_signatures_included(served):
    client, mock = served
    body = gemini_body(*signed_history(), tools=TOOLS, safetySettings=[{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}],
                       generationConfig={"temperature": 0.3, "thinkingConfig": {"includeThoughts": True}}, vendorField={"kept": [1, 2.5]})
    resp = await client.post(GENERATE.format("gem-main"), json=body, headers={"x-goog-api-key": "client-key"})
    assert resp.status == 200, await resp.text()
    received = mock.received[-1]
    assert received.body == body and received.path == "/v1/models/gemini-mock:generateContent"
    assert received.headers["x-goog-api-key"] == "provider-secret"  # the provider's key, never the client's


async def test_an_altered_signature_is_refused_by_the_mock_as_gemini_does_and_relayed_in_googles_shape(served):
    client, _ = served
    history = signed_history()
    history[1]["parts"][0]["thoughtSignature"] = "QUJDRA=="  # not the mock's
    resp = await client.post(GENERATE.format("gem-main"), json=gemini_body(*history, tools=TOOLS))
    error = assert_google_error(resp.status, await resp.read(), 400)
    assert "Corrupted thought signature" in error["message"]


async def test_a_call_without_its_signature_goes_with_googles_placeholder(served):
    """A session whose loop began on a chat model (no signatures) moves to Gemini: Gemini 3 would refuse the
    unsigned call of the current turn; the proxy sends Google's placeholder in its place, nothing else."""
    client, mock = served
    history = signed_history()
    del history[1]["parts"][0]["thoughtSignature"]
    resp = await client.post(GENERATE.format("gem-main"), json=gemini_body(*history, tools=TOOLS))
    assert resp.status == 200, await resp.text()
    sent = mock.received[-1].body["contents"]
    assert sent[1]["parts"][0] == {**history[1]["parts"][0], "thoughtSignature": SKIP_SIGNATURE} and sent[0] == history[0] and sent[2] == history[2]


async def test_a_translated_request_gets_googles_placeholder_on_each_turns_first_call(served):
    client, mock = served
    chat = {"model": "gem-main", "messages": [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "list_directory", "arguments": '{"dir_path": "."}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "main.py"},
    ], "tools": [{"type": "function", "function": {"name": "list_directory", "parameters": {"type": "object"}}}]}
    resp = await client.post("/v1/chat/completions", json=chat)
    assert resp.status == 200, await resp.text()
    assert resp.headers["x-router-wire"] == "openai-chat->gemini"
    sent = mock.received[-1].body["contents"]
    assert sent[1]["parts"][0]["thoughtSignature"] == SKIP_SIGNATURE and sent[2]["parts"][0]["functionResponse"]["response"] == {"output": "main.py"}
    assert (await resp.json())["choices"][0]["message"]["content"].startswith("Hello from the mock upstream. (tool said: main.py")


async def test_an_output_limit_above_the_models_is_clamped_with_the_thinking_budget(served):
    client, mock = served
    body = gemini_body(user("hi"), generationConfig={"maxOutputTokens": 64_000, "thinkingConfig": {"thinkingBudget": 32_000}})
    resp = await client.post(GENERATE.format("gem-main"), json=body)
    assert resp.status == 200 and resp.headers["x-router-max-tokens"] == "4000"
    sent = mock.received[-1].body["generationConfig"]
    assert sent == {"maxOutputTokens": 4000, "thinkingConfig": {"thinkingBudget": 2000}}
    resp = await client.post(GENERATE.format("chat-main"), json=body)
    assert mock.received[-1].body["max_tokens"] == 4000


def long_session(results: int, chars: int = 6000) -> list[dict[str, Any]]:
    contents = [user("read the parts")]
    for n in range(results):
        made = call("read_file", call_id=f"c{n}", file_path=f"part{n}.txt")
        made["thoughtSignature"] = call_signature(made["functionCall"])
        contents += [model(made), user(response(f"part {n}\n" + "x" * chars, name="read_file", call_id=f"c{n}"))]
    return contents


async def test_pinch_compresses_old_function_responses_only(proxy, mock_upstream, monkeypatch):
    monkeypatch.setenv("MOCK_PROVIDER_KEY", "provider-secret")
    mock, url = mock_upstream
    pinch = {"enabled": True, "budget_tokens": 2000, "keep_last_turns": 2, "max_summarize_chars": 1000}
    client = await proxy(gemini_and_chat_config(url, pinch=pinch, middlewares=["session-fingerprint", "pinch-prune", "capability-gate", "upstream-forward"]))
    contents = long_session(6)
    resp = await client.post(GENERATE.format("gem-main"), json=gemini_body(*contents), headers={"x-router-session": "s1"})
    assert resp.status == 200, await resp.text()
    assert int(resp.headers["x-router-pinch-saved"]) > 0
    sent = mock.received[-1].body["contents"]
    assert len(sent) == len(contents)
    changed = [c for c, (a, b) in enumerate(zip(contents, sent, strict=True)) if a != b]
    assert changed and all(contents[c]["role"] == "user" and "functionResponse" in contents[c]["parts"][0] for c in changed)
    assert changed[-1] < len(contents) - 4  # the last two turns are kept
    for c in changed:
        before, after = contents[c]["parts"][0]["functionResponse"], sent[c]["parts"][0]["functionResponse"]
        assert {k: v for k, v in before.items() if k != "response"} == {k: v for k, v in after.items() if k != "response"}
        assert after["response"]["output"].startswith("[pinch-router") or "pinch-router removed" in after["response"]["output"]
