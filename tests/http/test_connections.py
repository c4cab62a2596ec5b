"""Client connections (issue #27, item 6): a head must arrive in time, an idle connection is closed, and a
flood of half-open connections cannot keep a real request out. Raw sockets against the proxy on loopback.

The figures at scale (10,000 half-open connections, the latency of real requests meanwhile) are
measured by ``bench/bench_half_open.py`` against a real ``serve`` process; here, the rules.
"""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest

from router.tools.mock_upstream import Behaviour
from tests.support.config import chat_body, make_config

HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


def request_bytes(body: bytes = orjson.dumps(chat_body())) -> bytes:
    return HEAD + f"Content-Length: {len(body)}\r\n\r\n".encode() + body


async def closed_after(reader: asyncio.StreamReader, timeout: float = 10.0) -> tuple[float, bytes]:
    """Seconds until the proxy closed the connection, and what it sent before."""
    started = time.monotonic()
    data = b""
    async with asyncio.timeout(timeout):
        while chunk := await reader.read(65536):
            data += chunk
    return time.monotonic() - started, data


def guarded(url: str, **server) -> object:
    return make_config(url, server={"head_timeout_seconds": 0.5, "keepalive_timeout_seconds": 30, **server})


async def metric(client, name: str) -> str:
    return "\n".join(line for line in (await (await client.get("/metrics")).text()).splitlines() if line.startswith(name))


async def test_half_a_head_gets_a_408_and_the_connection_closes_at_the_head_timeout(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(guarded(url))
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    writer.write(HEAD[:30])
    waited, data = await closed_after(reader)
    assert 0.4 < waited < 3  # without the timeout aiohttp held it for its keep-alive timeout (an hour)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408") and orjson.loads(body)["error"]["code"] == "request_timeout"
    assert 'reason="head_timeout"} 1.0' in await metric(client, "pinch_router_connections_closed_total")


async def test_a_connection_that_sends_nothing_is_closed_silently(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(guarded(url))
    reader, _ = await asyncio.open_connection("127.0.0.1", client.port)
    waited, data = await closed_after(reader)
    assert data == b"" and waited < 3


async def test_a_head_dripped_a_byte_at_a_time_is_not_given_more_time_for_each_byte(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(guarded(url))
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)

    async def drip() -> None:
        for byte in HEAD:
            writer.write(bytes([byte]))
            await asyncio.sleep(0.05)

    dripping = asyncio.create_task(drip())
    waited, data = await closed_after(reader)
    dripping.cancel()
    assert waited < 3 and data.startswith(b"HTTP/1.1 408")


async def test_a_byte_that_comes_as_the_head_times_out_does_not_cost_the_client_its_408(proxy, mock_upstream):
    """A client still sending when its head times out (the dripping one above, on a loaded machine):
    the proxy closed the socket with that input unread, so the kernel reset the connection, and the
    client got the reset instead of the 408. Here the loop is held while the byte and the timeout
    fall due (a loaded machine's late turn), so the byte comes after the last read: still the 408,
    then the end of the stream."""
    _, url = mock_upstream
    client = await proxy(guarded(url))  # a head timeout of 0.5 s
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    writer.write(HEAD[:30])
    loop = asyncio.get_running_loop()
    loop.call_later(0.45, writer.write, HEAD[30:31])  # due before the timeout ...
    loop.call_later(0.35, time.sleep, 0.3)  # ... and run in the same turn of the loop, just before it
    _, data = await closed_after(reader)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408") and orjson.loads(body)["error"]["code"] == "request_timeout"
    writer.close()


async def test_a_head_that_came_in_time_but_waits_unread_when_the_timeout_falls_due_is_served(proxy, mock_upstream):
    """The proxy's loop late to read (a loaded machine): a whole request waits in the socket when
    the head timeout falls due. It was closed, silently, as if nothing had come; it is read, and
    served."""
    _, url = mock_upstream
    client = await proxy(guarded(url))  # a head timeout of 0.5 s
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    loop = asyncio.get_running_loop()
    loop.call_later(0.45, writer.write, request_bytes())  # due before the timeout ...
    loop.call_later(0.35, time.sleep, 0.3)  # ... and run in the same turn of the loop, just before it
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    writer.close()


async def test_a_kept_alive_connection_may_idle_longer_than_the_head_timeout_and_is_served_again(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(guarded(url))
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    for _ in range(2):
        writer.write(request_bytes())
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
        await reader.readexactly(length)
        await asyncio.sleep(1.0)  # twice the head timeout, idle between requests
    writer.close()


async def test_an_idle_kept_alive_connection_is_closed_after_the_keepalive_timeout(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(guarded(url, keepalive_timeout_seconds=1))
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    writer.write(request_bytes())
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    await reader.readexactly(length)
    waited, data = await closed_after(reader)
    assert data == b"" and 0.5 < waited < 4


async def test_at_the_cap_half_open_connections_make_way_for_a_real_request(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(guarded(url, head_timeout_seconds=30, max_connections=16))
    flood = [await asyncio.open_connection("127.0.0.1", client.port) for _ in range(60)]
    for _, writer in flood:
        writer.write(HEAD[:20])
    await asyncio.sleep(0.2)
    for attempt in range(5):
        resp = await client.post("/v1/chat/completions", json=chat_body(f"still served {attempt}"))
        assert resp.status == 200
    closed = sum(1 for reader, _ in flood if reader.at_eof() or reader.exception() is not None)
    text = await metric(client, "pinch_router_connections_closed_total")
    assert 'reason="evicted_at_cap"' in text and closed >= 60 - 16
    assert float((await metric(client, "pinch_router_connections_open")).split()[-1]) <= 16
    for _, writer in flood:
        writer.close()


async def test_when_every_connection_is_busy_a_new_one_is_refused_with_503_and_retry_after(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(guarded(url, max_connections=16))
    mock.then(*[Behaviour(event_delay=0.2, text=" ".join(["word"] * 100)) for _ in range(16)])  # 20 s streams

    async def stream() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
        writer.write(request_bytes(orjson.dumps(chat_body(stream=True))))
        await reader.readuntil(b"\r\n\r\n")  # the stream has begun: this connection is busy
        return reader, writer

    streams = await asyncio.gather(*[stream() for _ in range(16)])
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    _, data = await closed_after(reader)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in head
    assert orjson.loads(body)["error"]["code"] == "server_busy"
    for _, stream_writer in streams:
        stream_writer.close()
    writer.close()


def test_the_connection_settings_are_checked():
    with pytest.raises(Exception, match="max_connections"):
        make_config(server={"max_connections": 2})
    with pytest.raises(Exception, match="head_timeout_seconds"):
        make_config(server={"head_timeout_seconds": 0})
