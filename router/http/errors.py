"""Errors the HTTP edge answers itself, before or outside the chain, in the client's format.

Inside the chain every refusal is written by the request's wire adapter
(:meth:`router.contract.context.RequestContext.error_response`); here the request has no context
yet (auth, framing, unknown paths, the endpoints outside the chain), so the format is the one its
path names: Google's for the Gemini API's paths; Anthropic's for a ``/messages`` path at any depth
(``/v1/v1/messages``, ``/messages``: an ``ANTHROPIC_BASE_URL`` with one ``/v1`` too many or too
few); OpenAI's for its APIs' paths (chat completions, Responses, and the completions and embeddings
the proxy does not serve), whatever headers come with them. Only a path that names no API (an
unknown one, ``/v1/models``) lets a header say more: Anthropic's for a request with an
``anthropic-version`` header (every Anthropic client sends one), else OpenAI's. Claude Code shows
only the message of an error in its own shape.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from aiohttp import web

from router.contract.context import error_response
from router.core.errors import ApiError
from router.http.request_ids import new_request_id
from router.wire.anthropic_messages.adapter import ANTHROPIC_MESSAGES_ADAPTER
from router.wire.gemini.adapter import GEMINI_ADAPTER
from router.wire.gemini.paths import is_gemini_path
from router.wire.openai_chat.adapter import OPENAI_CHAT_ADAPTER

ANTHROPIC_VERSION_HEADER = "anthropic-version"
# The paths of OpenAI's APIs, at any depth: they are OpenAI-shaped whatever headers come with them.
_OPENAI_PATH = re.compile(r"/(?:chat/completions|completions|responses|embeddings)(?:/|$)")


def openai_error(error: ApiError, headers: dict[str, str] | None = None) -> web.Response:
    return error_response(OPENAI_CHAT_ADAPTER, error, headers)


def anthropic_error(error: ApiError, headers: dict[str, str] | None = None, *, request_id: str | None = None) -> web.Response:
    """Anthropic's errors always carry a request id (``request_id``, ``request-id``): a refusal outside
    the chain gets one of its own (:func:`router.http.request_ids.new_request_id`) unless the caller
    made it already, to log it with the refusal."""
    return error_response(ANTHROPIC_MESSAGES_ADAPTER, error, headers, request_id or new_request_id())


def gemini_error(error: ApiError, headers: dict[str, str] | None = None) -> web.Response:
    return error_response(GEMINI_ADAPTER, error, headers)


def messages_shaped(path: str, headers: Mapping[str, str]) -> bool:
    """Whether a request is an Anthropic Messages client's (see the module doc): its path is the
    Messages API's, or names no API and it carries an ``anthropic-version`` header."""
    if "/messages" in path:
        return True
    return ANTHROPIC_VERSION_HEADER in headers and _OPENAI_PATH.search(path) is None and not is_gemini_path(path)


def error_for_request(
    request: web.BaseRequest, error: ApiError, headers: dict[str, str] | None = None, *, request_id: str | None = None
) -> web.Response:
    """``error`` in the format of the request's path (see the module doc); ``request_id`` where that
    format carries one (made here when the caller made none)."""
    if is_gemini_path(request.path):
        return gemini_error(error, headers)
    if messages_shaped(request.path, request.headers):
        return anthropic_error(error, headers, request_id=request_id)
    return openai_error(error, headers)


# Status → (type, code) for HTTP errors raised by aiohttp itself (404, 405, ...).
_HTTP_ERRORS = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    413: ("invalid_request_error", "request_too_large"),
    415: ("invalid_request_error", "unsupported_media_type"),
}


def from_http_exception(request: web.BaseRequest, exc: web.HTTPException) -> web.Response:
    """An HTTP error aiohttp raised, in the format of the request's path."""
    type_, code = _HTTP_ERRORS.get(exc.status, ("server_error" if exc.status >= 500 else "invalid_request_error", "http_error"))
    headers = {k: v for k, v in exc.headers.items() if k.lower() == "allow"}
    return error_for_request(request, ApiError(exc.status, exc.reason or "error", type_, code), headers)
