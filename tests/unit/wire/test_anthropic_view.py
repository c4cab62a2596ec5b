"""Anthropic Messages as the neutral view: units, tool results, write-back, session and needs."""

from __future__ import annotations

import copy

from router.wire.anthropic_messages.validation import validate_messages_body
from router.wire.anthropic_messages.view import (
    MessagesConversation,
    messages_view,
    opening,
)
from tests.support.anthropic_factories import (
    BILLING,
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

CACHED = {"type": "ephemeral", "ttl": "1h"}


def view_of(request: dict):
    return messages_view(request, validate_messages_body(request), 2000)


def test_each_tool_result_is_its_own_unit_and_turns_start_at_assistants() -> None:
    messages = [user("go"), assistant(thinking(), tool_use("t1"), tool_use("t2", name="Read")),
                user(tool_result("t1", "a"), tool_result("t2", [text("b"), image()]), reminder())]
    conversation = MessagesConversation([text("sys")], messages)
    assert len(conversation.units) == 1 + 2 + 3  # system, user, assistant, two results, the reminder
    assert conversation.turn_starts() == [2]
    results = conversation.tool_results()
    assert [(r.unit, r.id) for r in results] == [(3, "t1"), (4, "t2")]
    assert results[1].content == [text("b"), image()]
    assert [conversation.tool_name(r.unit) for r in results] == ["Bash", "Read"]


def test_rewrites_replace_only_the_results_content() -> None:
    messages = [user("go"), assistant(thinking(), tool_use("t1"), tool_use("t2")),
                user(tool_result("t1", "long", is_error=True, cache_control=CACHED), tool_result("t2", [text("x"), image()]), reminder())]
    before = copy.deepcopy(messages)
    conversation = MessagesConversation(None, messages)
    out = conversation.messages_with({0: "[short]", 1: [text("[y]"), image()]})
    assert messages == before
    assert out[0] is messages[0] and out[1] is messages[1]
    assert out[2]["content"][0] == {**messages[2]["content"][0], "content": "[short]"}
    assert out[2]["content"][1]["content"] == [text("[y]"), image()]
    assert out[2]["content"][2] is messages[2]["content"][2]
    assert conversation.messages_with({}) is messages


def test_the_opening_ignores_the_billing_line_and_reminders() -> None:
    first = opening([BILLING, text("You are Claude.")], [user(reminder("date 1"), text("list the files"))])
    later = opening([{**BILLING, "text": BILLING["text"].replace("2.1.332", "2.1.400")}, text("You are Claude.")],
                    [user(reminder("date 2"), text("list the files")), assistant("ok")])
    assert first == later == ("system", "You are Claude.", "user", "list the files")


def test_the_turn_text_is_the_users_words_not_tool_results_or_reminders() -> None:
    request = body(user(reminder(), text("fix the parser")), assistant(text("looking"), tool_use("t1", command="pytest")),
                   user(tool_result("t1", "FAILED"), reminder("todo list")))
    turn = view_of(request).turn_text
    assert turn.task == "fix the parser"
    assert turn.step == 'Bash({"command":"pytest"})\nlooking'


def test_captured_claude_code_requests_give_the_same_opening_and_the_metadata_session() -> None:
    first, second = (captured(f"claude-code/000{n}-POST-v1-messages.json") for n in (1, 4))
    views = [view_of(c["body"]) for c in (first, second)]
    assert views[0].opening == views[1].opening and views[0].opening[2] == "user"
    assert "<system-reminder>" not in views[0].opening[3]
    assert views[0].body_session == first["headers"]["X-Claude-Code-Session-Id"]
    assert views[1].turn_text.task == "which of them is Python?"


def test_the_gate_sees_tools_images_json_output_and_thinking() -> None:
    plain = view_of(body(user("hi"), tools=[]))
    assert not (plain.offers_tools or plain.tools_present or plain.has_images or plain.json_output or plain.thinking)
    assert view_of(body(user("hi"))).offers_tools
    history = view_of(body(user("go"), assistant(tool_use("t1")), user(tool_result("t1", "x")), tools=[]))
    assert history.tools_present and not history.offers_tools
    assert view_of(body(user("go"), assistant(tool_use("t1")), user(tool_result("t1", [image()])))).has_images
    assert view_of(body(user(text("what"), image()))).has_images
    assert view_of(body(output_config={"format": {"type": "json_schema", "schema": {}}})).json_output
    assert view_of(body(thinking={"type": "adaptive"})).thinking


def test_the_view_reports_the_requested_output_limit_and_the_stream() -> None:
    view = view_of(captured("claude-code/0001-POST-v1-messages.json")["body"])
    assert (view.wire, view.output_limit, view.stream, view.model) == ("anthropic-messages", 128000, True, "claude-opus-5-5")
