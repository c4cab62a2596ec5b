"""Validating a Responses API body: stateless use accepted, server-side state refused naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from router.core.errors import InvalidRequest
from router.wire.openai_responses.validation import validate_responses_body
from tests.http.test_agent_fixtures import load
from tests.support.wire_factories import (
    EXEC_COMMAND,
    NAMESPACE_TOOL,
    WEB_SEARCH_TOOL,
    function_call,
    function_call_output,
    input_image,
    input_message,
    reasoning_item,
    responses_body,
)

CODEX = [f"codex/000{n}-POST-v1-responses.json" for n in (1, 2, 3, 4)]


@pytest.mark.parametrize("name", CODEX)
def test_every_captured_codex_request_is_valid(name: str) -> None:
    body = load(name)["body"]
    request = validate_responses_body(body)
    assert request.stream is True
    assert request.model == "mock-model"
    assert list(request.items) == body["input"]
    assert request.tools == tuple(body["tools"])


def test_a_string_input_is_one_user_message() -> None:
    request = validate_responses_body({"model": "auto", "input": "hello"})
    assert request.items == ({"type": "message", "role": "user", "content": "hello"},)
    assert request.stream is False


def test_a_message_without_type_is_read_as_a_message() -> None:
    request = validate_responses_body(responses_body({"role": "developer", "content": "be brief"}))
    assert request.items[0]["role"] == "developer"


def test_no_model_means_route_for_me() -> None:
    assert validate_responses_body({"input": "hi"}).model is None


def test_store_false_and_store_absent_are_stateless() -> None:
    validate_responses_body(responses_body(store=False))
    validate_responses_body(responses_body())


def test_the_full_item_vocabulary_passes() -> None:
    body = responses_body(
        input_message("developer", "rules"),
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "look"}, input_image()]},
        reasoning_item("thinking"),
        function_call("call_1", cmd="ls"),
        function_call_output("call_1", [{"type": "input_text", "text": "a.py"}]),
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        tools=[EXEC_COMMAND, NAMESPACE_TOOL, WEB_SEARCH_TOOL],
        text={"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}},
        max_output_tokens=100,
        tool_choice={"type": "function", "name": "exec_command"},
    )
    request = validate_responses_body(body)
    assert len(request.items) == 7 and request.output_limit == 100


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"previous_response_id": "resp_123"}, "previous_response_id"),
        ({"conversation": "conv_1"}, "conversation"),
        ({"store": True}, "store"),
        ({"background": True}, "background"),
    ],
)
def test_a_request_that_needs_server_side_state_is_refused_naming_the_field(extra: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        validate_responses_body(responses_body(**extra))
    assert caught.value.param == param
    assert param in caught.value.message and "'store': false" in caught.value.message


def test_an_item_reference_is_refused_as_server_side_state() -> None:
    with pytest.raises(InvalidRequest) as caught:
        validate_responses_body(responses_body(input_message("user", "hi"), {"type": "item_reference", "id": "msg_1"}))
    assert caught.value.param == "input[1]" and "stored on the server" in caught.value.message


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ([], None),
        ({"model": "", "input": "hi"}, "model"),
        ({"model": "m", "input": "hi", "stream": "yes"}, "stream"),
        ({"model": "m"}, "input"),
        ({"model": "m", "input": []}, "input"),
        ({"model": "m", "input": 3}, "input"),
        ({"model": "m", "input": ["hi"]}, "input[0]"),
        ({"model": "m", "input": [{"content": "no role"}]}, "input[0].type"),
        ({"model": "m", "input": [{"type": "message", "role": "tool", "content": "x"}]}, "input[0].role"),
        ({"model": "m", "input": [{"type": "message", "role": "user", "content": 1}]}, "input[0].content"),
        ({"model": "m", "input": [{"type": "message", "role": "user", "content": [{"type": "input_text"}]}]}, "input[0].content[0].text"),
        ({"model": "m", "input": [{"type": "message", "role": "user", "content": [{"type": "input_image"}]}]}, "input[0].content[0].image_url"),
        ({"model": "m", "input": [{"type": "function_call", "call_id": "c", "name": "f"}]}, "input[0].arguments"),
        ({"model": "m", "input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id"),
        ({"model": "m", "input": [{"type": "function_call_output", "call_id": "c", "output": None}]}, "input[0].output"),
        ({"model": "m", "input": "hi", "instructions": 3}, "instructions"),
        ({"model": "m", "input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
        ({"model": "m", "input": "hi", "max_output_tokens": True}, "max_output_tokens"),
        ({"model": "m", "input": "hi", "text": {"format": "json"}}, "text.format"),
        ({"model": "m", "input": "hi", "tools": {}}, "tools"),
        ({"model": "m", "input": "hi", "tools": [{"type": "function"}]}, "tools[0].name"),
        ({"model": "m", "input": "hi", "tools": [{"type": "function", "name": "f", "parameters": []}]}, "tools[0].parameters"),
        ({"model": "m", "input": "hi", "tool_choice": 1}, "tool_choice"),
        ({"model": "m", "input": "hi", "store": "no"}, "store"),
    ],
)
def test_a_malformed_body_is_refused_naming_the_field(body: Any, param: str | None) -> None:
    with pytest.raises(InvalidRequest) as caught:
        validate_responses_body(body)
    assert caught.value.param == param
