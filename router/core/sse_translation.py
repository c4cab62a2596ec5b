"""Stream translation between wire formats, over whole SSE events. Pure.

The relay cuts an upstream stream into whole events (:class:`router.core.sse.SseRelay`)
and hands them here when the provider speaks another format than the client; what
comes back is whole events in the client's format, written as they are made — never
buffered to the end. A translator says when its stream is complete (``done``), makes
the closing events if the provider ended without them (``end``), and the client's
error event when the stream breaks (``fail``).
"""

from __future__ import annotations

import re
from typing import Protocol

import orjson

from router.core.anthropic_chat import ChatToMessagesStream, MessagesToChatStream

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


class StreamTranslator(Protocol):
    done: bool

    def feed(self, events: bytes) -> bytes:
        """Whole upstream events in, whole client events out."""
        ...

    def end(self) -> bytes:
        """The upstream stream ended cleanly: whatever closes the client's stream."""
        ...

    def fail(self, message: str) -> bytes:
        """The upstream stream broke: the client's error event."""
        ...


def data_lines(events: bytes) -> list[bytes]:
    """The ``data:`` payload of each event (multi-line data joined), in order."""
    out = []
    for event in _EVENT_END.split(events):
        lines = [line[5:].lstrip() for line in event.splitlines() if line.startswith(b"data:")]
        if lines:
            out.append(b"\n".join(lines))
    return out


class ChatToAnthropicSse:
    """A chat-completions stream (``data: {...}`` … ``data: [DONE]``) as Anthropic Messages events."""

    def __init__(self, model: str, input_estimate: int, *, reasoning_content: bool = False) -> None:
        self.stream = ChatToMessagesStream(model=model, input_estimate=input_estimate, reasoning_content=reasoning_content)
        self.done = False

    def feed(self, events: bytes) -> bytes:
        out: list[bytes] = []
        for data in data_lines(events):
            if self.done:
                break
            if data == b"[DONE]":
                out += self.stream.finish()
                self.done = True
                continue
            try:
                chunk = orjson.loads(data)
            except orjson.JSONDecodeError:
                continue  # a comment or keep-alive a server sent as data: nothing to translate
            if isinstance(chunk, dict) and isinstance(chunk.get("error"), dict):
                out += self.stream.fail(str(chunk["error"].get("message", "upstream error")))
                self.done = True
            elif isinstance(chunk, dict):
                out += self.stream.chunk(chunk)
        return b"".join(out)

    def end(self) -> bytes:
        """Some servers end without ``[DONE]`` after the finish reason: that is a complete answer."""
        if self.done:
            return b""
        self.done = True
        if self.stream.finish_reason is None:
            return b"".join(self.stream.fail("the provider closed the stream before it finished"))
        return b"".join(self.stream.finish())

    def fail(self, message: str) -> bytes:
        self.done = True
        return b"".join(self.stream.fail(message))


class AnthropicToChatSse:
    """An Anthropic Messages stream (``message_start`` … ``message_stop``) as chat-completions chunks."""

    def __init__(self, model: str, include_usage: bool) -> None:
        self.stream = MessagesToChatStream(model=model, include_usage=include_usage)
        self.done = False

    def feed(self, events: bytes) -> bytes:
        out: list[bytes] = []
        for data in data_lines(events):
            if self.done:
                break
            try:
                event = orjson.loads(data)
            except orjson.JSONDecodeError:
                continue
            if isinstance(event, dict):
                out += self.stream.event(event)
                self.done = self.stream.done
        return b"".join(out)

    def end(self) -> bytes:
        if self.done:
            return b""
        return self.fail("the provider closed the stream before message_stop")

    def fail(self, message: str) -> bytes:
        self.done = True
        return b"".join(self.stream.event({"type": "error", "error": {"type": "upstream_stream_interrupted", "message": message}}))
