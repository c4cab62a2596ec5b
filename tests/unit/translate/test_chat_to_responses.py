"""A chat answer translated back to the Responses API: the response object and the event sequence."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from router.translate.chat_to_responses import (
    ChatStreamTranslator,
    ResponseFrame,
    chat_chunks,
    completion_to_response,
    responses_usage,
)
from router.translate.chat_to_messages import chat_usage
from router.wire.openai_responses.compaction import decode_summary
from router.wire.openai_responses.stream import sse_event
from tests.support.wire_factories import EXEC_COMMAND, input_message, responses_body

REQUEST = responses_body(input_message("user", "list the files"), tools=[EXEC_COMMAND], stream=True)
FRAME = ResponseFrame("resp_abc", 1700000000, REQUEST)
USAGE = {"prompt_tokens": 120, "completion_tokens": 8, "total_tokens": 128, "prompt_tokens_details": {"cached_tokens": 96}}
RESPONSES_USAGE = {
    "input_tokens": 120,
    "input_tokens_details": {"cached_tokens": 96, "cache_write_tokens": 0},  # both required by the spec
    "output_tokens": 8,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 128,
}


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if delta is not None or finish else []
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "qwen", "choices": choices, **extra}


def call_delta(index: int, arguments: str, call_id: str | None = None, name: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        call.update(id=call_id, type="function")
        call["function"]["name"] = name
    return {"tool_calls": [call]}


def run(*chunks: dict[str, Any]) -> list[dict[str, Any]]:
    translator = ChatStreamTranslator(FRAME)
    events = translator.start()
    for c in chunks:
        events += translator.feed(c)
    return events + translator.finish()


def shape(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Each event as (type, output_index, the delta or final text/arguments) for event-by-event comparison."""
    out = []
    for e in events:
        detail = e.get("delta", e.get("text", e.get("arguments")))
        out.append((e["type"], e.get("output_index"), detail) if detail is not None or "output_index" in e else (e["type"],))
    return out


def test_a_text_stream_becomes_one_message_item_event_by_event() -> None:
    events = run(chunk({"role": "assistant", "content": ""}), chunk({"content": "Hello"}), chunk({"content": " there"}), chunk(finish="stop"), chunk(usage=USAGE))
    assert shape(events) == [
        ("response.created",),
        ("response.in_progress",),
        ("response.output_item.added", 0, None),
        ("response.content_part.added", 0, None),
        ("response.output_text.delta", 0, "Hello"),
        ("response.output_text.delta", 0, " there"),
        ("response.output_text.done", 0, "Hello there"),
        ("response.content_part.done", 0, None),
        ("response.output_item.done", 0, None),
        ("response.completed",),
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    created, completed = events[0]["response"], events[-1]["response"]
    assert created["id"] == completed["id"] == "resp_abc" and created["status"] == "in_progress" and created["output"] == []
    message = {"id": "msg_abc_0", "type": "message", "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": "Hello there", "annotations": [], "logprobs": []}]}
    assert events[8]["item"] == message and completed["output"] == [message]
    assert events[2]["item"] == {**message, "status": "in_progress", "content": []}
    assert completed["status"] == "completed" and completed["usage"] == RESPONSES_USAGE and completed["model"] == "qwen"
    assert completed["tools"] == [EXEC_COMMAND] and completed["store"] is False


def test_a_tool_call_stream_keeps_every_argument_fragment() -> None:
    events = run(
        chunk({"role": "assistant", "content": None, "tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "exec_command", "arguments": ""}}]}),
        chunk(call_delta(0, '{"cmd"')),
        chunk(call_delta(0, ':"ls"}')),
        chunk(finish="tool_calls"),
    )
    assert shape(events) == [
        ("response.created",),
        ("response.in_progress",),
        ("response.output_item.added", 0, None),
        ("response.function_call_arguments.delta", 0, '{"cmd"'),
        ("response.function_call_arguments.delta", 0, ':"ls"}'),
        ("response.function_call_arguments.done", 0, '{"cmd":"ls"}'),
        ("response.output_item.done", 0, None),
        ("response.completed",),
    ]
    call = {"id": "fc_abc_0", "type": "function_call", "status": "completed", "call_id": "call_1", "name": "exec_command", "arguments": '{"cmd":"ls"}'}
    assert events[6]["item"] == call and events[-1]["response"]["output"] == [call]
    assert events[2]["item"] == {**call, "status": "in_progress", "arguments": ""}
    assert events[5]["name"] == "exec_command" and events[5]["item_id"] == "fc_abc_0"
    assert events[-1]["response"]["usage"] is None  # the upstream reported none


def test_interleaved_parallel_calls_stay_apart_each_in_its_own_item() -> None:
    events = run(
        chunk(call_delta(0, "", "call_a", "exec_command")),
        chunk(call_delta(1, "", "call_b", "exec_command")),
        chunk(call_delta(0, '{"cmd":"ls"}')),
        chunk(call_delta(1, '{"cmd":"pwd"}')),
        chunk(finish="tool_calls"),
    )
    deltas = [(e["output_index"], e["delta"]) for e in events if e["type"] == "response.function_call_arguments.delta"]
    assert deltas == [(0, '{"cmd":"ls"}'), (1, '{"cmd":"pwd"}')]
    output = events[-1]["response"]["output"]
    assert [(o["call_id"], o["arguments"]) for o in output] == [("call_a", '{"cmd":"ls"}'), ("call_b", '{"cmd":"pwd"}')]


def test_text_before_a_call_is_closed_before_the_call_opens() -> None:
    events = run(chunk({"content": "Let me look."}), chunk(call_delta(0, "{}", "call_1", "exec_command")), chunk(finish="tool_calls"))
    types = [e["type"] for e in events]
    assert types.index("response.output_item.done") < types.index("response.function_call_arguments.delta")
    assert [o["type"] for o in events[-1]["response"]["output"]] == ["message", "function_call"]
    assert [e["output_index"] for e in events if e["type"] == "response.output_item.added"] == [0, 1]


def test_a_call_without_an_id_gets_one() -> None:
    events = run(chunk({"tool_calls": [{"index": 0, "function": {"name": "exec_command", "arguments": "{}"}}]}))
    assert events[-1]["response"]["output"][0]["call_id"] == "call_abc_0"


@pytest.mark.parametrize(("finish", "reason"), [("length", "max_output_tokens"), ("content_filter", "content_filter")])
def test_a_cut_answer_ends_incomplete_with_its_reason(finish: str, reason: str) -> None:
    events = run(chunk({"content": "partial"}), chunk(finish=finish))
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["status"] == "incomplete" and events[-1]["response"]["incomplete_details"] == {"reason": reason}


def test_an_error_chunk_ends_the_stream_as_failed_keeping_what_was_done() -> None:
    translator = ChatStreamTranslator(FRAME)
    events = translator.start() + translator.feed(chunk({"content": "half"}))
    events += translator.feed({"error": {"message": "model overloaded", "type": "server_error"}})
    assert events[-1]["type"] == "response.failed"
    failed = events[-1]["response"]
    assert failed["status"] == "failed" and failed["error"] == {"code": "upstream_error", "message": "model overloaded"}
    assert translator.feed(chunk({"content": "more"})) == [] and translator.finish() == []  # nothing after the end


def test_a_broken_stream_fails_once() -> None:
    translator = ChatStreamTranslator(FRAME)
    translator.start()
    failed = translator.fail("connection to the provider broke", "upstream_stream_interrupted")
    assert [e["type"] for e in failed] == ["response.failed"] and failed[0]["sequence_number"] == 2
    assert translator.fail("again", "x") == []


def test_events_are_sent_as_named_sse_events() -> None:
    event = {"type": "response.output_text.delta", "delta": "hi", "sequence_number": 4}
    assert sse_event(event) == b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"hi","sequence_number":4}\n\n'


def test_chat_chunks_reads_whole_events_and_skips_done_and_noise() -> None:
    ready = b'data: {"a":1}\n\n: keep-alive\n\ndata: not json\n\ndata: {"b":2}\r\n\r\ndata: [DONE]\n\n'
    assert chat_chunks(ready) == [{"a": 1}, {"b": 2}]


def completion(message: dict[str, Any], finish: str = "stop", usage: dict[str, Any] | None = USAGE) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "qwen", "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}


def test_a_text_completion_becomes_a_response_with_one_message() -> None:
    response = completion_to_response(completion({"role": "assistant", "content": "Hello"}), FRAME)
    assert response is not None
    assert response["object"] == "response" and response["status"] == "completed" and response["id"] == "resp_abc"
    assert response["output"] == [{"id": "msg_abc_0", "type": "message", "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": "Hello", "annotations": [], "logprobs": []}]}]
    assert response["usage"] == RESPONSES_USAGE and response["created_at"] == 1700000000


def test_an_anthropic_providers_cache_reads_and_writes_reach_the_responses_usage() -> None:
    """Responses → Anthropic: Anthropic's cache figures, through chat's usage, as the spec's two input details."""
    anthropic = {"input_tokens": 10, "cache_read_input_tokens": 300, "cache_creation_input_tokens": 50, "output_tokens": 8}
    usage = responses_usage(chat_usage(anthropic))
    assert usage is not None and usage["input_tokens"] == 360
    assert usage["input_tokens_details"] == {"cached_tokens": 300, "cache_write_tokens": 50}


def test_a_tool_call_completion_becomes_function_call_items() -> None:
    calls = [
        {"id": "call_1", "type": "function", "function": {"name": "exec_command", "arguments": '{"cmd":"ls"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "exec_command", "arguments": '{"cmd":"pwd"}'}},
    ]
    response = completion_to_response(completion({"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls", None), FRAME)
    assert response is not None and response["usage"] is None
    assert [(o["type"], o["call_id"], o["name"], o["arguments"]) for o in response["output"]] == [
        ("function_call", "call_1", "exec_command", '{"cmd":"ls"}'),
        ("function_call", "call_2", "exec_command", '{"cmd":"pwd"}'),
    ]


def test_a_refusal_is_a_refusal_part() -> None:
    response = completion_to_response(completion({"role": "assistant", "content": None, "refusal": "I can't."}), FRAME)
    assert response is not None and response["output"][0]["content"] == [{"type": "refusal", "refusal": "I can't."}]


def test_a_completion_cut_by_the_limit_is_incomplete() -> None:
    response = completion_to_response(completion({"role": "assistant", "content": "par"}, "length"), FRAME)
    assert response is not None and response["status"] == "incomplete" and response["incomplete_details"] == {"reason": "max_output_tokens"}


@pytest.mark.parametrize("body", [[], {"choices": []}, {"choices": [{"message": "x"}]}, {"error": {"message": "no"}}])
def test_what_is_not_a_completion_is_none(body: Any) -> None:
    assert completion_to_response(body, FRAME) is None


def test_the_translated_answer_is_json_serialisable() -> None:
    events = run(chunk({"content": "x"}), chunk(finish="stop"))
    assert all(orjson.loads(sse_event(e).split(b"data: ", 1)[1]) == e for e in events)


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_a_chat_servers_thinking_becomes_a_reasoning_item_before_the_answer(key: str) -> None:
    events = run(chunk({key: "Let me"}), chunk({key: " look."}), chunk({"content": "Hi"}), chunk(finish="stop"))
    assert shape(events)[:9] == [
        ("response.created",),
        ("response.in_progress",),
        ("response.output_item.added", 0, None),
        ("response.reasoning_summary_part.added", 0, None),
        ("response.reasoning_summary_text.delta", 0, "Let me"),
        ("response.reasoning_summary_text.delta", 0, " look."),
        ("response.reasoning_summary_text.done", 0, "Let me look."),
        ("response.reasoning_summary_part.done", 0, None),
        ("response.output_item.done", 0, None),
    ]
    reasoning = {"id": "rs_pinch_abc_0", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Let me look."}]}
    assert [o["type"] for o in events[-1]["response"]["output"]] == ["reasoning", "message"]
    assert events[-1]["response"]["output"][0] == reasoning and events[8]["item"] == reasoning
    assert events[9]["output_index"] == 1  # the message opens after the reasoning closed


def test_a_completions_thinking_is_the_first_output_item() -> None:
    response = completion_to_response(completion({"role": "assistant", "content": "Hi", "reasoning_content": "Hmm."}), FRAME)
    assert response is not None and [o["type"] for o in response["output"]] == ["reasoning", "message"]
    assert response["output"][0]["summary"] == [{"type": "summary_text", "text": "Hmm."}]


def test_the_answer_to_a_compaction_trigger_is_one_compaction_item_holding_the_text() -> None:
    request = responses_body(input_message("user", "list the files"), {"type": "compaction_trigger"}, tools=[EXEC_COMMAND], stream=True)
    frame = ResponseFrame("resp_abc", 1700000000, request, compaction=True)
    translator = ChatStreamTranslator(frame)
    events = translator.start()
    for delta in ({"content": "The user asked "}, {"content": "for the files."}, {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "exec_command", "arguments": "{}"}}]}):
        events += translator.feed(chunk(delta))
    events += translator.feed(chunk(finish="stop")) + translator.finish()
    assert [e["type"] for e in events] == ["response.created", "response.in_progress", "response.output_item.added", "response.output_item.done", "response.completed"]
    (item,) = events[-1]["response"]["output"]
    assert item["type"] == "compaction" and decode_summary(item["encrypted_content"]) == "The user asked for the files."
    whole = completion_to_response({"choices": [{"message": {"role": "assistant", "content": "All done."}, "finish_reason": "stop"}]}, frame)
    assert [(i["type"], decode_summary(i["encrypted_content"])) for i in whole["output"]] == [("compaction", "All done.")]
