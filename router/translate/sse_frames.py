"""The frame of a stream translator over raw provider SSE bytes (Anthropic Messages ⇄ OpenAI chat). Pure.

Each translator takes the provider's stream as it arrives (any cut), frames it into
whole events (:class:`router.core.sse.SseRelay`, which also reads the provider's
usage), and returns whole events in the client's format as they are made — never
buffered to the end. :meth:`finish` at the provider's end of stream gives the
closing events a complete answer is owed (a chat server may end after its finish
reason without ``[DONE]``), or nothing when the answer was cut short, so the relay
ends it with the client's error event. An error the provider reports inside its
stream is raised as :class:`~router.translate.protocol.StreamBroken`, after the events before it.
A chat stream's tool calls, sent in fragments, are put together whole by :class:`StreamedCalls`
for a client format that takes each call whole (Gemini's, Ollama's); :class:`FromChatStream` is
the frame of such a translation: a chunk's reasoning and text as they come, the calls, the finish
reason and the usage kept for its last event.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from router.core.results import Usage
from router.core.sse import EventFormat, SseRelay, data_payloads
from router.translate.json_values import checked_event
from router.translate.protocol import StreamBroken
from router.wire.openai_chat.adapter import OPENAI_CHAT_ADAPTER
from router.wire.openai_chat.validation import chunk_problem as chat_chunk_problem


def error_member(event: dict[str, Any]) -> str | None:
    """The error a chat or Gemini stream reports in an event: its ``error`` member's message, clipped."""
    error = event.get("error")
    if error is None:
        return None
    return str(error.get("message", error) if isinstance(error, dict) else error)[:300]


def provider_event(
    data: bytes, problem_of: Callable[[Any], str | None], kind: str, error_of: Callable[[dict[str, Any]], str | None] = error_member
) -> dict[str, Any] | None:
    """One event of a provider's stream, parsed and checked: None for one that is no object (ignored);
    :class:`~router.translate.protocol.StreamBroken` for one that is no JSON or reports an error
    (``error_of``: how its wire says so); :class:`~router.translate.protocol.MalformedAnswer` for one
    ``problem_of`` (the provider wire's check) finds none of ``kind``."""
    try:
        event = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise StreamBroken(f"the provider sent an event that is not JSON ({len(data)} bytes)") from None
    if not isinstance(event, dict):
        return None
    error = error_of(event)
    if error is not None:
        raise StreamBroken(error)
    return checked_event(event, problem_of, kind)



class SseTranslator:
    """A stream translator's frame: the provider's events in ``provider_format``, whole, to ``_data``
    one by one; ``_closing`` at the provider's end of stream."""

    def __init__(self, provider_format: EventFormat) -> None:
        self.frames = SseRelay(provider_format)
        self.done = False
        self.broken: StreamBroken | None = None

    @property
    def usage(self) -> Usage | None:
        """The usage the provider reported, read from its own events."""
        return self.frames.usage

    def feed(self, chunk: bytes) -> bytes:
        self._raise_pending()
        out: list[bytes] = []
        for data in data_payloads(self.frames.feed(chunk)):
            if self.done:
                break
            try:
                out += self._data(data)
            except StreamBroken as exc:
                self.broken, self.done = exc, True
                break
        return b"".join(out)

    def finish(self) -> bytes:
        self._raise_pending()
        if self.done:
            return b""
        self.done = True
        return b"".join(self._closing())

    def _raise_pending(self) -> None:
        if self.broken is not None:
            broken, self.broken = self.broken, None
            raise broken

    def _data(self, data: bytes) -> list[bytes]:
        raise NotImplementedError

    def _closing(self) -> list[bytes]:
        raise NotImplementedError


class StreamedCalls:
    """A chat stream's tool calls, each whole once the stream is: ``delta.tool_calls`` fragments, by their
    ``index``, give a call's ``id`` and ``name`` once and its ``arguments`` in pieces."""

    def __init__(self) -> None:
        self.by_index: dict[int, dict[str, Any]] = {}  # chat index → the call so far (id, name, arguments)

    def add(self, fragment: Any) -> None:
        if not isinstance(fragment, dict):
            return
        index = fragment.get("index", 0)
        function = fragment.get("function") if isinstance(fragment.get("function"), dict) else {}
        so_far = self.by_index.setdefault(index if isinstance(index, int) else 0, {"id": None, "function": {"name": "", "arguments": ""}})
        if isinstance(fragment.get("id"), str) and fragment["id"]:
            so_far["id"] = fragment["id"]
        if isinstance(function.get("name"), str) and function["name"]:
            so_far["function"]["name"] = function["name"]
        if isinstance(function.get("arguments"), str):
            so_far["function"]["arguments"] += function["arguments"]

    def whole(self) -> list[dict[str, Any]]:
        """The calls in the order of their index: ``{"id": str | None, "function": {"name", "arguments"}}``."""
        return [call for _, call in sorted(self.by_index.items())]


class FromChatStream(SseTranslator):
    """A chat-completions stream as a format that takes each call whole (Gemini's, Ollama's): each chunk's
    (reasoning, text) pieces, per choice, go to ``_pieces`` as they come (its events); the calls are put
    together (``calls``), the finish reason and the usage kept (``finish_reason``, ``chat_usage``) for
    ``_last``, the events at ``[DONE]`` — or at the stream's end once a finish reason came (a chat
    server may end without ``[DONE]``); before it, the answer was cut short and is owed nothing."""

    def __init__(self) -> None:
        super().__init__(OPENAI_CHAT_ADAPTER)
        self.calls = StreamedCalls()
        self.finish_reason: str | None = None
        self.chat_usage: Any = None

    def _data(self, data: bytes) -> list[bytes]:
        if data == b"[DONE]":
            self.done = True
            return self._last()
        chunk = provider_event(data, chat_chunk_problem, "a chat completion chunk")
        if chunk is None:
            return []
        if isinstance(chunk.get("usage"), dict):
            self.chat_usage = chunk["usage"]
        pieces: list[tuple[str, str]] = []
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
            reasoning, text = delta.get("reasoning_content"), delta.get("content")
            pieces.append((reasoning if isinstance(reasoning, str) else "", text if isinstance(text, str) else ""))
            for call in delta.get("tool_calls") or []:
                self.calls.add(call)
            if isinstance(choice.get("finish_reason"), str):
                self.finish_reason = choice["finish_reason"]
        return self._pieces([piece for piece in pieces if any(piece)])

    def _closing(self) -> list[bytes]:
        return self._last() if self.finish_reason is not None else []

    def _pieces(self, pieces: list[tuple[str, str]]) -> list[bytes]:
        """The events of one chunk's (reasoning, text) pieces, none empty."""
        raise NotImplementedError

    def _last(self) -> list[bytes]:
        """The events that end the answer: the calls, whole, the finish reason, the usage."""
        raise NotImplementedError
