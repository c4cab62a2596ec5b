"""What the mock upstream answers, before any wire format: one scripted turn of an agent's loop.

The Anthropic Messages and OpenAI Responses mocks (``mock_anthropic``,
``mock_responses``) share this script, so a real agent completes a tool round
trip against either: the first turn calls a tool taken from the request's own
tools list (a shell tool when there is one, with a command that lists files),
and once the request carries that tool's result the answer is text quoting it.
A request asking for JSON with a schema gets an instance of that schema (the
agents' title requests); thinking/reasoning, when asked for, comes first and is
sealed so a later turn can be checked for sending it back unchanged.
Everything here is pure: plain data in, plain data out.
"""

from __future__ import annotations

import re

import base64
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

# Shell tools by the names agents give them, best first: Claude Code's Bash,
# Codex's shell / shell_command / exec_command (its name depends on the version). A tool by
# another name is a shell tool when its schema requires a command (see :func:`shell_tool`).
SHELL_TOOL_NAMES = ("bash", "shell", "shell_command", "exec_command", "local_shell", "run_command", "terminal")
COMMAND_ARGUMENT_NAMES = ("command", "cmd", "commands", "script")
# Tools that list a directory, called when no shell tool is offered: Gemini CLI's list_directory
# (in -p mode it offers no shell), and the like. Their path is the workspace: ".".
LISTING_TOOLS = ("list_directory", "list_dir", "list_files", "ls")
PATH_ARGUMENT_SUFFIXES = ("path", "dir", "directory")
LIST_FILES = "ls"
# What the shell-tool calls of one user turn run by default: one listing, then the answer.
ONE_LISTING = (LIST_FILES,)
# Agents that finish by running a command rather than by a text answer, and the command their
# prompt asks for: mini-swe-agent (2.x; 1.x's before it) ends when one prints this marker.
SUBMIT_COMMANDS = ("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "echo MINI_SWE_AGENT_FINAL_OUTPUT")
# The tool result quoted in the final answer is cut here: a huge listing should not make a huge answer.
MAX_QUOTED_RESULT_CHARS = 2000
# What an agent that compacts its session asks for, by its words: Codex's summarising prompt (on a
# custom provider), the proxy's own for a Responses compaction trigger (router.translate.compaction),
# Claude Code's /compact and auto-compact, Gemini CLI's history compression.
SUMMARY_REQUESTS = (
    "CONTEXT CHECKPOINT COMPACTION",
    "is about to be replaced by a summary",
    "Your task is to create a detailed summary of",
    "distilling chat history into a structured XML",
)
# The mock's summary. Once a user turn carries it (the agent's history after the compaction), that
# turn's commands count as run: the mock answers instead of calling them again, as a model reading
# the summary would — else a session compacted mid-turn would run its commands and compact forever.
MOCK_SUMMARY = "Summary by the mock upstream: the user's request was worked on; its commands ran and their output came back. Nothing is left to run."


def asks_for_summary(text: str) -> bool:
    """Whether ``text`` (the request's last user turn, or its system prompt) asks for a summary of the conversation."""
    return any(words in text for words in SUMMARY_REQUESTS)


def summary_text(asked: str) -> str:
    """The mock's summary as a model following the request ``asked`` (its words asking for one) writes it: in a
    ``<summary>`` block when asked for one (Claude Code's compaction prompt; 2.1.332's auto-compact asks again
    for a reply without one, then gives up and compacts again and again), else as it is."""
    return f"<summary>\n{MOCK_SUMMARY}\n</summary>" if "<summary>" in asked else MOCK_SUMMARY


@dataclass(frozen=True, slots=True)
class FunctionTool:
    """A tool the client offered: its name, the JSON schema of its arguments and its description."""

    name: str
    schema: dict[str, Any]
    description: str = ""

    @property
    def runs_code(self) -> bool:
        """Codex's code mode (its default model): the shell is ``tools.exec_command`` inside the custom tool
        ``exec``, which takes JavaScript (a chat model sees it as a function of one string, ``input``)."""
        return "tools.exec_command(" in self.description and bool(self.schema.get("required") == ["input"] or self.schema == {})


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]

    @property
    def arguments_json(self) -> str:
        return orjson.dumps(self.arguments).decode()


@dataclass(frozen=True, slots=True)
class ScriptedAnswer:
    """One assistant turn: optional reasoning first, then a tool call or text (never both)."""

    text: str = ""
    tool_call: ToolCall | None = None
    reasoning: str | None = None


@dataclass(frozen=True, slots=True)
class MockWire:
    """One client API the mock serves, as the pure functions its handler needs."""

    name: str
    # the body of an error with this status and message, in the API's own shape
    error_body: Callable[[int, str], dict[str, Any]]
    # why the request is invalid (→ 400), or None
    request_error: Callable[[dict[str, Any]], str | None]
    # what to answer, given the request, the answer text and the tool commands of the mock's behaviour
    answer: Callable[[dict[str, Any], str, tuple[str, ...]], ScriptedAnswer]
    # the non-streamed answer
    message: Callable[[dict[str, Any], ScriptedAnswer], dict[str, Any]]
    # the streamed answer, as complete SSE events (or the pieces of Gemini's JSON array)
    events: Callable[[dict[str, Any], ScriptedAnswer], list[bytes]]
    # the streamed answer's content type
    stream_type: Callable[[dict[str, Any]], str] = lambda body: "text/event-stream"
    # what the path says beside the body (its named parts, the query), read as fields of the body
    # (Gemini's model and stream); None: the body says it all
    path_facts: Callable[[Mapping[str, str], Mapping[str, str]], dict[str, Any]] | None = None


def shell_tool(tools: list[FunctionTool]) -> FunctionTool | None:
    """The agent's shell tool: one named as a shell tool is (:data:`SHELL_TOOL_NAMES`, best first), else
    the first whose schema requires a command — a required string (or list of strings) property named
    ``command``, ``cmd``, ``commands`` or ``script`` — whatever the tool is called (Qwen Code's
    ``run_shell_command``, Cline's ``run_commands``, mini-swe-agent's ``bash``)."""
    for wanted in SHELL_TOOL_NAMES:
        for tool in tools:
            if tool.name.lower() == wanted:
                return tool
    return next((tool for tool in tools if _requires_a_command(tool.schema) or tool.runs_code), None)


def _requires_a_command(schema: dict[str, Any]) -> bool:
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    for name in COMMAND_ARGUMENT_NAMES:
        prop = properties.get(name)
        if name not in required or not isinstance(prop, dict):
            continue
        items = prop.get("items") if isinstance(prop.get("items"), dict) else {}
        if prop.get("type") == "string" or (prop.get("type") == "array" and items.get("type") == "string"):
            return True
    return False


def pick_tool(tools: list[FunctionTool]) -> FunctionTool | None:
    """The tool the mock calls: the shell tool if offered (so the agent really runs something), else a
    tool that lists a directory (:data:`LISTING_TOOLS`), else the first."""
    return shell_tool(tools) or listing_tool(tools) or (tools[0] if tools else None)


def listing_tool(tools: list[FunctionTool]) -> FunctionTool | None:
    """A tool that lists a directory (:data:`LISTING_TOOLS`), for an agent that offers no shell."""
    return next((t for t in tools if t.name.lower() in LISTING_TOOLS), None)


def submit_command(texts: str) -> str | None:
    """The command the agent's prompt (``texts``: the request's text, in any shape) says ends its task, if any."""
    return next((command for command in SUBMIT_COMMANDS if command in texts), None)


def example_of(schema: Any, name: str = "", command: str = LIST_FILES) -> Any:
    """A small value valid for ``schema`` (only its required properties for objects).

    A property named like a command gets ``command`` (``ls``), so a shell tool called
    with it runs that whatever its schema calls the command.
    """
    if not isinstance(schema, dict):
        return command if name in COMMAND_ARGUMENT_NAMES else f"mock {name}".strip()
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for alternatives in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(alternatives), list) and schema[alternatives]:
            return example_of(schema[alternatives][0], name, command)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = schema.get("required")
        required = [key for key in required if isinstance(key, str)] if isinstance(required, list) else []
        return {key: example_of(properties.get(key), key, command) for key in required}
    if kind == "array":
        return [example_of(schema.get("items"), name, command)]
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return example_of(None, name, command)


def next_command(commands: tuple[str, ...], results_this_turn: int, submit: str | None = None) -> str | None:
    """The command of the user turn's next tool call, None once every one has its result.

    The mock calls the shell tool with ``commands`` one after another within one user
    turn (``mock-upstream --tool-command``, default one ``ls``), so a real agent runs
    several tool turns and their results pile up in its history, as in a real session.
    ``submit``: an agent that ends its task with a command (:func:`submit_command`) gets
    that command after the others, instead of a text answer it would not take as an end.
    """
    if results_this_turn < len(commands):
        return commands[results_this_turn]
    return submit if submit is not None and results_this_turn == len(commands) else None


def call_tool(tools: list[FunctionTool], call_id: str, command: str | None = LIST_FILES) -> ToolCall | None:
    """A call of the tool :func:`pick_tool` picks, running ``command``; None without tools or command."""
    tool = pick_tool(tools)
    if tool is None or command is None:
        return None
    return ToolCall(call_id, tool.name, shell_arguments(tool, command))


# The first line of a result the proxy cut at first sight (router.core.first_sight.long_output.summary_marker).
RETRIEVE_MARKER = re.compile(r'pinch_retrieve\("([^"]{1,512})"\) returns the whole output')
RETRIEVE_LEAD_IN = "Some of that output was cut; I will read all of it. "


def retrieve_call(tool_names: list[str], results: list[str], call_id: str) -> ToolCall | None:
    """A call of ``pinch_retrieve`` for the first cut result among the latest ``results`` (the tool
    results that end the conversation), when the tool is offered: what a model does when a cut output
    is what it needs. None otherwise (after the proxy answered it, the latest result is the whole output)."""
    if "pinch_retrieve" not in tool_names:
        return None
    for text in results:
        found = RETRIEVE_MARKER.search(text)
        if found is not None:
            return ToolCall(call_id, "pinch_retrieve", {"id": found.group(1)})
    return None


def shell_arguments(tool: FunctionTool, command: str) -> dict[str, Any]:
    """The arguments that make ``tool`` run ``command``: valid for its schema, the command where the
    schema names one; for Codex's code-mode ``exec``, JavaScript that runs it and hands back its output
    (the ``output`` of what ``exec_command`` returns, its lines as the command printed them, as a model
    writes it; the whole result as JSON when it has none)."""
    if tool.runs_code:
        script = f"const r = await tools.exec_command({{cmd: {orjson.dumps(command).decode()}}});\ntext(typeof r === \"string\" ? r : r.output ?? JSON.stringify(r));"
        return {"input": script}
    arguments = example_of(tool.schema, command=command)
    if not isinstance(arguments, dict):
        return {}
    if tool.name.lower() in LISTING_TOOLS:  # the workspace, not example_of's "mock dir_path": the agent really lists it
        return {k: ("." if k.lower().endswith(PATH_ARGUMENT_SUFFIXES) else v) for k, v in arguments.items()}
    return arguments


def quoting_tool_result(text: str, result: str) -> str:
    """The final answer: the mock's text and what the tool said, its first 2,000 characters (every mock API alike)."""
    return f"{text} (tool said: {result[:MAX_QUOTED_RESULT_CHARS]})"


def scripted_answer(call: ToolCall | None, results: list[str], text: str, otherwise: str | None = None) -> ScriptedAnswer:
    """The answer every mock API gives a turn: ``call`` when there is one (the user turn's next command,
    :func:`call_tool`); once every command has its result, ``text`` quoting the turn's ``results``; else
    ``otherwise`` (JSON when the request asks for it), or ``text``."""
    if call is not None:
        return ScriptedAnswer(tool_call=call)
    if results:
        return ScriptedAnswer(text=quoting_tool_result(text, "\n".join(results)))
    return ScriptedAnswer(text=text if otherwise is None else otherwise)


def json_answer(schema: Any) -> str:
    return orjson.dumps(example_of(schema)).decode()


def reasoning_about(answer: ScriptedAnswer) -> str:
    """The thinking the mock shows before ``answer``: it says what the turn will do."""
    if answer.tool_call is not None:
        return f"The user wants something only a tool can tell. I will call {answer.tool_call.name}."
    return "I have what I need. I will answer."


def seal(text: str) -> str:
    """The signature of a thinking block / the encrypted content of a reasoning item.

    Deterministic, so the mock can check that a client sent its reasoning back
    byte for byte — as Anthropic and OpenAI do (a changed thinking block is a 400).
    """
    return base64.b64encode(hashlib.sha256(b"pinch-router mock reasoning\0" + text.encode()).digest() * 2).decode()


def estimate_tokens(*parts: Any) -> int:
    """A rough token count of request parts (1 token ≈ 4 bytes of their JSON), never zero."""
    return max(1, len(orjson.dumps(parts)) // 4)


def sse(event: str, data: dict[str, Any]) -> bytes:
    """One named SSE event, as both Anthropic and the Responses API send them."""
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def chunks(text: str, size: int) -> list[str]:
    """``text`` in pieces of ``size`` characters (the fragments a real stream arrives in)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def words(text: str) -> list[str]:
    """``text`` word by word, each with its following space: how the mocks stream text."""
    pieces = text.split(" ")
    return [piece + " " for piece in pieces[:-1]] + [pieces[-1]]
