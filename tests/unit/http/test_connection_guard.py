"""The connection guard's rules on plain data (router/http/connections.py): which connection goes at
the cap, and when the head timeout closes one. Connections here are stand-ins that record their close;
the same rules on real sockets are tests/http/test_connections.py's, at scale tests/system/'s."""

from __future__ import annotations

import asyncio

from router.http.connections import EVICTED, HEAD_TIMEOUT, REFUSED, ConnectionGuard

HALF_A_HEAD = 71  # bytes of a head that never completes, as bench/half_open_flood.py sends


class Connection:
    """What the guard uses of aiohttp's request handler (GuardedRequestHandler): its two ways to close."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False
        self.answer = b""
        self.waiting = b""  # what it sent that waits in its socket, unread

    def unread(self, limit: int = 1) -> bytes:
        return self.waiting[:limit]

    def force_close(self) -> None:
        self.closed = True

    def answer_and_close(self, answer: bytes) -> None:
        self.answer, self.closed = answer, True

    def __repr__(self) -> str:
        return self.name


def guard(cap: int = 16, head_timeout: float = 30.0) -> tuple[ConnectionGuard, list[str]]:
    reasons: list[str] = []
    return ConnectionGuard(head_timeout, cap, on_close=reasons.append), reasons


def half_open(g: ConnectionGuard, name: str) -> Connection:
    conn = Connection(name)
    g.opened(conn)
    g.received(conn, HALF_A_HEAD, 0)
    return conn


async def test_a_real_connection_whose_head_is_late_outlasts_a_flood_of_half_heads():
    """A client connects; before its head comes (a loaded machine), a flood opens twice the cap of
    connections that each send half a head. Every one of them goes before the real one: by age alone
    the real one became the oldest waiting after cap - 1 more, and was closed before its head came."""
    g, reasons = guard(cap=16)
    flood = [half_open(g, f"flood{i}") for i in range(15)]
    real = Connection("real")
    g.opened(real)
    flood += [half_open(g, f"flood{i}") for i in range(15, 47)]
    assert not real.closed and g.open == 16
    g.received(real, 120, 1)  # its head, whole: now it is served
    assert g.state[real] == "busy"
    assert sum(conn.closed for conn in flood) == 47 - 15 and reasons == [EVICTED] * 32


async def test_half_heads_go_oldest_first_and_before_connections_that_sent_nothing():
    g, _ = guard(cap=16)
    silent = [Connection(f"silent{i}") for i in range(8)]
    for conn in silent:
        g.opened(conn)
    partial = [half_open(g, f"partial{i}") for i in range(8)]
    for i in range(8):
        g.opened(Connection(f"new{i}"))  # nothing sent yet
        assert [conn.closed for conn in partial] == [True] * (i + 1) + [False] * (7 - i)
    assert not any(conn.closed for conn in silent)
    g.opened(Connection("one more"))  # no half head left: the newest that sent nothing goes
    assert not any(conn.closed for conn in silent) and g.open == 16
    g.opened(Connection("and one more"))
    assert not any(conn.closed for conn in silent) and g.open == 16


async def test_with_the_flood_unread_its_half_heads_go_before_a_late_head_or_a_whole_one_unread():
    """The loop accepts faster than it reads (a loaded machine): the flood's half-heads wait unread,
    so every connection looks silent. The oldest of them — a real client whose head is late, or came
    and waits unread — went first (a CI run); the half-heads, peeked, go before them."""
    g, reasons = guard(cap=16)
    late, whole = Connection("late"), Connection("whole unread")
    g.opened(late)
    g.opened(whole)
    whole.waiting = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n"
    flood = []
    for i in range(40):
        conn = Connection(f"flood{i}")
        g.opened(conn)
        conn.waiting = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl"
        flood.append(conn)
    assert not late.closed and not whole.closed and sum(conn.closed for conn in flood) == 40 - 14
    assert reasons == [EVICTED] * 26
    for conn in flood:  # the flood stops short of its half-heads: nothing sent, nothing unread
        conn.waiting = b""
    g.opened(Connection("one more"))  # none holds part of a head: the newest that sent nothing goes
    assert not late.closed and not whole.closed and flood[-1].closed and not flood[-2].closed


async def test_a_client_slow_to_send_outlasts_a_flood_whose_half_heads_come_late_too():
    """A client connects and sends its head 0.5 s later (a loaded machine); meanwhile a flood opens
    connections whose half-heads have not come yet either (its process descheduled between connect
    and send: two suites on two cores). By age the client was the oldest that sent nothing, and went
    (1 run in ~14 of tests/system/test_half_open_connections.py); the flood's newest go instead."""
    g, reasons = guard(cap=16)
    g.opened(late := Connection("late"))
    flood = [Connection(f"flood{i}") for i in range(100)]
    for conn in flood:
        g.opened(conn)
    assert not late.closed and sum(conn.closed for conn in flood) == 100 - 15 and reasons == [EVICTED] * 85
    g.received(late, 120, 1)  # its head, whole: now it is served
    assert g.state[late] == "busy"


async def test_a_client_yet_to_send_outlasts_a_flood_whose_newest_hold_their_half_heads_unread():
    """The oldest waiting sent nothing (a flood's stalled connects); then a client that sends its head
    late; then the flood's newest, their half-heads waiting unread (the loop accepts faster than it
    reads). Those newest go, not the client: taking the newest that sent nothing passed them over
    for the client (tests/system/test_half_open_connections.py, 1 run in 6)."""
    g, reasons = guard(cap=80)
    stalled = [Connection(f"stalled{i}") for i in range(60)]
    for conn in stalled:
        g.opened(conn)
    g.opened(late := Connection("late"))
    flood = []
    for i in range(40):
        g.opened(conn := Connection(f"flood{i}"))
        conn.waiting = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl"
        flood.append(conn)
    assert not late.closed and not any(conn.closed for conn in stalled)
    assert sum(conn.closed for conn in flood) == 40 - 19 and reasons == [EVICTED] * 21


async def test_a_head_waiting_unread_is_not_taken_for_silent_by_the_newest_first_rule():
    """The newest connection sent its whole head, which waits unread (the loop accepts faster than it
    reads): it is no silent one, and an older connection that sent nothing goes instead."""
    g, _ = guard(cap=16)
    older = [Connection(f"silent{i}") for i in range(15)]
    for conn in older:
        g.opened(conn)
    g.opened(real := Connection("real"))
    real.waiting = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n"
    g.opened(Connection("one more"))
    assert not real.closed and older[-1].closed and sum(conn.closed for conn in older) == 1


def served(g: ConnectionGuard, name: str) -> Connection:
    conn = Connection(name)
    g.opened(conn)
    g.received(conn, 120, 1)  # a whole head: its request is being served
    return conn


async def test_an_idle_kept_alive_connection_goes_after_those_waiting_for_a_head_and_a_busy_one_never():
    g, reasons = guard(cap=16)
    idle = served(g, "idle")
    g.finished(idle)  # answered, kept alive
    busy = [served(g, f"busy{i}") for i in range(14)]
    silent = Connection("silent")
    g.opened(silent)
    g.opened(newest := Connection("newest"))  # at the cap: the one waiting for a head goes, not the idle one
    assert silent.closed and not idle.closed
    g.received(newest, 120, 1)
    g.opened(Connection("next"))  # none waits for a head: the idle one goes
    assert idle.closed and not any(conn.closed for conn in busy) and reasons == [EVICTED, EVICTED]


async def test_when_every_connection_is_busy_the_new_one_is_refused():
    g, reasons = guard(cap=16)
    busy = [served(g, f"busy{i}") for i in range(16)]
    g.opened(refused := Connection("refused"))
    assert refused.closed and refused.answer.startswith(b"HTTP/1.1 503 ") and not any(conn.closed for conn in busy)
    assert reasons == [REFUSED] and g.open == 16


async def test_the_head_timeout_closes_connections_that_sent_nothing_or_half_a_head():
    g, reasons = guard(cap=16, head_timeout=0.05)
    silent = Connection("silent")
    g.opened(silent)
    partial = half_open(g, "partial")
    busy = served(g, "busy")
    await asyncio.sleep(0.2)
    assert silent.closed and partial.closed and not busy.closed
    assert silent.answer == b"" and partial.answer.startswith(b"HTTP/1.1 408 ")  # a 408 when part of a head came
    assert reasons == [HEAD_TIMEOUT, HEAD_TIMEOUT] and g.open == 1 and not g.heads


async def test_a_head_that_waits_unread_when_its_deadline_comes_is_read_before_it_is_judged():
    """The proxy's loop late to read (a loaded machine): at the deadline what a client sent waits in
    its socket. Before, the timer closed it as if nothing had come: silently, its head unread."""
    # a second deadline one head timeout after the first: wide, as a loaded machine's timers run late
    g, reasons = guard(cap=16, head_timeout=1.0)
    whole, half, never_read = Connection("whole"), Connection("half"), Connection("never read")
    for conn in (whole, half, never_read):
        g.opened(conn)
        conn.waiting = b"POST / HTTP/1.1\r\n"
    await asyncio.sleep(1.2)  # past the deadline: nothing closed, each waits for its read
    assert not any(conn.closed for conn in (whole, half, never_read))
    g.received(whole, 120, 1)  # its head, whole: served
    g.received(half, 71, 0)  # half a head: closed on that read, with the 408
    assert g.state[whole] == "busy" and half.closed and half.answer.startswith(b"HTTP/1.1 408 ")
    await asyncio.sleep(1.0)  # a read that never comes: closed at a second deadline, no third
    assert never_read.closed and not whole.closed and reasons == [HEAD_TIMEOUT, HEAD_TIMEOUT]
