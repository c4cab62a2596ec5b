"""Errors the HTTP edge answers itself, before or outside the chain, in the client's format.

Inside the chain every refusal is written by the request's wire adapter
(:meth:`router.contract.context.RequestContext.error_response`); here the request has no context
yet (auth, framing, unknown paths, the endpoints outside the chain), so the format is the one its
path speaks: Anthropic's for the Messages paths, Google's for the Gemini API's, OpenAI's for every other.
"""

from __future__ import annotations

from aiohttp import web

from router.contract.context import error_response
from router.core.errors import ApiError
from router.http.request_ids import new_request_id
from router.wire.anthropic_messages.adapter import ANTHROPIC_MESSAGES_ADAPTER
from router.wire.gemini.adapter import GEMINI_ADAPTER
from router.wire.gemini.paths import is_gemini_path
from router.wire.openai_chat.adapter import OPENAI_CHAT_ADAPTER

ANTHROPIC_PATH_PREFIX = "/v1/messages"  # its refusals in Anthropic's error shape


def openai_error(error: ApiError, headers: dict[str, str] | None = None) -> web.Response:
    return error_response(OPENAI_CHAT_ADAPTER, error, headers)


def anthropic_error(error: ApiError, headers: dict[str, str] | None = None, *, request_id: str | None = None) -> web.Response:
    """Anthropic's errors always carry a request id (``request_id``, ``request-id``): a refusal outside
    the chain gets one of its own (:func:`router.http.request_ids.new_request_id`) unless the caller
    made it already, to log it with the refusal."""
    return error_response(ANTHROPIC_MESSAGES_ADAPTER, error, headers, request_id or new_request_id())


def gemini_error(error: ApiError, headers: dict[str, str] | None = None) -> web.Response:
    return error_response(GEMINI_ADAPTER, error, headers)


def error_for_path(path: str, error: ApiError, headers: dict[str, str] | None = None, *, request_id: str | None = None) -> web.Response:
    """``error`` in the format the request's path speaks (``request_id`` where that format carries one)."""
    if path.startswith(ANTHROPIC_PATH_PREFIX):
        return anthropic_error(error, headers, request_id=request_id)
    return gemini_error(error, headers) if is_gemini_path(path) else openai_error(error, headers)


# Status → (type, code) for HTTP errors raised by aiohttp itself (404, 405, ...).
_HTTP_ERRORS = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    413: ("invalid_request_error", "request_too_large"),
    415: ("invalid_request_error", "unsupported_media_type"),
}


def from_http_exception(exc: web.HTTPException, path: str = "") -> web.Response:
    """An HTTP error aiohttp raised, in the format ``path`` speaks."""
    type_, code = _HTTP_ERRORS.get(exc.status, ("server_error" if exc.status >= 500 else "invalid_request_error", "http_error"))
    headers = {k: v for k, v in exc.headers.items() if k.lower() == "allow"}
    return error_for_path(path, ApiError(exc.status, exc.reason or "error", type_, code), headers)
