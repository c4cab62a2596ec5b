"""A chat-completions answer translated to a Responses API answer. Pure.

The other half of :mod:`router.translate.responses_to_chat`. A completion becomes a
``response`` object; a chat stream becomes the Responses event sequence, in the
order the API sends it:

``response.created``, ``response.in_progress``, then per output item
``response.output_item.added`` … ``response.output_item.done`` — the thinking a
chat server sends beside the answer (``reasoning_content`` / ``reasoning``) as a
``reasoning`` item with ``response.reasoning_summary_part.added``,
``response.reasoning_summary_text.delta``…, ``.done``, ``response.reasoning_summary_part.done``; a message with
``response.content_part.added``, ``response.output_text.delta``…,
``response.output_text.done``, ``response.content_part.done``; a function call
with ``response.function_call_arguments.delta``…, ``.done`` — and last
``response.completed`` (``response.incomplete`` when the output limit or a
content filter cut the answer) with usage, cached tokens included when the
upstream reported them. Every event carries ``sequence_number`` (0, 1, …).

The text of a message is one item, and each tool call its own item in the
order the calls started; tool-call argument fragments are passed on one delta
per upstream fragment, never merged or re-chunked (WHAT-USERS-HIT #2). An
upstream that breaks mid-stream ends the sequence with ``response.failed``
carrying the error. Ids (``response_id``, item ids) and ``created_at`` come
from the caller: nothing here reads a clock or a random source.

The answer to a compaction trigger (:mod:`router.translate.compaction`) is one ``compaction``
item holding the model's text, added and done once the text is whole; a tool call in it (which
the request ruled out) is left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from router.core.retrieve import TOOL_NAME
from router.wire.openai_responses import compaction
from router.wire.openai_responses.stream import Event
from router.wire.openai_responses.validation import PROXY_REASONING_ID_PREFIX
from router.wire.usage import token_count


def responses_usage(usage: Any) -> dict[str, Any] | None:
    """A chat ``usage`` as Responses usage; None when the upstream reported none. The input's details carry
    both figures the spec requires: tokens read from the provider's cache and written to it (0 when the
    provider says nothing of it: most chat servers report no writes)."""
    if not isinstance(usage, dict):
        return None
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    prompt_details = usage.get("prompt_tokens_details")
    completion_details = usage.get("completion_tokens_details")
    cached = _count(prompt_details.get("cached_tokens")) if isinstance(prompt_details, dict) else 0
    written = _count(prompt_details.get("cache_write_tokens")) if isinstance(prompt_details, dict) else 0
    reasoning = _count(completion_details.get("reasoning_tokens")) if isinstance(completion_details, dict) else 0
    total = _count(usage.get("total_tokens")) or prompt + completion
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": total,
    }


def _count(value: Any) -> int:
    return token_count(value) or 0


INCOMPLETE_REASONS = {"length": "max_output_tokens", "content_filter": "content_filter"}


@dataclass(frozen=True, slots=True)
class ResponseFrame:
    """What a ``response`` object echoes of its request, and its identity."""

    response_id: str
    created_at: int
    request: dict[str, Any]  # the client's Responses body
    # the request's custom (freeform) tools: a chat call of one comes back as a custom_tool_call item
    custom_tools: frozenset[str] = frozenset()
    compaction: bool = False  # the request ends with a compaction trigger: the answer is a compaction item

    def response(self, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None, model: Any = None, **extra: Any) -> dict[str, Any]:
        body = self.request
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": model if isinstance(model, str) else body.get("model"),
            "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": None,
            "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
            "store": False,
            "temperature": body.get("temperature"),
            "text": body.get("text") or {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"),
            # the client's tools, echoed: not the one the proxy declares and answers itself
            "tools": [t for t in body.get("tools") or [] if not (isinstance(t, dict) and t.get("name") == TOOL_NAME)],
            "top_p": body.get("top_p"),
            "truncation": body.get("truncation", "disabled"),
            "usage": usage,
            "metadata": body.get("metadata") or {},
            **extra,
        }

    def item_id(self, prefix: str, n: int) -> str:
        return f"{prefix}_{self.response_id.removeprefix('resp_')}_{n}"


def _status(finish_reason: Any) -> tuple[str, dict[str, Any]]:
    reason = INCOMPLETE_REASONS.get(finish_reason) if isinstance(finish_reason, str) else None
    if reason is None:
        return "completed", {}
    return "incomplete", {"incomplete_details": {"reason": reason}}


def _output_text(text: str) -> dict[str, Any]:
    """An ``output_text`` part with the ``logprobs`` the spec requires (none: a chat answer carries none the
    proxy asked for), though OpenAI's own stream examples leave it out (docs/conformance.md)."""
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [_output_text(text)] if status == "completed" else []
    return {"id": item_id, "type": "message", "status": status, "role": "assistant", "content": content}


def reasoning_text(message: dict[str, Any]) -> str:
    """The model's thinking a chat server sent beside the answer: ``reasoning_content``
    (DeepSeek, vLLM, llama.cpp) or ``reasoning`` (Ollama, OpenRouter); "" when none."""
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _reasoning_item(item_id: str, text: str) -> dict[str, Any]:
    """A reasoning item with the thinking as its summary; no ``encrypted_content``: a chat
    server cannot take it back (translated requests never send reasoning items)."""
    return {"id": item_id, "type": "reasoning", "summary": [{"type": "summary_text", "text": text}]}


def _call_item(item_id: str, call_id: str, name: str, arguments: str, status: str = "completed") -> dict[str, Any]:
    return {"id": item_id, "type": "function_call", "status": status, "call_id": call_id, "name": name, "arguments": arguments}


def custom_tool_names(tools: list[Any]) -> frozenset[str]:
    """The custom (freeform) tools among the tools a Responses request offers
    (:func:`router.translate.responses_to_chat.offered_tools`: its ``tools`` and those of its
    ``additional_tools`` items), at the top or in the ``functions`` namespace (as
    :mod:`router.translate.responses_to_chat` reads them)."""
    tools = list(tools)
    names: set[str] = set()
    while tools:
        tool = tools.pop()
        if isinstance(tool, dict) and tool.get("type") == "custom" and isinstance(tool.get("name"), str):
            names.add(tool["name"])
        elif isinstance(tool, dict) and tool.get("type") == "namespace" and tool.get("name") == "functions":
            tools += tool.get("tools") or []
    return frozenset(names)


def _custom_input(arguments: str) -> str:
    """A custom tool's raw input from the chat call's arguments (``{"input": …}``; anything else as it came)."""
    try:
        parsed = orjson.loads(arguments) if arguments else {}
    except orjson.JSONDecodeError:
        return arguments
    value = parsed.get("input") if isinstance(parsed, dict) else None
    return value if isinstance(value, str) else arguments


def _custom_item(item_id: str, call_id: str, name: str, tool_input: str, status: str = "completed") -> dict[str, Any]:
    return {"id": item_id, "type": "custom_tool_call", "status": status, "call_id": call_id, "name": name, "input": tool_input}


def completion_to_response(completion: Any, frame: ResponseFrame) -> dict[str, Any] | None:
    """A chat completion as a ``response`` object; None when it is not a completion (no ``choices[0].message``)."""
    if not isinstance(completion, dict):
        return None
    choices = completion.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    message = choice.get("message") if choice is not None else None
    if not isinstance(message, dict):
        return None
    output: list[dict[str, Any]] = []
    thinking = reasoning_text(message)
    if thinking:
        output.append(_reasoning_item(frame.item_id(PROXY_REASONING_ID_PREFIX, 0), thinking))
    text = message.get("content")
    if frame.compaction:
        output.append(compaction.compaction_item(frame.item_id("cmp", 0), text if isinstance(text, str) else ""))
        status, extra = _status(choice.get("finish_reason") if choice else None)
        return frame.response(status, output, responses_usage(completion.get("usage")), completion.get("model"), **extra)
    if isinstance(text, str) and text:
        output.append(_message_item(frame.item_id("msg", 0), text))
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        part = {"type": "refusal", "refusal": refusal}
        output.append({"id": frame.item_id("msg", 1), "type": "message", "status": "completed", "role": "assistant", "content": [part]})
    calls = message.get("tool_calls")
    for n, call in enumerate(calls if isinstance(calls, list) else []):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        call_id = call.get("id") if isinstance(call.get("id"), str) else frame.item_id("call", n)
        name, arguments = str(function.get("name", "")), str(function.get("arguments") or "")
        if name in frame.custom_tools:
            output.append(_custom_item(frame.item_id("ctc", n), call_id, name, _custom_input(arguments)))
        else:
            output.append(_call_item(frame.item_id("fc", n), call_id, name, arguments))
    status, extra = _status(choice.get("finish_reason") if choice else None)
    return frame.response(status, output, responses_usage(completion.get("usage")), completion.get("model"), **extra)


@dataclass(slots=True)
class _OpenCall:
    output_index: int
    item_id: str
    call_id: str
    name: str
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ChatStreamTranslator:
    """Chat stream chunks in, Responses events out (see the module doc).

    Call :meth:`start` once, :meth:`feed` per parsed chunk, then :meth:`finish`
    at ``[DONE]`` or the end of the stream, or :meth:`fail` when it broke.
    """

    frame: ResponseFrame
    sequence: int = 0
    output: list[dict[str, Any]] = field(default_factory=list)  # finished items, by output index
    text: list[str] | None = None  # the open message's text so far
    text_index: int = -1
    reasoning: list[str] | None = None  # the open reasoning item's summary text so far
    reasoning_index: int = -1
    calls: dict[int, _OpenCall] = field(default_factory=dict)  # upstream tool-call index → its open item
    summary: list[str] = field(default_factory=list)  # a compaction's text so far (frame.compaction)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    model: str | None = None
    ended: bool = False

    def start(self) -> list[Event]:
        opened = self.frame.response("in_progress", [], None)
        return [self._event("response.created", response=opened), self._event("response.in_progress", response=opened)]

    def feed(self, chunk: Any) -> list[Event]:
        """Events for one parsed chunk; a chunk carrying an ``error`` ends the stream as failed."""
        if self.ended or not isinstance(chunk, dict):
            return []
        if isinstance(chunk.get("error"), (dict, str)):
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else error
            return self.fail(str(message or "the upstream reported an error"), "upstream_error")
        if isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        if isinstance(chunk.get("usage"), dict):
            self.usage = responses_usage(chunk["usage"])
        events: list[Event] = []
        choices = chunk.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
        if choice is None:
            return events
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        thinking = reasoning_text(delta)
        if thinking:
            events += self._reasoning_delta(thinking)
        content = delta.get("content")
        if isinstance(content, str) and content:
            events += self._text_delta(content)
        calls = delta.get("tool_calls") if not self.frame.compaction else None
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict):
                events += self._call_delta(call)
        if isinstance(choice.get("finish_reason"), str):
            self.finish_reason = choice["finish_reason"]
        return events

    def finish(self) -> list[Event]:
        """Close every open item and complete the response (usage included when reported)."""
        if self.ended:
            return []
        events = self._close_reasoning() + self._close_text() + self._close_calls() + self._compaction()
        self.ended = True
        status, extra = _status(self.finish_reason)
        kind = "response.completed" if status == "completed" else "response.incomplete"
        return events + [self._event(kind, response=self.frame.response(status, self._outputs(), self.usage, self.model, **extra))]

    def fail(self, message: str, code: str) -> list[Event]:
        """End the stream as failed: what was produced so far stays in the failed response's output."""
        if self.ended:
            return []
        self.ended = True
        error = {"code": code, "message": message}
        return [self._event("response.failed", response=self.frame.response("failed", self._outputs(), self.usage, self.model, error=error))]

    def _outputs(self) -> list[dict[str, Any]]:
        return [item for item in self.output if item]  # by output index; open items are left out

    def _next_index(self) -> int:
        self.output.append({})  # reserved until the item is done
        return len(self.output) - 1

    def _reasoning_delta(self, thinking: str) -> list[Event]:
        events: list[Event] = []
        if self.reasoning is None:
            events += self._close_text() + self._close_calls()
            self.reasoning_index = self._next_index()
            self.reasoning = []
            item = {"id": self.frame.item_id(PROXY_REASONING_ID_PREFIX, self.reasoning_index), "type": "reasoning", "summary": []}
            events.append(self._event("response.output_item.added", output_index=self.reasoning_index, item=item))
            events.append(self._event("response.reasoning_summary_part.added", **self._reasoning_at(), part={"type": "summary_text", "text": ""}))
        self.reasoning.append(thinking)
        events.append(self._event("response.reasoning_summary_text.delta", **self._reasoning_at(), delta=thinking))
        return events

    def _reasoning_at(self) -> dict[str, Any]:
        return {"item_id": self.frame.item_id(PROXY_REASONING_ID_PREFIX, self.reasoning_index), "output_index": self.reasoning_index, "summary_index": 0}

    def _close_reasoning(self) -> list[Event]:
        if self.reasoning is None:
            return []
        text, at = "".join(self.reasoning), self._reasoning_at()
        item = _reasoning_item(at["item_id"], text)
        self.output[self.reasoning_index] = item
        self.reasoning = None
        return [
            self._event("response.reasoning_summary_text.done", **at, text=text),
            self._event("response.reasoning_summary_part.done", **at, part=item["summary"][0]),
            self._event("response.output_item.done", output_index=at["output_index"], item=item),
        ]

    def _compaction(self) -> list[Event]:
        """The compaction item, once its text is whole (a compaction's answer: none otherwise)."""
        if not self.frame.compaction:
            return []
        n = self._next_index()
        item = compaction.compaction_item(self.frame.item_id("cmp", n), "".join(self.summary))
        self.output[n] = item
        return [self._event("response.output_item.added", output_index=n, item=item), self._event("response.output_item.done", output_index=n, item=item)]

    def _text_delta(self, content: str) -> list[Event]:
        if self.frame.compaction:
            self.summary.append(content)
            return []
        events: list[Event] = []
        if self.text is None:
            events += self._close_reasoning() + self._close_calls()
            self.text_index = self._next_index()
            self.text = []
            item_id = self.frame.item_id("msg", self.text_index)
            events.append(self._event("response.output_item.added", output_index=self.text_index, item=_message_item(item_id, "", "in_progress")))
            events.append(self._event("response.content_part.added", **self._text_at(), part=_output_text("")))
        self.text.append(content)
        events.append(self._event("response.output_text.delta", **self._text_at(), delta=content, logprobs=[]))
        return events

    def _text_at(self) -> dict[str, Any]:
        return {"item_id": self.frame.item_id("msg", self.text_index), "output_index": self.text_index, "content_index": 0}

    def _close_text(self) -> list[Event]:
        if self.text is None:
            return []
        text, at = "".join(self.text), self._text_at()
        item = _message_item(at["item_id"], text)
        self.output[self.text_index] = item
        self.text = None
        return [
            self._event("response.output_text.done", **at, text=text, logprobs=[]),
            self._event("response.content_part.done", **at, part=item["content"][0]),
            self._event("response.output_item.done", output_index=at["output_index"], item=item),
        ]

    def _call_delta(self, call: dict[str, Any]) -> list[Event]:
        index = call.get("index") if isinstance(call.get("index"), int) else len(self.calls)
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        events: list[Event] = []
        open_call = self.calls.get(index)
        if open_call is None:
            events += self._close_reasoning() + self._close_text()
            n = self._next_index()
            call_id = call.get("id") if isinstance(call.get("id"), str) else self.frame.item_id("call", n)
            name = str(function.get("name") or "")
            custom = name in self.frame.custom_tools
            open_call = _OpenCall(n, self.frame.item_id("ctc" if custom else "fc", n), call_id, name)
            self.calls[index] = open_call
            opened = _custom_item(open_call.item_id, call_id, name, "", "in_progress") if custom else _call_item(open_call.item_id, call_id, name, "", "in_progress")
            events.append(self._event("response.output_item.added", output_index=n, item=opened))
        elif isinstance(function.get("name"), str) and not open_call.name:
            open_call.name = function["name"]
        fragment = function.get("arguments")
        if isinstance(fragment, str) and fragment:
            open_call.arguments.append(fragment)
            if open_call.name not in self.frame.custom_tools:  # a custom tool's input is known once its JSON is whole
                at = {"item_id": open_call.item_id, "output_index": open_call.output_index}
                events.append(self._event("response.function_call_arguments.delta", **at, delta=fragment))
        return events

    def _close_calls(self) -> list[Event]:
        events: list[Event] = []
        for call in sorted(self.calls.values(), key=lambda c: c.output_index):
            arguments = "".join(call.arguments)
            at = {"item_id": call.item_id, "output_index": call.output_index}
            if call.name in self.frame.custom_tools:
                tool_input = _custom_input(arguments)
                item = _custom_item(call.item_id, call.call_id, call.name, tool_input)
                events.append(self._event("response.custom_tool_call_input.delta", **at, delta=tool_input))
                events.append(self._event("response.custom_tool_call_input.done", **at, input=tool_input))
            else:
                item = _call_item(call.item_id, call.call_id, call.name, arguments)
                events.append(self._event("response.function_call_arguments.done", **at, name=call.name, arguments=arguments))
            self.output[call.output_index] = item
            events.append(self._event("response.output_item.done", output_index=call.output_index, item=item))
        self.calls.clear()
        return events

    def _event(self, type_: str, **fields: Any) -> Event:
        event = {"type": type_, **fields, "sequence_number": self.sequence}
        self.sequence += 1
        return event


def chat_chunks(ready: bytes) -> list[Any]:
    """The parsed ``data:`` payloads of whole chat SSE events (``[DONE]`` left out; a line that is
    not JSON is skipped)."""
    chunks = []
    for line in ready.splitlines():
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]" or not data:
            continue
        try:
            chunks.append(orjson.loads(data))
        except orjson.JSONDecodeError:
            continue
    return chunks
