"""An Anthropic Messages request, read for the chain. Pure.

What the proxy needs from a ``POST /v1/messages`` body (Claude Code, the
``anthropic`` SDK), and nothing more:

* :func:`validate_messages_body` checks the minimal shape and raises
  :class:`AnthropicInvalid`; everything else (``thinking``, ``context_management``,
  ``safeguards``, ``cache_control``, betas' fields, unknown block types) passes
  through for the provider to judge (WHAT-USERS-HIT #8, #16).
* :func:`chat_view` is the conversation as OpenAI-chat-shaped messages, the base
  of the translation to a chat provider; the stages read the neutral view of
  :mod:`router.wire.anthropic_messages.view` instead.
* What identifies the session and the user's real words: the session part of
  ``metadata.user_id`` (a JSON string); Claude Code's ``<system-reminder>`` blocks
  and billing line, which carry no task and change between runs, are recognised
  here (:func:`is_reminder`, :func:`is_billing_line`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from router.core.content import Message
from router.core.sse import is_event_of_type

ROLES = ("user", "assistant", "system")  # "system" inside messages: the mid-conversation system beta
# The signature of a thinking block the proxy made from a chat model's ``reasoning_content``:
# Anthropic signs its own; this one's ':' occurs in no base64 text, so it is never a real signature.
PROXY_THINKING_SIGNATURE = "pinch-router:reasoning_content"
_PROXY_SIGNATURES = (PROXY_THINKING_SIGNATURE, "")  # "": as versions before the marker wrote it
REMINDER_OPEN = "<system-reminder>"
BILLING_PREFIX = "x-anthropic-billing-header:"

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "api_error",
    504: "api_error",
    529: "overloaded_error",
}


def error_type(status: int) -> str:
    """Anthropic's error ``type`` for an HTTP status."""
    return ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def error_payload(status: int, message: str) -> dict[str, Any]:
    """``{"type": "error", "error": {"type", "message"}}``, the one shape of every Anthropic error."""
    return {"type": "error", "error": {"type": error_type(status), "message": message}}


class AnthropicInvalid(ValueError):
    """The body is not a usable Messages request; the message names the field, as Anthropic's do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


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
        raise AnthropicInvalid(f"{where}.role: must be one of {', '.join(ROLES)} (got {role!r})")
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
        if kind == "thinking" and role == "assistant" and block.get("signature") in _PROXY_SIGNATURES:
            proxy_thinking = True
    return proxy_thinking


# ----------------------------------------------------------------------------------------------
# The chat view


def blocks_of(content: Any) -> list[dict[str, Any]]:
    """A message's content as blocks: a string is one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def system_blocks(system: Any) -> list[dict[str, Any]]:
    return blocks_of(system)


def is_billing_line(text: str) -> bool:
    """Claude Code's first system block: its version and entry point, not an instruction."""
    return text.startswith(BILLING_PREFIX)


def is_reminder(text: str) -> bool:
    """A ``<system-reminder>`` block Claude Code adds to user turns: context, not the user's words."""
    return text.lstrip().startswith(REMINDER_OPEN)


def image_part(block: dict[str, Any]) -> dict[str, Any] | None:
    """An Anthropic image block as an OpenAI ``image_url`` part (base64 ⇒ a data URL)."""
    source = block.get("source")
    if not isinstance(source, dict):
        return None
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        return {"type": "image_url", "image_url": {"url": f"data:{source.get('media_type', 'image/png')};base64,{source['data']}"}}
    if source.get("type") == "url" and isinstance(source.get("url"), str):
        return {"type": "image_url", "image_url": {"url": source["url"]}}
    return None


def result_parts(content: Any) -> tuple[str, list[dict[str, Any]]]:
    """A ``tool_result``'s content: its text (text blocks joined by newlines) and its images as image parts."""
    if isinstance(content, str):
        return content, []
    texts, images = [], []
    for block in blocks_of(content):
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "image" and (part := image_part(block)) is not None:
            images.append(part)
    return "\n".join(texts), images


def chat_view(system: Any, messages: list[Message]) -> list[Message]:
    """The conversation as chat messages, the base of the translation to a chat provider
    (:mod:`router.translate.messages_chat`): each ``tool_result`` a ``tool`` message right where it
    was, its images after it as the user's; unknown blocks kept for the translation to judge."""
    out: list[Message] = []
    system_texts = [b["text"] for b in system_blocks(system) if isinstance(b.get("text"), str)]
    if system_texts:
        out.append({"role": "system", "content": "\n\n".join(system_texts)})
    for message in messages:
        role = message.get("role")
        blocks = blocks_of(message.get("content"))
        if role == "assistant":
            out.append(_assistant_view(blocks))
            continue
        parts: list[dict[str, Any]] = []
        for block in blocks:
            kind = block.get("type")
            if kind == "tool_result":
                text, images = result_parts(block.get("content"))
                out.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": text})
                parts += images  # a tool message holds text only; its images follow as the user's
            elif kind == "text":
                parts.append({"type": "text", "text": block["text"]})
            elif kind == "image":
                if (part := image_part(block)) is not None:
                    parts.append(part)
            else:
                parts.append(block)  # documents and the like
        if parts or role == "system":
            out.append({"role": "system" if role == "system" else "user", "content": parts})
    return out


def _assistant_view(blocks: list[dict[str, Any]]) -> Message:
    texts, reasoning, calls = [], [], []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text", ""))
        elif kind == "thinking":
            reasoning.append(str(block.get("thinking", "")))
        elif kind == "tool_use":
            arguments = orjson.dumps(block.get("input", {})).decode()
            calls.append({"id": block["id"], "type": "function", "function": {"name": block["name"], "arguments": arguments}})
    message: Message = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        message["tool_calls"] = calls
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    return message


def metadata_session(body: dict[str, Any]) -> str | None:
    """The session part of ``metadata.user_id``: Claude Code sends a JSON string with ``session_id``."""
    metadata = body.get("metadata")
    user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
    if not isinstance(user_id, str) or not user_id.startswith("{"):
        return None
    try:
        parsed = orjson.loads(user_id)
    except orjson.JSONDecodeError:
        return None
    session = parsed.get("session_id") if isinstance(parsed, dict) else None
    return session.strip() if isinstance(session, str) and session.strip() else None


def wants_json_output(body: dict[str, Any]) -> bool:
    """``output_config.format`` asks for JSON (a schema), which the gate must see as JSON mode."""
    config = body.get("output_config")
    fmt = config.get("format") if isinstance(config, dict) else None
    return isinstance(fmt, dict) and fmt.get("type") in ("json_schema", "json_object", "json")


def wants_thinking(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def is_proxy_thinking(block: Any) -> bool:
    """A thinking block the proxy made (signed with :data:`PROXY_THINKING_SIGNATURE`, or unsigned)."""
    return isinstance(block, dict) and block.get("type") == "thinking" and block.get("signature") in _PROXY_SIGNATURES


def without_proxy_thinking(body: dict[str, Any]) -> dict[str, Any] | None:
    """The body for an Anthropic-format provider, without the thinking blocks the proxy made; None
    when it has none (the body goes out as it is).

    Such a block came from an OpenAI-chat model's ``reasoning_content`` earlier in the session;
    Anthropic rejects a thinking block it did not sign, so it is left out (a chat model that
    needs its reasoning back still gets it: translations read the body before this). Real signed
    blocks, redacted thinking and every other block stay as they are; an assistant message left
    with nothing is left out (:func:`without_blocks`). Whether thinking must then go off is
    :func:`tool_loop_without_thinking`'s question, asked of the client's body.
    """
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    made = frozenset(
        (m, b)
        for m, message in enumerate(messages)
        if isinstance(message, dict) and message.get("role") == "assistant" and isinstance(message.get("content"), list)
        for b, block in enumerate(message["content"])
        if is_proxy_thinking(block)
    )
    return {**body, "messages": without_blocks(messages, made)} if made else None


def without_blocks(messages: list[Any], positions: frozenset[tuple[int, int]]) -> list[Any]:
    """``messages`` without the blocks at ``positions`` (message index, block index); an assistant
    message left with nothing is left out (Anthropic joins the user turns around it). Every other
    message is the very same object."""
    out: list[Any] = []
    for m, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list) or not any((m, b) in positions for b in range(len(content))):
            out.append(message)
            continue
        kept = [block for b, block in enumerate(content) if (m, b) not in positions]
        if kept or message.get("role") != "assistant":
            out.append({**message, "content": kept})
    return out


# What ``x-router-dropped`` and the decision row say when thinking is switched off for one request.
THINKING_OFF_MID_TOOL_LOOP = "thinking (tool loop without Anthropic's thinking)"
THINKING_BLOCKS = ("thinking", "redacted_thinking")
MIN_THINKING_BUDGET = 1024  # Anthropic's floor for ``thinking.budget_tokens``


def last_assistant_at(messages: Sequence[Any]) -> int | None:
    """The index of the last assistant message (the step the request continues), or None."""
    for at in range(len(messages) - 1, -1, -1):
        message = messages[at]
        if isinstance(message, dict) and message.get("role") == "assistant":
            return at
    return None


def tool_loop_without_thinking(messages: Sequence[Any]) -> bool:
    """Whether Anthropic would refuse this conversation with thinking on: while thinking is on, the
    last assistant message, when it calls tools (the tool loop the request continues), must start
    with a ``thinking`` or ``redacted_thinking`` block Anthropic signed ("Expected `thinking` or
    `redacted_thinking`, but found `tool_use`…"). It does not when that step came from another
    provider mid loop — an OpenAI-chat or Ollama model gives none, and the thinking the proxy made
    from a chat model's reasoning is left out (:func:`without_proxy_thinking`). Only the last
    assistant message counts: a loop that ended with the assistant's text and a new user turn
    needs no thinking from the turns before it."""
    at = last_assistant_at(messages)
    blocks = blocks_of(messages[at].get("content")) if at is not None else []
    if not any(b.get("type") == "tool_use" for b in blocks):
        return False
    first = next((b for b in blocks if not is_proxy_thinking(b)), None)
    return first is None or first.get("type") not in THINKING_BLOCKS


def with_thinking_off(body: dict[str, Any], form: str = "omit") -> dict[str, Any]:
    """The body with thinking switched off for this one request, in the model's ``form``
    (``models[].thinking_off``): ``omit`` leaves ``thinking`` out (models that think only when
    asked), ``disabled`` and ``between_tools`` send that type (models that think by default; the
    newest refuse ``disabled`` and take ``between_tools``). The ``clear_thinking_*`` edits of
    ``context_management``, which Anthropic accepts only with thinking on, are left out. This is
    Anthropic's advice for a tool loop without its thinking ("To avoid this requirement, disable
    `thinking`"), and its rule of one thinking configuration per assistant turn: the loop began
    without thinking; the next user turn has it again."""
    sent = dict(body)
    if form == "omit":
        sent.pop("thinking", None)
    else:
        sent["thinking"] = {"type": form}
    _drop_thinking_edits(sent)
    return sent


def thinking_within_output_limit(body: dict[str, Any], asked: int, off_form: str = "omit") -> dict[str, Any] | None:
    """The body whose ``max_tokens`` the proxy lowered from the client's ``asked``, with its thinking
    budget fitted to the new limit; None when ``thinking`` goes as the client sent it. Anthropic
    requires ``budget_tokens`` below ``max_tokens``: a budget the client kept below its own limit
    but at or above the lowered one is scaled down with the limit (at least Anthropic's floor of
    1024), and with no room for even that, thinking is off (:func:`with_thinking_off` in the
    model's ``off_form``). Not the proxy's to mend: a budget that still fits, thinking other than
    ``enabled`` with a budget (``adaptive`` has none), or the client's own budget at or above its
    own limit (the interleaved-thinking beta allows that)."""
    thinking, sent = body.get("thinking"), body.get("max_tokens")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled" or not isinstance(sent, int):
        return None
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < sent or budget >= asked:
        return None
    if sent <= MIN_THINKING_BUDGET:
        return with_thinking_off(body, off_form)
    return {**body, "thinking": {**thinking, "budget_tokens": max(MIN_THINKING_BUDGET, budget * sent // asked)}}


def _drop_thinking_edits(body: dict[str, Any]) -> None:
    management = body.get("context_management")
    edits = management.get("edits") if isinstance(management, dict) else None
    if not isinstance(edits, list):
        return
    kept = [e for e in edits if not (isinstance(e, dict) and str(e.get("type", "")).startswith("clear_thinking"))]
    if len(kept) == len(edits):
        return
    if kept or len(management) > 1:
        body["context_management"] = {**management, "edits": kept}
    else:
        del body["context_management"]


MESSAGE_STOP = frozenset({"message_stop"})


def is_message_stop(data: bytes) -> bool:
    """Whether one SSE data payload is ``message_stop``, the last event of an Anthropic stream (there is no ``[DONE]``)."""
    return is_event_of_type(data, MESSAGE_STOP)
