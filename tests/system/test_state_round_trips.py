"""What one request costs Redis: one read of its session for every stage, one write as it goes upstream.

The proxy runs in this process on a real redis-server (loopback); every send on a
Redis connection is logged with the commands in it: one send, one round trip.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.asyncio.connection import Connection

from bench.harness import free_port
from router.http.endpoints import STATE_KEY
from router.state.limiter import ADMIT, SETTLE
from router.state.session_store import ResilientStore
from tests.support.classifier_fakes import FakeClock
from tests.support.config import make_config, model_entry
from tests.support.factories import assistant, system, tool, user
from tests.support.processes import redis_server_binary, running, start_redis

pytestmark = pytest.mark.skipif(redis_server_binary() is None, reason="redis-server is not installed (.ci/run installs it)")
NOON = 1_741_953_600.0  # 2025-03-14T12:00:00Z


@pytest.fixture
def redis_port() -> Iterator[int]:
    port = free_port()
    process: subprocess.Popen[bytes] = start_redis(port)
    with running(process, port):
        yield port


def commands_in(packed: bytes) -> list[tuple[str, ...]]:
    """The commands in one send, from their wire form (RESP arrays of length-prefixed strings)."""
    commands, at = [], 0
    while at < len(packed):
        end = packed.index(b"\r\n", at)
        count, at, args = int(packed[at + 1 : end]), end + 2, []  # *<count>
        for _ in range(count):
            end = packed.index(b"\r\n", at)
            length, at = int(packed[at + 1 : end]), end + 2  # $<length>
            args.append(packed[at : at + length].decode(errors="replace"))
            at += length + 2
        commands.append(tuple(args))
    return commands


class RoundTrips:
    """Every send of a Redis connection — a command alone, or several packed together — as its commands."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.log: list[list[tuple[str, ...]]] = []
        send = Connection.send_packed_command
        trips = self

        async def logged(self: Connection, command: Any, check_health: bool = True) -> None:
            packed = command if isinstance(command, bytes) else b"".join(command)
            commands = commands_in(packed)
            if commands[0][0] not in ("CLIENT", "HELLO", "SELECT", "PING"):  # a new connection's handshake
                trips.log.append(commands)
            await send(self, command, check_health)

        monkeypatch.setattr(Connection, "send_packed_command", logged)

    async def of_request(self, send: Any) -> list[list[str]]:
        """The command names of each round trip one request made, its writes (not waited for) included."""
        self.log.clear()
        await send()
        await asyncio.sleep(0.1)  # nothing more comes
        return [[command[0] for command in trip] for trip in self.log]


def session_turn(turns: int) -> dict[str, Any]:
    messages = [system("You are a coding agent."), user("Fix the failing test")]
    for i in range(turns):
        messages += [assistant(calls=[(f"c{i}", "read_file", '{"path": "a.py"}')]), tool(f"c{i}", f"line {i}\n" * 1000)]
    return {"model": "auto", "messages": messages}


async def test_a_sessions_turn_reads_redis_once_and_writes_once(proxy: Any, mock_upstream: Any, redis_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    _, upstream = mock_upstream
    config = make_config(
        upstream,
        middlewares=["session-fingerprint", "classification-cache", "classifier", "pinch-prune", "capability-gate", "upstream-forward"],
        models=[model_entry("main", context_window=16_000, max_output_tokens=100)],
        classifier={"provider": "mock", "model": "tiny"},
        session_cache={"enabled": True},
        pinch={"enabled": True, "budget_tokens": 1500, "keep_last_turns": 1, "max_summarize_chars": 400},
        escalation={"failures": 2, "window_minutes": 10},
        state={"backend": "redis", "redis": {"url": f"redis://127.0.0.1:{redis_port}/0", "timeout_ms": 3000}},
    )
    client = await proxy(config)
    assert isinstance(client.server.app[STATE_KEY], ResilientStore)
    trips = RoundTrips(monkeypatch)

    async def turn(n: int) -> None:
        response = await client.post("/v1/chat/completions", json=session_turn(n), headers={"x-router-session": "s1"})
        assert response.status == 200, await response.text()
        assert int(response.headers["x-router-pinch-saved"]) > 0

    # The first turn: one read for every stage (classification, pinch ledger, escalation record), the
    # request's writes in one send as it goes upstream (the ledger, the request id); once the answer is
    # in, the first classification is stored only if absent (SET NX and GET in one MULTI/EXEC).
    assert await trips.of_request(lambda: turn(2)) == [["MGET"], ["SET", "SET"], ["MULTI", "SET", "GET", "EXEC"]]
    read = trips.log[0][0]
    assert sorted(key.split(":")[1] for key in read[1:]) == ["classification", "escalation", "pinch"]
    for n in (3, 4):  # a classified session: one read, one write
        assert await trips.of_request(lambda n=n: turn(n)) == [["MGET"], ["SET", "SET"]]


async def test_a_key_with_limits_adds_one_script_call_a_request_not_waited_for(
    proxy: Any, mock_upstream: Any, redis_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its admission, the first time, is a round trip of its own (awaited, before the request's writes
    leave); after that each request's settling admits the next one ahead, in the one call it makes
    once its answer is in (router.state.limiter)."""
    _, upstream = mock_upstream
    key = "alice-key-0123456789"
    config = make_config(
        upstream,
        server={"api_keys": [{"name": "alice", "key": key, "limits": {"requests_per_minute": 100, "usd_per_day": 10}}]},
        models=[model_entry("main", cost_per_mtok={"input": 1.0, "output": 2.0})],
        state={"backend": "redis", "redis": {"url": f"redis://127.0.0.1:{redis_port}/0", "timeout_ms": 3000}},
    )
    client = await proxy(config, wall_clock=FakeClock(NOON))  # every request in one minute
    redis = Redis.from_url(f"redis://127.0.0.1:{redis_port}/0")
    for script in (ADMIT, SETTLE):  # loaded, as after the proxy's first calls: no NOSCRIPT round trip to log
        await redis.script_load(script)
    await redis.aclose()
    trips = RoundTrips(monkeypatch)

    async def request() -> None:
        body = {"model": "auto", "messages": [{"role": "user", "content": "fix the test"}], "max_tokens": 100}
        response = await client.post("/v1/chat/completions", json=body, headers={"x-router-session": "s1", "Authorization": f"Bearer {key}"})
        assert response.status == 200, await response.text()

    assert await trips.of_request(request) == [["MGET"], ["EVALSHA"], ["SET"], ["EVALSHA"]]
    for _ in range(2):
        assert await trips.of_request(request) == [["MGET"], ["SET"], ["EVALSHA"]]
