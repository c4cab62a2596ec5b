"""The mock's OpenAI Responses answers, built from plain request bodies."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from router.tools import mock_responses
from router.tools.mock_answers import seal
from tests.support.wire_factories import (
    EXEC_COMMAND,
    NAMESPACE_TOOL,
    VIEW_IMAGE,
    WEB_SEARCH_TOOL,
    function_call,
    function_call_output,
    input_message,
    responses_body,
    sse_events,
)

TEXT = "Hello from the mock upstream."
CODEX_TOOLS = [EXEC_COMMAND, VIEW_IMAGE, NAMESPACE_TOOL, WEB_SEARCH_TOOL]


def answer(body: dict[str, Any]) -> Any:
    return mock_responses.answer(body, TEXT)


def output(body: dict[str, Any]) -> list[dict[str, Any]]:
    return mock_responses.message(body, answer(body))["output"]


def test_codexs_tools_get_an_exec_command_call_that_lists_files() -> None:
    [call] = output(responses_body(tools=CODEX_TOOLS))
    assert (call["type"], call["name"], orjson.loads(call["arguments"])) == ("function_call", "exec_command", {"cmd": "ls"})
    assert call["call_id"].startswith("call_")


def test_a_turn_carrying_the_function_output_gets_text_quoting_it() -> None:
    body = responses_body(
        input_message("developer", "be brief"),
        input_message("user", "list the files"),
        function_call("call_1", cmd="ls"),
        function_call_output("call_1", "a.py\nb.py"),
        tools=CODEX_TOOLS,
    )
    [message] = output(body)
    assert message["type"] == "message" and message["role"] == "assistant"
    assert message["content"] == [{"type": "output_text", "text": f"{TEXT} (tool said: a.py\nb.py)", "annotations": [], "logprobs": []}]


def test_an_output_before_the_latest_user_message_is_history_so_the_tool_is_called_again() -> None:
    body = responses_body(
        input_message("user", "list the files"),
        function_call("call_1", cmd="ls"),
        function_call_output("call_1", "a.py"),
        input_message("user", "and again"),
        tools=CODEX_TOOLS,
    )
    assert output(body)[0]["type"] == "function_call"


def test_a_function_the_client_names_in_tool_choice_is_the_one_called() -> None:
    [call] = output(responses_body(tools=CODEX_TOOLS, tool_choice={"type": "function", "name": "view_image"}))
    assert (call["name"], orjson.loads(call["arguments"])) == ("view_image", {"path": "mock path"})


@pytest.mark.parametrize(
    "extra",
    [{}, {"tools": [NAMESPACE_TOOL, WEB_SEARCH_TOOL]}, {"tools": CODEX_TOOLS, "tool_choice": "none"}],
    ids=["no tools", "built-in tools only", "tool_choice none"],
)
def test_without_a_function_tool_to_call_the_answer_is_text(extra: dict[str, Any]) -> None:
    assert answer(responses_body(**extra)).text == TEXT


def test_a_plain_string_input_is_one_user_message() -> None:
    assert output(responses_body(input="hi"))[0]["content"][0]["text"] == TEXT


def test_json_output_with_a_schema_gets_json_matching_it() -> None:
    schema = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
    body = responses_body(text={"format": {"type": "json_schema", "name": "t", "schema": schema}})
    assert orjson.loads(answer(body).text) == {"title": "mock title"}


@pytest.mark.parametrize(("include", "encrypted"), [(["reasoning.encrypted_content"], True), ([], False)])
def test_reasoning_comes_first_and_is_encrypted_only_when_included(include: list[str], encrypted: bool) -> None:
    items = output(responses_body(tools=CODEX_TOOLS, reasoning={"summary": "auto"}, include=include))
    assert [i["type"] for i in items] == ["reasoning", "function_call"]
    summary = items[0]["summary"][0]["text"]
    assert ("encrypted_content" in items[0]) is encrypted
    if encrypted:
        assert items[0]["encrypted_content"] == seal(summary)


def stream(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return sse_events(b"".join(mock_responses.events(body, answer(body))))


def test_the_stream_is_numbered_and_frames_each_item_in_order() -> None:
    events = stream(responses_body(tools=CODEX_TOOLS, reasoning={"summary": "auto"}, stream=True))
    names = [name for name, _ in events]
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    assert [name for name, data in events if name == data["type"]] == names
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names[-1] == "response.completed"
    framing = [(n, d["output_index"]) for n, d in events if n.startswith("response.output_item.")]
    assert framing == [("response.output_item.added", 0), ("response.output_item.done", 0), ("response.output_item.added", 1), ("response.output_item.done", 1)]
    completed = events[-1][1]["response"]
    assert completed["status"] == "completed"
    assert [i["type"] for i in completed["output"]] == ["reasoning", "function_call"]


def test_streamed_arguments_arrive_in_fragments_that_join_to_the_done_arguments() -> None:
    events = stream(responses_body(tools=CODEX_TOOLS, stream=True))
    fragments = [d["delta"] for n, d in events if n == "response.function_call_arguments.delta"]
    [done] = [d for n, d in events if n == "response.function_call_arguments.done"]
    assert len(fragments) > 1
    assert "".join(fragments) == done["arguments"] == '{"cmd":"ls"}'


def test_streamed_text_joins_to_the_done_text_and_usage_is_reported() -> None:
    events = stream(responses_body(input_message("user", "hello " * 400), stream=True))
    names = [n for n, _ in events]
    assert names.index("response.content_part.added") < names.index("response.output_text.delta") < names.index("response.output_text.done")
    text = "".join(d["delta"] for n, d in events if n == "response.output_text.delta")
    [done] = [d for n, d in events if n == "response.output_text.done"]
    assert text == done["text"] == TEXT
    usage = events[-1][1]["response"]["usage"]
    assert usage["input_tokens"] > 400 and usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert usage["input_tokens_details"] == {"cached_tokens": 0, "cache_write_tokens": 0}  # both required by the spec


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"input": "hi"}, "'model'"),
        ({"model": "m", "input": 3}, "'input'"),
        ({"model": "m", "input": "hi", "previous_response_id": "resp_1"}, "previous_response_id"),
    ],
)
def test_a_request_the_stateless_mock_cannot_serve_is_refused_naming_the_field(body: dict[str, Any], problem: str) -> None:
    assert problem in (mock_responses.request_error(body) or "")


def test_a_reasoning_item_sent_back_changed_is_refused() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "call it"}], "encrypted_content": seal("call it")}
    assert mock_responses.request_error(responses_body(input_message("user", "go"), reasoning)) is None
    changed = {**reasoning, "encrypted_content": seal("call it!")}
    assert "input[1]" in (mock_responses.request_error(responses_body(input_message("user", "go"), changed)) or "")


def test_a_reasoning_item_without_its_sealed_content_is_refused_when_nothing_is_stored() -> None:
    unsealed = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "call it"}]}
    refused = mock_responses.request_error(responses_body(input_message("user", "go"), unsealed, store=False)) or ""
    assert "Item with id 'rs_1' not found" in refused
    assert mock_responses.request_error(responses_body(input_message("user", "go"), unsealed)) is None  # store unset: OpenAI stores by default


def test_errors_have_openais_shape() -> None:
    assert mock_responses.error_body(400, "bad", "input") == {"error": {"message": "bad", "type": "invalid_request_error", "param": "input", "code": None}}
    assert mock_responses.error_body(503, "down")["error"]["type"] == "server_error"


@pytest.mark.parametrize(
    ("items", "problem"),
    [
        ([input_message("user", "go"), function_call("c1"), function_call_output("c1", "ok")], None),
        ([input_message("user", "go"), function_call_output("c9", "ok")], "No tool call found for function call output with call_id c9."),
        ([input_message("user", "go"), function_call("c1"), input_message("user", "and?")], "No tool output found for function call c1."),
        (
            [input_message("user", "go"), function_call("c1"), function_call_output("c1", "a"), function_call_output("c1", "b")],
            "Duplicate function call output for call_id c1.",
        ),
        ([input_message("user", "go"), function_call_output("c1", "early"), function_call("c1")], "No tool call found for function call output with call_id c1."),
    ],
    ids=["paired", "orphan output", "missing output", "duplicate output", "output before its call"],
)
def test_a_function_output_split_from_its_call_is_refused_as_openai_does(items: list[dict[str, Any]], problem: str | None) -> None:
    assert mock_responses.request_error(responses_body(*items)) == problem
