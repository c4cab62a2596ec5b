"""The mock upstream: what it keeps of the requests it answers."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import TestClient, TestServer

from router.mock_upstream import MockUpstream
from tests.conftest import chat_body


@pytest.mark.parametrize(("record", "kept"), [(True, 1), (False, 0)])
async def test_only_a_recording_mock_keeps_the_requests_it_answered(record: bool, kept: int) -> None:
    mock = MockUpstream(record=record)
    async with TestClient(TestServer(mock.app(), host="127.0.0.1")) as client:
        resp = await client.post("/v1/chat/completions", json=chat_body())
        assert resp.status == 200
        assert (await resp.json())["choices"][0]["message"]["content"]
    assert len(mock.received) == kept
