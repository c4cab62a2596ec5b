"""What the state tests share: one throwaway redis-server per test module (a real one on loopback)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from bench.harness import free_port
from tests.support.processes import redis_server_binary, running, start_redis


@pytest.fixture(scope="module")
def redis_port() -> Iterator[int]:
    if redis_server_binary() is None:
        pytest.skip("redis-server is not installed (.ci/run installs it)")
    port = free_port()
    process: subprocess.Popen[bytes] = start_redis(port)
    with running(process, port):
        yield port
