"""Errors and stream events in Anthropic's shape. Pure.

Every error is ``{"type": "error", "error": {"type", "message"}, "request_id"}`` with the status's Anthropic type
(``invalid_request_error`` 400, ``authentication_error`` 401, ``not_found_error`` 404,
``request_too_large`` 413, ``rate_limit_error`` 429, ``api_error`` 5xx, ``overloaded_error`` 529);
the request's id is also the ``request-id`` header, as on Anthropic's own errors; a stream that breaks
ends with an ``error`` event; a silent stream is kept alive with ``ping``.
"""

from __future__ import annotations

from typing import Any

import orjson

from router.core.errors import ApiError, ErrorAnswer

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "api_error",
    504: "api_error",
    529: "overloaded_error",
}


def error_type(status: int) -> str:
    """Anthropic's error ``type`` for an HTTP status."""
    return ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def error_payload(status: int, message: str) -> dict[str, Any]:
    """``{"type": "error", "error": {"type", "message"}}``, the one shape of every Anthropic error."""
    return {"type": "error", "error": {"type": error_type(status), "message": message}}


def anthropic_event(kind: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **payload}) + b"\n\n"


PING_EVENT = anthropic_event("ping", {})


def anthropic_error_event(message: str, error_type: str = "api_error") -> bytes:
    return anthropic_event("error", {"error": {"type": error_type, "message": message}})


def render_error(error: ApiError, request_id: str | None = None) -> ErrorAnswer:
    """Any error of the proxy's, in Anthropic's shape with the status's type; with ``request_id`` where
    Anthropic's errors carry theirs (the body's ``request_id`` and the ``request-id`` header)."""
    payload = error_payload(error.status, error.message)
    if request_id is None:
        return ErrorAnswer(error.status, orjson.dumps(payload))
    return ErrorAnswer(error.status, orjson.dumps({**payload, "request_id": request_id}), (("request-id", request_id),))


def stream_error(message: str, code: str) -> bytes:
    """The event that ends a broken stream: ``overloaded_error`` when the proxy is stopping, else ``api_error``."""
    return anthropic_error_event(message, "overloaded_error" if code == "server_shutting_down" else "api_error")
