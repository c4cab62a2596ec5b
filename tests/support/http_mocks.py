"""aioresponses, made to work with aiohttp 3.14, for mocking endpoints the proxy calls.

aioresponses 0.7.9 builds responses without the ``stream_writer`` argument that
aiohttp 3.14 requires (pnuckowski/aioresponses#289, fix pending in #288);
aiohttp only reads its ``output_size``. Every mocked response here supplies
one. Remove this module's shim once a fixed aioresponses is released.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest.mock import Mock

from aiohttp import ClientResponse
from aioresponses import aioresponses
from yarl import URL


class MockedResponse(ClientResponse):
    def __init__(self, method: str, url: URL, **kwargs: Any) -> None:
        kwargs.setdefault("stream_writer", Mock(output_size=0))
        super().__init__(method, url, **kwargs)


class PatchedAioresponses(aioresponses):
    def add(self, url: Any, method: str = "GET", **kwargs: Any) -> None:  # type: ignore[override]
        kwargs["response_class"] = kwargs.get("response_class") or MockedResponse
        super().add(url, method, **kwargs)


@contextmanager
def mocked_http(passthrough: list[str]) -> Iterator[aioresponses]:
    """Mock every request except those whose URL starts with one of ``passthrough``
    (aioresponses matches it as a plain string prefix)."""
    with PatchedAioresponses(passthrough=passthrough) as mock:
        yield mock
