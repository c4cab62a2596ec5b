"""Serving an app on a free loopback port for a test, however the test ends."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer


@contextlib.asynccontextmanager
async def loopback_server(app: web.Application) -> AsyncIterator[str]:
    """``app`` served on a free loopback port; yields its ``/v1`` base URL and closes it however the block ends."""
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("/v1"))
    finally:
        await server.close()


ProxyFactory = Callable[..., Any]
