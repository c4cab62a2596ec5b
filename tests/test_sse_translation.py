"""Stream translation over whole SSE events, as the relay hands them over."""

from __future__ import annotations

import orjson

from router.core.sse_translation import AnthropicToChatSse, ChatToAnthropicSse, data_lines
from router.mock_anthropic import events as anthropic_events
from router.mock_answers import ScriptedAnswer
from tests.anthropic_factories import body, user


def chat_sse(*chunks: object) -> bytes:
    return b"".join(b"data: " + (c if isinstance(c, bytes) else orjson.dumps(c)) + b"\n\n" for c in chunks)


def names(raw: bytes) -> list[str]:
    return [line[7:] for line in raw.decode().splitlines() if line.startswith("event: ")]


def test_data_lines_of_every_line_ending() -> None:
    assert data_lines(b"event: a\ndata: 1\n\ndata: 2\r\n\r\n: comment\n\ndata:3\r\r") == [b"1", b"2", b"3"]


def test_a_chat_stream_in_any_cut_becomes_one_anthropic_stream() -> None:
    stream = chat_sse({"id": "x", "choices": [{"delta": {"content": "hi"}}]}, {"choices": [{"delta": {}, "finish_reason": "stop"}]}, b"[DONE]")
    whole = ChatToAnthropicSse("claude", 50)
    expected = whole.feed(stream)
    assert whole.done and names(expected) == ["message_start", "ping", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"]
    per_event = ChatToAnthropicSse("claude", 50)
    assert b"".join(per_event.feed(e + b"\n\n") for e in stream.split(b"\n\n") if e) == expected


def test_a_chat_stream_that_ends_without_done_after_its_finish_is_complete() -> None:
    translator = ChatToAnthropicSse("claude", 50)
    translator.feed(chat_sse({"choices": [{"delta": {"content": "hi"}, "finish_reason": "stop"}]}))
    assert names(translator.end())[-2:] == ["message_delta", "message_stop"]


def test_a_chat_stream_cut_before_its_finish_ends_in_an_error_event() -> None:
    translator = ChatToAnthropicSse("claude", 50)
    translator.feed(chat_sse({"choices": [{"delta": {"content": "hi"}}]}))
    assert names(translator.end()) == ["error"]


def test_an_error_chunk_from_the_chat_provider_becomes_an_anthropic_error_event() -> None:
    translator = ChatToAnthropicSse("claude", 50)
    out = translator.feed(chat_sse({"error": {"message": "model overloaded"}}))
    assert names(out)[-1] == "error" and b"model overloaded" in out and translator.done


def test_an_anthropic_stream_becomes_chat_chunks_ending_in_done() -> None:
    translator = AnthropicToChatSse("claude", include_usage=False)
    out = translator.feed(b"".join(anthropic_events(body(user("hi"), stream=True), ScriptedAnswer(text="hello there"))))
    assert translator.done and out.endswith(b"data: [DONE]\n\n")
    chunks = [orjson.loads(d) for d in data_lines(out) if d != b"[DONE]"]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "hello there"
    assert all(c["choices"] for c in chunks)  # no usage chunk: the client did not ask for one


def test_an_anthropic_stream_cut_short_ends_in_an_error_chunk() -> None:
    translator = AnthropicToChatSse("claude", include_usage=False)
    translator.feed(anthropic_events(body(user("hi"), stream=True), ScriptedAnswer(text="hello"))[0])
    out = translator.end()
    assert b'"error"' in out and out.endswith(b"data: [DONE]\n\n")
