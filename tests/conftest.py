"""Shared fixtures: a mock upstream and a running proxy on loopback; every test outside the user's home.

Tests live in folders that mirror the code (``unit/<folder>``, ``stages``, ``http``, ``system``,
``meta``; helpers in ``support``). Every test under ``system/`` starts real processes and gets the
``system`` marker here; a test elsewhere that does carries ``@pytest.mark.system`` itself. The fast
loop is ``pytest -m "not system"``.
"""

from __future__ import annotations

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


# The files whose tests take the longest, longest first (CPU seconds of a whole file on this 2-core
# machine, measured with the suite's --durations and each test's rusage): run first, so that no long
# test starts last. xdist (``--dist worksteal``, pyproject's addopts) hands a worker that runs out of
# tests half of another's queue, but never a test already running: one started late runs alone at the
# end while the other cores idle. A file missing here costs only the tail, never a result.
LONGEST_FIRST = (
    "http/test_fuzz_wires.py",  # 220 s
    "http/test_hostile_grid.py",  # 147 s
    "unit/wire/test_wire_body_checks.py",  # 57 s
    "unit/wire/test_chat_body_check.py",  # 20 s
    "unit/core/test_resent_prefix.py",  # 17 s
    "http/test_decision_log.py",  # 15 s
    "http/test_fuzz_gemini.py",  # 11 s
    "meta/test_layers.py",  # 10 s
    "unit/clients/test_local_embeddings.py",  # 10 s
    "unit/core/test_pinch_properties.py",  # 8 s
    "http/test_fuzz_edge.py",  # 8 s
    "http/test_fuzz_transcripts.py",  # 6 s
    "unit/tools/test_eval_pinch.py",  # 5 s
    "http/test_conformance.py",  # 4.5 s
    "http/test_hostile_upstream_matrix.py",  # 4.3 s
    "unit/tools/test_demo.py",  # 3.6 s
    "unit/tools/test_pinch_plot.py",  # 3 s
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    system = here / "system"
    for item in items:
        if system in Path(item.path).parents:
            item.add_marker(pytest.mark.system)
    # the system tests (processes started and waited on) first, then the longest files, each in its own order
    rank = {here / name: n for n, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: (0, 0) if system in Path(item.path).parents else (1, rank.get(Path(item.path), len(rank))))
