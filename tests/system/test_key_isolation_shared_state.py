"""Keys as tenants (issue #45) with ``state.backend: redis``: the remembered request ids keep the
name of the key each came with, so a replica that never served a request (its own decision log
knows nothing of it) refuses another user key's outcome for it as it refuses an unknown id, and
takes its own key's and an admin key's. The proxies run in this process, on a real redis-server.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from redis.asyncio import Redis

from router.core.tenants import plain_key_name
from tests.support.config import chat_body, make_config, model_entry
from tests.support.processes import redis_running, redis_server_binary

pytestmark = pytest.mark.skipif(redis_server_binary() is None, reason="redis-server is not installed (.ci/run installs it)")

ALICE, BOB, ADMIN = "alice-key-0123456789", "bob-key-9876543210", "ops-key-5555555555"
KEYS = [{"name": "alice", "key": ALICE}, BOB, {"name": "ops", "key": ADMIN, "role": "admin"}]  # bob: a plain key


@pytest.fixture
def redis_port() -> Iterator[int]:
    with redis_running() as port:
        yield port


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def outcome(client: Any, key: str, request_id: str) -> Any:
    return await client.post("/v1/outcome", json={"request_id": request_id, "success": False}, headers=auth(key))


async def test_a_replica_that_never_saw_a_request_refuses_it_to_another_user_key(proxy: Any, mock_upstream: Any, redis_port: int) -> None:
    _, upstream = mock_upstream
    config = make_config(
        upstream,
        server={"api_keys": KEYS},
        models=[model_entry("easy", tiers=[1, 2], quality=0.9), model_entry("hard", tiers=[3], quality=0.5)],
        escalation={"failures": 2, "window_minutes": 10},
        state={"backend": "redis", "redis": {"url": f"redis://127.0.0.1:{redis_port}/0", "timeout_ms": 3000}},
    )
    serving, other = await proxy(config), await proxy(config)  # each its own decision log: only Redis is shared

    async def bobs_turn() -> dict[str, str]:
        response = await serving.post("/v1/chat/completions", json=chat_body(), headers={"x-session-id": "ses_1", **auth(BOB)})
        assert response.status == 200, await response.text()
        return dict(response.headers)

    bobs = [(await bobs_turn())["x-router-request-id"] for _ in range(2)]
    for request_id in bobs:
        refused = await outcome(other, ALICE, request_id)
        unknown = await outcome(other, ALICE, request_id[:-4] + "0000")
        assert refused.status == unknown.status == 404
        assert (await unknown.read()).replace(request_id[:-4].encode() + b"0000", request_id.encode()) == await refused.read()
    assert (await bobs_turn())["x-router-model"] == "easy"  # alice's reports escalated nothing
    assert (await outcome(other, BOB, bobs[0])).status == 200  # bob's own key: found on Redis
    assert (await outcome(other, ADMIN, bobs[1])).status == 200  # the admin key: any request
    assert (await bobs_turn())["x-router-model"] == "hard"  # two failures, on the shared escalation record

    redis = Redis.from_url(f"redis://127.0.0.1:{redis_port}/0")
    try:
        keys = [key async for key in redis.scan_iter(match="*:request:v2:*")]
        assert len(keys) == 4  # bob's four requests
        values = [orjson.loads(value) for value in await redis.mget(keys)]
        assert {client for _, client in values} == {plain_key_name(BOB)}
        stored = b"".join([key async for key in redis.scan_iter()] + [await everything_in(redis, key) async for key in redis.scan_iter()])
        assert not any(key.encode() in stored for key in (ALICE, BOB, ADMIN))  # names, never keys
    finally:
        await redis.aclose()


async def everything_in(redis: Redis, key: bytes) -> bytes:
    """All a key holds, whatever its type (the session state's strings, the limiter's hashes, …); b"" once expired."""
    kind = (await redis.type(key)).decode()
    if kind == "string":
        return await redis.get(key) or b""
    if kind == "hash":
        return b"".join(part for pair in (await redis.hgetall(key)).items() for part in pair)
    if kind in ("list", "set", "zset"):
        members = await (redis.lrange(key, 0, -1) if kind == "list" else redis.smembers(key) if kind == "set" else redis.zrange(key, 0, -1))
        return b"".join(members)
    return b""
