"""The counters of the keys' limits (issue #45): in this process, and on a real Redis through the
session store's breaker — the same verdicts either way, holds that lapse, and Redis trouble that
falls back to this process's counts without an error."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from bench.harness import free_port
from router.config import RedisSettings
from router.core.limits import NANO_USD, Amount, KeyLimits, Refused, Spent
from router.state.limiter import HOLD_SECONDS, Hold, KeyLimiter, RedisLimits
from router.state.session_store import ResilientStore, redis_store
from tests.support.classifier_fakes import FakeClock
from tests.support.processes import redis_server_binary, running, start_redis

NOON = 1_741_953_600.0  # 2025-03-14T12:00:00Z
LIMITS = {"alice": KeyLimits(requests_per_minute=3, tokens_per_minute=1000, usd_per_day=1.0), "bob": KeyLimits()}


async def shared(port: int, namespace: str, clock: FakeClock) -> tuple[KeyLimiter, ResilientStore]:
    store = redis_store(RedisSettings(url=f"redis://127.0.0.1:{port}/0", namespace=namespace, timeout_ms=500, retry_seconds=60), lambda: None, lambda up: None)
    await store.start()
    return KeyLimiter(LIMITS, redis=RedisLimits(store.redis.client, namespace), store=store, clock=clock), store


@pytest.fixture(params=["process", "redis"])
async def limiter(request, tmp_path) -> AsyncIterator[tuple[KeyLimiter, FakeClock]]:
    clock = FakeClock(NOON)
    if request.param == "process":
        yield KeyLimiter(LIMITS, clock=clock), clock
        return
    port = request.getfixturevalue("redis_port")
    made, store = await shared(port, f"t-{tmp_path.name}", clock)
    assert made.shared
    yield made, clock
    assert made.shared, store.why  # every count was Redis's: none fell back to this process
    await store.close()


async def test_the_same_requests_get_the_same_verdicts_in_a_process_and_on_redis(limiter):
    made, clock = limiter
    first = await made.reserve("alice", "r1", Amount(600, NANO_USD // 10))
    second = await made.reserve("alice", "r2", Amount(300, 0))
    assert isinstance(first, Hold) and isinstance(second, Hold)
    third = await made.reserve("alice", "r3", Amount(300, 0))  # 900 held is below 1000: admitted, to 1200
    assert isinstance(third, Hold)
    over = await made.reserve("alice", "r4", Amount(1, 0))
    assert isinstance(over, Refused) and over.limit == "requests_per_minute" and over.retry_after == 60
    assert await made.spent("alice") == Spent(requests=3, held_tokens=1200, held_usd=NANO_USD // 10)
    for hold in (first, second, third):
        made.settle(hold, Amount(100, 1000))
    await made.settled()
    assert await made.spent("alice") == Spent(requests=3, tokens=300, usd_day=3000, usd_month=3000)
    clock.advance(60)  # the next minute: requests and tokens start again, the day's dollars stay
    assert await made.spent("alice") == Spent(usd_day=3000, usd_month=3000)


async def test_requests_in_flight_holding_the_budget_are_waited_for_briefly(limiter):
    made, _ = limiter
    hold = await made.reserve("alice", "r1", Amount(1000, 0))
    assert isinstance(hold, Hold)
    refused = await made.reserve("alice", "r2", Amount(1, 0))
    assert isinstance(refused, Refused) and refused.limit == "tokens_per_minute" and refused.held == 1000 and refused.retry_after == 5
    made.settle(hold, Amount(10, 0))
    await made.settled()
    assert isinstance(await made.reserve("alice", "r3", Amount(1, 0)), Hold)


async def test_a_key_without_limits_is_admitted_without_a_count_and_counted_when_it_ends(limiter):
    made, _ = limiter
    hold = await made.reserve("bob", "r1", Amount(10**9, 10**18))
    assert isinstance(hold, Hold) and not hold.counted and await made.spent("bob") == Spent()
    made.settle(hold, Amount(42, 7))
    await made.settled()
    assert await made.spent("bob") == Spent(requests=1, tokens=42, usd_day=7, usd_month=7)


async def test_an_unconfigured_name_is_never_counted(limiter):
    made, _ = limiter
    made.settle(Hold("mallory", Amount(), "r1"), Amount(42, 7))
    await made.settled()
    assert "mallory" not in made.local._keys


@pytest.mark.system  # starts a process
async def test_on_redis_two_processes_share_one_budget_and_a_dead_ones_hold_lapses(redis_port, tmp_path):
    clock = FakeClock(NOON)
    one, store_one = await shared(redis_port, f"t-{tmp_path.name}", clock)
    two, store_two = await shared(redis_port, f"t-{tmp_path.name}", clock)
    try:
        assert isinstance(await one.reserve("alice", "r1", Amount(1000, 0)), Hold)  # its process dies with it
        refused = await two.reserve("alice", "r2", Amount(1, 0))
        assert isinstance(refused, Refused) and refused.held == 1000
        clock.advance(HOLD_SECONDS + 1)
        assert isinstance(await two.reserve("alice", "r3", Amount(1, 0)), Hold)
        client, prefix = store_two.redis.client, f"t-{tmp_path.name}:limits:v1:alice"
        minute = f"{prefix}:m:{int(clock() // 60)}"
        keys = {k.decode() for k in await client.keys(f"t-{tmp_path.name}:*")}
        assert {minute, f"{prefix}:held"} <= keys and all(k.startswith(prefix) for k in keys)  # namespaced, by the key's name
        assert 0 < await client.pttl(minute) <= 120_000 and 0 < await client.pttl(f"{prefix}:held") <= HOLD_SECONDS * 1000
    finally:
        await store_one.close()
        await store_two.close()


@pytest.mark.system  # starts a process
async def test_redis_going_away_falls_back_to_this_process_and_a_hold_made_there_is_not_given_back_here():
    if redis_server_binary() is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    clock = FakeClock(NOON)
    with running(start_redis(port), port) as process:
        made, store = await shared(port, "gone", clock)
        on_redis = await made.reserve("alice", "r1", Amount(500, 0))
        assert isinstance(on_redis, Hold) and on_redis.on_redis
        process.kill()
        process.wait(5)
    try:
        here = await made.reserve("alice", "r2", Amount(400, 0))  # Redis does not answer: this process's counts
        assert isinstance(here, Hold) and not here.on_redis and not made.shared
        made.settle(on_redis, Amount(50, 0))  # its hold is on Redis: not taken from this process's
        await made.settled()
        assert await made.spent("alice") == Spent(requests=1, tokens=50, held_tokens=400)
        made.settle(here, Amount(40, 0))
        await made.settled()
        assert await made.spent("alice") == Spent(requests=1, tokens=90)
    finally:
        await store.close()


@pytest.mark.system  # starts a process
async def test_a_restarted_redis_without_the_scripts_is_sent_them_again(redis_port, tmp_path):
    clock = FakeClock(NOON)
    made, store = await shared(redis_port, f"t-{tmp_path.name}", clock)
    try:
        assert isinstance(await made.reserve("alice", "r1", Amount(1, 0)), Hold)
        await Redis.from_url(f"redis://127.0.0.1:{redis_port}/0").script_flush()
        assert isinstance(await made.reserve("alice", "r2", Amount(1, 0)), Hold) and made.shared
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def two_on_redis(redis_port: int, tmp_path, clock: FakeClock, limits: KeyLimits) -> AsyncIterator[tuple[KeyLimiter, KeyLimiter, Redis]]:
    """Two processes' limiters on one Redis (one namespace), alice's limits ``limits``; and a client of that Redis."""
    made = [await shared(redis_port, f"t-{tmp_path.name}", clock) for _ in range(2)]
    for limiter, _ in made:
        limiter.limits = {"alice": limits}
    try:
        yield made[0][0], made[1][0], made[0][1].redis.client
    finally:
        for _, store in made:
            await store.close()


async def minute_count(client: Redis, tmp_path, clock: FakeClock) -> int:
    """alice's requests counted on Redis in the current minute (those admitted ahead included)."""
    return int(await client.hget(f"t-{tmp_path.name}:limits:v1:alice:m:{int(clock() // 60)}", "requests") or 0)


@pytest.mark.system  # starts a process
async def test_on_redis_the_settling_admits_the_next_request_ahead_and_every_process_counts_it(redis_port, tmp_path):
    clock = FakeClock(NOON + 10)
    async with two_on_redis(redis_port, tmp_path, clock, KeyLimits(requests_per_minute=2, tokens_per_minute=10_000)) as (one, two, client):
        first = await one.reserve("alice", "r1", Amount(400, 0))
        assert isinstance(first, Hold) and not first.ahead
        one.settle(first, Amount(100, 0))
        await one.settled()
        # the settling admitted the next request ahead: counted, holding 400 and a quarter more ...
        assert await minute_count(client, tmp_path, clock) == 2
        # ... which another process counts: the minute's two requests are taken
        refused = await two.reserve("alice", "r2", Amount(1, 0))
        assert isinstance(refused, Refused) and refused.limit == "requests_per_minute"
        # what keys shows leaves it out: one request sent, nothing in flight
        assert await one.spent("alice") == Spent(requests=1, tokens=100)
        # the next request of the first process takes it: no second count, its hold is the one ahead
        second = await one.reserve("alice", "r3", Amount(450, 0))
        assert isinstance(second, Hold) and second.ahead and second.amount == Amount(500, 0) and second.asked == Amount(450, 0)
        assert await minute_count(client, tmp_path, clock) == 2
        one.settle(second, Amount(100, 0))
        await one.settled()
        assert await one.spent("alice") == Spent(requests=2, tokens=200)  # nothing more admitted ahead: the minute's two are used
        assert isinstance(await one.reserve("alice", "r4", Amount(1, 0)), Refused)


@pytest.mark.system  # starts a process
async def test_a_request_admitted_ahead_and_not_used_is_given_back_uncounted(redis_port, tmp_path):
    clock = FakeClock(NOON + 10)
    async with two_on_redis(redis_port, tmp_path, clock, KeyLimits(requests_per_minute=3, tokens_per_minute=10_000)) as (one, two, client):
        first = await one.reserve("alice", "r1", Amount(400, 0))
        assert isinstance(first, Hold)
        one.settle(first, Amount(100, 0))
        await one.settled()
        # a request that does not fit in it (its estimate grew past the margin) gives it back with its own admission
        bigger = await one.reserve("alice", "r2", Amount(600, 0))
        assert isinstance(bigger, Hold) and not bigger.ahead
        assert await minute_count(client, tmp_path, clock) == 2
        assert await one.spent("alice") == Spent(requests=2, tokens=100, held_tokens=600)
        one.settle(bigger, Amount(100, 0))
        await one.settled()
        assert await minute_count(client, tmp_path, clock) == 3  # the third, admitted ahead
        assert isinstance(await two.reserve("alice", "r3", Amount(1, 0)), Refused)
        await one.close()  # at shutdown: given back, uncounted, so that another process may use it
        assert await minute_count(client, tmp_path, clock) == 2
        third = await two.reserve("alice", "r4", Amount(1, 0))
        assert isinstance(third, Hold)
        clock.advance(60)  # the next minute
        two.settle(third, Amount(1, 0))
        await two.settled()
        assert await minute_count(client, tmp_path, clock) == 1  # admitted ahead in this minute
        two._expire("alice")  # what the minute's end does
        await two.settled()
        assert await minute_count(client, tmp_path, clock) == 0
        assert await client.zcard(f"t-{tmp_path.name}:limits:v1:alice:held") == 0


@pytest.mark.system  # starts a process
async def test_a_request_admitted_ahead_in_a_minute_that_ended_is_given_back_and_not_taken(redis_port, tmp_path):
    clock = FakeClock(NOON + 50)
    async with two_on_redis(redis_port, tmp_path, clock, KeyLimits(requests_per_minute=5)) as (one, _, client):
        first = await one.reserve("alice", "r1", Amount(10, 0))
        assert isinstance(first, Hold)
        one.settle(first, Amount(10, 0))
        await one.settled()
        assert await minute_count(client, tmp_path, clock) == 2
        clock.advance(15)  # the next minute: its requests are counted in it
        second = await one.reserve("alice", "r2", Amount(10, 0))
        assert isinstance(second, Hold) and not second.ahead
        assert await minute_count(client, tmp_path, clock) == 1
        assert await one.spent("alice") == Spent(requests=1, held_tokens=10)  # the one ahead holds nothing any more
