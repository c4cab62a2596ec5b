"""A Responses client (the openai SDK, Codex) to an ``api: anthropic`` provider: translated through chat.

Responses → chat → Anthropic Messages on the way out and back (the chained translator,
``router.providers.anthropic.responses_to_messages``): the mock receives an Anthropic
request, the client gets Responses events, and what neither translation can carry is named.
"""

from __future__ import annotations

import openai
import pytest

from tests.support.config import make_config, model_entry
from tests.support.wire_factories import WEB_SEARCH_TOOL, sse_events

TEXT_EVENTS = ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]


@pytest.fixture
async def setup(proxy, mock_upstream):
    mock, url = mock_upstream
    provider = {"base_url": url.removesuffix("/v1"), "api": "anthropic"}
    model = model_entry("claude", upstream_model="claude-up", supports={"tools": True, "vision": True, "json_mode": True}, max_output_tokens=8000)
    client = await proxy(make_config(url, providers={"anth": provider}, models=[{**model, "provider": "anth"}]))
    async with openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="unused", max_retries=0) as sdk:
        yield sdk, mock, client


async def test_a_whole_answer_comes_back_as_a_response(setup):
    sdk, mock, _ = setup
    raw = await sdk.responses.with_raw_response.create(model="auto", input="hi", store=False, instructions="be brief")
    response = raw.parse()
    assert response.status == "completed" and response.output_text
    assert raw.headers["x-router-wire"] == "openai-responses->anthropic-messages"
    sent = mock.received[-1]
    assert sent.path == "/v1/messages"
    # instructions → system; max_tokens is required there: the model's limit
    assert sent.body == {"model": "claude-up", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "system": "be brief", "max_tokens": 8000}


async def test_a_stream_comes_back_as_responses_events_and_the_dropped_tool_is_named(setup):
    _, mock, client = setup
    body = {"model": "auto", "input": "hi", "store": False, "stream": True, "tools": [WEB_SEARCH_TOOL]}
    response = await client.post("/v1/responses", json=body)
    assert response.status == 200 and response.headers["x-router-dropped"] == "tool web_search"
    names = [name for name, _ in sse_events(await response.read())]
    assert names[:4] == TEXT_EVENTS and names[-1] == "response.completed"
    assert "response.output_text.delta" in names
    assert "tools" not in mock.received[-1].body  # nothing left an Anthropic model could run
