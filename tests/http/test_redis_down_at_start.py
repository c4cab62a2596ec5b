"""WHAT-USERS-HIT #18, at start-up: a Redis that is not there, or that never answers, blocks nothing.

``state.backend: redis`` with Redis refusing connections, or accepting them and then staying
silent (no socket timeout would hang every request): the proxy starts, serves from its own
memory, and says so on ``/healthz`` (200, ``degraded``). Redis failing mid-run is
``test_shared_state.py`` (real redis-server processes).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bench.harness import free_port
from tests.support.classifier_fakes import OLLAMA_CHAT_URL, FakeClock, agent_turn, classifier_config, mocked_classifier, ollama_reply, verdict


async def silent_server() -> tuple[asyncio.Server, int]:
    """Accepts connections, reads, never answers."""

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.read(4096):
                pass
        finally:
            writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.fixture(params=["refusing", "silent"])
async def redis_port(request) -> AsyncIterator[int]:
    if request.param == "refusing":
        yield free_port()
        return
    server, port = await silent_server()
    try:
        yield port
    finally:
        server.close()


async def test_a_proxy_whose_redis_is_down_starts_serves_and_says_degraded(proxy, mock_upstream, redis_port):
    state = {"backend": "redis", "redis": {"url": f"redis://127.0.0.1:{redis_port}/0", "timeout_ms": 200, "retry_seconds": 60}}
    # a hang guard, not a speed target: a proxy waiting on the silent socket fails here instead of blocking
    async with asyncio.timeout(30):
        with mocked_classifier() as mock:
            mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("debugging", 3)), repeat=True)
            client = await proxy(classifier_config(mock_upstream[1], state=state), clock=FakeClock())
            for turn in (1, 2, 3):  # the session cache reads and writes the state on every turn
                resp = await client.post("/v1/chat/completions", json={"model": "auto", "messages": agent_turn("fix the test", turn)})
                assert resp.status == 200
                assert resp.headers["x-router-source"] == ("classifier" if turn == 1 else "cached")  # the memory fallback holds it
        health = await client.get("/healthz")
    assert health.status == 200 and (await health.json())["status"] == "degraded"
