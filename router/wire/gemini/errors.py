"""Errors in Google's shape: ``{"error": {"code", "message", "status"}}``. Pure.

``code`` is the HTTP status, ``status`` its ``google.rpc.Code`` name (``INVALID_ARGUMENT`` 400,
``UNAUTHENTICATED`` 401, ``PERMISSION_DENIED`` 403, ``NOT_FOUND`` 404, ``RESOURCE_EXHAUSTED`` 429,
``INTERNAL`` 500, ``UNAVAILABLE`` 502/503, ``DEADLINE_EXCEEDED`` 504), as the google-genai SDKs
read them; ``details`` holds one ``google.rpc.ErrorInfo`` whose ``reason`` is the proxy's own
error code in the UPPER_SNAKE_CASE ``error_details.proto`` asks of a reason (``MODEL_NOT_FOUND``,
``NO_CAPABLE_MODEL``, …), so a client can tell them apart.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from router.core.errors import ApiError, ErrorAnswer

STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    415: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    431: "INVALID_ARGUMENT",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
    529: "UNAVAILABLE",
}
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
DOMAIN = "pinch-router"
_NOT_IN_A_REASON = re.compile(r"[^A-Z0-9]+")
MAX_REASON = 63  # error_details.proto: "at most 63 characters", matching [A-Z][A-Z0-9_]+[A-Z0-9]


def status_name(status: int) -> str:
    """The ``google.rpc.Code`` name Google gives an HTTP status."""
    return STATUSES.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT")


def error_reason(code: str) -> str:
    """The proxy's error code as an ``ErrorInfo.reason``: ``model_not_found`` → ``MODEL_NOT_FOUND``
    ("" when nothing of it is left)."""
    reason = _NOT_IN_A_REASON.sub("_", code.upper()).strip("_")[:MAX_REASON].rstrip("_")
    return reason if len(reason) >= 3 and reason[0].isalpha() else ""


def error_payload(status: int, message: str, reason: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": status, "message": message, "status": status_name(status)}
    if reason and (reason := error_reason(reason)):
        error["details"] = [{"@type": ERROR_INFO, "reason": reason, "domain": DOMAIN}]
    return {"error": error}


def render_error(error: ApiError) -> ErrorAnswer:
    """Any error of the proxy's, in Google's shape."""
    return ErrorAnswer(error.status, orjson.dumps(error_payload(error.status, error.message, error.code)))


def stream_error(message: str, code: str) -> bytes:
    """The event that ends a broken stream: the error object as one more ``data:`` event
    (``UNAVAILABLE`` when the proxy is stopping, else ``INTERNAL``)."""
    status = 503 if code == "server_shutting_down" else 500
    return b"data: " + orjson.dumps(error_payload(status, message, code)) + b"\r\n\r\n"
