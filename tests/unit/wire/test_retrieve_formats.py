"""pinch_retrieve in the provider formats, with plain data (issue #44): calls found in whole answers and
in streams, held back, the round appended, the next round's events following on."""

from __future__ import annotations

from typing import Any

import orjson

from router.core.retrieve import RETRIEVE_TOOL, RetrieveCall
from router.wire.anthropic_messages.retrieve import MESSAGES_RETRIEVE
from router.wire.openai_chat.retrieve import CHAT_RETRIEVE, with_tool
from router.wire.retrieve import retrieve_format


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return b"data: " + orjson.dumps({"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + b"\n\n"


USAGE = b'data: {"id":"c","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2}}\n\n'
DONE = b"data: [DONE]\n\n"


def retrieve_round(call_id: str = "call_r", index: int = 0) -> list[bytes]:
    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Reading it all. "}),
        chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function", "function": {"name": "pinch_retrieve", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": index, "function": {"arguments": '{"id":'}}]}),
        chunk({"tool_calls": [{"index": index, "function": {"arguments": '"call_1"}'}}]}),
        chunk({}, "tool_calls"),
        USAGE,
        DONE,
    ]


def test_only_the_formats_with_a_retrieve_codec_are_offered_the_tool() -> None:
    assert retrieve_format("openai-chat") is CHAT_RETRIEVE and retrieve_format("anthropic-messages") is MESSAGES_RETRIEVE
    assert retrieve_format("gemini") is None and retrieve_format("nonsense") is None


def test_the_tool_is_declared_after_the_clients_own() -> None:
    body = {"tools": [{"type": "function", "function": {"name": "bash"}}], "messages": []}
    assert [t["function"]["name"] for t in with_tool(body, RETRIEVE_TOOL)["tools"]] == ["bash", "pinch_retrieve"]
    assert body["tools"][-1]["function"]["name"] == "bash"  # not mutated


def test_a_chat_stream_round_that_only_retrieves_is_held_and_continued() -> None:
    stream = CHAT_RETRIEVE.stream()
    out = b"".join(stream.feed(event) for event in retrieve_round())
    assert out == retrieve_round()[0] + retrieve_round()[1]  # the text stays; the call, its end, usage and [DONE] held
    assert stream.ended and not stream.others and stream.calls == [RetrieveCall("call_r", '{"id":"call_1"}')]
    continued = CHAT_RETRIEVE.continued({"messages": [{"role": "user", "content": "hi"}]}, stream.answer(), [(stream.calls[0], "WHOLE")])
    assert continued["messages"][1:] == [
        {"role": "assistant", "content": "Reading it all. ", "tool_calls": [{"id": "call_r", "type": "function", "function": {"name": "pinch_retrieve", "arguments": '{"id":"call_1"}'}}]},
        {"role": "tool", "tool_call_id": "call_r", "content": "WHOLE"},
    ]
    stream.next_round()
    second = [chunk({"role": "assistant", "content": ""}), chunk({"content": "Done."}), chunk({}, "stop"), USAGE, DONE]
    assert b"".join(stream.feed(event) for event in second) == b"".join(second)
    assert stream.ended and not stream.calls


def test_a_chat_round_that_calls_the_clients_tool_too_goes_on_without_the_retrieve_call() -> None:
    stream = CHAT_RETRIEVE.stream()
    bash = chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]})
    events = retrieve_round()[:5] + [bash, chunk({}, "tool_calls"), USAGE, DONE]
    out = b"".join(stream.feed(event) for event in events)
    assert b"pinch_retrieve" not in out and bash in out and out.endswith(chunk({}, "tool_calls") + USAGE + DONE)
    assert stream.others


def test_events_split_anywhere_are_read_whole() -> None:
    stream = CHAT_RETRIEVE.stream()
    raw = b"".join(retrieve_round())
    out = b"".join(stream.feed(raw[i : i + 7]) for i in range(0, len(raw), 7))
    assert out == retrieve_round()[0] + retrieve_round()[1] and stream.ended and len(stream.calls) == 1


def test_a_whole_chat_answer_calls_and_strips() -> None:
    answer = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "pinch_retrieve", "arguments": '{"id":"x"}'}},
        {"id": "b", "type": "function", "function": {"name": "bash", "arguments": "{}"}},
    ]}}]}  # fmt: skip
    calls, others = CHAT_RETRIEVE.calls(answer)
    assert calls == [RetrieveCall("a", '{"id":"x"}')] and others
    assert [c["id"] for c in CHAT_RETRIEVE.without_calls(answer)["choices"][0]["message"]["tool_calls"]] == ["b"]
    for odd in ({}, {"choices": []}, {"choices": [{"message": {"tool_calls": "x"}}]}, [], None):
        assert CHAT_RETRIEVE.calls(odd) == ([], False)


def sse(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: ".encode() + orjson.dumps({"type": name, **data}) + b"\n\n"


def messages_round(first_index: int = 0, retrieve: bool = True) -> list[bytes]:
    events = [
        sse("message_start", {"message": {"id": "msg_1", "usage": {"input_tokens": 10}}}),
        sse("content_block_start", {"index": first_index, "content_block": {"type": "thinking", "thinking": ""}}),
        sse("content_block_delta", {"index": first_index, "delta": {"type": "thinking_delta", "thinking": "cut; read it"}}),
        sse("content_block_delta", {"index": first_index, "delta": {"type": "signature_delta", "signature": "SIG"}}),
        sse("content_block_stop", {"index": first_index}),
    ]
    if retrieve:
        events += [
            sse("content_block_start", {"index": first_index + 1, "content_block": {"type": "tool_use", "id": "toolu_r", "name": "pinch_retrieve", "input": {}}}),
            sse("content_block_delta", {"index": first_index + 1, "delta": {"type": "input_json_delta", "partial_json": '{"id": "toolu_1"}'}}),
            sse("content_block_stop", {"index": first_index + 1}),
        ]
    return events + [sse("message_delta", {"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}}), sse("message_stop", {})]


def test_a_messages_stream_round_is_held_and_the_next_ones_indices_follow_on() -> None:
    stream = MESSAGES_RETRIEVE.stream()
    out = b"".join(stream.feed(event) for event in messages_round())
    assert out == b"".join(messages_round()[:5])  # the thinking block stays; the call, message_delta and message_stop held
    assert stream.ended and stream.calls == [RetrieveCall("toolu_r", '{"id": "toolu_1"}')]
    answer = stream.answer()
    assert answer["content"] == [
        {"type": "thinking", "thinking": "cut; read it", "signature": "SIG"},
        {"type": "tool_use", "id": "toolu_r", "name": "pinch_retrieve", "input": {"id": "toolu_1"}},
    ]
    continued = MESSAGES_RETRIEVE.continued({"messages": [{"role": "user", "content": "hi"}]}, answer, [(stream.calls[0], "WHOLE")])
    assert continued["messages"][-1] == {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_r", "content": "WHOLE"}]}
    stream.next_round()
    second = [
        sse("message_start", {"message": {"id": "msg_2"}}),
        sse("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        sse("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "Fixed."}}),
        sse("content_block_stop", {"index": 0}),
        sse("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}),
        sse("message_stop", {}),
    ]
    out = b"".join(stream.feed(event) for event in second)
    names_and_indices = [(e.split(b"\n")[0], orjson.loads(e.split(b"data: ", 1)[1]).get("index")) for e in out.split(b"\n\n") if e]
    # no second message_start; the text block is the client's block 1 (after the thinking block it was sent)
    assert names_and_indices == [
        (b"event: content_block_start", 1), (b"event: content_block_delta", 1), (b"event: content_block_stop", 1),
        (b"event: message_delta", None), (b"event: message_stop", None),
    ]  # fmt: skip


def test_a_whole_messages_answer_calls_and_strips() -> None:
    answer = {"content": [{"type": "text", "text": "x"}, {"type": "tool_use", "id": "t", "name": "pinch_retrieve", "input": {"id": "a"}}]}
    assert MESSAGES_RETRIEVE.calls(answer) == ([RetrieveCall("t", {"id": "a"})], False)
    assert MESSAGES_RETRIEVE.without_calls(answer)["content"] == [{"type": "text", "text": "x"}]
    assert MESSAGES_RETRIEVE.calls({"content": "odd"}) == ([], False)
