"""Errors in the OpenAI format, ``{"error": {"message", "type", "code", "param"}}``: chat
completions, the Responses API, and every endpoint of the proxy's own. Pure."""

from __future__ import annotations

import orjson

from router.core.errors import ApiError, ErrorAnswer


def error_payload(error: ApiError) -> dict[str, dict[str, str | None]]:
    return {"error": {"message": error.message, "type": error.type, "code": error.code, "param": error.param}}


def render_error(error: ApiError, request_id: str | None = None) -> ErrorAnswer:
    """OpenAI's errors carry no request id in the body (the proxy's own is ``x-router-request-id``)."""
    return ErrorAnswer(error.status, orjson.dumps(error_payload(error)))
