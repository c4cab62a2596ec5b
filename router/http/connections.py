"""The client connections of one server: a head that must arrive in time, and a cap on how many are open.

aiohttp waits for a request head as long as its keep-alive timeout allows (an hour by default),
and holds every connection it accepts: a client that opens connections and sends half a head, or
nothing, holds a socket and a file descriptor each for as long as it likes, until the process
runs out of them. So, per server (one per process: each worker of ``serve --workers`` has its own):

* **Head timeout** (``server.head_timeout_seconds``): a request's head — its request line and
  headers — must be complete within this long of the connection opening (its first request), or
  of the first byte of the head (a kept-alive connection's next request). Else the connection is
  closed: with a ``408`` in the proxy's own error format (no path is known yet) when part of a head came, silently when nothing
  did. A slow body is the body timeout's (``server.body_timeout_seconds``), an idle kept-alive
  connection aiohttp's keep-alive timeout (``server.keepalive_timeout_seconds``).
* **Connection cap** (``server.max_connections``): at the cap, a new connection closes one that
  is waiting for a head (the half-open ones go first), else the oldest idle kept-alive one; one
  serving a request is never closed for another. Only when every connection is busy is the new one
  refused, with a ``503`` and ``Retry-After``. So a flood of half-open connections cannot keep a
  real request out. Of those waiting for a head, the ones that sent part of one go first (the one
  whose head began the longest ago first), then those that sent nothing yet (the newest first). A
  client sends its head as soon as it connects, but on a loaded machine that can be later than a
  flood takes to open ``max_connections`` more connections: by age alone, the client's connection
  was the oldest waiting before its head came, and was closed while a thousand stalled half-heads
  were there to close instead. What a connection sent is known once the proxy's loop reads it, and
  under load the loop accepts connections faster than it reads them: a flood's half-heads then wait
  unread, every connection looks silent, and the oldest — the real client whose head was late, or
  came and waits unread itself — went first (once in a CI run). So before one that looks silent
  goes, the oldest of them are looked at as they are (``EVICT_LOOK`` at most, their unread bytes
  peeked): the first holding part of a head goes, one holding a whole head is left to be read; then
  the newest of them (``EVICT_LOOK`` at most) the same way, as a flood's newest hold their half-heads
  unread while the proxy accepts faster than it reads. When none of those holds part of a head, the
  **newest** that sent nothing goes: the late client sending its head after 0.5 s was older than every
  connection a flood opened meanwhile, and when the flood's half-heads had not arrived yet either
  (its process descheduled between connect and send: two test suites on two cores), the
  oldest-silent rule closed the client (1 run in ~14). A flood's newest connections are the ones
  whose bytes had the least time to come; a client that never sends is the head timeout's to close.
  (Newest-silent alone, without peeking at the newest for half-heads, closed the late client too:
  the flood's newest, their half-heads unread, were passed over for it — 1 run in 6.)

A connection whose deadline comes while bytes it sent wait in its socket unread (the proxy's loop
was late to read them: a loaded machine) is judged on what they hold: it gets one read, and is
closed after it unless that read completed its head (or at a second deadline should the read not
come). The head timeout is the client's to meet, not the proxy's loop's: under load the loop's
timers ran before its reads, and a head that had arrived was closed unread, silently, as if
nothing had come.

An answer the guard sends (the ``408``, the ``503``) is followed by a half-close: the proxy ends
its side of the stream after the answer, then reads and drops what the client still sends, until
the client closes its side, for ``LINGER_SECONDS`` and ``LINGER_BYTES`` at most (``LINGER_MAX``
connections at once, past that closed as soon as the answer is written; they no longer count
against the cap). Closing a socket with input unread makes the kernel reset the connection, and a
client still sending (the rest of its head, a body) got the reset instead of the answer: a head
dripped a byte at a time lost its ``408`` that way on a loaded machine.

The guard sees a connection through the request handler class the app's servers use (see
:mod:`router.http.framing_errors`, the one seam where aiohttp lets the handler be chosen):
opened, bytes received, a head parsed, an answer finished, closed. Deadlines all lie one head
timeout after their start, so the connections waiting for a head are kept in start order and
one timer, at the earliest deadline, expires them.
"""

from __future__ import annotations

import asyncio
import socket
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from aiohttp.web_protocol import RequestHandler

from router.core.errors import ApiError
from router.wire import own_format

HEAD, BUSY, IDLE = "head", "busy", "idle"
EXPIRE_SLICE = 32  # late connections closed per turn of the loop
EVICT_LOOK = 32  # connections that look silent whose unread bytes are peeked before one is evicted
PEEK_BYTES = 16 * 1024  # a head's end must lie within this much to be seen as whole (agents' are < 2 KB)
HEAD_TIMEOUT, EVICTED, REFUSED = "head_timeout", "evicted_at_cap", "refused_at_cap"  # why the proxy closed one
# After the guard's own answer: how long, and how much of what a client still sends, is read and dropped
# before the socket is closed (the client closing its end ends it at once)
LINGER_SECONDS = 2.0
LINGER_BYTES = 64 * 1024
LINGER_MAX = 64  # lingering at once, per server: past the cap's sockets, so a few


def _part_of_a_head(waiting: bytes) -> bool:
    """Bytes waiting unread hold the start of a head and not its end (within ``PEEK_BYTES``)."""
    return bool(waiting) and b"\r\n\r\n" not in waiting and len(waiting) < PEEK_BYTES


def _raw_answer(status: int, reason: str, error: ApiError, extra: str = "") -> bytes:
    """A whole HTTP/1.1 answer that closes the connection, for when no request was parsed to answer."""
    body = own_format().render_error(error).body
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}Connection: close\r\n\r\n"
    return head.encode() + body


class ConnectionGuard:
    """The head timeout and the connection cap of one server (see the module doc).

    ``on_close(reason)`` is told of every connection the guard closes (``head_timeout``,
    ``evicted_at_cap``, ``refused_at_cap``); ``on_count(n)`` of the number open after each change.
    """

    def __init__(
        self,
        head_timeout: float,
        max_connections: int,
        on_close: Callable[[str], None] | None = None,
        on_count: Callable[[int], None] | None = None,
    ) -> None:
        self.head_timeout = head_timeout
        self.max_connections = max_connections
        self.on_close, self.on_count = on_close, on_count
        self.open = 0
        self.lingering = 0  # closed by the guard after an answer, still reading what the client sends
        self.state: dict[RequestHandler, str] = {}
        # waiting for a head: handler → (deadline, bytes of it received), in deadline order
        self.heads: OrderedDict[RequestHandler, tuple[float, int]] = OrderedDict()
        # those of them that have sent part of a head, in the order its first byte came: evicted first
        self.partial: OrderedDict[RequestHandler, None] = OrderedDict()
        self.idle: OrderedDict[RequestHandler, None] = OrderedDict()  # kept alive between requests, oldest first
        self.read_late: set[RequestHandler] = set()  # past its deadline with bytes unread: judged on its next read
        self.parsed: dict[RequestHandler, int] = {}  # heads parsed on each connection, as aiohttp counts them
        self.answered: dict[RequestHandler, int] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self.closed: dict[str, int] = {HEAD_TIMEOUT: 0, EVICTED: 0, REFUSED: 0}
        self._timeout_answer = _raw_answer(
            408, "Request Timeout", ApiError(408, f"the request head did not arrive within {head_timeout:g}s (server.head_timeout_seconds)", "invalid_request_error", "request_timeout")
        )
        self._busy_answer = _raw_answer(
            503,
            "Service Unavailable",
            ApiError(503, f"the proxy is serving its {max_connections} connections at once (server.max_connections); retry shortly", "server_error", "server_busy"),
            "Retry-After: 1\r\n",
        )

    # -- what the handler tells the guard

    def opened(self, handler: RequestHandler) -> None:
        self.open += 1
        self.parsed[handler] = self.answered[handler] = 0
        self.state[handler] = BUSY  # not evictable while it is decided whether another goes
        if self.open > self.max_connections and not self._evict_one():
            self._close(handler, REFUSED, self._busy_answer)
            return
        self._wait_for_head(handler, 0)
        self._counted()

    def received(self, handler: RequestHandler, data_size: int, heads_parsed: int) -> None:
        """Bytes arrived; ``heads_parsed``: how many heads the connection's parser has completed so far."""
        if handler not in self.state:
            return
        if heads_parsed != self.parsed[handler]:  # a head is complete: its request is being served
            self.parsed[handler] = heads_parsed
            self._set(handler, BUSY)
        elif self.state[handler] == IDLE:  # the first bytes of the next request's head
            self._wait_for_head(handler, data_size)
        elif self.state[handler] == HEAD and data_size:
            deadline, got = self.heads[handler]
            self.heads[handler] = (deadline, got + data_size)
            if not got:
                self.partial[handler] = None
            if handler in self.read_late:  # its late bytes are read, and its head is still not whole
                self._close(handler, HEAD_TIMEOUT, self._timeout_answer)

    def finished(self, handler: RequestHandler) -> None:
        """An answer is written; idle (evictable) again once every parsed head has been answered."""
        if handler not in self.state:
            return
        self.answered[handler] += 1
        if self.answered[handler] >= self.parsed[handler] and self.state[handler] == BUSY:
            self._set(handler, IDLE)

    def closed_by_peer_or_server(self, handler: RequestHandler) -> None:
        if self.state.pop(handler, None) is None:
            return
        self.heads.pop(handler, None)
        self.partial.pop(handler, None)
        self.idle.pop(handler, None)
        self.read_late.discard(handler)
        self.parsed.pop(handler, None)
        self.answered.pop(handler, None)
        self.open -= 1
        self._counted()

    # -- the guard's own work

    def _set(self, handler: RequestHandler, state: str) -> None:
        self.heads.pop(handler, None)
        self.partial.pop(handler, None)
        self.idle.pop(handler, None)
        self.read_late.discard(handler)
        self.state[handler] = state
        if state == IDLE:
            self.idle[handler] = None

    def _wait_for_head(self, handler: RequestHandler, received: int) -> None:
        self._set(handler, HEAD)
        deadline = asyncio.get_running_loop().time() + self.head_timeout
        self.heads[handler] = (deadline, received)
        if received:
            self.partial[handler] = None
        if self._timer is None:
            self._arm(deadline)

    def _arm(self, at: float) -> None:
        self._timer_at = at
        self._timer = asyncio.get_running_loop().call_at(at, self._expire)

    def _expire(self) -> None:
        """Close the connections whose head is late, a slice at a time: a flood opened at once
        expires at once, and closing a thousand in one callback held the loop from real requests."""
        self._timer = None
        now = asyncio.get_running_loop().time()
        for _ in range(EXPIRE_SLICE):
            if not self.heads:
                return
            handler, (deadline, received) = next(iter(self.heads.items()))
            if deadline > now:
                self._arm(deadline)
                return
            if handler not in self.read_late and handler.unread():  # type: ignore[attr-defined]  # a GuardedRequestHandler
                # what it sent waits unread: judged once it is read (the next turn of the loop), or at
                # a second deadline, the latest of all, so the order holds
                self.read_late.add(handler)
                self.heads.move_to_end(handler)
                self.heads[handler] = (now + self.head_timeout, received)
                continue
            self._close(handler, HEAD_TIMEOUT, self._timeout_answer if received else None)
        if self.heads:
            self._arm(now)  # the rest on the next turn of the loop, after what waits meanwhile

    def _evict_one(self) -> bool:
        """Close a connection waiting for a head — one that sent part of it first (the oldest first),
        then one that sent nothing yet (the newest first) —, else the oldest idle one; False: all are busy."""
        victim = next(iter(self.partial), None) or self._silent_victim() or next(iter(self.idle), None)
        if victim is None:
            return False
        self._close(victim, EVICTED, None)
        return True

    def _silent_victim(self) -> RequestHandler | None:
        """Of those that look silent (nothing read yet): one whose unread bytes hold part of a head (the
        oldest first, then the newest), else the newest with nothing unread, else the newest (module doc)."""
        for handler, _ in zip(self.heads, range(EVICT_LOOK)):
            if _part_of_a_head(handler.unread(PEEK_BYTES)):  # type: ignore[attr-defined]  # a GuardedRequestHandler
                return handler
        silent = None
        for handler, _ in zip(reversed(self.heads), range(EVICT_LOOK)):
            waiting = handler.unread(PEEK_BYTES)  # type: ignore[attr-defined]  # a GuardedRequestHandler
            if _part_of_a_head(waiting):
                return handler  # a flood's newest hold their half-heads unread: they go before a client yet to send
            if not waiting and silent is None:
                silent = handler
        # None holds part of a head: a flood's newest connections are the ones whose bytes had the least
        # time to come; a real client slow to send is older than they are (the head timeout closes it
        # if it never sends)
        return silent or next(reversed(self.heads), None)

    def _close(self, handler: RequestHandler, reason: str, answer: bytes | None) -> None:
        self.closed_by_peer_or_server(handler)
        self.closed[reason] += 1
        if self.on_close is not None:
            self.on_close(reason)
        if answer is None:
            handler.force_close()
        else:
            handler.answer_and_close(answer)  # type: ignore[attr-defined]  # a GuardedRequestHandler

    def _counted(self) -> None:
        if self.on_count is not None:
            self.on_count(self.open)


class GuardedRequestHandler(RequestHandler):
    """aiohttp's request handler, telling its server's :class:`ConnectionGuard` what the connection does."""

    guard: ConnectionGuard | None = None
    _lingering: int | None = None  # after the guard's answer: the bytes read and dropped since
    _linger_handle: asyncio.TimerHandle | None = None

    def answer_and_close(self, answer: bytes) -> None:
        """Send ``answer`` and close without a reset that could cost the client the answer (see the
        module doc): the proxy's end of the stream follows the answer, then what the client still
        sends is read and dropped until it closes its end, for ``LINGER_SECONDS`` at most."""
        transport, guard = self.transport, self.guard
        if transport is None or transport.is_closing():
            self.force_close()
            return
        if not transport.can_write_eof() or guard is None or guard.lingering >= LINGER_MAX:
            transport.write(answer)
            self.force_close()  # the transport closes once what is buffered is written
            return
        guard.lingering += 1
        self._lingering = 0  # aiohttp parses nothing more: no request is served on this connection
        transport.write(answer)
        transport.write_eof()  # sent once the answer is
        self._linger_handle = asyncio.get_running_loop().call_later(LINGER_SECONDS, self.force_close)

    def unread(self, limit: int = 1) -> bytes:
        """The first ``limit`` bytes the client has sent that wait in the socket, not yet read, left
        there (b"" where there are none, or the socket cannot be asked)."""
        sock = self.transport.get_extra_info("socket") if self.transport is not None else None
        if sock is None:
            return b""
        # asyncio's socket wrapper has no recv: a socket object over the same descriptor, detached
        # after the peek so that it closes nothing (the socket is non-blocking: asyncio's)
        try:
            peeker = socket.socket(fileno=sock.fileno())
        except OSError:  # closed meanwhile
            return b""
        try:
            return peeker.recv(limit, socket.MSG_PEEK)
        except OSError:
            return b""
        finally:
            peeker.detach()

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        if self.guard is not None:
            self.guard.opened(self)

    def data_received(self, data: bytes) -> None:
        if self._lingering is not None:
            self._lingering += len(data)
            if self._lingering > LINGER_BYTES:
                self.force_close()
            return
        super().data_received(data)
        if self.guard is not None:
            self.guard.received(self, len(data), self._request_count)

    async def finish_response(self, request: Any, resp: Any, start_time: float | None) -> Any:
        try:
            return await super().finish_response(request, resp, start_time)
        finally:
            if self.guard is not None:
                self.guard.finished(self)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._linger_handle is not None:
            self._linger_handle.cancel()
            self._linger_handle = None
            if self.guard is not None:
                self.guard.lingering -= 1
        if self.guard is not None:
            self.guard.closed_by_peer_or_server(self)
        super().connection_lost(exc)
