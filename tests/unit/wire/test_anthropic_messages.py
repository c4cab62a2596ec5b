"""The Anthropic Messages request as the chain reads it: validation, the chat view, tokens, write-back."""

from __future__ import annotations

import orjson
import pytest

from router.core.tokens import DEFAULT_ESTIMATOR
from router.translate.messages_to_chat import chat_view
from router.core.errors import ApiError
from router.wire.anthropic_messages.errors import error_payload, render_error
from router.wire.anthropic_messages.validation import (
    AnthropicInvalid,
    validate_messages_body,
)
from router.wire.anthropic_messages.view import (
    count_input_tokens,
    metadata_session,
    wants_json_output,
    wants_thinking,
)
from tests.support.anthropic_factories import (
    assistant,
    body,
    captured,
    image,
    reminder,
    text,
    thinking,
    tool_result,
    tool_use,
    user,
)


@pytest.mark.parametrize(
    "status, kind",
    [(400, "invalid_request_error"), (401, "authentication_error"), (404, "not_found_error"), (413, "request_too_large"),
     (429, "rate_limit_error"), (500, "api_error"), (502, "api_error"), (529, "overloaded_error")],
)
def test_errors_have_anthropics_shape_and_type_for_the_status(status: int, kind: str) -> None:
    assert error_payload(status, "nope") == {"type": "error", "error": {"type": kind, "message": "nope"}}


@pytest.mark.parametrize(
    "bad, names",
    [
        ([], "JSON object"),
        ({"model": "m", "messages": [user("hi")]}, "max_tokens"),
        ({"model": "m", "max_tokens": 0, "messages": [user("hi")]}, "max_tokens"),
        ({"model": "", "max_tokens": 5, "messages": [user("hi")]}, "model"),
        ({"max_tokens": 5, "messages": []}, "messages"),
        ({"max_tokens": 5, "messages": [{"role": "tool", "content": "x"}]}, "messages.0.role"),
        ({"max_tokens": 5, "messages": [{"role": "user", "content": 3}]}, "messages.0.content"),
        ({"max_tokens": 5, "messages": [user({"type": 1})]}, "messages.0.content.0"),
        ({"max_tokens": 5, "messages": [user(text("a"), {"type": "text"})]}, "messages.0.content.1.text"),
        ({"max_tokens": 5, "messages": [user(tool_use("t1"))]}, "tool_use blocks belong to assistant"),
        ({"max_tokens": 5, "messages": [assistant(tool_result("t1", "x"))]}, "tool_result blocks belong to user"),
        ({"max_tokens": 5, "messages": [user(tool_result(3, "x"))]}, "tool_use_id"),
        ({"max_tokens": 5, "messages": [assistant({"type": "tool_use", "id": "t", "name": "B", "input": "ls"})]}, "input"),
        ({"max_tokens": 5, "messages": [user("hi")], "stream": "yes"}, "stream"),
        ({"max_tokens": 5, "messages": [user("hi")], "system": [{"type": "image"}]}, "system.0"),
        ({"max_tokens": 5, "messages": [user("hi")], "tools": [{"input_schema": {}}]}, "tools.0.name"),
        ({"max_tokens": 5, "messages": [user("hi")], "stop_sequences": "END"}, "stop_sequences"),
        ({"max_tokens": 5, "messages": [user("hi")], "thinking": "adaptive"}, "thinking"),
    ],
)
def test_a_malformed_body_is_refused_naming_the_field(bad: object, names: str) -> None:
    with pytest.raises(AnthropicInvalid, match=names):
        validate_messages_body(bad)


def test_a_bad_role_names_the_two_roles_every_model_takes() -> None:
    """Not "system": it is taken only mid-conversation, and only by some models (docs/conformance.md)."""
    with pytest.raises(AnthropicInvalid) as refused:
        validate_messages_body({"max_tokens": 5, "messages": [user("hi"), {"role": "tool", "content": "x"}]})
    assert refused.value.message == "messages.1.role: Input should be 'user' or 'assistant' (got 'tool')"


def test_a_mid_conversation_system_message_passes_for_the_provider_to_judge() -> None:
    validate_messages_body({"max_tokens": 5, "messages": [user("hi"), {"role": "system", "content": "Auto-approve is on."}]})


def test_an_error_carries_the_request_id_in_its_body_and_header_as_anthropics_do() -> None:
    answer = render_error(ApiError(404, "no such model", "invalid_request_error", "model_not_found"), "req_123")
    assert orjson.loads(answer.body) == {"type": "error", "error": {"type": "not_found_error", "message": "no such model"}, "request_id": "req_123"}
    assert answer.headers == (("request-id", "req_123"),)


def test_count_tokens_bodies_need_no_max_tokens() -> None:
    counted = captured("claude-code-tui/0015-POST-v1-messages-count-tokens.json")["body"]
    assert validate_messages_body(counted, count_tokens=True).max_tokens is None
    with pytest.raises(AnthropicInvalid, match="max_tokens"):
        validate_messages_body(counted)


@pytest.mark.parametrize("name", ["claude-code/0001-POST-v1-messages.json", "claude-code/0004-POST-v1-messages.json",
                                  "claude-code-tui/0001-POST-v1-messages.json", "claude-code-tui/0002-POST-v1-messages.json"])
def test_every_captured_claude_code_request_is_valid(name: str) -> None:
    parsed = validate_messages_body(captured(name)["body"])
    assert parsed.stream is True and parsed.max_tokens == 128000 and parsed.tools


def test_unknown_fields_and_blocks_are_accepted() -> None:
    request = body(user(text("hi"), {"type": "document", "source": {"type": "text", "data": "x"}}),
                   safeguards=[{"type": "dangerous_tool_use"}], context_management={"edits": []})
    assert validate_messages_body(request).messages == request["messages"]


# ---- tokens


@pytest.mark.parametrize(
    "added",
    [
        pytest.param(text("x" * 400), id="text"),
        pytest.param(image(), id="image"),
        pytest.param(tool_result("t0", "y" * 400), id="tool_result string"),
        pytest.param(tool_result("t0", [text("y" * 400)]), id="tool_result blocks"),
        pytest.param(tool_result("t0", [image()]), id="tool_result image"),
    ],
)
def test_every_user_block_type_adds_tokens(added: dict) -> None:
    base = body(user("hi"))
    grown = body(user(text("hi"), added))
    assert count_input_tokens(grown) > count_input_tokens(base) > 0


@pytest.mark.parametrize(
    "added",
    [pytest.param(thinking("z" * 400), id="thinking"), pytest.param(thinking("", "s" * 400), id="signature only"),
     pytest.param(tool_use("t1", command="c" * 400), id="tool_use"),
     pytest.param({"type": "redacted_thinking", "data": "r" * 400}, id="redacted_thinking")],
)
def test_every_assistant_block_type_adds_tokens(added: dict) -> None:
    base = body(user("hi"), assistant(text("ok")), user("go"))
    grown = body(user("hi"), assistant(text("ok"), added), user("go"))
    assert count_input_tokens(grown) > count_input_tokens(base)


def test_system_and_tools_are_counted() -> None:
    plain = {"model": "m", "messages": [user("hi")]}
    assert count_input_tokens({**plain, "system": "s" * 400}) >= count_input_tokens(plain) + 100
    assert count_input_tokens(body(user("hi"))) > count_input_tokens(body(user("hi"), tools=[]))


def test_an_image_counts_the_configured_image_tokens_not_its_base64() -> None:
    big = body(user(text("hi"), image("A" * 400_000)))
    small = body(user(text("hi"), image("A" * 40)))
    assert count_input_tokens(big) == count_input_tokens(small)
    assert count_input_tokens(small) - count_input_tokens(body(user(text("hi")))) == DEFAULT_ESTIMATOR.image_tokens


def test_the_largest_captured_count_tokens_call_counts_its_tools() -> None:
    counted = captured("claude-code-tui/0015-POST-v1-messages-count-tokens.json")["body"]
    assert count_input_tokens(counted) > 1000  # the dummy message "foo" and 13 tool schemas


# ---- the chat view


def test_the_view_pairs_each_tool_result_with_its_call_in_order() -> None:
    messages = [user("list"), assistant(thinking(), tool_use("t1"), tool_use("t2")),
                user(tool_result("t1", "a.py"), tool_result("t2", [text("b.py"), image()]), reminder())]
    view = chat_view(None, messages)
    assert [m["role"] for m in view] == ["user", "assistant", "tool", "tool", "user"]
    assert [c["id"] for c in view[1]["tool_calls"]] == ["t1", "t2"]
    assert view[1]["tool_calls"][0]["function"] == {"name": "Bash", "arguments": '{"command":"ls"}'}
    assert (view[2]["tool_call_id"], view[2]["content"]) == ("t1", "a.py")
    assert (view[3]["tool_call_id"], view[3]["content"]) == ("t2", "b.py")
    assert view[4]["content"][0]["type"] == "image_url"  # the result's image, then the reminder


def test_the_mid_conversation_system_message_stays_a_system_message() -> None:
    view = chat_view([text("sys")], [user("hi"), {"role": "system", "content": "# Environment"}])
    assert [m["role"] for m in view] == ["system", "user", "system"]


# ---- session and needs


def test_the_session_comes_from_the_metadata_user_id_json() -> None:
    request = captured("claude-code/0004-POST-v1-messages.json")
    assert metadata_session(request["body"]) == request["headers"]["X-Claude-Code-Session-Id"]


@pytest.mark.parametrize("metadata", [None, {}, {"user_id": "plain-user"}, {"user_id": "{not json"}, {"user_id": orjson.dumps({"session_id": " "}).decode()}])
def test_no_session_without_a_session_id_in_metadata(metadata: object) -> None:
    assert metadata_session(body(metadata=metadata)) is None


def test_json_output_and_thinking_are_read_from_the_body() -> None:
    assert wants_json_output(body(output_config={"format": {"type": "json_schema", "schema": {}}}))
    assert not wants_json_output(body(output_config={"effort": "medium"}))
    assert wants_thinking(body(thinking={"type": "adaptive", "display": "omitted"}))
    assert not wants_thinking(body(thinking={"type": "disabled"}))
