"""Server-sent-event framing for the stream relay. Pure.

The relay forwards upstream bytes unchanged but only in whole events: bytes
after the last event boundary wait for the rest of their event. Tool-call
deltas are never re-chunked or merged (WHAT-USERS-HIT #2), and when a stream
breaks, the client gets a clean error event instead of half a JSON line.
The usage chunk (``stream_options.include_usage``) is read, never altered — and
dropped whole only when the proxy asked for it on the client's behalf
(``drop_usage_only``, see :mod:`router.wire.openai_chat.body`); a stream that
reports usage in several events (Anthropic's message_start and message_delta)
keeps the latest figure of each kind.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from router.core.results import Usage
from router.wire.openai_chat.body import is_usage_only_event

DONE_EVENT = b"data: [DONE]\n\n"
# What a silent stream sends in the OpenAI formats: an SSE comment, which every client ignores.
KEEP_ALIVE_COMMENT = b": keep-alive\n\n"
# One event's end: a blank line in any of the three line-ending styles.
_EVENT_END = re.compile(rb"(\r\n\r\n|\n\n|\r\r)")


def error_event(message: str, code: str) -> bytes:
    payload = {"error": {"message": message, "type": "upstream_error", "code": code}}
    return b"data: " + orjson.dumps(payload) + b"\n\n" + DONE_EVENT


class EventTooLarge(Exception):
    """One event (or a line that never ends) outgrew the relay's bound."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"an SSE event is larger than {max_bytes / 1048576:g} MB (upstream.max_stream_event_mb)")


def _last_boundary(buffer: bytes | bytearray, start: int = 0) -> int:
    """End offset of the last complete event in ``buffer`` at or after ``start`` (0 if none)."""
    ends = (buffer.rfind(b"\n\n", start), buffer.rfind(b"\r\n\r\n", start), buffer.rfind(b"\r\r", start))
    lf, crlf, cr = ends
    return max(lf + 2 if lf >= 0 else 0, crlf + 4 if crlf >= 0 else 0, cr + 2 if cr >= 0 else 0)


def read_usage(data: bytes) -> Usage | None:
    """Usage from one JSON body (a chat completion or one stream chunk), if it has one.

    Reads both shapes of cache accounting: OpenAI's ``prompt_tokens`` with
    ``prompt_tokens_details.cached_tokens``, and Anthropic's ``input_tokens``
    (which leaves out the cached part) with ``cache_read_input_tokens`` and
    ``cache_creation_input_tokens`` — also inside an OpenAI-shaped usage, as
    some compatible servers send them — plus DeepSeek's
    ``prompt_cache_hit_tokens``. Anthropic's stream carries its usage in
    ``message_start``'s ``message``, the Responses API in ``response`` (its
    ``input_tokens`` include the cached ``input_tokens_details.cached_tokens``);
    those are read too.
    """
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return usage_of(obj)


def usage_of(obj: Any) -> Usage | None:
    """:func:`read_usage` of a body already parsed (a whole answer the proxy has parsed anyway)."""
    if not isinstance(obj, dict):
        return None
    usage = obj.get("usage")
    if not isinstance(usage, dict):
        # Anthropic's message_start carries it in ``message``, a Responses event in ``response``
        holder = obj.get("message") if isinstance(obj.get("message"), dict) else obj.get("response")
        usage = holder.get("usage") if isinstance(holder, dict) else None
        if not isinstance(usage, dict):
            return None
    return _usage(usage)


def _usage(usage: dict[str, Any]) -> Usage:
    def number(key: str, within: dict[str, Any] = usage) -> int | None:
        value = within.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    details = usage.get("prompt_tokens_details")
    if not isinstance(details, dict):
        details = usage.get("input_tokens_details")  # the Responses API's name for it
    cached_detail = number("cached_tokens", details) if isinstance(details, dict) else None
    cache_read, cache_write = number("cache_read_input_tokens"), number("cache_creation_input_tokens")
    cached = next((n for n in (cached_detail, cache_read, number("prompt_cache_hit_tokens")) if n is not None), None)
    prompt, completion = number("prompt_tokens"), number("completion_tokens")
    total, uncached_input = number("total_tokens"), number("input_tokens")
    if prompt is None and uncached_input is not None:
        # Anthropic's shape: input_tokens counts only what was neither read from nor written to the cache
        prompt = uncached_input + (cache_read or 0) + (cache_write or 0)
    if completion is None:
        completion = number("output_tokens")
    return Usage(prompt, completion, total, cached, cache_write)


def _without_usage_only_events(ready: bytes) -> bytes:
    """Whole events (each with its own terminator), minus the usage-only ones, byte-for-byte."""
    parts = _EVENT_END.split(ready)  # event, end, event, end, ..., rest (blank-line bytes after the last end)
    kept = [parts[i] + parts[i + 1] for i in range(0, len(parts) - 1, 2) if not is_usage_only_event(parts[i])]
    return b"".join(kept) + parts[-1]


def is_event_of_type(data: bytes, types: frozenset[str]) -> bool:
    """Whether one SSE data payload is a JSON event whose ``type`` is one of ``types`` (a stream
    end for formats without ``[DONE]``); parsed only when a type's quoted name occurs in it, so
    the many delta events cost a substring search and text that mentions a name is not taken."""
    if not any(f'"{kind}"'.encode() in data for kind in types):
        return False
    try:
        event = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return isinstance(event, dict) and event.get("type") in types


@dataclass(slots=True)
class SseRelay:
    """Cuts an upstream byte stream into whole events, noting usage and [DONE]."""

    pending: bytearray = field(default_factory=bytearray)
    usage: Usage | None = None
    done: bool = False
    events: int = 0
    max_event_bytes: int = 8 * 1024 * 1024
    drop_usage_only: bool = False  # the client did not ask for the usage chunk: it is read, not forwarded
    # Whether one data line's payload is the stream's last event, for a wire format that ends
    # otherwise than chat's `data: [DONE]` (the wire adapter's is_stream_end); None: [DONE].
    ends_stream: Callable[[bytes], bool] | None = None

    def feed(self, chunk: bytes) -> bytes:
        """Bytes to forward now: every complete event so far, byte-for-byte.

        Only the new bytes are searched for a boundary (plus the 3 before them,
        where one may begin), so a long event costs linear time, not a rescan
        per chunk; :class:`EventTooLarge` when the unfinished event outgrows
        ``max_event_bytes``.
        """
        start = max(len(self.pending) - 3, 0)
        self.pending += chunk
        end = _last_boundary(self.pending, start)
        if end == 0:
            if len(self.pending) > self.max_event_bytes:
                raise EventTooLarge(self.max_event_bytes)
            return b""
        ready = bytes(self.pending[:end])
        del self.pending[:end]
        self._inspect(ready)
        if self.drop_usage_only and b'"usage"' in ready:
            return _without_usage_only_events(ready)
        return ready

    def _inspect(self, ready: bytes) -> None:
        for line in ready.splitlines():
            if not line.startswith(b"data:"):
                continue
            self.events += 1
            data = line[5:].strip()
            if data == b"[DONE]" if self.ends_stream is None else self.ends_stream(data):
                self.done = True
            if b'"usage"' in data:  # the last event may carry it (the Responses API's response.completed)
                usage = read_usage(data)
                if usage is not None:  # Anthropic reports the prompt at the start, the output at the end
                    self.usage = usage if self.usage is None else self.usage.updated(usage)
