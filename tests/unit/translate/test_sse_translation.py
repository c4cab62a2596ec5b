"""Stream translation over raw provider bytes, in any cut, as the relay hands them over."""

from __future__ import annotations

import orjson
import pytest

from router.tools.mock_answers import ScriptedAnswer
from router.tools.mock_anthropic import events as anthropic_events
from router.translate.chat_to_messages import AnthropicToChatSse
from router.translate.messages_to_chat import ChatToAnthropicSse
from router.translate.protocol import StreamBroken
from router.core.sse import data_payloads as data_lines
from tests.support.anthropic_factories import body, user


def chat_sse(*chunks: object) -> bytes:
    return b"".join(b"data: " + (c if isinstance(c, bytes) else orjson.dumps(c)) + b"\n\n" for c in chunks)


def names(raw: bytes) -> list[str]:
    return [line[7:] for line in raw.decode().splitlines() if line.startswith("event: ")]


CHAT_STREAM = chat_sse(
    {"id": "x", "choices": [{"delta": {"content": "hi"}}]},
    {"choices": [{"delta": {}, "finish_reason": "stop"}]},
    {"choices": [], "usage": {"prompt_tokens": 70, "completion_tokens": 2}},
    b"[DONE]",
)


def test_data_lines_of_every_line_ending() -> None:
    assert data_lines(b"event: a\ndata: 1\n\ndata: 2\r\n\r\n: comment\n\ndata:3\r\r") == [b"1", b"2", b"3"]


@pytest.mark.parametrize("cut", [1, 7, 50, len(CHAT_STREAM)])
def test_a_chat_stream_in_any_cut_becomes_the_same_anthropic_stream(cut: int) -> None:
    translator = ChatToAnthropicSse("claude", 50, message_id="msg_1")
    out = b"".join(translator.feed(CHAT_STREAM[i : i + cut]) for i in range(0, len(CHAT_STREAM), cut)) + translator.finish()
    assert names(out) == ["message_start", "ping", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"]
    final = orjson.loads(data_lines(out)[-2])
    assert final["usage"]["input_tokens"] == 70 and final["usage"]["output_tokens"] == 2
    assert translator.usage is not None and translator.usage.prompt_tokens == 70


def test_a_chat_stream_that_ends_without_done_after_its_finish_is_complete() -> None:
    translator = ChatToAnthropicSse("claude", 50, message_id="msg_1")
    translator.feed(chat_sse({"choices": [{"delta": {"content": "hi"}, "finish_reason": "stop"}]}))
    assert names(translator.finish())[-2:] == ["message_delta", "message_stop"]


def test_a_chat_stream_cut_before_its_finish_owes_nothing_so_the_relay_reports_it() -> None:
    translator = ChatToAnthropicSse("claude", 50, message_id="msg_1")
    assert names(translator.feed(chat_sse({"choices": [{"delta": {"content": "hi"}}]})))[0] == "message_start"
    assert translator.finish() == b""


def test_an_error_chunk_is_raised_after_the_events_before_it() -> None:
    translator = ChatToAnthropicSse("claude", 50, message_id="msg_1")
    out = translator.feed(chat_sse({"choices": [{"delta": {"content": "hi"}}]}, {"error": {"message": "model overloaded"}}))
    assert "content_block_delta" in names(out)
    with pytest.raises(StreamBroken, match="model overloaded"):
        translator.finish()


def test_an_anthropic_stream_becomes_chat_chunks_ending_in_done_with_usage() -> None:
    translator = AnthropicToChatSse("claude", 1_700_000_000)
    raw = b"".join(anthropic_events(body(user("hi"), stream=True), ScriptedAnswer(text="hello there")))
    out = b"".join(translator.feed(raw[i : i + 13]) for i in range(0, len(raw), 13))
    assert translator.done and out.endswith(b"data: [DONE]\n\n") and translator.finish() == b""
    chunks = [orjson.loads(d) for d in data_lines(out) if d != b"[DONE]"]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == "hello there"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] > 0  # dropped by the relay unless asked
    assert {c["created"] for c in chunks} == {1_700_000_000}  # when the answer was made, not 0
    assert translator.usage is not None and translator.usage.completion_tokens > 0


def test_an_anthropic_stream_cut_short_owes_nothing_and_an_error_event_is_raised() -> None:
    translator = AnthropicToChatSse("claude", 1_700_000_000)
    translator.feed(anthropic_events(body(user("hi"), stream=True), ScriptedAnswer(text="hello"))[0])
    assert translator.finish() == b""
    broken = AnthropicToChatSse("claude", 1_700_000_000)
    broken.feed(b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}\n\n')
    with pytest.raises(StreamBroken, match="overloaded_error: Overloaded"):
        broken.finish()
