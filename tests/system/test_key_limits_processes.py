"""Keys' limits (issue #45) across real processes on one real redis-server: the two workers of
`pinch-router serve --workers 2`, and two `serve` replicas behind nginx running the shipped
deploy/nginx.conf. Fifty requests of one key at once against a budget that allows ten: at most
eleven are served in all — with a count per process, each process would serve up to ten — and each
process took part. The upstream is the mock, in this process, reporting the usage of
tests/http/test_key_limits.py (each answer costs $0.00015, so $0.0015 a day allows ten). The
processes run on the wall clock: a dollar budget, whose window (the UTC day) a test does not cross.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bench.harness import free_port, tcp_states, wait_for_port
from router.tools.mock_upstream import Behaviour, MockUpstream
from tests.http.test_key_limits import ALICE, OPS, USAGE, WIRES, auth, refusal_of
from tests.support.processes import redis_server_binary, router, running, start_redis, write_config
from tests.system.test_shared_state import loopback_nginx_conf, nginx_binary, recording_upstream
from tests.system.test_workers import wait_for_workers

# CI installs both (.ci/run): there a missing binary fails the test instead of skipping it.
pytestmark = pytest.mark.skipif(redis_server_binary() is None and not os.environ.get("CI"), reason="redis-server is not installed (.ci/run installs it)")

PATH, _, BODY, _ = WIRES["openai-chat"]
BUDGET = {"usd_per_day": 0.0015}  # ten answers' worth
PER_ANSWER_USD = 0.00015
HEAD_DELAY = 1.0  # every admitted request is still in flight when the last of the fifty arrives


def limited_config(directory: Path, upstream_port: int, port: int, redis_port: int) -> Path:
    """alice with the budget for ten, ops an admin; state (and the keys' counts) on the Redis at ``redis_port``."""
    return write_config(
        directory,
        upstream_port,
        port,
        server={
            "api_keys": [{"name": "alice", "key": ALICE, "limits": BUDGET}, {"name": "ops", "key": OPS, "role": "admin"}],
        },
        routing={"aliases": ["auto", "*"]},
        models=[
            {"name": "m", "provider": "mock", "upstream_model": "up", "context_window": 10_000, "max_output_tokens": 100, "tiers": [1, 2, 3],
             "cost_per_mtok": {"input": 1.0, "output": 2.0}},
        ],  # fmt: skip
        # generous: a busy machine must not open the breaker and turn the counts into each process's own
        state={"backend": "redis", "redis": {"url": f"redis://127.0.0.1:{redis_port}/0", "timeout_ms": 3000}},
    )


@contextlib.asynccontextmanager
async def slow_upstream() -> AsyncIterator[tuple[MockUpstream, int]]:
    """The mock upstream in this process, answering after :data:`HEAD_DELAY` with the tests' usage."""
    async with recording_upstream() as (mock, port):
        mock.default = Behaviour(delay_before_head=HEAD_DELAY, usage=USAGE)
        yield mock, port


@contextlib.contextmanager
def redis_on_loopback() -> Iterator[int]:
    port = free_port()
    with running(start_redis(port), port):
        yield port


async def fifty_at_once(url: str, pids: list[int], upstream_port: int) -> tuple[list[int], set[int]]:
    """Fifty requests of alice's, each on its own connection; their statuses, and which of ``pids``
    were seen waiting on the upstream meanwhile (each process that admitted one)."""
    waiting: set[int] = set()
    async with aiohttp.ClientSession() as http:

        async def one() -> int:
            async with http.post(url + PATH, json=BODY, headers={**auth(ALICE), "Connection": "close"}) as response:
                body = await response.json()
                if response.status == 429:
                    assert "key 'alice' is over its limit usd_per_day" in refusal_of("openai-chat", body)
                return response.status

        sent = [asyncio.ensure_future(one()) for _ in range(50)]
        while not all(task.done() for task in sent):
            waiting |= {pid for pid in pids if tcp_states(pid, remote_port=upstream_port).get("ESTABLISHED")}
            await asyncio.sleep(0.05)
        return [task.result() for task in sent], waiting


async def alices_row(url: str) -> tuple[str, dict[str, Any]]:
    """Where the counts are, and alice's row of `GET /v1/keys`, once her requests in flight hold nothing."""
    async with aiohttp.ClientSession() as http:
        deadline = time.monotonic() + 10
        while True:
            async with http.get(url + "/v1/keys", headers={**auth(OPS), "Connection": "close"}) as response:
                answer = await response.json()
            row = next(row for row in answer["data"] if row["name"] == "alice")
            if row["held"]["tokens"] == 0 or time.monotonic() > deadline:
                return answer["counts"], row
            await asyncio.sleep(0.05)


def assert_one_budget(statuses: list[int], counts: str, row: dict[str, Any]) -> None:
    served = statuses.count(200)
    assert 5 <= served <= 11 and statuses.count(429) == 50 - served, statuses
    assert counts == "redis"
    assert row["used"]["usd_per_day"] == pytest.approx(served * PER_ANSWER_USD)


async def test_two_workers_on_one_redis_hold_one_budget(tmp_path: Path) -> None:
    port = free_port()
    with redis_on_loopback() as redis_port:
        async with slow_upstream() as (mock, upstream_port):
            config = limited_config(tmp_path, upstream_port, port, redis_port)
            log = (tmp_path / "serve.log").open("wb")
            with running(router(["serve", "--config", str(config), "--workers", "2"], stdout=log, stderr=subprocess.STDOUT)) as supervisor:
                workers = wait_for_workers(supervisor, port)
                statuses, admitting = await fifty_at_once(f"http://127.0.0.1:{port}", workers, upstream_port)
                counts, row = await alices_row(f"http://127.0.0.1:{port}")
            log.close()
    assert_one_budget(statuses, counts, row)
    assert len(mock.received) == statuses.count(200)  # a refused request never reached the upstream
    assert admitting == set(workers), "both workers admitted some of the fifty"


@pytest.mark.skipif(nginx_binary() is None and not os.environ.get("CI"), reason="nginx is not installed (.ci/run installs it)")
async def test_two_replicas_behind_the_shipped_nginx_config_hold_one_budget(tmp_path: Path) -> None:
    port = free_port()
    with redis_on_loopback() as redis_port, contextlib.ExitStack() as stack:
        async with slow_upstream() as (mock, upstream_port):
            replicas: dict[int, int] = {}  # port → pid
            for name in ("a", "b"):
                directory, replica_port = tmp_path / name, free_port()
                directory.mkdir()
                log = stack.enter_context((directory / "serve.log").open("wb"))
                config = limited_config(directory, upstream_port, replica_port, redis_port)
                replicas[replica_port] = stack.enter_context(running(router(["serve", "--config", str(config)], stdout=log, stderr=subprocess.STDOUT))).pid
            for replica_port in replicas:
                wait_for_port(replica_port, 30)
            conf = loopback_nginx_conf(tmp_path, port, list(replicas))
            binary = nginx_binary()
            assert binary is not None, "nginx is not installed"
            # one process, as the invoking user: no master, no switch to nginx's own user
            nginx = [binary, "-p", str(tmp_path), "-c", str(conf), "-e", str(tmp_path / "nginx-error.log"), "-g", f"daemon off; master_process off; pid {tmp_path / 'nginx.pid'};"]
            stack.enter_context(running(subprocess.Popen(nginx, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), port))
            statuses, admitting = await fifty_at_once(f"http://127.0.0.1:{port}", list(replicas.values()), upstream_port)
            counts, row = await alices_row(f"http://127.0.0.1:{port}")
            answered = {replica_port: await alices_answers(f"http://127.0.0.1:{replica_port}") for replica_port in replicas}
    assert_one_budget(statuses, counts, row)
    assert len(mock.received) == statuses.count(200)
    assert admitting == set(replicas.values()), "both replicas admitted some of the fifty"
    # nginx spread the fifty over both, and each refused some: one count, not one each
    assert all(answers.get("429", 0) > 0 for answers in answered.values()), answered
    assert sum(answers.get("200", 0) for answers in answered.values()) == statuses.count(200)


async def alices_answers(url: str) -> dict[str, float]:
    """A replica's answers to alice by status, from its own /metrics."""
    async with aiohttp.ClientSession() as http, http.get(url + "/metrics", headers=auth(OPS)) as response:
        assert response.status == 200
        text = await response.text()
    pattern = r'^pinch_router_client_requests_total\{client="alice",status="(\d+)"\} (\S+)$'
    return {status: float(value) for status, value in re.findall(pattern, text, re.M)}
