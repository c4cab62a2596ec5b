"""The Gemini API's vocabulary: contents, parts, their camelCase and snake_case names, Gemini CLI's markers. Pure.

Google's REST API takes every field in either spelling (``generationConfig`` or
``generation_config``; its curl examples use the second, the SDKs the first), so what the proxy
reads is read under both (:func:`field`) and written back under the name the client used.
A part holds one kind of data (``text``, ``inlineData``, ``fileData``, ``functionCall``,
``functionResponse``, ``executableCode``, ``codeExecutionResult``); ``thought: true`` marks a
text part as the model's thinking, and ``thoughtSignature`` may ride on any part of a model turn.
"""

from __future__ import annotations

from typing import Any

GEMINI = "gemini"
# Google's documented stand-in for a thought signature, for function calls Gemini did not make
# (a history translated from another API, or one whose own signature the proxy had to replace):
# "skip_thought_signature_validator" in the thought signature field skips the check
# (ai.google.dev/gemini-api/docs/thought-signatures, FAQ). Gemini CLI itself sends it for calls
# of its history that lack a signature.
SKIP_SIGNATURE = "skip_thought_signature_validator"
# Gemini CLI's first user part: the date, the OS and the workspace's files — context, not the user's words.
SESSION_CONTEXT_OPEN = "<session_context>"
IMAGE_MIME_PREFIX = "image/"

# Each field the proxy reads, as (camelCase, snake_case).
CONTENTS = ("contents", "contents")
SYSTEM = ("systemInstruction", "system_instruction")
TOOLS = ("tools", "tools")
TOOL_CONFIG = ("toolConfig", "tool_config")
GENERATION = ("generationConfig", "generation_config")
MAX_OUTPUT = ("maxOutputTokens", "max_output_tokens")
THINKING = ("thinkingConfig", "thinking_config")
THINKING_BUDGET = ("thinkingBudget", "thinking_budget")
THINKING_LEVEL = ("thinkingLevel", "thinking_level")
INCLUDE_THOUGHTS = ("includeThoughts", "include_thoughts")
RESPONSE_MIME = ("responseMimeType", "response_mime_type")
RESPONSE_SCHEMA = ("responseSchema", "response_schema")
RESPONSE_JSON_SCHEMA = ("responseJsonSchema", "response_json_schema")
DECLARATIONS = ("functionDeclarations", "function_declarations")
FUNCTION_CALL = ("functionCall", "function_call")
FUNCTION_RESPONSE = ("functionResponse", "function_response")
INLINE_DATA = ("inlineData", "inline_data")
FILE_DATA = ("fileData", "file_data")
MIME_TYPE = ("mimeType", "mime_type")
SIGNATURE = ("thoughtSignature", "thought_signature")
CACHED_CONTENT = ("cachedContent", "cached_content")


def field(obj: Any, name: tuple[str, str]) -> Any:
    """``obj``'s field under either spelling (the camelCase one first); None when absent or ``obj`` is no object."""
    if not isinstance(obj, dict):
        return None
    value = obj.get(name[0])
    return obj.get(name[1]) if value is None else value


def key_of(obj: dict[str, Any], name: tuple[str, str]) -> str:
    """The spelling ``obj`` uses for ``name`` (camelCase when it has neither)."""
    return name[1] if name[0] not in obj and name[1] in obj else name[0]


def parts_of(content: Any) -> list[dict[str, Any]]:
    """A content's parts (the objects among them)."""
    parts = content.get("parts") if isinstance(content, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def is_model(content: Any) -> bool:
    return isinstance(content, dict) and content.get("role") == "model"


def function_call(part: Any) -> dict[str, Any] | None:
    value = field(part, FUNCTION_CALL)
    return value if isinstance(value, dict) else None


def function_response(part: Any) -> dict[str, Any] | None:
    value = field(part, FUNCTION_RESPONSE)
    return value if isinstance(value, dict) else None


def signature_of(part: Any) -> str | None:
    value = field(part, SIGNATURE)
    return value if isinstance(value, str) and value else None


def is_thought(part: Any) -> bool:
    return isinstance(part, dict) and part.get("thought") is True


def text_of(part: Any) -> str | None:
    """The text of a text part that is not thinking; None for any other part."""
    text = part.get("text") if isinstance(part, dict) else None
    return text if isinstance(text, str) and not is_thought(part) else None


def is_image_part(part: Any) -> bool:
    """An ``inlineData`` or ``fileData`` part of an image type."""
    data = field(part, INLINE_DATA) or field(part, FILE_DATA)
    mime = field(data, MIME_TYPE)
    return isinstance(mime, str) and mime.startswith(IMAGE_MIME_PREFIX)


def is_session_context(text: str) -> bool:
    return text.lstrip().startswith(SESSION_CONTEXT_OPEN)


def words_of(content: Any) -> str:
    """What a user content really says: its text parts, without thinking and Gemini CLI's session context."""
    return "\n".join(t for p in parts_of(content) if (t := text_of(p)) is not None and t and not is_session_context(t))


def all_text(content: Any) -> str:
    """Every text part of a content that is not thinking, joined by newlines (a system instruction's text)."""
    if isinstance(content, str):
        return content
    return "\n".join(t for p in parts_of(content) if (t := text_of(p)) is not None)


def first_call_at(parts: list[dict[str, Any]]) -> int | None:
    """The index of a model turn's first ``functionCall`` part (the one a signature must ride on), or None."""
    return next((i for i, part in enumerate(parts) if function_call(part) is not None), None)


def current_turn_start(contents: list[Any]) -> int:
    """Where Google's "current turn" starts: the last user content with standard content (text,
    images — not only function responses). Signatures are checked from there on."""
    for at in range(len(contents) - 1, -1, -1):
        content = contents[at]
        if isinstance(content, dict) and content.get("role") != "model" and any(function_response(p) is None for p in parts_of(content)):
            return at
    return 0
