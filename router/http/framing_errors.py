"""HTTP errors aiohttp answers before any handler runs, in the format of the request they refuse.

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

An ``Expect`` header other than ``100-continue`` is aiohttp's to refuse too, before the middlewares
(its default expect handler, for every route): with a plain-text 417, and with a 500 when the value
is no UTF-8 (its message echoes it and cannot be written). The servers' request handler meets it
first (:func:`meet_expectations`): the 417 in the path's format, logged and counted as a refusal.

The format is the one the wire registry finds for the request, as for every error the edge answers
itself (:mod:`router.http.errors`: the format whose API its path names; on a path that names none,
the one whose clients' header it carries; else the proxy's own). aiohttp hands the refusal a
stand-in request whose path is ``/`` and which has no headers, so both are read from the bytes
themselves: the last request line among the starts of the connection's last two reads
(:func:`refused_path`; a client writes a request's head in one go, so its line is there) and the
head after it. Best effort by design — only the error's shape depends on it, and a request line not
found (one behind a pipelined body, say) gets the proxy's own.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import hdrs, web
from aiohttp.http import HttpVersion11
from aiohttp.http_exceptions import ContentEncodingError, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from router.http.connections import ConnectionGuard, GuardedRequestHandler
from router.core.errors import ApiError
from router.http.errors import error_for, error_for_request
from router.wire import adapters

log = logging.getLogger("pinch_router.http")

# The parser quotes the client's bytes after a colon; the message ends there.
_QUOTED = re.compile(r"[:'\"\n]")
# A request line's method and path (up to its query or the line's end), at the start of a line.
_REQUEST_LINE = re.compile(rb"(?:^|\n)[A-Z]{3,10} (/[^\s?#]*)")
HEAD_BYTES = 2048  # of each read kept for refused_path: a request line's start is all it needs
EXPECT_CONTINUE = "100-continue"  # the one expectation met (aiohttp's expect handler answers it)


def refused_error(reads: bytes, error: ApiError, path: str | None = None) -> web.Response:
    """``error`` in the shape of the request the refused bytes ``reads`` began (see the module doc);
    ``path``: the request's, when aiohttp knew it."""
    line = _last_request_line(reads)
    if path is None:
        path = line.group(1).decode("latin-1") if line else "/"
    head = reads[line.start() :].split(b"\r\n\r\n", 1)[0].lower().replace(b" ", b"") if line else b""
    # the headers that mark a format's clients, as far as the head shows them
    marks = (a.api.client_header for a in adapters().values() if a.api.client_header is not None)
    return error_for(path, {mark: "" for mark in marks if f"\n{mark}:".encode() in head}, error)


def refused_path(reads: bytes) -> str:
    """The path of the last request line in ``reads`` (the starts of the last reads, newline-joined); ``/``
    when there is none."""
    line = _last_request_line(reads)
    return line.group(1).decode("latin-1") if line else "/"


def _last_request_line(reads: bytes) -> re.Match[bytes] | None:
    found = None
    for found in _REQUEST_LINE.finditer(reads):
        pass
    return found


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


def _refused(error: ApiError, on_refused: Callable[[ApiError], None] | None, exc: BaseException | None = None) -> None:
    log.info("http_refused", extra={"status": error.status, "code": error.code, "reason": type(exc).__name__ if exc else None})
    if on_refused is not None:
        on_refused(error)


def meet_expectations(
    handler: Callable[[BaseRequest], Awaitable[web.StreamResponse]], on_refused: Callable[[ApiError], None] | None
) -> Callable[[BaseRequest], Awaitable[web.StreamResponse]]:
    """``handler`` (a server's: the application's), behind the check of an HTTP/1.1 request's
    ``Expect`` header that aiohttp makes in it: one other than ``100-continue`` is refused with a 417
    in the path's format, its value not echoed, and the connection closed (the body is never read)."""

    async def handle(request: BaseRequest) -> web.StreamResponse:
        expect = request.headers.get(hdrs.EXPECT)
        if not expect or request.version != HttpVersion11 or expect.lower() == EXPECT_CONTINUE:
            return await handler(request)
        error = ApiError(417, f"unsupported Expect header: the proxy meets only Expect: {EXPECT_CONTINUE}", "invalid_request_error", "expectation_failed")
        _refused(error, on_refused)
        response = error_for_request(request, error)
        response.force_close()
        return response

    return handle


class _ApiErrorRequestHandler(GuardedRequestHandler):
    on_refused: Callable[[ApiError], None] | None = None
    _heads: tuple[bytes, bytes] = (b"", b"")  # the starts of the connection's last two reads

    def data_received(self, data: bytes) -> None:
        self._heads = (self._heads[1], data[:HEAD_BYTES])  # a slice, not the read: no big body kept alive
        super().data_received(data)

    def handle_error(
        self, request: BaseRequest, status: int = 500, exc: BaseException | None = None, message: str | None = None
    ) -> web.StreamResponse:
        if request.writer.output_size > 0:  # part of an answer is out: nothing else can be said
            return super().handle_error(request, status, exc, message)
        error = framing_error(status, exc)
        _refused(error, self.on_refused, exc)
        # aiohttp's stand-in request has the path "/" and no headers: they are read from the bytes
        response = refused_error(b"\n".join(self._heads), error, request.path if request.path != "/" else None)
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
        server.request_handler = meet_expectations(server.request_handler, on_refused)
        return server

    app._make_handler = make_server  # type: ignore[method-assign]
