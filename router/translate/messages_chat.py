"""Translation between the Anthropic Messages API and OpenAI chat completions, both ways. Pure.

Used when the client's format and the chosen provider's differ: Claude Code (Anthropic)
routed to an OpenAI-compatible or Ollama model, and opencode or aider (OpenAI chat)
routed to an ``api: anthropic`` model. Requests, answers and streams are translated;
a same-format request never comes here (it is passed through).

Decisions, where the two APIs have no common ground:

* Anthropic → chat. Claude Code's billing line is dropped from the system text (it
  is not an instruction); ``<system-reminder>`` blocks are kept (they are). Each
  ``tool_result`` becomes a ``tool`` message right after the assistant turn, exactly
  one per ``tool_call``: a duplicate result is dropped, a missing one is sent as
  ``(no result)`` (providers reject both otherwise), a result naming no call is dropped.
  Images in a tool result follow as a user message. ``thinking`` is dropped, or sent
  back as ``reasoning_content`` when the provider needs it (``reasoning_content=True``:
  DeepSeek and others require it on tool-call turns); the answer's reasoning comes back
  as thinking blocks signed :data:`~router.wire.anthropic_messages.request.PROXY_THINKING_SIGNATURE`,
  which an Anthropic provider is never sent (:func:`~router.wire.anthropic_messages.request.without_proxy_thinking`). Fields no chat API has —
  ``thinking``, ``context_management``, ``safeguards`` (it carries local paths),
  ``cache_control``, ``metadata``, ``top_k``, ``output_config.effort``, server tools —
  are dropped. ``output_config.format`` becomes ``response_format``.
* chat → Anthropic. Every system/developer message joins the top-level ``system``
  (Anthropic has no system role among messages outside a beta); consecutive tool
  messages become one user message of ``tool_result`` blocks; ``max_tokens`` is
  required there, so a request without one gets ``default_max_tokens``;
  ``response_format: json_schema`` becomes ``output_config.format``, ``json_object``
  has no equivalent and is dropped; tool-call arguments that are not a JSON object
  are sent as ``{"arguments": <text>}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from router.wire.anthropic_messages.request import (
    PROXY_THINKING_SIGNATURE,
    blocks_of,
    chat_view,
    is_billing_line,
    system_blocks,
)
from router.core.content import Message, content_text

NO_RESULT = "(no result)"

# ----------------------------------------------------------------------------------------------
# Anthropic request → chat request


def server_tools(body: dict[str, Any]) -> tuple[str, ...]:
    """The tools a chat provider cannot run (Anthropic's server tools: no ``input_schema``), as
    reported when they are dropped: ``tool web_search``, like the Responses translation's."""
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    return tuple(
        f"tool {t.get('name') or t.get('type')}" for t in tools if isinstance(t, dict) and "input_schema" not in t
    )


def messages_to_chat_body(body: dict[str, Any], upstream_model: str, *, reasoning_content: bool = False) -> dict[str, Any]:
    """An Anthropic Messages body as a chat-completions body for ``upstream_model``."""
    system = [b for b in system_blocks(body.get("system")) if not is_billing_line(str(b.get("text", "")))]
    view = chat_view(system, body.get("messages") or [])
    out: dict[str, Any] = {"model": upstream_model, "messages": _chat_messages(view, reasoning_content)}
    if isinstance(body.get("max_tokens"), int):
        out["max_tokens"] = body["max_tokens"]
    for key in ("temperature", "top_p"):
        if body.get(key) is not None:
            out[key] = body[key]
    if body.get("stop_sequences"):
        out["stop"] = body["stop_sequences"]
    tools = [_chat_tool(t) for t in body.get("tools") or [] if isinstance(t, dict) and "input_schema" in t]
    choice = body.get("tool_choice") if isinstance(body.get("tool_choice"), dict) else None
    if tools:
        out["tools"] = tools
    if choice:
        kind = choice.get("type")
        mapped = {"auto": "auto", "any": "required", "none": "none"}.get(kind)
        if kind == "tool" and isinstance(choice.get("name"), str):
            out["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
        elif mapped is not None and tools:
            out["tool_choice"] = mapped
        if choice.get("disable_parallel_tool_use") is True and tools:
            out["parallel_tool_calls"] = False
    fmt = body.get("output_config", {}).get("format") if isinstance(body.get("output_config"), dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema" and isinstance(fmt.get("schema"), dict):
        out["response_format"] = {"type": "json_schema", "json_schema": {"name": "output", "schema": fmt["schema"]}}
    elif isinstance(fmt, dict) and fmt.get("type") in ("json", "json_object"):
        out["response_format"] = {"type": "json_object"}
    if body.get("stream") is True:
        out["stream"] = True
        out["stream_options"] = {"include_usage": True}  # the closing message_delta reports real usage
    return out


def _chat_tool(tool: dict[str, Any]) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool["name"], "parameters": tool.get("input_schema") or {"type": "object"}}
    if isinstance(tool.get("description"), str):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def _chat_messages(view: list[Message], reasoning_content: bool) -> list[Message]:
    """The chat view made sendable: view-only keys dropped, unknown parts dropped, one result per call."""
    out: list[Message] = []
    open_calls: list[str] = []  # the last assistant turn's call ids still waiting for their result
    answered: set[str] = set()
    for message in view:
        role = message["role"]
        if role == "tool":
            call_id = message["tool_call_id"]
            if call_id in open_calls and call_id not in answered:
                answered.add(call_id)
                out.append(message)
            continue
        _close_calls(out, open_calls, answered)
        if role == "assistant":
            sent = {k: v for k, v in message.items() if k in ("role", "content", "tool_calls")}
            if reasoning_content and message.get("reasoning_content"):
                sent["reasoning_content"] = message["reasoning_content"]
            out.append(sent)
            open_calls = [c["id"] for c in message.get("tool_calls", [])]
            answered = set()
            continue
        if isinstance(message["content"], str):
            out.append(message)
            continue
        parts = [p for p in message["content"] if p.get("type") in ("text", "image_url")]
        if not parts:
            continue
        if role == "system" or all(p.get("type") == "text" for p in parts):
            out.append({"role": role, "content": "\n".join(p["text"] for p in parts) if role == "system" else parts})
        else:
            out.append({"role": role, "content": parts})
    _close_calls(out, open_calls, answered)
    return out


def _close_calls(out: list[Message], open_calls: list[str], answered: set[str]) -> None:
    """Send ``(no result)`` for each open call with none, then forget the calls."""
    # results always come right after their call in the view, so missing ones belong at the end
    insert_at = len(out)
    for call_id in open_calls:
        if call_id not in answered:
            out.insert(insert_at, {"role": "tool", "tool_call_id": call_id, "content": NO_RESULT})
            insert_at += 1
            answered.add(call_id)
    open_calls.clear()


# ----------------------------------------------------------------------------------------------
# chat answer → Anthropic answer

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use", "content_filter": "refusal"}


def anthropic_usage(usage: Any, input_estimate: int = 0) -> dict[str, int]:
    """A chat ``usage`` in Anthropic's terms: ``input_tokens`` leaves out what the cache read."""
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    cached = cached if isinstance(cached, int) else 0
    prompt = usage.get("prompt_tokens")
    prompt = prompt if isinstance(prompt, int) and prompt > 0 else input_estimate
    output = usage.get("completion_tokens")
    return {
        "input_tokens": max(prompt - cached, 0),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens": output if isinstance(output, int) else 0,
    }


def chat_completion_to_message(
    completion: dict[str, Any], model: str, input_estimate: int, *, message_id: str, reasoning_content: bool = False
) -> dict[str, Any]:
    """A non-streamed chat completion as an Anthropic ``message``."""
    choices = completion.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    content: list[dict[str, Any]] = []
    reasoning = message.get("reasoning_content")
    if reasoning_content and isinstance(reasoning, str) and reasoning:
        content.append({"type": "thinking", "thinking": reasoning, "signature": PROXY_THINKING_SIGNATURE})
    text = content_text(message.get("content"))
    if text:
        content.append({"type": "text", "text": text})
    for position, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            call_id = call.get("id") or missing_call_id(message_id, position)
            content.append({"type": "tool_use", "id": call_id, "name": function.get("name", ""), "input": tool_input(function.get("arguments"))})
    stop = STOP_REASONS.get(choice.get("finish_reason"), "end_turn")
    if any(b["type"] == "tool_use" for b in content):
        stop = "tool_use"
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": anthropic_usage(completion.get("usage"), input_estimate),
    }


def missing_call_id(message_id: str, position: int) -> str:
    """A ``tool_use`` id for a call the provider sent without one: unique in the conversation as Anthropic
    wants (``toolu_0`` in every answer made a session's calls share it), as its answer's id is."""
    return f"toolu_{message_id.removeprefix('msg_')}_{position}"


def tool_input(arguments: Any) -> dict[str, Any]:
    """Tool-call arguments (JSON text) as a ``tool_use`` input object; not an object ⇒ ``{"arguments": text}``."""
    if isinstance(arguments, dict):
        return arguments
    if not isinstance(arguments, str) or not arguments.strip():
        return {}
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"arguments": arguments}


def anthropic_event(kind: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **payload}) + b"\n\n"


PING_EVENT = anthropic_event("ping", {})


def anthropic_error_event(message: str, error_type: str = "api_error") -> bytes:
    return anthropic_event("error", {"error": {"type": error_type, "message": message}})


@dataclass(slots=True)
class ChatToMessagesStream:
    """Turns the chunks of a chat-completions stream into Anthropic stream events.

    Feed each chunk's parsed JSON to :meth:`chunk`; call :meth:`finish` at ``[DONE]``
    (or at EOF after a finish reason); a broken stream is ended by the relay with the
    client's ``error`` event (:func:`anthropic_error_event`). ``message_start`` carries the
    request's estimated input tokens (a chat stream reports usage only at its end, and
    Claude Code's context meter reads the start); ``message_delta`` carries the real
    figures when the provider sent them. Text opens a text block; each tool call (by
    its chat ``index``) a ``tool_use`` block whose argument fragments are relayed as
    ``input_json_delta`` unchanged; blocks close at the end, in order.
    """

    model: str
    input_estimate: int
    # unique per answer, made by the caller: Claude Code files streamed blocks by their message's id, so two
    # answers sharing one (a provider's constant or missing id) became one assistant turn, its history reordered
    message_id: str
    reasoning_content: bool = False
    started: bool = False
    finished: bool = False
    blocks: list[str] = field(default_factory=list)  # each block's kind, by Anthropic index
    open_text: int | None = None
    open_thinking: int | None = None
    tool_blocks: dict[int, int] = field(default_factory=dict)  # chat tool-call index → block index
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None

    def _start(self) -> list[bytes]:
        if self.started:
            return []
        self.started = True
        message = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**anthropic_usage(None, self.input_estimate), "output_tokens": 1},
        }
        return [anthropic_event("message_start", {"message": message}), PING_EVENT]

    def _open(self, kind: str, block: dict[str, Any]) -> tuple[int, list[bytes]]:
        index = len(self.blocks)
        self.blocks.append(kind)
        return index, [anthropic_event("content_block_start", {"index": index, "content_block": block})]

    def _close_text(self) -> list[bytes]:
        out = []
        for attr in ("open_thinking", "open_text"):
            index = getattr(self, attr)
            if index is not None:
                if self.blocks[index] == "thinking":
                    out.append(_delta(index, {"type": "signature_delta", "signature": PROXY_THINKING_SIGNATURE}))
                out.append(anthropic_event("content_block_stop", {"index": index}))
                setattr(self, attr, None)
        return out

    def chunk(self, chunk: dict[str, Any]) -> list[bytes]:
        out = self._start()
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return out
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
            reasoning = delta.get("reasoning_content")
            if self.reasoning_content and isinstance(reasoning, str) and reasoning:
                if self.open_thinking is None:
                    self.open_thinking, started = self._open("thinking", {"type": "thinking", "thinking": "", "signature": ""})
                    out += started
                out.append(_delta(self.open_thinking, {"type": "thinking_delta", "thinking": reasoning}))
            text = delta.get("content")
            if isinstance(text, str) and text:
                if self.open_thinking is not None:
                    index, self.open_thinking = self.open_thinking, None
                    out += [_delta(index, {"type": "signature_delta", "signature": PROXY_THINKING_SIGNATURE}), anthropic_event("content_block_stop", {"index": index})]
                if self.open_text is None:
                    self.open_text, started = self._open("text", {"type": "text", "text": ""})
                    out += started
                out.append(_delta(self.open_text, {"type": "text_delta", "text": text}))
            for call in delta.get("tool_calls") or []:
                out += self._tool_call(call)
            if isinstance(choice.get("finish_reason"), str):
                self.finish_reason = choice["finish_reason"]
        return out

    def _tool_call(self, call: Any) -> list[bytes]:
        if not isinstance(call, dict):
            return []
        out: list[bytes] = []
        position = call.get("index", 0)
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        index = self.tool_blocks.get(position)
        if index is None:
            out += self._close_text()
            block = {"type": "tool_use", "id": call.get("id") or missing_call_id(self.message_id, position), "name": function.get("name") or "", "input": {}}
            index, started = self._open("tool_use", block)
            self.tool_blocks[position] = index
            out += started
        fragment = function.get("arguments")
        if isinstance(fragment, str) and fragment:
            out.append(_delta(index, {"type": "input_json_delta", "partial_json": fragment}))
        return out

    def finish(self) -> list[bytes]:
        """The closing events: every open block stopped, ``message_delta`` with the stop reason and usage, ``message_stop``."""
        if self.finished:
            return []
        self.finished = True
        out = self._start() + self._close_text()
        for index in sorted(self.tool_blocks.values()):
            out.append(anthropic_event("content_block_stop", {"index": index}))
        stop = "tool_use" if self.tool_blocks else STOP_REASONS.get(self.finish_reason or "stop", "end_turn")
        usage = anthropic_usage(self.usage, self.input_estimate)
        out.append(anthropic_event("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage}))
        out.append(anthropic_event("message_stop", {}))
        return out


def _delta(index: int, delta: dict[str, Any]) -> bytes:
    return anthropic_event("content_block_delta", {"index": index, "delta": delta})


# ----------------------------------------------------------------------------------------------
# chat request → Anthropic request


def chat_to_messages_body(body: dict[str, Any], upstream_model: str, default_max_tokens: int) -> dict[str, Any]:
    """A chat-completions body as an Anthropic Messages body for ``upstream_model``."""
    system: list[str] = []
    messages: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"] += blocks  # Anthropic alternates roles: consecutive turns are one
        else:
            messages.append({"role": role, "content": blocks})

    for message in body.get("messages") or []:
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            if text := content_text(content):
                system.append(text)
        elif role == "user":
            add("user", _user_blocks(content))
        elif role in ("tool", "function"):
            result = {"type": "tool_result", "tool_use_id": message.get("tool_call_id") or message.get("name") or "", "content": content_text(content)}
            add("user", [result])
        elif role == "assistant":
            blocks = []
            if text := content_text(content):
                blocks.append({"type": "text", "text": text})
            for call in message.get("tool_calls") or []:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict):
                    blocks.append({"type": "tool_use", "id": call.get("id", ""), "name": function.get("name", ""), "input": tool_input(function.get("arguments"))})
            add("assistant", blocks)
    out: dict[str, Any] = {"model": upstream_model, "messages": messages}
    if system:
        out["system"] = "\n\n".join(system)
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    out["max_tokens"] = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else default_max_tokens
    for key in ("temperature", "top_p"):
        if body.get(key) is not None:
            out[key] = body[key]
    stop = body.get("stop")
    if stop:
        out["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    tools = [_anthropic_tool(t) for t in body.get("tools") or [] if isinstance(t, dict) and isinstance(t.get("function"), dict)]
    if tools:
        out["tools"] = tools
        choice = body.get("tool_choice")
        mapped: dict[str, Any] | None = None
        if choice in ("auto", "required", "none"):
            mapped = {"type": {"auto": "auto", "required": "any", "none": "none"}[choice]}
        elif isinstance(choice, dict) and isinstance(choice.get("function"), dict):
            mapped = {"type": "tool", "name": choice["function"].get("name", "")}
        if body.get("parallel_tool_calls") is False:
            mapped = {**(mapped or {"type": "auto"}), "disable_parallel_tool_use": True}
        if mapped is not None:
            out["tool_choice"] = mapped
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema" and isinstance(fmt.get("json_schema"), dict):
        schema = fmt["json_schema"].get("schema")
        if isinstance(schema, dict):
            out["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
    if isinstance(body.get("user"), str):
        out["metadata"] = {"user_id": body["user"]}
    if body.get("stream") is True:
        out["stream"] = True
    return out


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") in ("text", "input_text") and isinstance(part.get("text"), str):
            blocks.append({"type": "text", "text": part["text"]})
        elif part.get("type") == "image_url":
            url = part.get("image_url", {}).get("url") if isinstance(part.get("image_url"), dict) else part.get("image_url")
            if isinstance(url, str):
                blocks.append({"type": "image", "source": image_source(url)})
    return blocks


def image_source(url: str) -> dict[str, Any]:
    """An ``image_url`` as an Anthropic image source: a data URL ⇒ base64, anything else ⇒ url."""
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        return {"type": "base64", "media_type": media_type or "image/png", "data": data}
    return {"type": "url", "url": url}


def _anthropic_tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool["function"]
    out: dict[str, Any] = {"name": function.get("name", ""), "input_schema": function.get("parameters") or {"type": "object", "properties": {}}}
    if isinstance(function.get("description"), str):
        out["description"] = function["description"]
    return out


# ----------------------------------------------------------------------------------------------
# Anthropic answer → chat answer

FINISH_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls", "pause_turn": "stop", "refusal": "content_filter"}


def chat_usage(usage: Any) -> dict[str, Any]:
    """Anthropic usage in chat terms: the prompt is the uncached input plus what the cache read and wrote."""
    usage = usage if isinstance(usage, dict) else {}

    def number(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    read, written = number("cache_read_input_tokens"), number("cache_creation_input_tokens")
    prompt = number("input_tokens") + read + written
    completion = number("output_tokens")
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion, "prompt_tokens_details": {"cached_tokens": read}}


def message_to_chat_completion(message: dict[str, Any], model: str) -> dict[str, Any]:
    """A non-streamed Anthropic ``message`` as a chat completion."""
    texts, reasoning, calls = [], [], []
    for block in blocks_of(message.get("content")):
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "thinking":
            reasoning.append(str(block.get("thinking", "")))
        elif kind == "tool_use":
            calls.append({"id": block.get("id", ""), "type": "function", "function": {"name": block.get("name", ""), "arguments": orjson.dumps(block.get("input", {})).decode()}})
    reply: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if reasoning:
        reply["reasoning_content"] = "".join(reasoning)
    if calls:
        reply["tool_calls"] = calls
    return {
        "id": f"chatcmpl-{message.get('id', 'pinch')}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": reply, "finish_reason": FINISH_REASONS.get(message.get("stop_reason"), "stop")}],
        "usage": chat_usage(message.get("usage")),
    }


@dataclass(slots=True)
class MessagesToChatStream:
    """Turns Anthropic stream events into chat-completions chunks (``data:`` lines).

    Feed each event's parsed JSON to :meth:`event`. Text and thinking deltas become
    ``content`` and ``reasoning_content`` deltas; each ``tool_use`` block a tool call
    with its own chat ``index`` whose ``input_json_delta`` fragments become argument
    fragments unchanged; ``message_delta`` the finish reason; ``message_stop`` the usage
    chunk (when ``include_usage``) and ``[DONE]``; an ``error`` event an error chunk.
    """

    model: str
    include_usage: bool = False
    chunk_id: str = "chatcmpl-pinch"
    tool_index: dict[int, int] = field(default_factory=dict)  # block index → chat tool-call index
    usage: dict[str, Any] = field(default_factory=dict)
    done: bool = False

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        chunk = {"id": self.chunk_id, "object": "chat.completion.chunk", "created": 0, "model": self.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    def event(self, event: dict[str, Any]) -> list[bytes]:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") if isinstance(event.get("message"), dict) else {}
            self.chunk_id = f"chatcmpl-{message.get('id', 'pinch')}"
            self.usage.update(message.get("usage") or {})
            return [self._chunk({"role": "assistant", "content": ""})]
        if kind == "content_block_start":
            block = event.get("content_block") if isinstance(event.get("content_block"), dict) else {}
            if block.get("type") == "tool_use":
                position = len(self.tool_index)
                self.tool_index[event.get("index", position)] = position
                call = {"index": position, "id": block.get("id", ""), "type": "function", "function": {"name": block.get("name", ""), "arguments": ""}}
                return [self._chunk({"tool_calls": [call]})]
            if block.get("type") == "text" and block.get("text"):
                return [self._chunk({"content": block["text"]})]
            return []
        if kind == "content_block_delta":
            delta = event.get("delta") if isinstance(event.get("delta"), dict) else {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                return [self._chunk({"content": delta.get("text", "")})]
            if dtype == "thinking_delta":
                return [self._chunk({"reasoning_content": delta.get("thinking", "")})]
            if dtype == "input_json_delta":
                position = self.tool_index.get(event.get("index"), 0)
                return [self._chunk({"tool_calls": [{"index": position, "function": {"arguments": delta.get("partial_json", "")}}]})]
            return []
        if kind == "message_delta":
            self.usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
            stop = (event.get("delta") or {}).get("stop_reason")
            return [self._chunk({}, FINISH_REASONS.get(stop, "stop"))]
        if kind == "message_stop":
            return self.finish()
        if kind == "error":
            error = event.get("error") if isinstance(event.get("error"), dict) else {}
            self.done = True
            payload = {"error": {"message": str(error.get("message", "upstream error")), "type": "upstream_error", "code": str(error.get("type", "upstream_error"))}}
            return [b"data: " + orjson.dumps(payload) + b"\n\n", b"data: [DONE]\n\n"]
        return []  # ping, and event types added later

    def finish(self) -> list[bytes]:
        if self.done:
            return []
        self.done = True
        out = []
        if self.include_usage:
            usage_chunk = {"id": self.chunk_id, "object": "chat.completion.chunk", "created": 0, "model": self.model, "choices": [], "usage": chat_usage(self.usage)}
            out.append(b"data: " + orjson.dumps(usage_chunk) + b"\n\n")
        out.append(b"data: [DONE]\n\n")
        return out
