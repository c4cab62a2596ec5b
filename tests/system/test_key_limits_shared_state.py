"""Keys' limits (issue #45) with ``state.backend: redis``: one budget for every replica, and Redis
going away mid-run fails no request — each process then holds the limits on its own counts until
Redis answers again. The proxies run in this process, on a real redis-server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bench.harness import free_port
from router.tools.mock_upstream import Behaviour
from tests.http.test_key_limits import ALICE, BUDGETS_FOR_TEN, NOON, OPS, USAGE, WIRES, auth, limited_config
from tests.support.classifier_fakes import FakeClock
from tests.support.processes import redis_running, redis_server_binary, running, start_redis

pytestmark = pytest.mark.skipif(redis_server_binary() is None, reason="redis-server is not installed (.ci/run installs it)")

PATH, _, BODY, _ = WIRES["openai-chat"]


def on_redis(port: int, retry_seconds: float = 60) -> dict[str, Any]:
    # a killed Redis refuses at once: the generous timeout keeps a busy machine from tripping the breaker early
    return {"backend": "redis", "redis": {"url": f"redis://127.0.0.1:{port}/0", "timeout_ms": 3000, "retry_seconds": retry_seconds}}


async def counts(client: Any) -> tuple[str, dict[str, Any]]:
    answer = await (await client.get("/v1/keys", headers=auth(OPS))).json()
    return answer["counts"], next(row for row in answer["data"] if row["name"] == "alice")


@pytest.mark.parametrize("limit", BUDGETS_FOR_TEN)
async def test_two_replicas_on_one_redis_share_one_budget(proxy, mock_upstream, limit):
    mock, url = mock_upstream
    mock.default = Behaviour(delay_before_head=0.3, usage=USAGE)
    with redis_running() as port:
        config = limited_config(url, {limit: BUDGETS_FOR_TEN[limit]}, state=on_redis(port))
        one, two = await proxy(config, wall_clock=FakeClock(NOON)), await proxy(config, wall_clock=FakeClock(NOON))
        answers = await asyncio.gather(*(replica.post(PATH, json=BODY, headers=auth(ALICE)) for _ in range(25) for replica in (one, two)))
        statuses = [answer.status for answer in answers]
        served = statuses.count(200)
        assert 5 <= served <= 11 and statuses.count(429) == 50 - served, statuses
        # one count: with one each, the two replicas would have served up to 20
        assert all(429 in {answer.status for answer in answers[i::2]} for i in (0, 1))  # each refuses
        for replica in (one, two):
            while (await counts(replica))[1]["held"]["tokens"]:  # the last charges on their way
                await asyncio.sleep(0.05)
        (where_one, alice_one), (where_two, alice_two) = await counts(one), await counts(two)
        assert where_one == where_two == "redis" and alice_one == alice_two  # one count, read by either
        per_request = {"requests_per_minute": 1, "tokens_per_minute": 100, "usd_per_day": 0.00015}[limit]
        assert alice_one["used"][limit] == pytest.approx(served * per_request)


async def test_redis_killed_mid_run_fails_no_request_and_each_process_holds_the_limits_until_it_returns(proxy, mock_upstream):
    mock, url = mock_upstream
    port = free_port()
    mock.default = Behaviour(usage=USAGE)
    mock.then(*[Behaviour(delay_before_head=0.5, usage=USAGE)] * 10)
    with running(start_redis(port), port) as redis:
        client = await proxy(limited_config(url, {"requests_per_minute": 25}, state=on_redis(port, retry_seconds=0.2)), wall_clock=FakeClock(NOON))
        in_flight = [asyncio.ensure_future(client.post(PATH, json=BODY, headers=auth(ALICE))) for _ in range(10)]
        while len(mock.received) < 10:  # all ten admitted on Redis and waiting on the upstream
            await asyncio.sleep(0.02)
        redis.kill()
        redis.wait(5)
        assert [(await answer).status for answer in in_flight] == [200] * 10
        assert (await counts(client))[0] == "process"
        # this process's own count starts at 0: 25 more are admitted, then the limit holds
        statuses = [(await client.post(PATH, json=BODY, headers=auth(ALICE))).status for _ in range(30)]
        assert statuses == [200] * 25 + [429] * 5
    with running(start_redis(port), port):  # back, empty
        while (await counts(client))[0] != "redis":
            await asyncio.sleep(0.1)
        assert (await client.post(PATH, json=BODY, headers=auth(ALICE))).status == 200
        assert (await counts(client))[1]["used"]["requests_per_minute"] == 1  # counted on Redis again
