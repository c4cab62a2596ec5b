"""An OpenAI-chat client (opencode, aider, …) to an ``api: anthropic`` provider: the request, the
answer and its stream back. Pure.

Decisions, where the two APIs have no common ground:

Every system/developer message joins the top-level ``system`` (Anthropic has no system role among
messages outside a beta); consecutive tool messages become one user message of ``tool_result``
blocks; ``max_tokens`` is required there, so a request without one gets ``default_max_tokens``;
``response_format: json_schema`` becomes ``output_config.format``, ``json_object`` has no equivalent
and is dropped; tool-call arguments that are not a JSON object are sent as ``{"arguments":
<text>}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from router.core.content import content_text
from router.core.results import Candidate
from router.translate.json_values import add_turn, checked_answer, request_object, stop_sequences, tool_arguments, tool_input
from router.translate.protocol import EVENT_STREAM, AnswerIds, Translator
from router.translate.sse_frames import SseTranslator, provider_event
from router.wire.anthropic_messages.adapter import ANTHROPIC_MESSAGES_ADAPTER
from router.wire.anthropic_messages.blocks import blocks_of
from router.wire.openai_chat.answer import chat_completion
from router.wire.anthropic_messages.validation import answer_problem as messages_answer_problem
from router.wire.anthropic_messages.validation import event_problem as messages_event_problem

# Sent when an OpenAI-chat client set no output limit and the model has none configured (Anthropic requires one).
FALLBACK_MAX_TOKENS = 8192


class ChatToMessagesTranslator(Translator):
    """An OpenAI chat request to an Anthropic-format provider, and its answer back (one request)."""

    def __init__(self, ids: AnswerIds, system_anywhere: bool = False) -> None:  # Anthropic's system is top-level: nothing to place
        self.model = ""
        self.dropped: tuple[str, ...] = ()
        self.ids = ids

    def request(self, body: bytes | dict[str, Any], candidate: Candidate) -> bytes:
        chat = request_object(body)
        self.model = candidate.model
        tools = chat.get("tools") if isinstance(chat.get("tools"), list) else []  # only function tools go over
        self.dropped = tuple(f"tool {t.get('type')}" for t in tools if isinstance(t, dict) and not isinstance(t.get("function"), dict))
        limit = candidate.output_tokens or candidate.max_output_tokens or FALLBACK_MAX_TOKENS
        return orjson.dumps(chat_to_messages_body(chat, candidate.upstream_model, limit))

    def response_object(self, body: bytes | Any) -> dict[str, Any]:
        message = checked_answer(body, messages_answer_problem, "an Anthropic message")
        return message_to_chat_completion(message, self.model, self.ids.created)

    def streams(self, content_type: str) -> bool:
        return content_type == EVENT_STREAM

    def stream(self) -> AnthropicToChatSse:
        return AnthropicToChatSse(self.model, self.ids.created)


def chat_to_messages_body(body: dict[str, Any], upstream_model: str, default_max_tokens: int) -> dict[str, Any]:
    """A chat-completions body as an Anthropic Messages body for ``upstream_model``."""
    system: list[str] = []
    messages: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        add_turn(messages, role, blocks, "content")

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
    stop = stop_sequences(body)
    if stop:
        out["stop_sequences"] = stop
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


FINISH_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls", "pause_turn": "stop", "refusal": "content_filter"}


def chat_usage(usage: Any) -> dict[str, Any]:
    """Anthropic usage in chat terms: the prompt is the uncached input plus what the cache read and wrote;
    ``prompt_tokens_details`` says which part was read (``cached_tokens``) and which written (``cache_write_tokens``)."""
    usage = usage if isinstance(usage, dict) else {}

    def number(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    read, written = number("cache_read_input_tokens"), number("cache_creation_input_tokens")
    prompt = number("input_tokens") + read + written
    completion = number("output_tokens")
    details = {"cached_tokens": read, "cache_write_tokens": written}
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion, "prompt_tokens_details": details}


def message_to_chat_completion(message: dict[str, Any], model: str, created: int) -> dict[str, Any]:
    """A non-streamed Anthropic ``message`` as a chat completion made at ``created`` (epoch seconds)."""
    texts, reasoning, calls = [], [], []
    for block in blocks_of(message.get("content")):
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "thinking":
            reasoning.append(str(block.get("thinking", "")))
        elif kind == "tool_use":
            calls.append({"id": str(block.get("id", "")), "type": "function", "function": {"name": str(block.get("name", "")), "arguments": tool_arguments(block.get("input", {}))}})
    reply: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if reasoning:
        reply["reasoning_content"] = "".join(reasoning)
    if calls:
        reply["tool_calls"] = calls
    finish = FINISH_REASONS.get(message.get("stop_reason"), "stop")
    return chat_completion(f"chatcmpl-{message.get('id', 'pinch')}", created, model, reply, finish, chat_usage(message.get("usage")))


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
    created: int  # epoch seconds of the answer (AnswerIds.created)
    include_usage: bool = False
    chunk_id: str = "chatcmpl-pinch"
    tool_index: dict[int, int] = field(default_factory=dict)  # block index → chat tool-call index
    usage: dict[str, Any] = field(default_factory=dict)
    done: bool = False

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        chunk = {"id": self.chunk_id, "object": "chat.completion.chunk", "created": self.created, "model": self.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    def event(self, event: dict[str, Any]) -> list[bytes]:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") if isinstance(event.get("message"), dict) else {}
            self.chunk_id = f"chatcmpl-{message.get('id', 'pinch')}"
            self.usage.update(_object(message.get("usage")))
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
            self.usage.update({k: v for k, v in _object(event.get("usage")).items() if v is not None})
            stop = _object(event.get("delta")).get("stop_reason")
            return [self._chunk({}, FINISH_REASONS.get(stop, "stop"))]
        if kind == "message_stop":
            return self.finish()
        if kind == "error":
            error = event.get("error") if isinstance(event.get("error"), dict) else {}
            self.done = True
            payload = {"error": {"message": str(error.get("message", "upstream error")), "type": "upstream_error", "param": None, "code": str(error.get("type", "upstream_error"))}}
            return [b"data: " + orjson.dumps(payload) + b"\n\n", b"data: [DONE]\n\n"]
        return []  # ping, and event types added later

    def finish(self) -> list[bytes]:
        if self.done:
            return []
        self.done = True
        out = []
        if self.include_usage:
            usage_chunk = {"id": self.chunk_id, "object": "chat.completion.chunk", "created": self.created, "model": self.model, "choices": [], "usage": chat_usage(self.usage)}
            out.append(b"data: " + orjson.dumps(usage_chunk) + b"\n\n")
        out.append(b"data: [DONE]\n\n")
        return out


def _object(value: Any) -> dict[str, Any]:
    """A field the provider should have sent as an object, or {} when it sent something else."""
    return value if isinstance(value, dict) else {}


class AnthropicToChatSse(SseTranslator):
    """An Anthropic Messages stream (``message_start`` … ``message_stop``) as chat-completions chunks.

    The usage chunk is always made: the relay drops it when the client did not ask for it.
    """

    def __init__(self, model: str, created: int) -> None:
        super().__init__(ANTHROPIC_MESSAGES_ADAPTER)
        self.stream = MessagesToChatStream(model=model, include_usage=True, created=created)

    def _data(self, data: bytes) -> list[bytes]:
        event = provider_event(data, messages_event_problem, "an Anthropic stream event", anthropic_error)
        if event is None:
            return []
        out = self.stream.event(event)
        self.done = self.stream.done
        return out

    def _closing(self) -> list[bytes]:
        return []  # no message_stop: cut short


def anthropic_error(event: dict[str, Any]) -> str | None:
    """The error an Anthropic stream reports: an event of type ``error``, its type and message."""
    if event.get("type") != "error":
        return None
    error = event.get("error") if isinstance(event.get("error"), dict) else {}
    return f"{error.get('type', 'error')}: {str(error.get('message', ''))[:300]}"
