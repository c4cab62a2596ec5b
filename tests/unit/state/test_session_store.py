"""The awaited session store: in-process semantics, Redis semantics (a real redis-server), the fallback."""

from __future__ import annotations

import asyncio
import math
import warnings
from typing import Any

import orjson
import pytest
from redis.asyncio import Redis

from bench.harness import free_port
from router.config import Config, RedisSettings, parse_config
from router.core.session_state import SessionSnapshot, Space
from router.server.doctor import Finding, state_backend_findings
from router.state.remembered import RECENT_REQUESTS, RecentRequest
from router.state.session_store import (
    LocalStore,
    RedisStore,
    read_session,
    redis_store,
    without_password,
)
from tests.support.config import model_entry
from tests.support.processes import redis_server_binary

needs_redis = pytest.mark.skipif(redis_server_binary() is None, reason="redis-server is not installed (.ci/run installs it)")


def notes(version: int = 1, ttl: float = 60.0) -> Space[str]:
    return Space("notes", version, ttl, 100, lambda s: s.encode(), lambda b: b.decode())


async def test_the_first_value_put_if_absent_stays_in_the_process() -> None:
    store = LocalStore()
    assert await store.put_if_absent(notes(), "s1", "first", now=0.0) == "first"
    assert await store.put_if_absent(notes(), "s1", "second", now=1.0) == "first"
    assert await store.get_many([(notes(), "s1"), (notes(), "s2")], now=2.0) == ["first", None]


@pytest.mark.system  # starts a process
@needs_redis
async def test_redis_keeps_the_first_value_namespaced_versioned_and_with_the_spaces_lifetime(redis_port: int) -> None:
    client = Redis.from_url(f"redis://127.0.0.1:{redis_port}/0")
    store = RedisStore(client, "ns-a")
    try:
        assert await store.put_if_absent(notes(), "s1", "first", now=0.0) == "first"
        assert await store.put_if_absent(notes(), "s1", "second", now=0.0) == "first"
        assert await store.get(notes(version=2), "s1", now=0.0) is None  # another schema version never reads it
        assert await RedisStore(client, "ns-b").get(notes(), "s1", now=0.0) is None  # nor another namespace
        assert 59_000 < await client.pttl("ns-a:notes:v1:s1") <= 60_000
        await store.put(notes(ttl=math.inf), "s2", "kept", now=0.0)
        assert await client.pttl("ns-a:notes:v1:s2") == -1
        await client.set("ns-a:notes:v1:s3", b"\xff")  # a value this version cannot decode is a miss
        assert await store.get_many([(notes(), "s3"), (notes(), "s2")], now=0.0) == [None, "kept"]
    finally:
        await client.aclose()


def test_the_redis_client_is_built_without_a_warning_on_the_newest_redis_py() -> None:
    # redis-py 8 converts a synchronous Retry handed to its asyncio client, with a UserWarning at every start.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        redis_store(RedisSettings(url=f"redis://127.0.0.1:{free_port()}/0"), on_fallback=lambda: None, on_state=lambda up: None)


async def test_an_unreachable_redis_serves_from_memory_counts_each_call_and_says_why() -> None:
    fallbacks: list[None] = []
    states: list[bool] = []
    settings = RedisSettings(url=f"redis://:secret@127.0.0.1:{free_port()}/0", timeout_ms=100, retry_seconds=60)
    store = redis_store(settings, on_fallback=lambda: fallbacks.append(None), on_state=states.append)
    await store.start()
    try:
        await store.put(notes(), "s1", "kept here", now=0.0)
        assert await store.get(notes(), "s1", now=1.0) == "kept here"
        assert len(fallbacks) == 2 and states == [False]
        problem = store.problem()
        assert problem is not None and "unavailable" in problem and "secret" not in problem
    finally:
        await store.close()


async def test_stages_read_from_the_requests_snapshot_and_ask_the_store_only_for_what_it_lacks() -> None:
    store, asked = LocalStore(), []
    get_many = store.get_many

    async def counted(reads: Any, now: float) -> list[Any]:
        asked.append([key for _, key in reads])
        return await get_many(reads, now)

    store.get_many = counted  # type: ignore[method-assign]
    await store.put(notes(), "s1", "stored", now=0.0)
    await store.put(notes(), "s2", "stored too", now=0.0)
    snapshot = SessionSnapshot.of([(notes(), "s1")], ["as read"])
    assert await read_session(store, snapshot, [(notes(), "s1")], now=1.0) == ["as read"]
    assert asked == []  # all in the snapshot: no round trip
    assert await read_session(store, snapshot, [(notes(), "s1"), (notes(), "s2")], now=1.0) == ["as read", "stored too"]
    assert await read_session(store, None, [(notes(), "s1")], now=1.0) == ["stored"]
    assert asked == [["s2"], ["s1"]]  # one read each time, of what the snapshot lacked


@pytest.mark.system  # starts a process
@needs_redis
async def test_writes_not_waited_for_leave_together_when_a_request_ends_and_go_to_memory_while_redis_is_down(redis_port: int) -> None:
    store = redis_store(RedisSettings(url=f"redis://127.0.0.1:{redis_port}/0", namespace="later"), on_fallback=lambda: None, on_state=lambda up: None)
    await store.start()
    pipelines: list[int] = []
    put_many = store.redis.put_many

    async def counted(writes: Any) -> None:
        pipelines.append(len(writes))
        await put_many(writes)

    store.redis.put_many = counted  # type: ignore[method-assign]
    try:
        store.put_later(notes(), "ledger", "a", now=0.0)
        store.put_later(notes(), "request", "b", now=0.0)
        assert await store.redis.get_many([(notes(), "ledger")], now=0.0) == [None]  # queued until the request ends
        store.flush_later()
        await asyncio.sleep(0)  # the pipeline has left
        store.put_later(notes(), "next", "c", now=0.0)  # by a request still running
        await asyncio.sleep(0.1)
        assert pipelines == [2]
        assert await store.redis.get_many([(notes(), "ledger"), (notes(), "request"), (notes(), "next")], now=0.0) == ["a", "b", None]
        store.flush_later()
        await asyncio.sleep(0.1)
        assert pipelines == [2, 1]
        store.up = False  # the breaker is open: written to this process's memory at once
        store.put_later(notes(), "down", "d", now=0.0)
        assert await store.local.get(notes(), "down", now=0.0) == "d"
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://:pw@cache:6380/1", "redis://:***@cache:6380/1"),
        ("rediss://user:pw@cache/0", "rediss://user:***@cache/0"),
    ],
)
def test_a_redis_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert without_password(url) == shown


def test_request_ids_survive_the_codec_with_and_without_a_session_and_a_client_key() -> None:
    for session in ("abc", None):
        for client in ("alice", None):
            value = RecentRequest(session, client)
            assert RECENT_REQUESTS.decode(RECENT_REQUESTS.encode(value)) == value
    assert orjson.loads(RECENT_REQUESTS.encode(RecentRequest(None))) == [None, None]
    assert RECENT_REQUESTS.version == 2  # version 1 held the session alone: its values read as a miss


@pytest.mark.system  # starts a process
@needs_redis
async def test_doctor_says_whether_the_configured_redis_answers(redis_port: int) -> None:
    def config(url: str) -> Config:
        state = {"backend": "redis", "redis": {"url": url, "timeout_ms": 200}}
        providers = {"mock": {"base_url": "http://127.0.0.1:9/v1"}}
        chain = ["session-fingerprint", "capability-gate", "upstream-forward"]
        return parse_config({"middlewares": chain, "providers": providers, "models": [model_entry("m")], "classifier": {"provider": "mock"}, "state": state}, {})

    url = f"redis://127.0.0.1:{redis_port}/0"
    assert await state_backend_findings(config(url)) == [Finding("state backend", True, f"redis at {url} answers")]
    [down] = await state_backend_findings(config(f"redis://:pw@127.0.0.1:{free_port()}/0"))
    assert not down.ok and "state.backend: memory" in down.fix and "pw" not in down.detail
