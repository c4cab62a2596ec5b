"""The mock's scripted turn, before any wire format: which tool it calls, with what, and its seals."""

from __future__ import annotations

from typing import Any

import pytest

from router.tools.mock_answers import FunctionTool, ScriptedAnswer, ToolCall, call_tool, example_of, pick_tool, quoting_tool_result, reasoning_about, seal, words


def tools(*names: str) -> list[FunctionTool]:
    return [FunctionTool(name, {"type": "object"}) for name in names]


@pytest.mark.parametrize(
    ("offered", "picked"),
    [
        (["Agent", "Read", "Bash", "Write"], "Bash"),  # Claude Code
        (["exec_command", "write_stdin", "view_image"], "exec_command"),  # Codex 0.17x
        (["apply_patch", "shell"], "shell"),  # older Codex
        (["read_file", "grep"], "read_file"),  # no shell: the first tool
        ([], None),
    ],
)
def test_a_shell_tool_is_picked_when_offered_so_the_agent_runs_a_command(offered: list[str], picked: str | None) -> None:
    tool = pick_tool(tools(*offered))
    assert (tool.name if tool else None) == picked


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "number"}}, "required": ["command"]}, {"command": "ls"}),
        ({"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}, {"cmd": "ls"}),
        ({"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}}}, "required": ["command"]}, {"command": ["ls"]}),
        ({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}, {"title": "mock title"}),
        ({"type": "string", "enum": ["low", "high"]}, "low"),
        ({"type": ["null", "integer"], "minimum": 3}, 3),
        ({"anyOf": [{"type": "boolean"}, {"type": "string"}]}, False),
        ({"const": "fixed"}, "fixed"),
        ({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "null"}}, "required": ["b"]}}, "required": ["a"]}, {"a": {"b": None}}),
        ({}, "mock"),
    ],
)
def test_example_of_builds_a_value_the_schema_accepts(schema: dict[str, Any], value: Any) -> None:
    assert example_of(schema) == value


def test_the_tool_call_lists_files_with_the_called_tools_own_argument_name() -> None:
    codex = FunctionTool("exec_command", {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]})
    call = call_tool([codex], "call_1")
    assert call == ToolCall("call_1", "exec_command", {"cmd": "ls"})
    assert call.arguments_json == '{"cmd":"ls"}'


def test_a_tool_without_an_object_schema_is_called_with_no_arguments() -> None:
    assert call_tool([FunctionTool("odd", {"type": "string"})], "c").arguments == {}


def test_the_final_answer_quotes_the_tool_result_but_not_without_bound() -> None:
    assert quoting_tool_result("Done.", "a.py\nb.py") == "Done. (tool said: a.py\nb.py)"
    assert len(quoting_tool_result("Done.", "x" * 100_000)) < 2100


def test_the_reasoning_says_what_the_turn_will_do() -> None:
    assert "Bash" in reasoning_about(ScriptedAnswer(tool_call=ToolCall("t", "Bash", {})))
    assert "answer" in reasoning_about(ScriptedAnswer(text="hi"))


def test_a_seal_is_stable_for_the_same_text_and_differs_for_another() -> None:
    assert seal("thinking") == seal("thinking")
    assert seal("thinking") != seal("thinking.")


def test_text_streams_word_by_word_and_joins_back_unchanged() -> None:
    assert words("Hello from  the mock.") == ["Hello ", "from ", " ", "the ", "mock."]
    assert "".join(words("Hello from  the mock.")) == "Hello from  the mock."
