"""The mock upstream: what it keeps of the requests it answers."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import TestClient, TestServer

from router.core.tokens import TokenEstimator
from router.tools.mock_upstream import MockUpstream, SimulatedPromptCache
from tests.support.config import chat_body
@pytest.mark.parametrize(("record", "kept"), [(True, 1), (False, 0)])
async def test_only_a_recording_mock_keeps_the_requests_it_answered(record: bool, kept: int) -> None:
    mock = MockUpstream(record=record)
    async with TestClient(TestServer(mock.app(), host="127.0.0.1")) as client:
        resp = await client.post("/v1/chat/completions", json=chat_body())
        assert resp.status == 200
        assert (await resp.json())["choices"][0]["message"]["content"]
    assert len(mock.received) == kept


async def test_a_simulated_prompt_cache_reports_the_repeated_prefix_until_it_expires() -> None:
    now = [0.0]
    mock = MockUpstream(prompt_cache=SimulatedPromptCache(300, clock=lambda: now[0]))
    first = chat_body("a long opening question " * 50)
    second = {**first, "messages": [*first["messages"], {"role": "assistant", "content": "an answer"}, {"role": "user", "content": "more"}]}
    estimator = TokenEstimator()

    async def cached(body: dict) -> tuple[int, int]:
        resp = await client.post("/v1/chat/completions", json=body)
        usage = (await resp.json())["usage"]
        return usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"]

    async with TestClient(TestServer(mock.app(), host="127.0.0.1")) as client:
        assert await cached(first) == (estimator.prompt_tokens(first["messages"]), 0)
        now[0] = 300
        assert await cached(second) == (estimator.prompt_tokens(second["messages"]), estimator.prompt_tokens(first["messages"]))
        now[0] = 601  # idle longer than the lifetime: the entry is gone
        assert await cached(second) == (estimator.prompt_tokens(second["messages"]), 0)
