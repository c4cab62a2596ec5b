"""Shared fixtures: a mock upstream and a running proxy on loopback; every test outside the user's home.

Tests live in folders that mirror the code (``unit/<folder>``, ``stages``, ``http``, ``system``,
``meta``; helpers in ``support``). Every test under ``system/`` starts real processes and gets the
``system`` marker here; a test elsewhere that does carries ``@pytest.mark.system`` itself, as do the
exhaustive grids (``http/test_hostile_grid.py``, ``http/test_fuzz_wires.py``: the fast loop runs a
sample of each). The fast loop is ``pytest -m "not system"``.
"""

from __future__ import annotations

import os
import sys
import tempfile

# Compiled modules go to a cache of their own outside the tree (PYTHONPYCACHEPREFIX), and are written
# there even where PYTHONDONTWRITEBYTECODE is set (CI's machine sets it): else every process a test
# starts (`python -m router serve`, mock upstreams, workers; hundreds in the full suite) compiled the
# package again (importing the app and the CLI: 1.1–1.2 s of CPU, 0.8–1.0 s cached), and every xdist
# worker its tests (collecting the suite: 16 s of CPU, 9 s cached). Set before anything below is imported, and in the environment the workers and
# the started processes inherit; the tree stays free of caches either way.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault("PYTHONPYCACHEPREFIX", os.path.join(tempfile.gettempdir(), f"pinch-router-pycache-{os.getuid() if hasattr(os, 'getuid') else 0}"))
sys.dont_write_bytecode, sys.pycache_prefix = False, os.environ["PYTHONPYCACHEPREFIX"]

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from router.server.app import create_app
from router.config import Config
from router.tools.mock_upstream import MockUpstream
from tests.support.servers import ProxyFactory, loopback_server


@pytest.fixture(autouse=True, scope="session")
def _state_outside_the_users_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test (nor a process it starts) writes to the user's state directory: they get their own.

    Set as ``XDG_STATE_HOME``, the lowest-precedence override, so tests of the lookup order still
    decide it themselves (``--state-dir`` and ``PINCH_ROUTER_STATE_DIR`` win over it).
    """
    import os

    os.environ.setdefault("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))


@pytest.fixture(autouse=True)
def _kept_bodies_never_change(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Every body an edge keeps for the next turn to resume from (router.core.resent_prefix) still
    equals its bytes' parse when the test ends: nothing the proxy did to a request changed the
    objects it shares with the next one. Every test that sends a body through an edge checks it, and
    keeps bodies of any size (the server keeps none under MIN_BYTES), so every test's bodies are
    resumed from one another wherever they repeat."""
    import orjson

    from router.core.resent_prefix import ResentBodies
    from router.http import edge

    made: list[ResentBodies] = []

    def recording(max_bytes: int) -> ResentBodies:
        made.append(ResentBodies(max_bytes, min_bytes=0))
        return made[-1]

    monkeypatch.setattr(edge, "ResentBodies", recording)
    yield
    changed = [known.raw[:120] for bodies in made for known in bodies.bodies() if known.body != orjson.loads(known.raw)]
    assert changed == [], "a kept body was changed after it was kept"


@pytest.fixture
async def mock_upstream() -> AsyncIterator[tuple[MockUpstream, str]]:
    """A MockUpstream on a free loopback port; yields (mock, base_url)."""
    mock = MockUpstream()
    async with loopback_server(mock.app()) as url:
        yield mock, url


@pytest.fixture
async def proxy() -> AsyncIterator[ProxyFactory]:
    """``await proxy(config)`` starts the proxy on a free loopback port and returns a TestClient."""
    clients: list[TestClient[web.Request, web.Application]] = []

    async def start(config: Config, **kwargs: Any) -> TestClient[web.Request, web.Application]:
        app = await create_app(config, **kwargs)
        client = TestClient(TestServer(app, host="127.0.0.1"))
        await client.start_server()
        clients.append(client)
        return client

    yield start
    for client in clients:
        await client.close()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    session = aiohttp.ClientSession()
    yield session
    await session.close()


# The files whose tests take the longest, longest first (CPU seconds of a whole file's fast-loop tests,
# each test's process time in its worker, in a full run at load ~3-6): run first, so that no long test
# starts last. xdist (``--dist worksteal``, pyproject's addopts) hands a worker that runs out of
# tests half of another's queue, but never a test already running: one started late runs alone at the
# end while the other cores idle. A file missing here costs only the tail, never a result. The system
# tests run before the rest, in the same order.
LONGEST_FIRST = (
    # first of all: its system test forks 360 processes from the worker, whose page tables each fork
    # copies: 17.7 s of CPU and 56 s when a worker ran it after the fuzz had grown it, 1.1 s and 12 s alone
    "http/test_decision_log.py",  # 0.5 s
    "unit/wire/test_wire_body_checks.py",  # 19 s
    "unit/core/test_resent_prefix.py",  # 16.5 s
    "http/test_fuzz_wires.py",  # 11.6 s (300 bodies a wire); its 5,000 a wire 200 s (system)
    "unit/clients/test_local_embeddings.py",  # 11.4 s
    "http/test_fuzz_gemini.py",  # 10.9 s
    "http/test_fuzz_edge.py",  # 10 s
    "unit/wire/test_chat_body_check.py",  # 8.7 s
    "http/test_fuzz_transcripts.py",  # 6.8 s
    "unit/core/test_pinch_properties.py",  # 6 s
    "http/test_hostile_upstream_matrix.py",  # 5.9 s
    "http/test_conformance.py",  # 5.6 s
    "http/test_hardening.py",  # 4.3 s
    "unit/tools/test_eval_pinch.py",  # 4.2 s
    "unit/core/test_gemini_properties.py",  # 3.8 s
    "http/test_hostile_grid.py",  # 2.6 s (its diagonal); the whole grid 91 s (system)
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    system = here / "system"
    for item in items:
        if system in Path(item.path).parents:
            item.add_marker(pytest.mark.system)
    # the system tests (processes started and waited on, the exhaustive grids) first, then the rest;
    # each the longest files first, every file in its own order
    rank = {here / name: n for n, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: (item.get_closest_marker("system") is None, rank.get(Path(item.path), len(rank))))
