"""A flood of half-open connections, in a process of its own: ``python -m bench.half_open_flood --port P``.

Opens ``--count`` connections to 127.0.0.1:P as fast as it can, sends each half a request head (or
nothing, ``--silent``), and waits until the server has closed every one. Prints one JSON line: how
many were opened and closed, and for each closed connection the seconds from its connect to its
close (``held``), summarised. Used by ``bench/bench_half_open.py`` and
``tests/system/test_half_open_connections.py``; in its own process so its CPU is not the
measuring client's.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import resource
import socket
import sys
import time

import orjson

HALF_A_HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl"


async def one(port: int, silent: bool, held: list[float], failed: list[str], counter: list[int]) -> None:
    # The half head goes out with the connection, in the same step: written once this process's loop
    # noticed the connection made (asyncio.open_connection), it came late — the server had accepted a
    # thousand connections still silent meanwhile, and the flood was, for a while, a silent one.
    # On loopback the handshake is made within connect(), so the send right after it succeeds.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    rest = b"" if silent else HALF_A_HEAD
    try:
        try:
            sock.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        made = False
        if rest:
            try:
                rest, made = rest[sock.send(rest) :], True
            except OSError:  # not connected yet (the server's backlog full): sent once it is
                pass
        if not made:
            try:
                await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
            except OSError as exc:
                if exc.errno != errno.EISCONN:  # made meanwhile
                    raise
        reader, writer = await asyncio.open_connection(sock=sock)
    except OSError as exc:
        sock.close()
        failed.append(type(exc).__name__)
        return
    connected = time.monotonic()
    counter[0] += 1
    if rest:
        writer.write(rest)
    try:
        while await reader.read(4096):
            pass
    except OSError:
        pass
    held.append(time.monotonic() - connected)
    writer.close()


async def flood(port: int, count: int, silent: bool, timeout: float) -> dict[str, object]:
    held: list[float] = []
    failed: list[str] = []
    counter = [0]
    started = time.monotonic()
    tasks = []
    for _ in range(count):
        tasks.append(asyncio.create_task(one(port, silent, held, failed, counter)))
        if len(tasks) % 200 == 0:
            await asyncio.sleep(0)  # let connects complete as they are issued
    done, pending = await asyncio.wait(tasks, timeout=timeout)
    for task in pending:
        task.cancel()
    ordered = sorted(held)
    return {
        "requested": count,
        "opened": counter[0],
        "connect_failed": len(failed),
        "closed": len(held),
        "still_open": len(pending),
        "open_seconds": round(time.monotonic() - started, 3),
        "held_max": round(ordered[-1], 3) if ordered else None,
        "held_p50": round(ordered[len(ordered) // 2], 3) if ordered else None,
        "held": [round(x, 3) for x in ordered],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--silent", action="store_true", help="send nothing at all")
    parser.add_argument("--timeout", type=float, default=120.0, help="give up waiting for closes after this long")
    args = parser.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.count + 256)), hard))
    result = asyncio.run(flood(args.port, args.count, args.silent, args.timeout))
    sys.stdout.write(orjson.dumps(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
