"""Validation of an Ollama request (``/api/chat``, ``/api/generate``): what Ollama's own decoding refuses, and what
the proxy cannot serve. Pure.

Ollama decodes a body into Go structs, so a field of the wrong type is a 400 there too: a message's
``content`` that is not a string, ``images`` that are not strings (base64), a tool call's ``arguments``
that are not an object. Fields the proxy does not read pass (the translation carries what it can).
``stream`` defaults to true, as in Ollama's API. What Ollama would answer with no model run at all
— ``messages: []`` or an empty ``prompt``, which load a model (``keep_alive: 0`` unloads it) — is a
400 here: the proxy loads nothing. So are a fill-in-the-middle ``suffix`` and a ``raw`` prompt on
``/api/generate``: both are in the model's own template's tokens, which no translation carries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from router.core.content import Message
from router.core.errors import InvalidRequest
from router.core.redaction import quoted
from router.wire.request_fields import model_and_stream, tool_list

CHAT, GENERATE = "chat", "generate"
ACTIONS = (CHAT, GENERATE)
ROLES = ("system", "user", "assistant", "tool")
THINK_LEVELS = ("high", "medium", "low")
# The options the translations read (as chat's sampling fields), each a number; the rest pass unread.
NUMBER_OPTIONS = ("temperature", "top_p", "top_k", "min_p", "seed", "frequency_penalty", "presence_penalty", "repeat_penalty")
INTEGER_OPTIONS = ("num_predict", "num_ctx")
_STRING_OR_NULL = ("content", "thinking", "tool_name", "tool_call_id")


@dataclass(frozen=True, slots=True)
class OllamaRequest:
    """A valid body's fields the proxy reads. ``messages``: the chat's, or a generate request's system and
    prompt as the two messages they are to the model. ``output_limit``: ``options.num_predict`` when
    positive (-1, -2 and 0 set none)."""

    action: str
    model: str | None
    stream: bool
    messages: list[Message]
    tools: list[Any] | None
    has_images: bool
    tool_history: bool
    output_limit: int | None
    json_output: bool
    thinking: bool


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    """A JSON number: one a double holds, or one kept as the client wrote it (``1e400``, an ``orjson.Fragment``)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) or isinstance(value, orjson.Fragment)


def validate_ollama_body(body: Any, action: str | None) -> OllamaRequest:
    """The request ``body`` makes at ``/api/<action>`` (``chat`` when None), or :class:`InvalidRequest` naming what is wrong."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    action = action or CHAT
    model, stream = model_and_stream(body)
    output_limit = _options(body.get("options"))
    fmt = body.get("format")
    if fmt is not None and fmt not in ("", "json") and not isinstance(fmt, dict):
        raise InvalidRequest(f"'format' must be \"json\" or a JSON schema (an object), not {quoted(fmt)}", "format")
    keep_alive = body.get("keep_alive")
    if keep_alive is not None and not isinstance(keep_alive, str) and not _is_number(keep_alive):
        raise InvalidRequest("'keep_alive' must be a duration (\"5m\") or a number of seconds", "keep_alive")
    think = body.get("think")
    if think is not None and not isinstance(think, bool) and think not in THINK_LEVELS:
        raise InvalidRequest(f"'think' must be a boolean or one of {', '.join(THINK_LEVELS)}, not {quoted(think)}", "think")
    tools = tool_list(body, _check_tool)
    messages = _chat_messages(body) if action == CHAT else _generate_messages(body)
    return OllamaRequest(
        action=action,
        model=model,
        stream=stream is not False,  # Ollama's API streams unless told not to
        messages=messages,
        tools=tools or None,
        has_images=any(m.get("images") for m in messages),
        tool_history=any(m.get("role") == "tool" or m.get("tool_calls") for m in messages),
        output_limit=output_limit,
        json_output=fmt == "json" or isinstance(fmt, dict),
        thinking=think is True or think in THINK_LEVELS,
    )


def _options(options: Any) -> int | None:
    """The output limit ``options`` sets (``num_predict``), once its fields the proxy reads are checked."""
    if options is None:
        return None
    if not isinstance(options, dict):
        raise InvalidRequest("'options' must be an object", "options")
    for key in INTEGER_OPTIONS:
        if options.get(key) is not None and not _is_int(options[key]):
            raise InvalidRequest(f"'options.{key}' must be an integer", f"options.{key}")
    for key in NUMBER_OPTIONS:
        if options.get(key) is not None and not _is_number(options[key]):
            raise InvalidRequest(f"'options.{key}' must be a number", f"options.{key}")
    stop = options.get("stop")
    if stop is not None and not isinstance(stop, str) and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        raise InvalidRequest("'options.stop' must be a string or an array of strings", "options.stop")
    limit = options.get("num_predict")
    return limit if _is_int(limit) and limit > 0 else None


def _check_tool(tool: Any, where: str) -> None:
    """A function tool, as Ollama takes tools: a named function, its parameters a schema (an object) or none."""
    function = tool.get("function") if isinstance(tool, dict) else None
    if not isinstance(function, dict) or tool.get("type", "function") != "function":
        raise InvalidRequest(f"'{where}' must be a function tool: {{\"type\": \"function\", \"function\": {{…}}}}", where)
    if not isinstance(function.get("name"), str) or not function["name"]:
        raise InvalidRequest(f"'{where}.function.name' must be a non-empty string", f"{where}.function.name")
    if function.get("parameters") is not None and not isinstance(function["parameters"], dict):
        raise InvalidRequest(f"'{where}.function.parameters' must be an object", f"{where}.function.parameters")


def _chat_messages(body: dict[str, Any]) -> list[Message]:
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise InvalidRequest("'messages' must be an array of message objects", "messages")
    if not messages:
        raise InvalidRequest("'messages' is empty: Ollama would only load the model, and pinch-router loads none (send a message)", "messages")
    for index, message in enumerate(messages):
        _check_message(message, index)
    return messages


def _message_error(index: int, where: str, problem: str) -> InvalidRequest:
    return InvalidRequest(f"messages[{index}]{where} {problem}", f"messages.{index}{where}")


def _check_message(message: Any, index: int) -> None:
    if not isinstance(message, dict):
        raise _message_error(index, "", "must be an object")
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise _message_error(index, ".role", f"is {quoted(role)}, not one of {', '.join(ROLES)}")
    for key in _STRING_OR_NULL:
        if message.get(key) is not None and not isinstance(message[key], str):
            raise _message_error(index, f".{key}", "must be a string")
    images = message.get("images")
    if images is not None and not (isinstance(images, list) and all(isinstance(i, str) for i in images)):
        raise _message_error(index, ".images", "must be an array of base64 strings")
    calls = message.get("tool_calls")
    if calls is None:
        return
    if not isinstance(calls, list):
        raise _message_error(index, ".tool_calls", "must be an array")
    for j, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise _message_error(index, f".tool_calls[{j}].function", "must be an object with a string 'name'")
        if function.get("arguments") is not None and not isinstance(function["arguments"], dict):
            raise _message_error(index, f".tool_calls[{j}].function.arguments", "must be an object")
        if call.get("id") is not None and not isinstance(call["id"], str):
            raise _message_error(index, f".tool_calls[{j}].id", "must be a string")


def _generate_messages(body: dict[str, Any]) -> list[Message]:
    """A generate request's system and prompt, with its images, as the messages they are to the model."""
    prompt, system, images = body.get("prompt"), body.get("system"), body.get("images")
    if prompt is not None and not isinstance(prompt, str):
        raise InvalidRequest("'prompt' must be a string", "prompt")
    if not prompt:
        raise InvalidRequest("'prompt' is empty: Ollama would only load the model, and pinch-router loads none (send a prompt)", "prompt")
    if system is not None and not isinstance(system, str):
        raise InvalidRequest("'system' must be a string", "system")
    if images is not None and not (isinstance(images, list) and all(isinstance(i, str) for i in images)):
        raise InvalidRequest("'images' must be an array of base64 strings", "images")
    if body.get("suffix"):
        raise InvalidRequest("'suffix' (fill in the middle) is not served: it is written in the model's own template tokens, which no translation carries", "suffix")
    if body.get("raw") is True:
        raise InvalidRequest("'raw' prompts are not served: a raw prompt is written in the model's own template tokens, which no translation carries", "raw")
    user: Message = {"role": "user", "content": prompt, **({"images": images} if images else {})}
    return [{"role": "system", "content": system}, user] if system else [user]
