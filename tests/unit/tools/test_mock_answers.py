"""The mock's scripted turn, before any wire format: which tool it calls, with what, and its seals."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from router.tools import mock_anthropic, mock_responses
from router.tools.mock_answers import (
    FunctionTool,
    ScriptedAnswer,
    ToolCall,
    call_tool,
    example_of,
    pick_tool,
    quoting_tool_result,
    reasoning_about,
    seal,
    words,
)
from router.tools.mock_upstream import completion
from tests.support.factories import assistant, tool, user


def tools(*names: str) -> list[FunctionTool]:
    return [FunctionTool(name, {"type": "object"}) for name in names]


@pytest.mark.parametrize(
    ("offered", "picked"),
    [
        (["Agent", "Read", "Bash", "Write"], "Bash"),  # Claude Code
        (["exec_command", "write_stdin", "view_image"], "exec_command"),  # Codex 0.17x
        (["apply_patch", "shell"], "shell"),  # older Codex
        (["read_file", "grep"], "read_file"),  # no shell, no listing tool: the first tool
        (["update_topic", "list_directory", "read_file"], "list_directory"),  # Gemini CLI in -p mode: its listing tool
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


# --tool-command: within one user turn the mock calls the shell tool once per command, in order, and
# answers with text once the last one's result is in — on each of the three APIs it serves
COMMANDS = ("cat part1.txt", "cat part2.txt", "cat part3.txt")
SHELL_SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}


def anthropic_turn(results: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "read the parts"}]
    for n in range(results):
        messages += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": COMMANDS[n]}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": f"part {n + 1}"}, {"type": "text", "text": "<system-reminder>x</system-reminder>"}]},
        ]  # fmt: skip
    return {"model": "m", "max_tokens": 100, "messages": messages, "tools": [{"name": "Bash", "input_schema": SHELL_SCHEMA}]}


def responses_turn(results: int) -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "read the parts"}]}]
    for n in range(results):
        items += [
            {"type": "function_call", "call_id": f"c{n}", "name": "exec_command", "arguments": orjson.dumps({"cmd": COMMANDS[n]}).decode()},
            {"type": "function_call_output", "call_id": f"c{n}", "output": f"part {n + 1}"},
        ]  # fmt: skip
    return {"model": "m", "input": items, "tools": [{"type": "function", "name": "exec_command", "parameters": {**SHELL_SCHEMA, "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}]}


def chat_turn(results: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "read the parts"}]
    for n in range(results):
        messages += [assistant(None, [(f"c{n}", "bash", orjson.dumps({"command": COMMANDS[n]}).decode())]), tool(f"c{n}", f"part {n + 1}")]
    return {"model": "m", "messages": messages, "tools": [{"type": "function", "function": {"name": "bash", "parameters": SHELL_SCHEMA}}]}


def translated_claude_turn(results: int) -> dict[str, Any]:
    """Claude Code's turns translated to chat: the reminder beside each tool_result becomes a user message after it."""
    body = chat_turn(results)
    body["messages"] = [m for message in body["messages"] for m in ([message, user("<system-reminder>x</system-reminder>")] if message["role"] == "tool" else [message])]
    return body


def anthropic_step(body: dict[str, Any]) -> tuple[str | None, str]:
    scripted = mock_anthropic.answer(body, "done", COMMANDS)
    return (scripted.tool_call.arguments["command"] if scripted.tool_call else None), scripted.text


def responses_step(body: dict[str, Any]) -> tuple[str | None, str]:
    scripted = mock_responses.answer(body, "done", COMMANDS)
    return (scripted.tool_call.arguments["cmd"] if scripted.tool_call else None), scripted.text


def chat_step(body: dict[str, Any]) -> tuple[str | None, str]:
    message = completion(body, "done", COMMANDS)["choices"][0]["message"]
    calls = message.get("tool_calls") or []
    return (orjson.loads(calls[0]["function"]["arguments"])["command"] if calls else None), message.get("content") or ""


@pytest.mark.parametrize(
    ("turn", "step"), [(anthropic_turn, anthropic_step), (responses_turn, responses_step), (chat_turn, chat_step), (translated_claude_turn, chat_step)]
)
def test_the_mock_runs_each_tool_command_of_a_turn_in_order_then_answers(turn, step) -> None:
    assert [step(turn(results))[0] for results in range(3)] == list(COMMANDS)
    command, text = step(turn(3))
    assert command is None and text.startswith("done (tool said: ") and "part 3" in text


@pytest.mark.parametrize(("turn", "step"), [(anthropic_turn, anthropic_step), (responses_turn, responses_step), (chat_turn, chat_step)])
def test_a_new_user_message_starts_the_commands_again(turn, step) -> None:
    body = turn(3)
    key = "input" if "input" in body else "messages"
    if key == "input":
        body[key] += [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
                      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "again"}]}]  # fmt: skip
    else:
        body[key] += [{"role": "assistant", "content": "done"}, {"role": "user", "content": "again"}]
    assert step(body)[0] == COMMANDS[0]


def test_the_chat_mocks_calls_have_ids_unique_in_the_conversation() -> None:
    """A client answers each call by its id: Claude Code (translated) resent its request over and over when a
    later call reused the id of an earlier one."""
    ids = [completion(chat_turn(results), "done", COMMANDS)["choices"][0]["message"]["tool_calls"][0]["id"] for results in range(3)]
    assert len(set(ids)) == 3


# --- a shell tool by its schema, and mini-swe-agent's submit command ---------------------------------------------

QWEN_SHELL = {"type": "object", "properties": {"command": {"type": "string"}, "description": {"type": "string"}}, "required": ["command"]}
CLINE_COMMANDS = {"type": "object", "properties": {"commands": {"type": "array", "items": {"type": "string"}}}, "required": ["commands"]}
NOT_A_SHELL = {"type": "object", "properties": {"command": {"type": "string"}}}  # optional: a read tool's mode, say


@pytest.mark.parametrize(
    ("offered", "picked", "arguments"),
    [
        ([("read_file", {"type": "object"}), ("run_shell_command", QWEN_SHELL)], "run_shell_command", {"command": "ls"}),  # Qwen Code
        ([("read_files", {"type": "object"}), ("run_commands", CLINE_COMMANDS)], "run_commands", {"commands": ["ls"]}),  # Cline CLI
        ([("search", NOT_A_SHELL), ("bash", QWEN_SHELL)], "bash", {"command": "ls"}),
        ([("search", NOT_A_SHELL)], None, None),
    ],
)
def test_a_shell_tool_is_found_by_its_schema_whatever_it_is_called(offered, picked, arguments) -> None:
    from router.tools.mock_answers import shell_tool

    tool = shell_tool([FunctionTool(name, schema) for name, schema in offered])
    assert (tool.name if tool else None) == picked
    body = {"model": "m", "messages": [user("list the files")], "tools": [{"type": "function", "function": {"name": n, "parameters": s}} for n, s in offered]}
    calls = completion(body, "done")["choices"][0]["message"].get("tool_calls") or []
    if picked is not None:  # the chat mock calls it with valid arguments, as the agent runs it
        assert [(c["function"]["name"], orjson.loads(c["function"]["arguments"])) for c in calls] == [(picked, arguments)]
    else:
        assert calls[0]["function"]["arguments"] == '{"n":0}'


MINI_PROMPT = "Submit your changes and finish your work by issuing the following command: `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`."


def test_mini_swe_agent_is_given_its_submit_command_after_the_turns_commands() -> None:
    """mini-swe-agent 2.x ends only when a command prints its marker; a text answer makes it loop to its step limit."""
    bash = [{"type": "function", "function": {"name": "bash", "parameters": SHELL_SCHEMA}}]
    messages = [{"role": "system", "content": "You are a helpful assistant"}, user(f"Please solve this issue: list the files\n{MINI_PROMPT}")]

    def called(body_messages: list[dict[str, Any]]) -> str | None:
        calls = completion({"model": "m", "messages": body_messages, "tools": bash}, "done")["choices"][0]["message"].get("tool_calls")
        return orjson.loads(calls[0]["function"]["arguments"])["command"] if calls else None

    assert called(messages) == "ls"
    messages += [assistant(None, [("c1", "bash", '{"command": "ls"}')]), tool("c1", "a.py")]
    assert called(messages) == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
    messages += [assistant(None, [("c2", "bash", '{"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}')]), tool("c2", "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")]
    assert called(messages) is None  # had it gone on: text


def test_codex_code_mode_exec_is_its_shell_and_is_given_javascript_that_runs_the_command() -> None:
    """Codex on its default model offers no shell function: the custom tool ``exec`` runs JavaScript that calls ``tools.exec_command``."""
    from router.tools.mock_answers import shell_arguments, shell_tool
    from router.tools.mock_responses import answer, output_items

    exec_tool = FunctionTool("exec", {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}, "await tools.exec_command(...)")
    assert shell_tool([FunctionTool("wait", {"type": "object"}), exec_tool]) is exec_tool
    # the command's output as it printed it (what exec_command returns holds it as ``output``), as a model writes it
    assert shell_arguments(exec_tool, "ls")["input"] == 'const r = await tools.exec_command({cmd: "ls"});\ntext(typeof r === "string" ? r : r.output ?? JSON.stringify(r));'
    body = {"model": "m", "input": [
        {"type": "additional_tools", "role": "developer", "tools": [{"type": "namespace", "name": "functions", "tools": [
            {"type": "custom", "name": "exec", "description": "await tools.exec_command(...)"}]}]},
        {"type": "message", "role": "user", "content": "list the files"},
    ]}  # fmt: skip
    (item,) = output_items(body, answer(body, "done"))
    assert item["type"] == "custom_tool_call" and item["name"] == "exec" and "tools.exec_command" in item["input"]


# Gemini CLI's tools in -p mode, as it declares them (cut): no shell, a directory listing among them
GEMINI_CLI_TOOLS = [
    ("update_topic", {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]}),
    ("list_directory", {"type": "object", "properties": {"dir_path": {"type": "string"}, "ignore": {"type": "array"}}, "required": ["dir_path"]}),
    ("read_file", {"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}),
]


def test_without_a_shell_the_chat_mock_lists_the_workspace_with_the_agents_listing_tool() -> None:
    """Gemini CLI, translated to a chat provider, offers no shell in -p mode: the chat mock calls its
    list_directory on ".", so the agent really lists the workspace instead of failing a dummy call."""
    body = {"model": "m", "messages": [user("list the files")], "tools": [{"type": "function", "function": {"name": n, "parameters": s}} for n, s in GEMINI_CLI_TOOLS]}
    calls = completion(body, "done")["choices"][0]["message"]["tool_calls"]
    assert [(c["function"]["name"], orjson.loads(c["function"]["arguments"])) for c in calls] == [("list_directory", {"dir_path": "."})]
