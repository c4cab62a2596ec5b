"""The Anthropic passthrough with the upstream mocked by aioresponses (the proxy and the SDK on loopback)."""

from __future__ import annotations

import anthropic
import orjson
import pytest
from yarl import URL

from router.tools.mock_answers import seal
from tests.support.anthropic_factories import BASH, image, text, tool_result, tool_use, two_wire_config
from tests.support.http_mocks import mocked_http

UPSTREAM = "https://api.anthropic.example"  # never contacted: aioresponses answers
BETAS = "claude-code-20250219,context-management-2025-06-27"
ANSWER = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-up", "content": [{"type": "text", "text": "done"}],
          "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 120, "output_tokens": 3, "cache_read_input_tokens": 80}}


@pytest.fixture
async def sdk(proxy, monkeypatch):
    monkeypatch.setenv("MOCK_PROVIDER_KEY", "provider-secret")
    client = await proxy(two_wire_config("http://127.0.0.1:9/v1", anthropic_url=UPSTREAM))
    async with anthropic.AsyncAnthropic(base_url=str(client.make_url("")).rstrip("/"), api_key="local-key", max_retries=0) as sdk:
        yield sdk


async def test_what_the_proxy_did_not_change_goes_out_byte_for_byte(sdk):
    thought = "I will list them."
    messages = [
        {"role": "user", "content": [text("list", cache_control={"type": "ephemeral", "ttl": "1h"}), image()]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": thought, "signature": seal(thought)}, tool_use("toolu_1")]},
        {"role": "user", "content": [tool_result("toolu_1", [text("a.py"), image()], is_error=False, cache_control={"type": "ephemeral", "scope": "global"})]},
    ]
    with mocked_http(passthrough=["http://127.0.0.1"]) as upstream:
        upstream.post(f"{UPSTREAM}/v1/messages", body=orjson.dumps(ANSWER), content_type="application/json")
        message = await sdk.messages.create(model="claude-main", max_tokens=900, messages=messages, tools=[BASH],
                                            extra_headers={"anthropic-beta": BETAS, "anthropic-version": "2023-06-01"})
        (calls,) = [v for k, v in upstream.requests.items() if k[1] == URL(f"{UPSTREAM}/v1/messages")]
    assert message.content[0].text == "done" and message.usage.cache_read_input_tokens == 80
    (call,) = calls
    sent_raw: bytes = call.kwargs["data"]
    sent = orjson.loads(sent_raw)
    assert sent == {"model": "claude-up", "max_tokens": 900, "messages": messages, "tools": [BASH]}
    for message_ in messages:  # every block as the SDK serialised it, signatures and cache markers included
        for block in message_["content"]:
            assert orjson.dumps(block) in sent_raw
    headers = call.kwargs["headers"]
    assert headers["anthropic-beta"] == BETAS and headers["anthropic-version"] == "2023-06-01"
    assert headers["x-api-key"] == "provider-secret" and "Authorization" not in headers
