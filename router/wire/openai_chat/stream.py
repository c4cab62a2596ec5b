"""Chat-completions stream events: the end (``data: [DONE]``), the error event that ends a broken
stream, and the usage-only chunk the proxy asks for when the client did not (then dropped). Pure."""

from __future__ import annotations

import orjson

DONE_EVENT = b"data: [DONE]\n\n"


def error_event(message: str, code: str) -> bytes:
    payload = {"error": {"message": message, "type": "upstream_error", "param": None, "code": code}}  # an ErrorResponse
    return b"data: " + orjson.dumps(payload) + b"\n\n" + DONE_EVENT


def is_usage_only_event(event: bytes) -> bool:
    """An SSE event that only carries usage (``choices`` empty), as ``include_usage`` adds at the end."""
    if b'"usage"' not in event:
        return False
    for line in event.splitlines():
        if line.startswith(b"data:"):
            try:
                chunk = orjson.loads(line[5:])
            except orjson.JSONDecodeError:
                return False
            return isinstance(chunk, dict) and chunk.get("choices") == [] and isinstance(chunk.get("usage"), dict)
    return False
