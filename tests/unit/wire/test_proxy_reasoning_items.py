"""Reasoning items the proxy made from a chat model's thinking, for a Responses client (Codex).

A chat model's ``reasoning_content`` reaches a Responses client as a ``reasoning`` item with the
proxy's id (``rs_pinch_…``) and no ``encrypted_content``. Codex sends it back with ``store:
false``; a Responses provider (OpenAI) never stored it and refuses an input naming it, so a
passed-through request leaves it out — the provider's own sealed items go out as sent.
"""

from __future__ import annotations

from typing import Any

import openai
import orjson
import pytest

from router.core.request_view import BodyChanges
from router.tools.mock_answers import seal
from router.wire.openai_responses.validation import (
    PROXY_REASONING_ID_PREFIX,
    is_proxy_reasoning,
    validate_responses_body,
)
from router.wire.openai_responses.view import body_with_changes, responses_view
from tests.support.config import make_config, model_entry
from tests.support.http_mocks import mocked_http
from tests.support.wire_factories import (
    function_call,
    function_call_output,
    input_message,
    reasoning_item,
    responses_body,
)

CHAT = "https://chat.example/v1"  # aioresponses answers; the Responses provider is the loopback mock
MADE = {"type": "reasoning", "id": f"{PROXY_REASONING_ID_PREFIX}_0123abcd_0", "summary": [{"type": "summary_text", "text": "ls shows them"}]}
SEALED = reasoning_item("I will read it", seal("I will read it"))  # the mock checks the seal, as OpenAI would


def history(*reasoning: dict[str, Any]) -> dict[str, Any]:
    return responses_body(input_message("user", "list the files"), *reasoning, function_call("call_1"), function_call_output("call_1", "a.py"), store=False)


def sent_for(body: dict[str, Any], *, translated: bool = False) -> dict[str, Any]:
    view = responses_view(body, validate_responses_body(body), 2000)
    return body_with_changes(body, view, BodyChanges("gpt-up", translated=translated))


def test_the_proxys_reasoning_item_is_recognised_and_openais_are_not() -> None:
    assert is_proxy_reasoning(MADE)
    assert not is_proxy_reasoning(SEALED)
    assert not is_proxy_reasoning({**MADE, "encrypted_content": "c2VhbGVk"})  # sealed by someone: not ours to drop
    assert not is_proxy_reasoning({**SEALED, "id": "rs_68c1f0a2b3"})  # OpenAI's ids are hex


def test_a_passed_through_request_leaves_out_the_proxys_reasoning_and_keeps_the_sealed_one() -> None:
    body = history(MADE, SEALED)
    sent = sent_for(body)
    assert sent["input"] == [i for i in body["input"] if i is not MADE]
    assert body["input"][1] is MADE  # the client's body is never changed


def test_a_translated_request_is_left_to_the_translation() -> None:
    body = history(MADE)
    assert sent_for(body, translated=True)["input"] == body["input"]


def test_a_body_without_the_proxys_reasoning_is_not_walked_for_it() -> None:
    body = history(SEALED)
    assert not validate_responses_body(body).proxy_items
    assert sent_for(body)["input"] is body["input"]


REASONED = {"id": "c1", "object": "chat.completion", "model": "chat-up", "usage": {"prompt_tokens": 50, "completion_tokens": 9},
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None, "reasoning_content": "ls shows them",
                                                                              "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "exec_command", "arguments": "{\"cmd\": \"ls\"}"}}]}}]}


@pytest.fixture
async def sdk(proxy, mock_upstream):
    mock, url = mock_upstream
    config = make_config(
        url,
        providers={"chat": {"base_url": CHAT}, "responses": {"base_url": url, "wire": "openai-responses"}},
        models=[model_entry("chat-main", provider="chat"), model_entry("resp-main", provider="responses")],
    )
    client = await proxy(config)
    async with openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="unused", max_retries=0) as sdk:
        yield sdk, mock


async def test_codex_moving_from_a_reasoning_chat_model_to_a_responses_provider_sends_no_proxy_reasoning(sdk):
    client, mock = sdk
    tools = [{"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]
    with mocked_http(passthrough=["http://127.0.0.1"]) as upstream:
        upstream.post(f"{CHAT}/chat/completions", body=orjson.dumps(REASONED), content_type="application/json")
        first = await client.responses.create(model="chat-main", input="list the files", tools=tools, store=False)
    items = [item.model_dump(exclude_none=True) for item in first.output]
    assert items[0]["type"] == "reasoning" and is_proxy_reasoning(items[0])
    call = next(i for i in items if i["type"] == "function_call")
    later = [{"role": "user", "content": "list the files"}, *items, function_call_output(call["call_id"], "a.py"), SEALED]
    await client.responses.create(model="resp-main", input=later, tools=tools, store=False)
    (sent,) = [r for r in mock.received if r.path == "/v1/responses"]
    assert [i.get("type") for i in sent.body["input"]] == [None, "function_call", "function_call_output", "reasoning"]
    assert orjson.dumps(SEALED) in sent.raw  # the provider's own sealed item, byte for byte
