"""The mock's Anthropic Messages answers, built from plain request bodies."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from router.tools import mock_anthropic
from router.tools.mock_answers import seal
from tests.support.wire_factories import (
    BASH,
    READ,
    WEB_SEARCH_SERVER_TOOL,
    anthropic_body,
    anthropic_user,
    sse_events,
    tool_result,
    tool_use,
)

TEXT = "Hello from the mock upstream."


def answer(body: dict[str, Any]) -> Any:
    return mock_anthropic.answer(body, TEXT)


def test_offered_tools_get_a_bash_call_that_lists_files() -> None:
    scripted = answer(anthropic_body(tools=[READ, BASH]))
    assert scripted.tool_call is not None
    assert (scripted.tool_call.name, scripted.tool_call.arguments) == ("Bash", {"command": "ls"})
    assert scripted.text == ""


@pytest.mark.parametrize("content", ["a.py\nb.py", [{"type": "text", "text": "a.py\nb.py"}]])
def test_a_turn_carrying_the_tool_result_gets_text_quoting_it(content: Any) -> None:
    body = anthropic_body(
        anthropic_user("list the files"),
        tool_use("toolu_1", command="ls"),
        anthropic_user(tool_result("toolu_1", content), "<system-reminder>x</system-reminder>"),
        tools=[BASH],
    )
    scripted = answer(body)
    assert scripted.tool_call is None
    assert scripted.text == f"{TEXT} (tool said: a.py\nb.py)"


def test_a_tool_the_client_names_in_tool_choice_is_the_one_called() -> None:
    scripted = answer(anthropic_body(tools=[BASH, READ], tool_choice={"type": "tool", "name": "Read"}))
    assert scripted.tool_call is not None
    assert (scripted.tool_call.name, scripted.tool_call.arguments) == ("Read", {"file_path": "mock file_path"})


@pytest.mark.parametrize(
    "extra",
    [{}, {"tools": [WEB_SEARCH_SERVER_TOOL]}, {"tools": [BASH], "tool_choice": {"type": "none"}}],
    ids=["no tools", "server tools only", "tool_choice none"],
)
def test_without_a_client_tool_to_call_the_answer_is_text(extra: dict[str, Any]) -> None:
    assert answer(anthropic_body(**extra)).text == TEXT


def test_a_title_request_with_a_json_schema_gets_json_matching_it() -> None:
    schema = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
    body = anthropic_body(output_config={"format": {"type": "json_schema", "schema": schema}})
    assert orjson.loads(answer(body).text) == {"title": "mock title"}


@pytest.mark.parametrize(("thinking", "thinks"), [({"type": "adaptive"}, True), ({"type": "enabled", "budget_tokens": 2000}, True), ({"type": "disabled"}, False), (None, False)])
def test_thinking_comes_first_only_when_asked_for(thinking: Any, thinks: bool) -> None:
    body = anthropic_body(tools=[BASH], **({"thinking": thinking} if thinking else {}))
    blocks = mock_anthropic.message(body, answer(body))["content"]
    assert [b["type"] for b in blocks] == (["thinking", "tool_use"] if thinks else ["tool_use"])
    if thinks:
        assert blocks[0]["signature"] == seal(blocks[0]["thinking"])


def stream(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return sse_events(b"".join(mock_anthropic.events(body, answer(body))))


def test_the_stream_opens_fills_and_closes_every_block_in_order() -> None:
    events = stream(anthropic_body(tools=[BASH], thinking={"type": "adaptive"}, stream=True))
    names = [name for name, _ in events]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    assert [name for name, data in events if name == data["type"]] == names  # every event named after its type
    blocks = [(d["index"], d["content_block"]["type"]) for n, d in events if n == "content_block_start"]
    assert blocks == [(0, "thinking"), (1, "tool_use")]
    deltas = [d["delta"]["type"] for n, d in events if n == "content_block_delta"]
    assert deltas.index("signature_delta") == deltas.count("thinking_delta")  # the signature ends the thinking
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_streamed_tool_input_arrives_in_fragments_that_join_to_the_input() -> None:
    events = stream(anthropic_body(tools=[BASH], stream=True))
    fragments = [d["delta"]["partial_json"] for n, d in events if n == "content_block_delta" and d["delta"]["type"] == "input_json_delta"]
    assert len(fragments) > 1
    assert orjson.loads("".join(fragments)) == {"command": "ls"}


def test_streamed_text_joins_to_the_non_streamed_text_and_usage_is_real() -> None:
    body = anthropic_body(anthropic_user("hello " * 400))
    events = stream(body)
    text = "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta")
    assert text == mock_anthropic.message(body, answer(body))["content"][0]["text"] == TEXT
    start_usage = events[0][1]["message"]["usage"]
    assert start_usage["input_tokens"] > 400  # Claude Code's context meter reads it here
    assert events[-2][1]["usage"]["output_tokens"] > 0
    assert events[-2][1]["delta"]["stop_reason"] == "end_turn"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"max_tokens": 10, "messages": [anthropic_user("hi")]}, "model"),
        ({"model": "m", "messages": [anthropic_user("hi")]}, "max_tokens"),
        ({"model": "m", "max_tokens": 0, "messages": [anthropic_user("hi")]}, "max_tokens"),
        ({"model": "m", "max_tokens": 10, "messages": []}, "messages"),
        ({"model": "m", "max_tokens": 10, "messages": ["hi"]}, "messages"),
    ],
)
def test_a_request_missing_what_anthropic_requires_is_refused_naming_it(body: dict[str, Any], problem: str) -> None:
    assert problem in (mock_anthropic.request_error(body) or "")


def test_a_thinking_block_sent_back_changed_is_refused_like_anthropic_does() -> None:
    thinking = {"type": "thinking", "thinking": "I will call Bash.", "signature": seal("I will call Bash.")}
    turn = {"role": "assistant", "content": [thinking, tool_use("toolu_1")["content"][0]]}
    intact = anthropic_body(anthropic_user("go"), turn, anthropic_user(tool_result("toolu_1", "ok")))
    assert mock_anthropic.request_error(intact) is None
    changed = orjson.loads(orjson.dumps(intact))
    changed["messages"][1]["content"][0]["thinking"] = "I will call Bash!"
    assert mock_anthropic.request_error(changed) == "messages.1.content.0: Invalid `signature` in `thinking` block"


def test_count_tokens_counts_system_tools_and_messages_and_needs_no_max_tokens() -> None:
    small = {"model": "m", "messages": [anthropic_user("hi")]}
    assert mock_anthropic.count_tokens_error(small) is None
    bigger = {**small, "system": [{"type": "text", "text": "s" * 4000}], "tools": [BASH]}
    assert mock_anthropic.count_tokens(bigger)["input_tokens"] > mock_anthropic.count_tokens(small)["input_tokens"] + 1000


@pytest.mark.parametrize(("status", "kind"), [(400, "invalid_request_error"), (401, "authentication_error"), (429, "rate_limit_error"), (529, "overloaded_error"), (502, "api_error")])
def test_errors_have_anthropics_shape_and_type(status: int, kind: str) -> None:
    body = mock_anthropic.error_body(status, "boom")
    assert {k: v for k, v in body.items() if k != "request_id"} == {"type": "error", "error": {"type": kind, "message": "boom"}}
    assert body["request_id"].startswith("req_") and body["request_id"] != mock_anthropic.error_body(status, "other")["request_id"]


def system_message(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([anthropic_user("go"), tool_use("t1"), anthropic_user(tool_result("t1", "ok"))], None),
        ([anthropic_user("go"), tool_use("t1"), system_message("env"), anthropic_user(tool_result("t1", "ok"))], None),
        ([anthropic_user("go"), tool_use("t1")], None),  # a trailing assistant turn is a prefill
        ([anthropic_user(tool_result("t9", "ok"))], "messages.0: unexpected `tool_use_id` found in `tool_result` blocks: t9."),
        ([anthropic_user("go"), tool_use("t1"), anthropic_user("no result")], "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: t1."),
        (
            [anthropic_user("go"), tool_use("t1"), anthropic_user(tool_result("t1", "a"), tool_result("t1", "b"))],
            "messages.2: more than one `tool_result` block for `tool_use` ids: t1",
        ),
    ],
    ids=["paired", "system message between", "prefill", "orphan result", "missing result", "duplicate result"],
)
def test_a_tool_result_split_from_its_tool_use_is_refused_as_anthropic_does(messages: list[dict[str, Any]], problem: str | None) -> None:
    error = mock_anthropic.request_error(anthropic_body(*messages))
    assert (error or "").startswith(problem) if problem else error is None


def test_a_bound_thinking_block_survives_its_prefix_turning_a_block_into_the_string_it_stands_for() -> None:
    """Claude Code on its default model (claude-opus-5-5, which binds thinking) sends its environment block as a
    list with cache_control, then as a plain string: the same prompt, so the real API keeps the thinking valid."""
    from router.tools import mock_anthropic

    first = {"model": "claude-opus-5-5", "max_tokens": 100, "thinking": {"type": "adaptive"},
             "tools": [{"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}],
             "messages": [{"role": "user", "content": "list the files"},
                          {"role": "system", "content": [{"type": "text", "text": "# Environment", "cache_control": {"type": "ephemeral"}}]}]}  # fmt: skip
    answer = mock_anthropic.message(first, mock_anthropic.answer(first, "done"))
    call = next(b for b in answer["content"] if b["type"] == "tool_use")
    later = {**first, "messages": [
        first["messages"][0], {"role": "system", "content": "# Environment"},
        {"role": "assistant", "content": answer["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "main.py"}]},
    ]}  # fmt: skip
    assert mock_anthropic.request_error(later) is None
    changed = {**later, "messages": [{"role": "user", "content": "list the files!"}, *later["messages"][1:]]}
    assert "bound to a different conversation" in (mock_anthropic.request_error(changed) or "")
