"""The current turn's text, shared by classifier and relevance."""

from __future__ import annotations

from router.wire.openai_chat.view import extract_turn_text
from tests.support.factories import assistant, system, tool, user


def test_task_is_the_head_of_the_last_user_message_and_step_the_latest_assistant_turn():
    messages = [
        system("sys"),
        user("first task"),
        assistant("old thinking", [("c0", "bash", '{"command": "ls"}')]),
        tool("c0", "files"),
        user("the real task " + "x" * 100),
        assistant("now I will grep for the symbol", [("c1", "grep", '{"pattern": "parse_header"}')]),
        tool("c1", "matches"),
    ]
    text = extract_turn_text(messages, max_chars=80)
    assert text.task == ("the real task " + "x" * 100)[:80]
    assert text.step.startswith('grep({"pattern": "parse_header"})\n')
    assert len(text.step) <= 80
    assert text.step.endswith("symbol")  # the tail of the assistant text


def test_tool_call_arguments_take_at_most_half_the_room():
    messages = [user("q"), assistant("tail text", [("c1", "bash", "y" * 500)])]
    text = extract_turn_text(messages, max_chars=40)
    assert text.step.startswith("bash(yyyyyyy")
    assert text.step.endswith("tail text") and len(text.step) <= 40


def test_text_parts_count_and_missing_parts_are_empty():
    messages = [user("x"), {"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "image_url"}]}]
    text = extract_turn_text(messages, 100)
    assert text.task == "part one"
    assert text.step == ""


def test_assistant_without_tool_calls_gives_its_text_tail():
    text = extract_turn_text([user("q"), assistant("a" * 50 + "END")], 10)
    assert text.step == ("a" * 50 + "END")[-10:]
