"""The Gemini wire adapter on plain data: registry, view, the signed-reasoning hooks, the body a Gemini
provider gets, the JSON-array framing, usage and the stream's end."""

from __future__ import annotations

import orjson
import pytest

from router.core.pinch import prune_results
from router.core.request_view import BodyChanges, RequestTarget
from router.core.errors import ApiError
from router.wire import adapters
from router.wire.gemini.adapter import GEMINI_ADAPTER as WIRE
from router.wire.gemini.answers import JsonArrayFraming, is_last_chunk, read_usage
from router.wire.gemini.parts import SKIP_SIGNATURE
from router.wire.gemini.paths import is_gemini_client, is_gemini_path
from router.wire.gemini.signatures import HOLD_FOR_SIGNED_LOOP
from router.wire.gemini.view import GeminiConversation
from tests.support.gemini_factories import TOOLS, call, gemini_body, model, response, user

TARGET = RequestTarget({"model": "auto", "action": "streamGenerateContent"}, {"alt": "sse"})


def view(body, target=TARGET):
    parsed = WIRE.parse(body, 2000, target)
    assert not isinstance(parsed, ApiError), parsed
    return parsed


def test_it_is_registered_and_reads_model_and_stream_from_the_path():
    assert adapters()["gemini"] is WIRE
    parsed = view(gemini_body(user("hi")))
    assert (parsed.model, parsed.stream, parsed.wire) == ("auto", True, "gemini")
    assert WIRE.stream_framing(parsed) is None
    array = view(gemini_body(user("hi")), RequestTarget({"model": "m", "action": "streamGenerateContent"}))
    assert isinstance(WIRE.stream_framing(array), JsonArrayFraming)
    assert not view(gemini_body(user("hi")), RequestTarget({"model": "m", "action": "generateContent"})).stream


def test_the_view_sees_tools_images_json_limits_thinking_and_the_users_own_words():
    png = {"inlineData": {"mimeType": "image/png", "data": "AAAA"}}
    body = gemini_body(
        user("<session_context>\nthe workspace\n</session_context>", "fix the parser"), model(call(signature="c2ln")), user(response("ok"), png),
        tools=TOOLS, systemInstruction={"parts": [{"text": "be brief"}]},
        generationConfig={"maxOutputTokens": 900, "responseMimeType": "application/json", "thinkingConfig": {"thinkingLevel": "LOW"}},
    )
    parsed = view(body)
    assert parsed.offers_tools and parsed.tools_present and parsed.has_images and parsed.json_output and parsed.thinking
    assert parsed.output_limit == 900
    assert parsed.turn_text.task == "fix the parser" and parsed.turn_text.step == 'list_directory({"dir_path":"."})'
    assert parsed.opening == ("system", "be brief", "user", "<session_context>\nthe workspace\n</session_context>\nfix the parser")
    conversation = parsed.conversation
    assert [r.id for r in conversation.tool_results()] == ["call_1"] and conversation.tool_name(conversation.result_units()[0]) == "list_directory"
    unnamed = GeminiConversation(None, [user("x"), model(call(call_id=None)), user(response("y", call_id=None))])
    assert [r.id for r in unnamed.tool_results()] == ["list_directory@2.0"]  # name and position: stable as the talk grows


def test_a_function_response_with_one_string_field_is_its_text_and_any_other_its_json():
    conversation = GeminiConversation(None, [user("x"), model(call()), user(response({"result": "r"})), model(call(call_id="c2")), user(response({"a": 1, "b": [2]}, call_id="c2"))])
    assert [r.content for r in conversation.tool_results()] == ["r", '{"a":1,"b":[2]}']
    sent = conversation.contents_with({0: "short", 1: "shorter"})
    assert sent[2]["parts"][0]["functionResponse"]["response"] == {"result": "short"}
    assert sent[4]["parts"][0]["functionResponse"]["response"] == {"output": "shorter"}


def test_passed_through_only_the_chains_changes_differ():
    body = gemini_body(user("hi"), model(call(signature="c2ln")), user(response("x" * 5000)), model("done"), user("next"), tools=TOOLS,
                       generation_config={"max_output_tokens": 9000, "thinking_config": {"thinking_budget": 8000}})
    parsed = view(body)
    same = orjson.loads(WIRE.upstream_body(body, parsed, BodyChanges("m")))
    assert same == body
    sent = orjson.loads(WIRE.upstream_body(body, parsed, BodyChanges("m", {0: "short"}, output_tokens=4000)))
    assert sent["contents"][2]["parts"][0]["functionResponse"]["response"] == {"output": "short"}
    assert sent["generation_config"] == {"max_output_tokens": 4000, "thinking_config": {"thinking_budget": 3555}}  # the client's spelling kept
    assert {k: v for k, v in sent.items() if k not in ("contents", "generation_config")} == {k: v for k, v in body.items() if k not in ("contents", "generation_config")}
    translated = orjson.loads(WIRE.upstream_body(body, parsed, BodyChanges("up-m", translated=True)))
    assert translated["model"] == "up-m" and translated["stream"] is True  # the path's facts, for the translation


def test_signatures_go_stale_only_for_a_model_that_checks_them_and_then_as_googles_placeholder():
    contents = [user("task")]
    for n in range(4):
        contents += [model(call(call_id=f"c{n}", signature=f"c2ln{n}")), user(response("r" * 3000, call_id=f"c{n}"))]
    parsed = view(gemini_body(*contents))
    conversation = parsed.conversation
    assert conversation.batch_hold(False) is None and conversation.batch_hold(True) == HOLD_FOR_SIGNED_LOOP
    rewrites, _ = prune_results(conversation, 500, 1, 400)
    first = min(rewrites)
    stale, keys = conversation.stale_signatures(first, ())
    assert stale is not None and stale.positions == ((3, 0), (5, 0), (7, 0)) and len(keys) == 3 and not stale.loop_without_reasoning
    again, _ = conversation.stale_signatures(None, keys)  # the session remembers: the very same parts on the next request
    assert again is not None and again.positions == stale.positions
    sent = orjson.loads(WIRE.upstream_body(gemini_body(*contents), parsed, BodyChanges("m", rewrites, stale=stale)))
    assert [c["parts"][0].get("thoughtSignature") for c in sent["contents"] if c["role"] == "model"] == ["c2ln0", SKIP_SIGNATURE, SKIP_SIGNATURE, SKIP_SIGNATURE]
    assert WIRE.passthrough_dropped(parsed, BodyChanges("m", stale=stale)) == ("thought signatures bound to a prefix pinch changed (3 parts, placeholder sent)",)


@pytest.mark.parametrize(("data", "last"), [
    (b'{"candidates":[{"content":{"parts":[{"text":"a"}]}}]}', False),
    (b'{"candidates":[{"content":{"parts":[]},"finishReason":"STOP"}]}', True),
    (b'{"candidates":[{"content":{"parts":[{"text":"the word \\"finishReason\\""}]}}]}', False),
])
def test_the_chunk_with_a_finish_reason_ends_the_stream(data, last):
    assert is_last_chunk(data) is last


def test_usage_metadata_is_read_with_the_cached_and_thought_tokens():
    usage = read_usage(b'{"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":60,"candidatesTokenCount":7,"thoughtsTokenCount":3,"totalTokenCount":110}}')
    assert (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens, usage.total_tokens) == (100, 60, 10, 110)


def test_the_json_array_framing_wraps_whole_events():
    framing = JsonArrayFraming()
    assert framing.events(b'data: {"a":1}\r\n\r\ndata: {"b":2}\r\n\r\n') + framing.events(b'data: {"c":3}\n\n') + framing.close() == b'[{"a":1},\r\n{"b":2},\r\n{"c":3}]'
    assert orjson.loads(JsonArrayFraming().close()) == []


def test_gemini_paths_and_clients_are_told_apart():
    assert is_gemini_path("/v1beta/models/x:generateContent") and is_gemini_path("/v1/models/x:countTokens") and is_gemini_path("/v1beta/files")
    assert not is_gemini_path("/v1/models") and not is_gemini_path("/v1/models/gpt-4o") and not is_gemini_path("/v1/chat/completions")
    assert is_gemini_client({"x-goog-api-key": ""}, {}) and is_gemini_client({}, {"key": "k"}) and not is_gemini_client({"authorization": "Bearer k"}, {})


@pytest.mark.parametrize(
    ("code", "reason"),
    [("model_not_found", "MODEL_NOT_FOUND"), ("upstream_400", "UPSTREAM_400"), ("a.b-c", "A_B_C"), ("x" * 80, "X" * 63), ("4xx", ""), ("ab", "")],
)
def test_an_error_reason_is_upper_snake_case_as_error_info_asks(code, reason):
    """error_details.proto: a reason matches [A-Z][A-Z0-9_]+[A-Z0-9], at most 63 characters; none is better than a bad one."""
    body = orjson.loads(WIRE.render_error(ApiError(404, "no such model", "invalid_request_error", code)).body)
    assert body["error"].get("details", [{}])[0].get("reason", "") == reason
