"""Small readers over OpenAI chat messages, shared by every core."""

from __future__ import annotations

from typing import Any

Message = dict[str, Any]

TEXT_PART_TYPES = frozenset({"text", "input_text"})
IMAGE_PART_TYPES = frozenset({"image_url", "input_image", "image"})


def content_text(content: Any) -> str:
    """The text of a message's content: a string, or its text parts joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and part.get("type") in TEXT_PART_TYPES and isinstance(part.get("text"), str)
        )
    return ""


def has_image_part(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") in IMAGE_PART_TYPES for part in content
    )


def tool_call_arguments(message: Message) -> list[str]:
    """The `name(arguments)` strings of an assistant message's tool calls, in order."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    out = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            out.append(f"{function.get('name', '')}({function.get('arguments', '')})")
    return out
