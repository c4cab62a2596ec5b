"""Small builders of Anthropic Messages and OpenAI Responses request bodies, shaped like the agents' own."""

from __future__ import annotations

from typing import Any

import orjson

from router.translate.protocol import AnswerIds

# Claude Code's Bash tool and Codex's exec_command tool, as they declare them (descriptions cut).
BASH = {
    "name": "Bash",
    "description": "Executes a given bash command.",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}, "timeout": {"type": "number"}, "description": {"type": "string"}},
        "required": ["command"],
        "additionalProperties": False,
    },
}
READ = {"name": "Read", "description": "Reads a file.", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}}
WEB_SEARCH_SERVER_TOOL = {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}
EXEC_COMMAND = {
    "type": "function",
    "name": "exec_command",
    "description": "Runs a command in a PTY.",
    "strict": False,
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}, "yield_time_ms": {"type": "number"}}, "required": ["cmd"]},
}
VIEW_IMAGE = {"type": "function", "name": "view_image", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}
NAMESPACE_TOOL = {"type": "namespace", "name": "multi_agent_v1", "tools": []}
WEB_SEARCH_TOOL = {"type": "web_search", "external_web_access": False}


def anthropic_body(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "claude-mock", "max_tokens": 1024, "messages": list(messages) or [anthropic_user("hi")], **extra}


def anthropic_user(*blocks: str | dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": b} if isinstance(b, str) else b for b in blocks]}


def tool_use(call_id: str, name: str = "Bash", **arguments: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": name, "input": arguments}]}


def tool_result(call_id: str, content: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": False}


def responses_body(*items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "mock-model", "input": list(items) or [input_message("user", "hi")], **extra}


def input_message(role: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


def function_call(call_id: str, name: str = "exec_command", **arguments: Any) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": orjson.dumps(arguments).decode()}


def function_call_output(call_id: str, output: Any) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def sse_events(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    """A named-event SSE stream as (event name, parsed data) pairs."""
    events = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        events.append((fields["event"], orjson.loads(fields["data"])))
    return events


def reasoning_item(summary: str, encrypted: str = "c2VhbGVk") -> dict[str, Any]:
    """A reasoning item as Codex echoes it back: summary, ``content: null``, the provider's sealed content."""
    return {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": summary}], "content": None, "encrypted_content": encrypted}


def input_image(url: str = "data:image/png;base64,AAAA", detail: str | None = None) -> dict[str, Any]:
    part = {"type": "input_image", "image_url": url}
    return {**part, "detail": detail} if detail is not None else part


# What a translated answer is given outside the pure translations: fixed, so a test can name them.
ANSWER_IDS = AnswerIds("0123456789abcdef01234567", 1_700_000_000)
