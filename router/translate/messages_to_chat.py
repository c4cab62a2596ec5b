"""An Anthropic Messages client (Claude Code, the anthropic SDK) to an OpenAI-chat provider: the
request, the answer and its stream back. Pure.

Decisions, where the two APIs have no common ground:

Claude Code's billing line is dropped from the system text (it is not an instruction); ``<system-
reminder>`` blocks are kept (they are). Each ``tool_result`` becomes a ``tool`` message right after
the assistant turn, exactly one per ``tool_call``: a duplicate result is dropped, a missing one is
sent as ``(no result)`` (providers reject both otherwise), a result naming no call is dropped.
Images in a tool result follow as a user message. ``thinking`` is dropped, or sent back as
``reasoning_content`` when the provider needs it (``reasoning_content=True``: DeepSeek and others
require it on tool-call turns); the answer's reasoning comes back as thinking blocks signed
:data:`~router.wire.anthropic_messages.blocks.PROXY_THINKING_SIGNATURE`, which an Anthropic provider
is never sent (:func:`~router.wire.anthropic_messages.body.without_proxy_thinking`). Fields no chat
API has — ``thinking``, ``context_management``, ``safeguards`` (it carries local paths),
``cache_control``, ``metadata``, ``top_k``, ``output_config.effort``, server tools — are dropped.
``output_config.format`` becomes ``response_format``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import orjson

from router.core.content import Message, content_text
from router.core.results import Candidate
from router.translate.chat_shape import strict_chat_messages
from router.translate.element_memo import ElementMemo, PassMemo
from router.translate.json_values import chat_stream, checked_answer, first_choice, request_object, tool_input
from router.translate.protocol import EVENT_STREAM, AnswerIds, ToChat
from router.translate.sse_frames import SseTranslator, provider_event
from router.wire.anthropic_messages.blocks import (
    PROXY_THINKING_SIGNATURE,
    blocks_of,
    is_billing_line,
    system_blocks,
)
from router.wire.anthropic_messages.errors import PING_EVENT, anthropic_event
from router.wire.anthropic_messages.view import count_input_tokens
from router.wire.openai_chat.adapter import OPENAI_CHAT_ADAPTER
from router.wire.openai_chat.validation import answer_problem as chat_answer_problem
from router.wire.openai_chat.validation import chunk_problem as chat_chunk_problem


class MessagesToChatTranslator(ToChat):
    """An Anthropic Messages request to an OpenAI-chat provider, and its answer back (one request)."""

    def __init__(self, ids: AnswerIds, system_anywhere: bool = False) -> None:
        self.system_anywhere = system_anywhere  # the provider takes system messages anywhere (else: one, leading)
        self.counted = ids.input_tokens  # the chain's count of the prompt, when it has one
        self.model = ""
        self.input_tokens = 0
        self.reasoning = False
        self.dropped: tuple[str, ...] = ()
        # the answer's own id, never the provider's: those repeat (a constant, Ollama's "chatcmpl-<0…998>",
        # none at all), and Claude Code merges the answers that share one into one turn
        self.message_id = f"msg_{ids.token}"

    def chat_request(self, body: bytes | dict[str, Any], candidate: Candidate) -> dict[str, Any]:
        """The chat body, before it is written (a chained translation hands it on as it is)."""
        messages_body = request_object(body)
        self.model, self.reasoning = candidate.model, candidate.reasoning_content
        self.dropped = server_tools(messages_body)
        # the prompt as sent, after pinch: a chat stream reports usage only at its end, message_start needs it now.
        # The chain counted it already (a second count walked every block again: on a 230 KB
        # conversation, a third of the translated request's Python)
        self.input_tokens = self.counted if self.counted is not None else count_input_tokens(messages_body)
        chat = messages_to_chat_body(messages_body, candidate.upstream_model, reasoning_content=self.reasoning)
        chat["messages"] = strict_chat_messages(chat["messages"], system_anywhere=self.system_anywhere, memo=STRICT)
        return chat

    def response_object(self, body: bytes | Any) -> dict[str, Any]:
        completion = checked_answer(body, chat_answer_problem, "a chat completion")
        return chat_completion_to_message(completion, self.model, self.input_tokens, message_id=self.message_id, reasoning_content=self.reasoning)

    def streams(self, content_type: str) -> bool:
        return content_type == EVENT_STREAM

    def stream(self) -> ChatToAnthropicSse:
        return ChatToAnthropicSse(self.model, self.input_tokens, message_id=self.message_id, reasoning_content=self.reasoning)


NO_RESULT = "(no result)"


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
    # made sendable apart: the system message (no call, nothing open after it) is made anew each time,
    # the conversation's messages (their views the same objects while resent) once, then taken again
    sendable = one_result_per_call(chat_view(system, []), reasoning_content)
    sendable += one_result_per_call(chat_view(None, body.get("messages") or []), reasoning_content, SENDABLE)
    out: dict[str, Any] = {"model": upstream_model, "messages": sendable}
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
    out.update(chat_stream(body))  # the closing message_delta reports real usage
    return out


def _chat_tool(tool: dict[str, Any]) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool["name"], "parameters": tool.get("input_schema") or {"type": "object"}}
    if isinstance(tool.get("description"), str):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def one_result_per_call(view: list[Message], reasoning_content: bool, memo: PassMemo[Message] | None = None) -> list[Message]:
    """A chat view made sendable (every translation to chat ends with it, whatever the client's format):
    view-only keys dropped, unknown parts dropped, exactly one ``tool`` message per call of the
    assistant message before it — a duplicate or a result naming no open call dropped, a missing one
    sent as ``(no result)`` — and ``reasoning_content`` kept only for a model that wants it back.

    With a ``memo``, a view that repeats one made sendable before (the very message objects) takes
    what was made of it up to its last message that is no ``tool`` message among those it repeats:
    before such a message the calls are closed and the output final."""
    start, out, marks = memo.resume(view, reasoning_content) if memo is not None else (0, [], [])
    open_calls: list[str] = []  # the last assistant turn's call ids still waiting for their result
    answered: set[str] = set()
    for at in range(start, len(view)):
        message = view[at]
        role = message["role"]
        if role == "tool":
            call_id = message["tool_call_id"]
            if call_id in open_calls and call_id not in answered:
                answered.add(call_id)
                out.append(message)
            continue
        _close_calls(out, open_calls, answered)
        marks.append((at, len(out)))
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
    if memo is not None:
        memo.keep(view, reasoning_content, out, marks)
    return out


def answered_call(call_id: Any, name: Any, open_calls: list[tuple[str, str]]) -> str | None:
    """The open call (``(id, name)`` of the last assistant turn's calls not yet answered) that a result
    answers — the one with its ``call_id`` when it names one, else the first of its ``name``, else (it
    names neither) the first still open — taken off the list; None when no open call is that one."""
    wanted = call_id if isinstance(call_id, str) and call_id else None
    for at, (open_id, open_name) in enumerate(open_calls):
        if open_id == wanted if wanted is not None else (open_name == name or not name):
            del open_calls[at]
            return open_id
    return None


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
    choice, message = first_choice(completion)
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
    # each message's view depends on that message alone: a resent one's is taken again (shared, never changed)
    out += chain.from_iterable(MESSAGE_VIEWS.map(messages, _message_view))
    return out


MESSAGE_VIEWS: ElementMemo[list[Message]] = ElementMemo()
SENDABLE: PassMemo[Message] = PassMemo()
STRICT: PassMemo[Message] = PassMemo()


def _message_view(message: Message) -> list[Message]:
    """One Messages message as chat messages (:func:`chat_view`)."""
    role = message.get("role")
    blocks = blocks_of(message.get("content"))
    if role == "assistant":
        return [_assistant_view(blocks)]
    out: list[Message] = []
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


class ChatToAnthropicSse(SseTranslator):
    """A chat-completions stream (``data: {...}`` … ``data: [DONE]``) as Anthropic Messages events."""

    def __init__(self, model: str, input_estimate: int, *, message_id: str, reasoning_content: bool = False) -> None:
        super().__init__(OPENAI_CHAT_ADAPTER)
        self.stream = ChatToMessagesStream(model=model, input_estimate=input_estimate, message_id=message_id, reasoning_content=reasoning_content)

    def _data(self, data: bytes) -> list[bytes]:
        if data == b"[DONE]":
            self.done = True
            return self.stream.finish()
        chunk = provider_event(data, chat_chunk_problem, "a chat completion chunk")
        return [] if chunk is None else self.stream.chunk(chunk)

    def _closing(self) -> list[bytes]:
        # after its finish reason a chat answer is complete, [DONE] or not; before it, it was cut short
        return self.stream.finish() if self.stream.finish_reason is not None else []
