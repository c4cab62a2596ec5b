"""Shared fixtures: config factories, a mock upstream and a running proxy on loopback."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from router.server.app import create_app
from router.config import Config, parse_config
from router.tools.mock_upstream import MockUpstream


@pytest.fixture(autouse=True, scope="session")
def _state_outside_the_users_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test (nor a process it starts) writes to the user's state directory: they get their own.

    Set as ``XDG_STATE_HOME``, the lowest-precedence override, so tests of the lookup order still
    decide it themselves (``--state-dir`` and ``PINCH_ROUTER_STATE_DIR`` win over it).
    """
    import os

    os.environ.setdefault("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))


def model_entry(name: str, **overrides: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name,
        "provider": "mock",
        "upstream_model": f"up-{name}",
        "context_window": 32_000,
        "max_output_tokens": 4_000,
        "supports": {"tools": True, "vision": False, "json_mode": True},
        "tool_proficiency": 0.6,
        "tiers": [1, 2, 3],
        "quality": 0.5,
    }
    entry.update(overrides)
    return entry


def make_config(upstream_url: str = "http://127.0.0.1:9/v1", **sections: Any) -> Config:
    """A valid config pointing at ``upstream_url``; keyword sections replace defaults."""
    raw: dict[str, Any] = {
        "middlewares": ["session-fingerprint", "capability-gate", "upstream-forward"],
        "providers": {"mock": {"base_url": upstream_url}},
        "models": [model_entry("main")],
        "upstream": {"connect_timeout_seconds": 2, "first_byte_timeout_seconds": 5, "idle_timeout_seconds": 5},
        "decision_log": {"path": ":memory:"},
    }
    raw.update(sections)
    return parse_config(raw, environ={})


def chat_body(text: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"model": "auto", "messages": [{"role": "user", "content": text}], **extra}


@contextlib.asynccontextmanager
async def loopback_server(app: web.Application) -> AsyncIterator[str]:
    """``app`` served on a free loopback port; yields its ``/v1`` base URL and closes it however the block ends."""
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("/v1"))
    finally:
        await server.close()


@pytest.fixture
async def mock_upstream() -> AsyncIterator[tuple[MockUpstream, str]]:
    """A MockUpstream on a free loopback port; yields (mock, base_url)."""
    mock = MockUpstream()
    async with loopback_server(mock.app()) as url:
        yield mock, url


ProxyFactory = Callable[..., Any]


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
