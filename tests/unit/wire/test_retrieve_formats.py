"""pinch_retrieve in the provider formats, with plain data (issue #44): calls found in whole answers and
in streams, held back, the round appended, the next round's events following on."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from router.core.retrieve import RETRIEVE_TOOL, RetrieveCall
from router.wire.anthropic_messages.retrieve import MESSAGES_RETRIEVE
from router.wire.gemini.retrieve import GEMINI_RETRIEVE
from router.wire.ollama.retrieve import OLLAMA_RETRIEVE
from router.wire.openai_responses.retrieve import RESPONSES_RETRIEVE
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


def test_the_formats_with_a_retrieve_codec_are_registered() -> None:
    assert retrieve_format("openai-chat") is CHAT_RETRIEVE and retrieve_format("anthropic-messages") is MESSAGES_RETRIEVE
    assert retrieve_format("gemini") is GEMINI_RETRIEVE and retrieve_format("ollama-chat") is OLLAMA_RETRIEVE
    assert retrieve_format("nonsense") is None


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


def gemini_chunk(parts: list[dict[str, Any]], finish: str | None = None) -> bytes:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    chunk: dict[str, Any] = {"candidates": [candidate]}
    if finish:
        chunk["usageMetadata"] = {"promptTokenCount": 9}
    return b"data: " + orjson.dumps(chunk) + b"\r\n\r\n"


def test_a_gemini_stream_round_that_only_retrieves_loses_its_call_and_its_end() -> None:
    stream = GEMINI_RETRIEVE.stream()
    call = {"functionCall": {"name": "pinch_retrieve", "args": {"id": "bash@2.0"}}, "thoughtSignature": "SIG"}
    events = [gemini_chunk([{"text": "Reading it all. "}]), gemini_chunk([call], "STOP")]
    out = b"".join(stream.feed(event) for event in events)
    assert out == events[0] and stream.ended and stream.calls == [RetrieveCall("pinch_retrieve#0", {"id": "bash@2.0"})]
    continued = GEMINI_RETRIEVE.continued({"contents": []}, stream.answer(), [(stream.calls[0], "WHOLE")])
    assert continued["contents"] == [
        {"role": "model", "parts": [{"text": "Reading it all. "}, call]},  # the signature goes back with its call
        {"role": "user", "parts": [{"functionResponse": {"name": "pinch_retrieve", "response": {"output": "WHOLE"}}}]},
    ]
    stream.next_round()
    last = gemini_chunk([{"text": "Fixed."}], "STOP")
    assert stream.feed(last) == last and stream.ended and not stream.calls


def test_a_gemini_chunk_with_text_and_the_end_keeps_its_text_without_the_end() -> None:
    stream = GEMINI_RETRIEVE.stream()
    call = {"functionCall": {"id": "fc_1", "name": "pinch_retrieve", "args": {"id": "x"}}}
    out = stream.feed(gemini_chunk([{"text": "Reading. "}, call], "STOP"))
    assert orjson.loads(out[6:]) == {"candidates": [{"content": {"role": "model", "parts": [{"text": "Reading. "}]}, "index": 0}]}
    assert stream.calls == [RetrieveCall("fc_1", {"id": "x"})]


def ollama_line(message: dict[str, Any], done: bool = False) -> bytes:
    return orjson.dumps({"model": "m", "message": {"role": "assistant", "content": "", **message}, "done": done}) + b"\n"


def test_an_ollama_stream_round_that_only_retrieves_is_held_and_continued() -> None:
    stream = OLLAMA_RETRIEVE.stream()
    call = {"id": "call_1", "function": {"index": 0, "name": "pinch_retrieve", "arguments": {"id": "call_make"}}}
    events = [ollama_line({"content": "Reading. "}), ollama_line({"tool_calls": [call]}), ollama_line({}, done=True)]
    raw = b"".join(events)
    out = b"".join(stream.feed(raw[i : i + 9]) for i in range(0, len(raw), 9))  # lines split anywhere
    assert out == events[0] and stream.ended and stream.calls == [RetrieveCall("call_1", {"id": "call_make"})]
    continued = OLLAMA_RETRIEVE.continued({"messages": []}, stream.answer(), [(stream.calls[0], "WHOLE")])
    assert continued["messages"] == [
        {"role": "assistant", "content": "Reading. ", "tool_calls": [{"function": {"name": "pinch_retrieve", "arguments": {"id": "call_make"}}}]},
        {"role": "tool", "content": "WHOLE", "tool_name": "pinch_retrieve"},
    ]
    assert stream.release() == events[2]  # held until the rounds ran out


def test_whole_gemini_and_ollama_answers_calls_and_strip() -> None:
    gemini = {"candidates": [{"content": {"parts": [{"functionCall": {"name": "pinch_retrieve", "args": {"id": "a"}}}, {"functionCall": {"name": "bash", "args": {}}}]}}]}
    assert GEMINI_RETRIEVE.calls(gemini) == ([RetrieveCall("pinch_retrieve#0", {"id": "a"})], True)
    assert [p["functionCall"]["name"] for p in GEMINI_RETRIEVE.without_calls(gemini)["candidates"][0]["content"]["parts"]] == ["bash"]
    ollama = {"message": {"tool_calls": [{"function": {"name": "pinch_retrieve", "arguments": {"id": "a"}}}]}, "done": True}
    assert OLLAMA_RETRIEVE.calls(ollama) == ([RetrieveCall("pinch_retrieve#0", {"id": "a"})], False)
    assert OLLAMA_RETRIEVE.without_calls(ollama)["message"]["tool_calls"] == []
    for odd in ({}, {"candidates": "x"}, {"message": "x"}, None, []):
        assert GEMINI_RETRIEVE.calls(odd) == ([], False) and OLLAMA_RETRIEVE.calls(odd) == ([], False)


def responses_event(name: str, number: int, **data: Any) -> bytes:
    return f"event: {name}\ndata: ".encode() + orjson.dumps({"type": name, "sequence_number": number, **data}) + b"\n\n"


RETRIEVE_ITEM = {"type": "function_call", "id": "fc_1", "call_id": "call_r", "name": "pinch_retrieve", "arguments": '{"id":"call_1"}'}
DECLARED = [{"type": "function", "name": "bash"}, {"type": "function", "name": "pinch_retrieve"}]


def test_a_responses_stream_is_numbered_gaplessly_across_rounds_and_ends_with_every_item() -> None:
    stream = RESPONSES_RETRIEVE.stream()
    text_item = {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "Reading."}]}
    first = [
        responses_event("response.created", 0, response={"id": "resp_1", "output": [], "tools": DECLARED}),
        responses_event("response.output_item.added", 1, output_index=0, item=text_item),
        responses_event("response.output_item.done", 2, output_index=0, item=text_item),
        responses_event("response.output_item.added", 3, output_index=1, item={**RETRIEVE_ITEM, "arguments": ""}),
        responses_event("response.function_call_arguments.delta", 4, output_index=1, item_id="fc_1", delta='{"id":"call_1"}'),
        responses_event("response.output_item.done", 5, output_index=1, item=RETRIEVE_ITEM),
        responses_event("response.completed", 6, response={"id": "resp_1", "output": [text_item, RETRIEVE_ITEM], "tools": DECLARED}),
    ]
    out = b"".join(stream.feed(event) for event in first)
    assert stream.ended and stream.calls == [RetrieveCall("call_r", '{"id":"call_1"}')] and b"pinch_retrieve" not in out
    continued = RESPONSES_RETRIEVE.continued({"input": "fix it"}, stream.answer(), [(stream.calls[0], "WHOLE")])
    assert continued["input"] == [{"role": "user", "content": "fix it"}, text_item, RETRIEVE_ITEM, {"type": "function_call_output", "call_id": "call_r", "output": "WHOLE"}]
    stream.next_round()
    done_item = {"type": "message", "id": "msg_2", "role": "assistant", "content": [{"type": "output_text", "text": "Fixed."}]}
    second = [
        responses_event("response.created", 0, response={"id": "resp_2", "output": [], "tools": DECLARED}),
        responses_event("response.output_item.added", 1, output_index=0, item=done_item),
        responses_event("response.output_item.done", 2, output_index=0, item=done_item),
        responses_event("response.completed", 3, response={"id": "resp_2", "output": [done_item], "tools": DECLARED}),
    ]
    out += b"".join(stream.feed(event) for event in second)
    events = [orjson.loads(e.split(b"data: ", 1)[1]) for e in out.split(b"\n\n") if e]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events].count("response.created") == 1 and events[-1]["type"] == "response.completed"
    assert [e["output_index"] for e in events if e["type"] == "response.output_item.added"] == [0, 1]
    assert events[-1]["response"]["id"] == "resp_1" and events[-1]["response"]["output"] == [text_item, done_item]
    assert [t["name"] for t in events[0]["response"]["tools"]] == ["bash"]  # the echo of the request's tools: the client's


def test_a_whole_responses_answer_loses_the_declaration_from_its_echo() -> None:
    answer = {"id": "resp_1", "output": [RETRIEVE_ITEM], "tools": DECLARED}
    assert RESPONSES_RETRIEVE.calls(answer) == ([RetrieveCall("call_r", '{"id":"call_1"}')], False)
    assert RESPONSES_RETRIEVE.without_calls(answer) == {"id": "resp_1", "output": [], "tools": [DECLARED[0]]}


def _rounds() -> dict[str, tuple[Any, bytes]]:
    """Each provider format's filter and one streamed round that calls only pinch_retrieve."""
    gemini_call = {"functionCall": {"name": "pinch_retrieve", "args": {"id": "x"}}}
    ollama_call = {"function": {"name": "pinch_retrieve", "arguments": {"id": "x"}}}
    text_item = {"type": "message", "id": "m", "content": []}
    return {
        "chat": (CHAT_RETRIEVE, b"".join(retrieve_round())),
        "messages": (MESSAGES_RETRIEVE, b"".join(messages_round())),
        "gemini": (GEMINI_RETRIEVE, gemini_chunk([{"text": "Reading. "}]) + gemini_chunk([gemini_call], "STOP")),
        "ollama": (OLLAMA_RETRIEVE, ollama_line({"content": "Reading. "}) + ollama_line({"tool_calls": [ollama_call]}) + ollama_line({}, done=True)),
        "responses": (RESPONSES_RETRIEVE, b"".join([
            responses_event("response.created", 0, response={"id": "r", "output": []}),
            responses_event("response.output_item.added", 1, output_index=0, item=text_item),
            responses_event("response.output_item.done", 2, output_index=0, item=text_item),
            responses_event("response.output_item.added", 3, output_index=1, item=RETRIEVE_ITEM),
            responses_event("response.output_item.done", 4, output_index=1, item=RETRIEVE_ITEM),
            responses_event("response.completed", 5, response={"id": "r", "output": [text_item, RETRIEVE_ITEM]}),
        ])),
    }  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(_rounds())), st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=200))
def test_a_round_split_anywhere_is_filtered_as_when_it_comes_whole(name: str, sizes: list[int]) -> None:
    fmt, raw = _rounds()[name]
    whole = fmt.stream()
    expected = whole.feed(raw)
    split = fmt.stream()
    out, at, i = [], 0, 0
    while at < len(raw):
        size = sizes[i % len(sizes)]
        out.append(split.feed(raw[at : at + size]))
        at, i = at + size, i + 1
    assert b"".join(out) == expected and split.calls == whole.calls and split.ended and whole.ended and len(whole.calls) == 1
