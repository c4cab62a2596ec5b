"""The Responses API's stream events, as SSE. Pure.

A Responses stream names each event's type on its ``event:`` line and ends at
``response.completed`` / ``.incomplete`` / ``.failed`` (or an ``error`` event): it has no ``[DONE]``.
"""

from __future__ import annotations

from typing import Any

import orjson

Event = dict[str, Any]
# The events that end a Responses stream.
END_TYPES = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})


def sse_event(event: Event) -> bytes:
    """One Responses event as SSE: its type on the ``event:`` line, as OpenAI sends it."""
    return b"event: " + event["type"].encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


def error_event(message: str, code: str, sequence_number: int) -> bytes:
    """The Responses API's ``error`` event, numbered as the next of the stream's events (those before it
    were numbered 0, 1, …, by the API relayed or by the translation)."""
    return sse_event({"type": "error", "code": code, "message": message, "param": None, "sequence_number": sequence_number})
