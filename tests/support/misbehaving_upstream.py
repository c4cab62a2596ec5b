"""An upstream that misbehaves on demand, at the byte level, on a free loopback port.

aiohttp's own server cannot send a malformed status line, an oversize header
or a body that never ends, so this one is a raw asyncio TCP server: each
connection reads one request (head and ``Content-Length`` body) and answers
with the next scripted :data:`Answer` — raw bytes, or a coroutine that writes
to the socket itself (endless streams, trickles) — and then closes.
"""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

Writer = Callable[[asyncio.StreamWriter], Awaitable[None]]
Answer = bytes | Writer

COMPLETION = orjson.dumps({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]})


def http_answer(status_line: bytes = b"HTTP/1.1 200 OK", headers: dict[str, str] | None = None, body: bytes = COMPLETION) -> bytes:
    head = {"Content-Type": "application/json", "Content-Length": str(len(body)), "Connection": "close", **(headers or {})}
    lines = [status_line, *(f"{k}: {v}".encode() for k, v in head.items())]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def gzip_bomb(decoded_bytes: int) -> bytes:
    """A gzip member of ``decoded_bytes`` zeros (about 1,000:1)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1024 * 1024)
    parts = [compressor.compress(block) for _ in range(decoded_bytes // len(block))]
    return b"".join(parts) + compressor.flush()


def gzipped(data: bytes) -> bytes:
    return gzip.compress(data)


def endless(prefix: bytes, chunk: bytes, *, pause: float = 0.0) -> Writer:
    """Sends ``prefix`` then ``chunk`` forever (until the proxy hangs up)."""

    async def write(writer: asyncio.StreamWriter) -> None:
        writer.write(prefix)
        while True:
            writer.write(chunk)
            await writer.drain()
            await asyncio.sleep(pause)

    return write


def trickle(head: bytes, body: bytes, every: float) -> Writer:
    """Sends ``head`` at once, then the body one byte every ``every`` seconds."""

    async def write(writer: asyncio.StreamWriter) -> None:
        writer.write(head)
        for i in range(len(body)):
            writer.write(body[i : i + 1])
            await writer.drain()
            await asyncio.sleep(every)

    return write


class MisbehavingUpstream:
    """``async with MisbehavingUpstream() as up: up.then(answer)``; ``up.url`` is its ``/v1`` base."""

    def __init__(self) -> None:
        self.script: deque[Answer] = deque()
        self.requests: list[bytes] = []
        self._server: asyncio.Server | None = None
        self.port = 0

    def then(self, *answers: Answer) -> MisbehavingUpstream:
        self.script.extend(answers)
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> MisbehavingUpstream:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0)
            self.requests.append(head + await reader.readexactly(length))
            answer = self.script.popleft() if self.script else http_answer()
            if isinstance(answer, bytes):
                writer.write(answer)
                await writer.drain()
            else:
                await answer(writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
