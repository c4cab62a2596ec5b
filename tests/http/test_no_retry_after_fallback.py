"""When every candidate failed, the client's SDK is told not to retry (issue #27, item 9).

The proxy already fell back over its candidates; the OpenAI and Anthropic SDKs retry a 5xx
(Claude Code 10 times, printing nothing for minutes) unless ``x-should-retry: false`` says not to.
Through the real SDKs, to a proxy on loopback whose only provider refuses connections.
"""

from __future__ import annotations

import asyncio

import anthropic
import openai
import pytest

from bench.harness import free_port
from tests.support.config import make_config
from tests.support.misbehaving_upstream import MisbehavingUpstream


async def rows(client) -> list[dict]:
    await asyncio.sleep(0.05)  # recorded just after the answer
    return (await (await client.get("/v1/decisions", params={"limit": "100"})).json())["data"]


@pytest.fixture
async def down(proxy):
    """A proxy whose one provider refuses every connection; yields (test client, base URL)."""
    client = await proxy(make_config(f"http://127.0.0.1:{free_port()}/v1"))
    return client, str(client.make_url("")).rstrip("/")


async def test_the_anthropic_sdk_does_not_retry_a_502_after_the_proxy_fell_back(down):
    client, base = down
    async with anthropic.AsyncAnthropic(base_url=base, api_key="k", max_retries=3) as sdk:
        with pytest.raises(anthropic.APIStatusError) as raised:
            await sdk.messages.create(model="auto", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert raised.value.status_code == 502
    assert raised.value.response.headers["x-should-retry"] == "false"
    assert "not retrying (x-should-retry: false)" in raised.value.message
    assert len(await rows(client)) == 1  # one request: no retry


async def test_the_openai_sdk_does_not_retry_a_502_after_the_proxy_fell_back(down):
    client, base = down
    async with openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="k", max_retries=3) as sdk:
        with pytest.raises(openai.APIStatusError) as raised:
            await sdk.chat.completions.create(model="auto", messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.APIStatusError):
            await sdk.responses.create(model="auto", input="hi", store=False)
    assert raised.value.status_code == 502 and raised.value.response.headers["x-should-retry"] == "false"
    assert len(await rows(client)) == 2


async def test_a_timeout_on_every_candidate_is_not_retried_either(proxy):
    async def never_answers(writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)

    async with MisbehavingUpstream() as upstream:
        upstream.then(*[never_answers] * 4)
        client = await proxy(make_config(upstream.url, upstream={"first_byte_timeout_seconds": 0.3, "idle_timeout_seconds": 1}))
        resp = await client.post("/v1/chat/completions", json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]})
        assert resp.status == 504 and resp.headers["x-should-retry"] == "false"


async def test_a_rate_limit_stays_retryable_after_its_retry_after(proxy):
    async with MisbehavingUpstream() as upstream:
        limited = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 120\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
        upstream.then(limited, limited)
        client = await proxy(make_config(upstream.url))
        resp = await client.post("/v1/chat/completions", json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]})
        assert resp.status == 429 and resp.headers["Retry-After"] == "120" and "x-should-retry" not in resp.headers
