"""Thinking the proxy made from a chat model's ``reasoning_content``, both ways.

Answer direction: a chat model's reasoning reaches an Anthropic client as a thinking block
signed with the proxy's marker (never a real-looking signature). Request direction: when that
block comes back in a later turn, a chat model that needs its reasoning still gets it as
``reasoning_content``; an ``api: anthropic`` provider, which rejects thinking it did not sign,
never sees it — while Anthropic's own signed blocks go out byte for byte.
"""

from __future__ import annotations

from typing import Any

import anthropic
import orjson
import pytest
from yarl import URL

from router.tools.mock_answers import seal
from router.translate.chat_to_messages import chat_to_messages_body
from router.translate.messages_to_chat import (
    ChatToMessagesStream,
    chat_completion_to_message,
)
from router.wire.anthropic_messages.blocks import (
    PROXY_THINKING_SIGNATURE,
    tool_loop_without_thinking,
)
from router.wire.anthropic_messages.body import (
    with_thinking_off,
    without_proxy_thinking,
)
from router.wire.anthropic_messages.validation import validate_messages_body
from tests.support.anthropic_factories import (
    BASH,
    assistant,
    body,
    text,
    thinking,
    tool_result,
    tool_use,
    two_wire_config,
    user,
)
from tests.support.http_mocks import mocked_http

CHAT = "https://chat.example/v1"  # aioresponses answers; the Anthropic side is the loopback mock
PROXY_MADE = thinking("the chat model reasoned", PROXY_THINKING_SIGNATURE)
REAL = thinking("Claude reasoned", seal("Claude reasoned"))


# ---- answer direction: the marker is what the proxy signs with


def test_a_translated_answers_reasoning_is_a_thinking_block_signed_with_the_proxys_marker() -> None:
    completion = {"id": "c", "choices": [{"message": {"role": "assistant", "content": "hi", "reasoning_content": "hmm"}, "finish_reason": "stop"}]}
    message = chat_completion_to_message(completion, "m", 10, message_id="msg_1", reasoning_content=True)
    assert message["content"][0] == {"type": "thinking", "thinking": "hmm", "signature": PROXY_THINKING_SIGNATURE}


@pytest.mark.parametrize("then", [{"content": "hi"}, {}], ids=["text follows", "stream ends"])
def test_a_translated_streams_thinking_block_ends_with_the_proxys_signature(then) -> None:
    stream = ChatToMessagesStream(model="m", input_estimate=10, message_id="msg_1", reasoning_content=True)
    out = stream.chunk({"choices": [{"delta": {"reasoning_content": "hmm"}}]}) + stream.chunk({"choices": [{"delta": then, "finish_reason": "stop"}]}) + stream.finish()
    deltas = [orjson.loads(e.split(b"data: ", 1)[1])["delta"] for e in out if e.startswith(b"event: content_block_delta")]
    assert {"type": "signature_delta", "signature": PROXY_THINKING_SIGNATURE} in deltas


def test_the_marker_is_never_a_real_signature() -> None:
    assert ":" in PROXY_THINKING_SIGNATURE  # base64, Anthropic's signature alphabet, has no ':'


# ---- request direction, the pure rule


def only_messages(sent: dict[str, Any]) -> list[Any]:
    return sent["messages"]


@pytest.mark.parametrize("made", [PROXY_MADE, thinking("reasoned", "")], ids=["marker", "unsigned (earlier versions)"])
def test_thinking_the_proxy_made_is_left_out_and_real_thinking_is_kept_as_sent(made) -> None:
    request = body(
        user("list the files"),
        assistant(made, tool_use("toolu_1")),
        user(tool_result("toolu_1", "a.py")),
        assistant(REAL, text("one file")),
        user("thanks"),
    )
    sent = without_proxy_thinking(request)
    assert sent is not None
    assert only_messages(sent)[1] == assistant(tool_use("toolu_1"))
    assert only_messages(sent)[3] is request["messages"][3]  # the signed block: the very object, so the very bytes
    assert orjson.dumps(REAL) in orjson.dumps(sent)
    assert request["messages"][1]["content"][0] == made  # the client's body is never changed


def test_a_body_without_thinking_the_proxy_made_goes_out_as_it_is() -> None:
    request = body(user("hi"), assistant(REAL, tool_use("toolu_1")), user(tool_result("toolu_1", "x")), thinking={"type": "adaptive"})
    assert without_proxy_thinking(request) is None
    assert not validate_messages_body(request).proxy_thinking  # so the body is not even walked for it


@pytest.mark.parametrize("made", [PROXY_MADE, thinking("r", "")], ids=["marker", "unsigned"])
def test_validation_notes_every_body_the_walk_would_change(made) -> None:
    request = body(user("hi"), assistant(made, text("ok")), user("more"))
    assert validate_messages_body(request).proxy_thinking and without_proxy_thinking(request) is not None


def test_an_assistant_message_of_nothing_but_proxy_thinking_is_left_out() -> None:
    request = body(user("a"), assistant(PROXY_MADE), user("b"))
    assert [m["content"] for m in without_proxy_thinking(request)["messages"]] == ["a", "b"]


MANAGED = {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}, {"type": "clear_tool_uses_20250919"}]}


def test_a_tool_loop_whose_thinking_was_the_proxys_goes_on_with_thinking_off() -> None:
    """Anthropic requires the current tool turn to start with thinking while thinking is on; its advice
    for a history without it is to switch thinking off, and clear_thinking needs thinking on."""
    request = body(
        user("list"), assistant(PROXY_MADE, tool_use("toolu_1")), user(tool_result("toolu_1", "a.py")),
        thinking={"type": "adaptive"}, context_management=MANAGED, output_config={"effort": "high"},
    )
    assert tool_loop_without_thinking(request["messages"])
    sent = with_thinking_off(without_proxy_thinking(request))
    assert "thinking" not in sent
    assert sent["context_management"] == {"edits": [{"type": "clear_tool_uses_20250919"}]}
    assert sent["output_config"] == {"effort": "high"}


@pytest.mark.parametrize(
    "history",
    [
        # the proxy's thinking is in an older turn; the current one starts with Anthropic's own
        [assistant(PROXY_MADE, tool_use("toolu_0")), user(tool_result("toolu_0", "x")), assistant(REAL, tool_use("toolu_1")), user(tool_result("toolu_1", "y"))],
        # no tool loop in progress: a new user turn
        [assistant(PROXY_MADE, text("done")), user("next")],
    ],
    ids=["current turn signed", "new user turn"],
)
def test_thinking_stays_on_when_the_current_tool_turn_does_not_need_the_proxys_block(history) -> None:
    request = body(user("list"), *history, thinking={"type": "adaptive"}, context_management=MANAGED)
    assert not tool_loop_without_thinking(request["messages"])
    sent = without_proxy_thinking(request)
    assert sent["thinking"] == {"type": "adaptive"} and sent["context_management"] == MANAGED


def test_clear_thinking_as_the_only_edit_takes_context_management_with_it() -> None:
    request = body(user("list"), assistant(PROXY_MADE, tool_use("toolu_1")), user(tool_result("toolu_1", "a.py")),
                   thinking={"type": "enabled", "budget_tokens": 2000}, context_management={"edits": [{"type": "clear_thinking_20251015"}]})
    sent = with_thinking_off(request)
    assert "thinking" not in sent and "context_management" not in sent
    assert request["context_management"] == {"edits": [{"type": "clear_thinking_20251015"}]}  # the client's body is never changed


def test_a_chat_clients_reasoning_content_never_becomes_unsigned_thinking_for_anthropic() -> None:
    """The other way in: opencode's history to an Anthropic model keeps the calls, not the reasoning."""
    chat = {"messages": [{"role": "user", "content": "list"},
                         {"role": "assistant", "content": None, "reasoning_content": "ls shows them",
                          "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": "call_1", "content": "a.py"}]}
    sent = chat_to_messages_body(chat, "claude-up", 900)
    assert [b["type"] for b in sent["messages"][1]["content"]] == ["tool_use"]


# ---- through the proxy: a session that moves from a reasoning chat model to Claude and back


@pytest.fixture
async def sdk(proxy, mock_upstream, monkeypatch):
    monkeypatch.setenv("MOCK_PROVIDER_KEY", "provider-secret")
    mock, url = mock_upstream
    client = await proxy(two_wire_config(CHAT, anthropic_url=url.removesuffix("/v1"), reasoning_content=True))
    async with anthropic.AsyncAnthropic(base_url=str(client.make_url("")).rstrip("/"), api_key="local-key", max_retries=0) as sdk:
        yield sdk, mock


REASONED = {"id": "c1", "object": "chat.completion", "model": "chat-up", "usage": {"prompt_tokens": 50, "completion_tokens": 9},
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None, "reasoning_content": "ls shows them",
                                                                              "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "Bash", "arguments": "{\"command\": \"ls\"}"}}]}}]}
DONE = {"id": "c2", "object": "chat.completion", "model": "chat-up", "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "a.py"}}]}


async def first_turn_on_the_chat_model(sdk: anthropic.AsyncAnthropic) -> list[dict[str, Any]]:
    """Turn 1 on the reasoning chat model; the history Claude Code would send next."""
    with mocked_http(passthrough=["http://127.0.0.1"]) as upstream:
        upstream.post(f"{CHAT}/chat/completions", body=orjson.dumps(REASONED), content_type="application/json")
        answer = await sdk.messages.create(model="chat-main", max_tokens=900, tools=[BASH], messages=[user("list the files")])
    made = answer.content[0]
    assert made.type == "thinking" and made.signature == PROXY_THINKING_SIGNATURE
    call = answer.content[1]
    return [user("list the files"), {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in answer.content]}, user(tool_result(call.id, "a.py"))]


async def test_the_proxys_thinking_is_never_sent_to_anthropic_which_would_refuse_it(sdk):
    client, mock = sdk
    history = await first_turn_on_the_chat_model(client)
    answer = await client.messages.create(model="claude-main", max_tokens=900, tools=[BASH], messages=history, thinking={"type": "adaptive"})
    assert answer.content[-1].type == "text"  # the mock checks every signature: the proxy's would be a 400 there
    (sent,) = [r.body for r in mock.received if r.path == "/v1/messages"]
    assert [b["type"] for b in sent["messages"][1]["content"]] == ["tool_use"]
    assert "thinking" not in sent  # its tool turn has no thinking of Anthropic's left: thinking off for this request


async def test_the_proxys_thinking_still_reaches_the_chat_model_that_needs_it(sdk):
    client, _ = sdk
    history = await first_turn_on_the_chat_model(client)
    with mocked_http(passthrough=["http://127.0.0.1"]) as upstream:
        upstream.post(f"{CHAT}/chat/completions", body=orjson.dumps(DONE), content_type="application/json")
        await client.messages.create(model="chat-main", max_tokens=900, tools=[BASH], messages=history)
        (call,) = upstream.requests[("POST", URL(f"{CHAT}/chat/completions"))]
    sent = orjson.loads(call.kwargs["data"])
    (reply,) = [m for m in sent["messages"] if m["role"] == "assistant"]
    assert reply["reasoning_content"] == "ls shows them"


async def test_anthropics_own_thinking_goes_back_to_it_byte_for_byte_beside_the_proxys(sdk):
    client, mock = sdk
    history = await first_turn_on_the_chat_model(client)
    signed = [user("earlier"), assistant(REAL, text("noted"))]
    await client.messages.create(model="claude-main", max_tokens=900, tools=[BASH], messages=signed + history[:1] + history[1:])
    (raw,) = [r.raw for r in mock.received if r.path == "/v1/messages"]
    assert orjson.dumps(REAL) in raw and PROXY_THINKING_SIGNATURE.encode() not in raw
