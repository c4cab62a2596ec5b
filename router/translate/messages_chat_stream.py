"""Stream translation between Anthropic Messages and OpenAI chat, over raw provider bytes. Pure.

Each translator takes the provider's stream as it arrives (any cut), frames it into
whole events (:class:`router.core.sse.SseRelay`, which also reads the provider's
usage), and returns whole events in the client's format as they are made — never
buffered to the end. :meth:`finish` at the provider's end of stream gives the
closing events a complete answer is owed (a chat server may end after its finish
reason without ``[DONE]``), or nothing when the answer was cut short, so the relay
ends it with the client's error event. An error the provider reports inside its
stream is raised as :class:`UpstreamStreamError`, after the events before it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import orjson

from router.core.results import Usage
from router.translate.messages_chat import ChatToMessagesStream, MessagesToChatStream
from router.wire.anthropic_messages.request import is_message_stop
from router.core.sse import SseRelay

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


class UpstreamStreamError(Exception):
    """The provider reported an error inside a stream it had started."""


def data_lines(events: bytes) -> list[bytes]:
    """The ``data:`` payload of each whole event (multi-line data joined), in order."""
    out = []
    for event in _EVENT_END.split(events):
        lines = [line[5:].lstrip() for line in event.splitlines() if line.startswith(b"data:")]
        if lines:
            out.append(b"\n".join(lines))
    return out


class _Translator:
    def __init__(self, ends_stream: Callable[[bytes], bool] | None) -> None:
        self.frames = SseRelay(ends_stream=ends_stream)
        self.done = False
        self.broken: UpstreamStreamError | None = None

    @property
    def usage(self) -> Usage | None:
        """The usage the provider reported, read from its own events."""
        return self.frames.usage

    def feed(self, chunk: bytes) -> bytes:
        self._raise_pending()
        out: list[bytes] = []
        for data in data_lines(self.frames.feed(chunk)):
            if self.done:
                break
            try:
                out += self._data(data)
            except UpstreamStreamError as exc:
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


class ChatToAnthropicSse(_Translator):
    """A chat-completions stream (``data: {...}`` … ``data: [DONE]``) as Anthropic Messages events."""

    def __init__(self, model: str, input_estimate: int, *, message_id: str, reasoning_content: bool = False) -> None:
        super().__init__(ends_stream=None)
        self.stream = ChatToMessagesStream(model=model, input_estimate=input_estimate, message_id=message_id, reasoning_content=reasoning_content)

    def _data(self, data: bytes) -> list[bytes]:
        if data == b"[DONE]":
            self.done = True
            return self.stream.finish()
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise UpstreamStreamError(f"the provider sent an event that is not JSON ({len(data)} bytes)") from None
        if not isinstance(chunk, dict):
            return []
        if chunk.get("error") is not None:
            error = chunk["error"]
            raise UpstreamStreamError(str(error.get("message", error) if isinstance(error, dict) else error)[:300])
        return self.stream.chunk(chunk)

    def _closing(self) -> list[bytes]:
        # after its finish reason a chat answer is complete, [DONE] or not; before it, it was cut short
        return self.stream.finish() if self.stream.finish_reason is not None else []


class AnthropicToChatSse(_Translator):
    """An Anthropic Messages stream (``message_start`` … ``message_stop``) as chat-completions chunks.

    The usage chunk is always made: the relay drops it when the client did not ask for it.
    """

    def __init__(self, model: str) -> None:
        super().__init__(ends_stream=is_message_stop)
        self.stream = MessagesToChatStream(model=model, include_usage=True)

    def _data(self, data: bytes) -> list[bytes]:
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise UpstreamStreamError(f"the provider sent an event that is not JSON ({len(data)} bytes)") from None
        if not isinstance(event, dict):
            return []
        if event.get("type") == "error":
            error = event.get("error") if isinstance(event.get("error"), dict) else {}
            raise UpstreamStreamError(f"{error.get('type', 'error')}: {str(error.get('message', ''))[:300]}")
        out = self.stream.event(event)
        self.done = self.stream.done
        return out

    def _closing(self) -> list[bytes]:
        return []  # no message_stop: cut short
