"""HTTP errors aiohttp answers before any handler runs, in the OpenAI error format.

A malformed request line, a header over 8 KB, an invalid header character or
a ``Content-Encoding`` aiohttp cannot decode (``br``, ``zstd``, when its decoding is on: the
proxy decodes request bodies itself, :mod:`router.http.request_body`) are refused by
aiohttp's protocol handler while it parses, before the application and its
middlewares see a request; its answer is plain text. The one seam for that
answer is :meth:`RequestHandler.handle_error`, and the one place the
handler class is chosen is the ``web.Server`` an application makes for
itself (``Application._make_handler``, used by ``web.run_app``, ``AppRunner``
and the test server alike). :func:`use_proxy_request_handler` wraps
that factory so the server's handlers answer with an ApiError (and close the
connection, as aiohttp does), log one line and count the refusal — and tell
the server's :class:`~router.http.connections.ConnectionGuard` what each
connection does (head timeout, connection cap).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import ContentEncodingError, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from router.http.connections import ConnectionGuard, GuardedRequestHandler
from router.http.errors import openai_error
from router.core.errors import ApiError

log = logging.getLogger("pinch_router.http")

# The parser quotes the client's bytes after a colon; the message ends there.
_QUOTED = re.compile(r"[:'\"\n]")


def framing_error(status: int, exc: BaseException | None) -> ApiError:
    """The error object for what aiohttp refused (``status`` is aiohttp's choice)."""
    if isinstance(exc, LineTooLong):
        return ApiError(431, "a request line or header is longer than aiohttp's 8190-byte limit", "invalid_request_error", "header_too_large")
    if isinstance(exc, ContentEncodingError):
        return ApiError(
            415, "unsupported Content-Encoding: send identity, gzip or deflate", "invalid_request_error", "unsupported_content_encoding"
        )
    if status >= 500:
        return ApiError(status, "internal error in the proxy; see its log", "server_error", "internal_error")
    said = _QUOTED.split(str(getattr(exc, "message", "") or ""), 1)[0].strip()[:80]
    return ApiError(status, f"malformed HTTP request{f' ({said})' if said else ''}", "invalid_request_error", "bad_http_request")


class _ApiErrorRequestHandler(GuardedRequestHandler):
    on_refused: Callable[[ApiError], None] | None = None

    def handle_error(
        self, request: BaseRequest, status: int = 500, exc: BaseException | None = None, message: str | None = None
    ) -> web.StreamResponse:
        if request.writer.output_size > 0:  # part of an answer is out: nothing else can be said
            return super().handle_error(request, status, exc, message)
        error = framing_error(status, exc)
        log.info("http_refused", extra={"status": error.status, "code": error.code, "reason": type(exc).__name__ if exc else None})
        if self.on_refused is not None:
            self.on_refused(error)
        response = openai_error(error)
        response.force_close()
        return response


def use_proxy_request_handler(
    app: web.Application, on_refused: Callable[[ApiError], None] | None = None, guard: Callable[[], ConnectionGuard] | None = None
) -> None:
    """Make the servers ``app`` builds use the proxy's request handler: framing errors answered as
    ApiErrors (see the module docstring), the connections of each server under its own
    :class:`~router.http.connections.ConnectionGuard`, made by ``guard``."""
    make_handler = app._make_handler

    def make_server(*args: Any, **kwargs: Any) -> web.Server:
        class Handler(_ApiErrorRequestHandler):
            pass

        Handler.on_refused = staticmethod(on_refused) if on_refused is not None else None  # type: ignore[assignment]
        Handler.guard = guard() if guard is not None else None

        class Server(web.Server):
            def __call__(self) -> RequestHandler:
                return Handler(self, loop=self._loop, **self._kwargs)

        server = make_handler(*args, **kwargs)
        server.__class__ = Server  # the same server, whose connections get the handler above
        return server

    app._make_handler = make_server  # type: ignore[method-assign]
