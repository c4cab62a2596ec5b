"""Validation of an Anthropic Messages body (``POST /v1/messages``): the minimal shape, nothing more. Pure.

:func:`validate_messages_body` checks what the proxy reads and raises :class:`AnthropicInvalid`
naming the field, as Anthropic's errors do; everything else (``thinking``, ``context_management``,
``safeguards``, ``cache_control``, betas' fields, unknown block types) passes through for the
provider to judge (WHAT-USERS-HIT #8, #16). The view (:mod:`.view`) is built from its result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from router.core.content import Message
from router.core.errors import InvalidRequest
from router.core.redaction import quoted
from router.wire.anthropic_messages.blocks import is_proxy_thinking

# A message's role: Anthropic's two, and "system" for a mid-conversation system message, which Anthropic
# takes without a beta header on the models that have it (Claude Opus 4.8 first; the others answer 400) and
# Claude Code sends since 2.1.154, so it is passed on for the provider to judge (a chat provider gets a system
# message where it stood). The error names only the two roles every model takes (docs/conformance.md).
ROLES = ("user", "assistant", "system")
TURN_ROLES = ("user", "assistant")


class AnthropicInvalid(InvalidRequest):
    """The body is not a usable Messages request; the message names the field, as Anthropic's do
    (bounded as every wire's validation message is: :class:`~router.core.errors.InvalidRequest`)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class MessagesRequest:
    """What the proxy reads of a valid body; the body itself stays the client's."""

    model: str | None
    messages: list[Message]
    stream: bool
    max_tokens: int | None
    tools: list[dict[str, Any]] | None
    proxy_thinking: bool = False  # an assistant message holds thinking the proxy made (:func:`is_proxy_thinking`)


def validate_messages_body(body: Any, *, count_tokens: bool = False) -> MessagesRequest:
    """The minimal shape: ``model``, ``messages`` (roles, blocks with a ``type``, tool ids), ``max_tokens``
    (not for ``count_tokens``), ``system``, ``tools``, ``stream``. A missing ``model`` means "route for me"."""
    if not isinstance(body, dict):
        raise AnthropicInvalid("the request body must be a JSON object")
    model = body.get("model")
    if model is not None and (not isinstance(model, str) or not model):
        raise AnthropicInvalid("model: must be a non-empty string")
    max_tokens = body.get("max_tokens")
    if not count_tokens:
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise AnthropicInvalid("max_tokens: Field required (a positive integer)")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise AnthropicInvalid("stream: must be a boolean")
    _check_system(body.get("system"))
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise AnthropicInvalid("messages: a non-empty list of message objects is required")
    proxy_thinking = False
    for m, message in enumerate(messages):
        proxy_thinking |= _check_message(message, f"messages.{m}")
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise AnthropicInvalid("tools: must be a list")
        for t, tool in enumerate(tools):
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
                raise AnthropicInvalid(f"tools.{t}.name: Field required")
            if "input_schema" in tool and not isinstance(tool["input_schema"], dict):
                raise AnthropicInvalid(f"tools.{t}.input_schema: must be an object")
    for key in ("tool_choice", "thinking", "output_config", "metadata"):
        if body.get(key) is not None and not isinstance(body[key], dict):
            raise AnthropicInvalid(f"{key}: must be an object")
    stops = body.get("stop_sequences")
    if stops is not None and (not isinstance(stops, list) or not all(isinstance(s, str) for s in stops)):
        raise AnthropicInvalid("stop_sequences: must be a list of strings")
    return MessagesRequest(
        model=model,
        messages=messages,
        stream=stream,
        max_tokens=max_tokens if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) else None,
        tools=tools or None,
        proxy_thinking=proxy_thinking,
    )


def _check_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise AnthropicInvalid("system: must be a string or a list of text blocks")
    for b, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise AnthropicInvalid(f"system.{b}: must be a text block with a string 'text'")


def _check_message(message: Any, where: str) -> bool:
    """Raises for a malformed message; whether it holds thinking the proxy made (read in this one walk)."""
    if not isinstance(message, dict):
        raise AnthropicInvalid(f"{where}: must be an object")
    role = message.get("role")
    if role not in ROLES:
        allowed = " or ".join(repr(r) for r in TURN_ROLES)
        raise AnthropicInvalid(f"{where}.role: Input should be {allowed} (got {quoted(role)})")
    content = message.get("content")
    if isinstance(content, str):
        return False
    if not isinstance(content, list):
        raise AnthropicInvalid(f"{where}.content: must be a string or a list of content blocks")
    proxy_thinking = False
    for b, block in enumerate(content):
        at = f"{where}.content.{b}"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise AnthropicInvalid(f"{at}: must be an object with a string 'type'")
        kind = block["type"]
        if kind == "text" and not isinstance(block.get("text"), str):
            raise AnthropicInvalid(f"{at}.text: must be a string")
        if kind == "tool_use":
            if role != "assistant":
                raise AnthropicInvalid(f"{at}: tool_use blocks belong to assistant messages")
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise AnthropicInvalid(f"{at}: tool_use needs a string 'id' and 'name'")
            if not isinstance(block.get("input"), dict):
                raise AnthropicInvalid(f"{at}.input: must be an object")
        if kind == "tool_result":
            if role != "user":
                raise AnthropicInvalid(f"{at}: tool_result blocks belong to user messages")
            if not isinstance(block.get("tool_use_id"), str):
                raise AnthropicInvalid(f"{at}.tool_use_id: must be a string")
            inner = block.get("content")
            if inner is not None and not isinstance(inner, (str, list)):
                raise AnthropicInvalid(f"{at}.content: must be a string or a list of content blocks")
            if isinstance(inner, list) and not all(isinstance(x, dict) and isinstance(x.get("type"), str) for x in inner):
                raise AnthropicInvalid(f"{at}.content: every block must be an object with a string 'type'")
        if role == "assistant" and is_proxy_thinking(block):
            proxy_thinking = True
    return proxy_thinking


def answer_problem(answer: Any) -> str | None:
    """What makes a provider's whole answer (its JSON) no Anthropic ``message``, or None: a
    ``content`` list of blocks, each an object with a string ``type``. What a block holds is the
    model's (a ``tool_use`` whose input is no object reaches the client, whose tool refuses it)."""
    if not isinstance(answer, dict):
        return "not a JSON object"
    if answer.get("type", "message") != "message":
        return f"its type is {quoted(answer.get('type'))}, not message"
    content = answer.get("content")
    if not isinstance(content, list):
        return "its content is no list of blocks"
    for b, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            return f"content.{b} is no block with a string type"
    return None


# ----------------------------------------------------------------------------------------------
# The chat view
