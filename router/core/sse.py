"""Server-sent-event framing for the stream relay. Pure.

The relay forwards upstream bytes unchanged but only in whole events: bytes
after the last event boundary wait for the rest of their event. Tool-call
deltas are never re-chunked or merged (WHAT-USERS-HIT #2), and when a stream
breaks, the client gets a clean error event instead of half a JSON line.
What the events mean is the wire format's (:class:`EventFormat`: its last event, its usage
reports, the usage-only event the proxy asked for on the client's behalf): the framing here
knows none of them. A usage report is read, never altered — and an event that only carries
one is dropped whole when the proxy asked for it (``drop_usage_only``); a stream that reports
usage in several events keeps the latest figure of each kind.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from router.core.json_body import json_object, loads
from router.core.results import Usage

# What a silent stream sends in the OpenAI formats: an SSE comment, which every client ignores.
KEEP_ALIVE_COMMENT = b": keep-alive\n\n"
# One event's end: a blank line in any of the three line-ending styles.
_EVENT_END = re.compile(rb"(\r\n\r\n|\n\n|\r\r)")


class EventTooLarge(Exception):
    """One event (or a line that never ends) outgrew the relay's bound."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"an SSE event is larger than {max_bytes / 1048576:g} MB (upstream.max_stream_event_mb)")


def _last_boundary(buffer: bytes | bytearray, start: int = 0) -> int:
    """End offset of the last complete event in ``buffer`` at or after ``start`` (0 if none)."""
    ends = (buffer.rfind(b"\n\n", start), buffer.rfind(b"\r\n\r\n", start), buffer.rfind(b"\r\r", start))
    lf, crlf, cr = ends
    return max(lf + 2 if lf >= 0 else 0, crlf + 4 if crlf >= 0 else 0, cr + 2 if cr >= 0 else 0)


class EventFormat(Protocol):
    """What a wire format says about its own events (every wire adapter is one)."""

    def is_stream_end(self, data: bytes) -> bool:
        """Whether one data line's payload (after ``data:``, stripped) is the stream's last event."""
        ...

    def read_usage(self, body: bytes) -> Usage | None:
        """The usage one event's JSON reports, if any."""
        ...

    def is_usage_only_event(self, event: bytes) -> bool:
        """An event that only carries the usage report the proxy asked for on the client's behalf."""
        ...


class StreamFraming(Protocol):
    """How a client takes a stream that is not server-sent events (Gemini's JSON array): the relay
    hands it the client's whole events as it would write them, and writes what it returns instead,
    with ``content_type``; ``close`` is written after the last event (an error event included)."""

    content_type: str

    def events(self, ready: bytes) -> bytes: ...

    def close(self) -> bytes: ...


def _without_usage_only_events(ready: bytes, events: EventFormat) -> bytes:
    """Whole events (each with its own terminator), minus the usage-only ones, byte-for-byte."""
    parts = _EVENT_END.split(ready)  # event, end, event, end, ..., rest (blank-line bytes after the last end)
    kept = [parts[i] + parts[i + 1] for i in range(0, len(parts) - 1, 2) if not events.is_usage_only_event(parts[i])]
    return b"".join(kept) + parts[-1]


def data_payloads(events: bytes) -> list[bytes]:
    """The ``data:`` payload of each whole event (the lines of one event joined), in order."""
    out = []
    for event in _EVENT_END.split(events)[::2]:
        lines = [line[5:].lstrip() for line in event.splitlines() if line.startswith(b"data:")]
        if lines:
            out.append(b"\n".join(lines))
    return out


def is_event_of_type(data: bytes, types: frozenset[str]) -> bool:
    """Whether one SSE data payload is a JSON event whose ``type`` is one of ``types`` (a stream
    end for formats without ``[DONE]``); parsed only when a type's quoted name occurs in it, so
    the many delta events cost a substring search and text that mentions a name is not taken."""
    if not any(f'"{kind}"'.encode() in data for kind in types):
        return False
    try:
        event = loads(data)  # a translated event may echo the request, numbers as the client wrote them
    except ValueError:
        return False
    return isinstance(event, dict) and event.get("type") in types


@dataclass(slots=True)
class SseRelay:
    """Cuts an upstream byte stream in ``format`` into whole events, noting usage and the stream's end."""

    format: EventFormat
    pending: bytearray = field(default_factory=bytearray)
    usage: Usage | None = None
    done: bool = False
    events: int = 0
    max_event_bytes: int = 8 * 1024 * 1024
    drop_usage_only: bool = False  # the client did not ask for the usage report: it is read, not forwarded

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
            return _without_usage_only_events(ready, self.format)
        return ready

    def _inspect(self, ready: bytes) -> None:
        events = self.format
        for line in ready.splitlines():
            if not line.startswith(b"data:"):
                continue
            self.events += 1
            data = line[5:].strip()
            if events.is_stream_end(data):
                self.done = True
            # the last event may carry it (the Responses API's response.completed); Gemini's is usageMetadata
            if b'"usage' in data:
                usage = events.read_usage(data)
                if usage is not None:  # Anthropic reports the prompt at the start, the output at the end
                    self.usage = usage if self.usage is None else self.usage.updated(usage)


class SseEvents:
    """Whole SSE events out of a provider's chunks: each event's bytes (its blank line included) and its
    ``data:`` payload (the lines joined; b"" for none).

    Linear in the bytes fed: a chunk's events are cut at offsets and the buffer shortened once, and an
    unfinished event's bytes are searched again only where a separator may begin (the last 3). Cutting
    each event off the front and searching the whole buffer for both separators every time was
    quadratic in a chunk's events (6 % of a streamed wire's fuzz profile). Each kind's next separator
    is searched for again only once passed: searching for LF from every event's end in a CRLF stream
    (Gemini's) ran to the buffer's end each time, quadratic again (5,000 events in one chunk 0.79 s →
    0.013 s; 16 % of the hostile grid's CPU)."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self._searched = 0  # the buffer's bytes with no event's end among them (but where one may begin)

    def feed(self, chunk: bytes) -> list[tuple[bytes, bytes]]:
        buffer = self.buffer
        buffer += chunk
        out: list[tuple[bytes, bytes]] = []
        start = 0
        search = max(self._searched - 3, 0)
        # the next separator of each kind at or after ``search``, found again only once passed: a
        # stream of one kind (Gemini's CRLF) never has the other's search run to the buffer's end per event
        lf, crlf = buffer.find(b"\n\n", search), buffer.find(b"\r\n\r\n", search)
        while lf >= 0 or crlf >= 0:
            # the separator that begins first ends the event (the two never begin at one offset)
            end, size = (crlf, 4) if crlf >= 0 and (lf < 0 or crlf < lf) else (lf, 2)
            raw = bytes(buffer[start : end + size])
            payloads = data_payloads(raw)
            out.append((raw, payloads[0] if payloads else b""))
            start = search = end + size
            if 0 <= lf < search:
                lf = buffer.find(b"\n\n", search)
            if 0 <= crlf < search:
                crlf = buffer.find(b"\r\n\r\n", search)
        if start:
            del buffer[:start]
        self._searched = len(buffer)
        return out

    def rest(self) -> bytes:
        rest, self.buffer, self._searched = bytes(self.buffer), bytearray(), 0
        return rest

    def feed_objects(self, chunk: bytes, on_object: Callable[[bytes, dict[str, Any]], bytes]) -> bytes:
        """``chunk``'s whole events as they go on: one whose data is a JSON object as ``on_object(raw,
        object)`` returns it, any other (no data, not JSON, not an object) as it came."""
        out = []
        for raw, data in self.feed(chunk):
            event = json_object(data) if data else None
            out.append(on_object(raw, event) if event is not None else raw)
        return b"".join(out)

