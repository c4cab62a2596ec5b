"""Errors in Ollama's shape: ``{"error": "<message>"}`` with the HTTP status. Pure.

Ollama's errors carry their message only (its clients raise it with the status: the ``ollama``
Python client's ``ResponseError``); the proxy's error code is in the decision log. A stream that
breaks ends with one more line, ``{"error": …}``, as Ollama ends its own.
"""

from __future__ import annotations

import orjson

from router.core.errors import ApiError, ErrorAnswer


def render_error(error: ApiError) -> ErrorAnswer:
    """Any error of the proxy's, in Ollama's shape."""
    return ErrorAnswer(error.status, orjson.dumps({"error": error.message}))


def stream_error(message: str) -> bytes:
    """The event that ends a broken stream: its error line (an SSE event, as the relay carries every line)."""
    return b"data: " + orjson.dumps({"error": message}) + b"\n\n"
