"""Errors the HTTP edge answers itself, before or outside the chain, in the client's format.

Inside the chain every refusal is written by the request's wire adapter
(:meth:`router.contract.context.RequestContext.error_response`); here the request has no context
yet (auth, framing, unknown paths, the endpoints outside the chain), so the format is the one the
wire registry finds for the request (:func:`router.wire.request_format`): the one whose API its path
names, at any depth (a base URL with one ``/v1`` too many or too few still names it), whatever
headers come with it; on a path that names no API (an unknown one, ``/v1/models``), the one whose
clients' header it carries; else the proxy's own. Every error carries a request id where its
format's errors carry one: a refusal outside the chain gets one of its own
(:func:`router.http.request_ids.new_request_id`) unless the caller made it already, to log it with
the refusal.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web

from router.contract.context import error_response
from router.core.errors import ApiError
from router.http.request_ids import new_request_id
from router.wire import own_format, request_format


def own_error(error: ApiError, headers: dict[str, str] | None = None) -> web.Response:
    """``error`` in the format of the proxy's own endpoints."""
    return error_response(own_format(), error, headers)


def error_for(
    path: str, request_headers: Mapping[str, str], error: ApiError, headers: dict[str, str] | None = None, *, request_id: str | None = None
) -> web.Response:
    """``error`` in the format of a request to ``path`` with ``request_headers`` (see the module doc)."""
    return error_response(request_format(path, request_headers), error, headers, request_id or new_request_id())


def error_for_request(
    request: web.BaseRequest, error: ApiError, headers: dict[str, str] | None = None, *, request_id: str | None = None
) -> web.Response:
    """``error`` in the format of the request (see the module doc); ``request_id`` where that format
    carries one (made here when the caller made none)."""
    return error_for(request.path, request.headers, error, headers, request_id=request_id)


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
