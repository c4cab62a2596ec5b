"""What one request costs Redis: one read of its session for every stage, one write pipeline as it goes upstream.

The proxy runs in this process on a real redis-server (loopback); a wrapper around
its Redis client logs each round trip: a command sent alone, or a pipeline once.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from redis.asyncio import Redis

from bench.harness import free_port
from router.endpoints import STATE_KEY
from router.session_store import ResilientStore
from tests.conftest import make_config, model_entry
from tests.factories import assistant, system, tool, user
from tests.processes import redis_server_binary, running, start_redis

pytestmark = pytest.mark.skipif(redis_server_binary() is None, reason="redis-server is not installed (.ci/run installs it)")


@pytest.fixture
def redis_port() -> Iterator[int]:
    port = free_port()
    process: subprocess.Popen[bytes] = start_redis(port)
    with running(process, port):
        yield port


class RoundTrips:
    """Each round trip a Redis client makes: ``(command, keys)`` for one sent alone, ``("PIPELINE", commands)``."""

    def __init__(self, client: Redis) -> None:
        self.log: list[tuple[str, tuple[Any, ...]]] = []
        send_one, open_pipeline = client.execute_command, client.pipeline

        async def execute_command(*args: Any, **options: Any) -> Any:
            self.log.append((str(args[0]), args[1:]))
            return await send_one(*args, **options)

        def pipeline(*args: Any, **options: Any) -> Any:
            pipe = open_pipeline(*args, **options)
            send_all = pipe.execute

            async def execute(*e_args: Any, **e_options: Any) -> Any:
                self.log.append(("PIPELINE", tuple(str(command[0]) for command, _ in pipe.command_stack)))
                return await send_all(*e_args, **e_options)

            pipe.execute = execute  # type: ignore[method-assign]
            return pipe

        client.execute_command = execute_command  # type: ignore[method-assign]
        client.pipeline = pipeline  # type: ignore[method-assign]

    async def of_request(self, send: Any) -> list[tuple[str, tuple[Any, ...]]]:
        """The round trips of one request, its writes (sent when it ended, not waited for) included."""
        self.log.clear()
        await send()
        for _ in range(200):  # the write pipeline leaves on the loop's next turns
            if any(name == "PIPELINE" and "SET" in commands for name, commands in self.log):
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # and nothing comes after it
        return list(self.log)


def session_turn(turns: int) -> dict[str, Any]:
    messages = [system("You are a coding agent."), user("Fix the failing test")]
    for i in range(turns):
        messages += [assistant(calls=[(f"c{i}", "read_file", '{"path": "a.py"}')]), tool(f"c{i}", f"line {i}\n" * 1000)]
    return {"model": "auto", "messages": messages}


async def test_a_sessions_turn_reads_redis_once_and_writes_once(proxy: Any, mock_upstream: Any, redis_port: int) -> None:
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
    store = client.server.app[STATE_KEY]
    assert isinstance(store, ResilientStore)
    trips = RoundTrips(store.redis.client)

    async def turn(n: int) -> None:
        response = await client.post("/v1/chat/completions", json=session_turn(n), headers={"x-router-session": "s1"})
        assert response.status == 200, await response.text()
        assert int(response.headers["x-router-pinch-saved"]) > 0

    first = await trips.of_request(lambda: turn(2))
    later = [await trips.of_request(lambda n=n: turn(n)) for n in (3, 4)]

    [(read, keys), *_] = first
    assert read == "MGET"  # classification, pinch ledger and escalation record: one read for every stage
    assert sorted(key.split(":")[1] for key in keys) == ["classification", "escalation", "pinch"]
    # the request's writes leave together as it goes upstream (the ledger and the request id); once the
    # answer is in, the first classification is stored only if absent (SET NX and GET in one MULTI/EXEC)
    assert first[1:] == [("PIPELINE", ("SET", "SET")), ("PIPELINE", ("SET", "GET"))]
    for trips_of_turn in later:  # classified: one read, one write pipeline (ledger + request id)
        assert [(name, commands if name == "PIPELINE" else len(commands)) for name, commands in trips_of_turn] == [("MGET", 3), ("PIPELINE", ("SET", "SET"))]
