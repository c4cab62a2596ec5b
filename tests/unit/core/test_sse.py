"""SSE framing for the relay: whole events, byte-for-byte, usage read and left in place."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.core.results import Usage
from router.core.retry_after import parse_retry_after
from router.core.sse import SseRelay
from router.wire.anthropic_messages.adapter import ANTHROPIC_MESSAGES_ADAPTER
from router.wire.openai_chat.adapter import OPENAI_CHAT_ADAPTER
from router.wire.openai_chat.stream import error_event
from router.wire.openai_responses.adapter import OPENAI_RESPONSES_ADAPTER
from router.wire.usage import read_usage

FORMATS = {"anthropic": ANTHROPIC_MESSAGES_ADAPTER, "responses": OPENAI_RESPONSES_ADAPTER, "chat": OPENAI_CHAT_ADAPTER}

EVENTS = [
    b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":""}}]}}]}\n\n',
    b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"g","arguments":""}}]}}]}\n\n',
    b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"x"}}]}}]}\n\n',
    b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\\"y"}}]}}]}\n\n',
    b'data: {"choices":[],"usage":{"prompt_tokens":11,"completion_tokens":3,"total_tokens":14}}\n\n',
    b"data: [DONE]\n\n",
]
STREAM = b"".join(EVENTS)


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=20))
def test_any_chunking_relays_the_same_bytes_in_whole_events(cuts):
    relay = SseRelay(OPENAI_CHAT_ADAPTER)
    points = sorted(set(cuts))
    pieces = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)])]
    out = []
    for piece in pieces:
        ready = relay.feed(piece)
        if ready:
            assert ready.endswith(b"\n\n")  # never half an event
            out.append(ready)
    assert b"".join(out) == STREAM
    assert relay.done
    assert relay.usage == Usage(11, 3, 14)
    assert relay.pending == bytearray()


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=20))
def test_dropping_the_usage_chunk_removes_exactly_that_event_in_any_chunking(cuts):
    relay = SseRelay(OPENAI_CHAT_ADAPTER, drop_usage_only=True)
    points = sorted(set(cuts))
    pieces = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)])]
    out = b"".join(relay.feed(piece) for piece in pieces)
    assert out == b"".join(e for e in EVENTS if b'"usage"' not in e)
    assert relay.usage == Usage(11, 3, 14)  # read all the same
    assert relay.done


@pytest.mark.parametrize(
    "event",
    [
        b'data: {"choices":[{"index":0,"delta":{}}],"usage":{"total_tokens":3}}\n\n',  # usage on a real chunk
        b'data: {"choices":[], "note": "usage"}\n\n',  # the word, not the field
        b"data: {not json usage\n\n",  # malformed: the client's to see
    ],
)
def test_only_a_usage_only_event_is_dropped(event):
    assert SseRelay(OPENAI_CHAT_ADAPTER, drop_usage_only=True).feed(event) == event


def test_crlf_framed_usage_chunk_is_dropped_whole():
    stream = b'data: {"choices":[]}\r\n\r\ndata: {"choices":[],"usage":{"total_tokens":3}}\r\n\r\ndata: [DONE]\r\n\r\n'
    assert SseRelay(OPENAI_CHAT_ADAPTER, drop_usage_only=True).feed(stream) == b'data: {"choices":[]}\r\n\r\ndata: [DONE]\r\n\r\n'


def test_a_partial_event_waits_for_the_rest():
    relay = SseRelay(OPENAI_CHAT_ADAPTER)
    assert relay.feed(b'data: {"a"') == b""
    assert relay.feed(b": 1}\n\n") == b'data: {"a": 1}\n\n'


def test_crlf_framing_is_understood():
    relay = SseRelay(OPENAI_CHAT_ADAPTER)
    assert relay.feed(b"data: x\r\n\r\ndata: [DONE]\r\n\r\n") == b"data: x\r\n\r\ndata: [DONE]\r\n\r\n"
    assert relay.done


def test_error_event_is_valid_json_then_done():
    event = error_event("it broke", "upstream_stream_interrupted")
    first, second = event.split(b"\n\n")[:2]
    assert orjson.loads(first.removeprefix(b"data: "))["error"]["code"] == "upstream_stream_interrupted"
    assert second == b"data: [DONE]"


def test_read_usage_tolerates_junk():
    assert read_usage(b"not json") is None
    assert read_usage(b'{"usage": "x"}') is None
    assert read_usage(b'{"usage": {"prompt_tokens": 1}}') == Usage(1, None, None)


def test_retry_after_seconds_and_dates():
    assert parse_retry_after("3", 0) == 3.0
    assert parse_retry_after("Thu, 01 Jan 1970 00:00:10 GMT", 4) == 6.0
    assert parse_retry_after("Thu, 01 Jan 1970 00:00:10 GMT", 40) == 0.0
    assert parse_retry_after("soon", 0) is None
    assert parse_retry_after(None, 0) is None
    assert parse_retry_after("nan", 0) is None



@pytest.mark.parametrize(
    ("wire", "stream", "done"),
    [
        ("anthropic", b'event: message_stop\ndata: {"type":"message_stop"}\n\n', True),
        ("anthropic", b'data: {"type":"message_stop"}\n\n', True),  # a server that sends no event: lines
        ("anthropic", b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"text":"message_stop"}}\n\n', False),
        ("chat", b'data: {"type":"message_stop"}\n\n', False),  # a chat stream ends at [DONE] only
        ("responses", b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"error"}\n\n', False),
        ("responses", b'event: response.failed\ndata: {"type":"response.failed","response":{}}\n\n', True),
        ("responses", b'event: error\ndata: {"type":"error","code":"x","message":"y"}\n\n', True),
    ],
)
def test_a_stream_ends_at_its_wire_formats_last_event_by_the_datas_type(wire, stream, done):
    relay = SseRelay(FORMATS[wire])
    assert relay.feed(stream) == stream
    assert relay.done is done


def test_the_last_event_of_a_responses_stream_is_read_for_its_usage():
    relay = SseRelay(OPENAI_RESPONSES_ADAPTER)
    usage = {"input_tokens": 12, "input_tokens_details": {"cached_tokens": 8}, "output_tokens": 3, "total_tokens": 15}
    relay.feed(b"event: response.completed\ndata: " + orjson.dumps({"type": "response.completed", "response": {"usage": usage}}) + b"\n\n")
    assert relay.done and relay.usage is not None
    assert (relay.usage.prompt_tokens, relay.usage.cached_tokens, relay.usage.completion_tokens) == (12, 8, 3)


FRAMED_EVENTS = [b'data: {"n": 1}\n\n', b'event: x\r\ndata: {"n": 2}\r\n\r\n', b": comment\n\n", b'data: {"n":\ndata: 3}\n\n', b'data: [DONE]\r\n\r\n']


@given(st.lists(st.sampled_from(FRAMED_EVENTS), max_size=12), st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_events_come_out_whole_and_in_order_however_the_stream_is_cut(events, cuts):
    """Either separator, any chunking (a separator split between chunks too): the events as sent, then nothing left."""
    from router.core.sse import SseEvents, data_payloads

    stream = b"".join(events) + b"data: unfinished"
    reader = SseEvents()
    got = []
    previous = 0
    for cut in sorted(min(c, len(stream)) for c in cuts) + [len(stream)]:
        got += reader.feed(stream[previous:cut])
        previous = cut
    assert [raw for raw, _ in got] == events
    assert [data for _, data in got] == [(data_payloads(e) or [b""])[0] for e in events]
    assert reader.rest() == b"data: unfinished"
