"""Whatever a provider answers, the client gets a well-formed answer in its own format (issue #27, item 4).

The matrix: five hostile answers (a malformed completion, empty choices, a truncated answer, unknown
events or fields, tool arguments that are not JSON) × every (client wire, provider wire) pair the
proxy serves × stream and non-stream. Each answer is written at the byte level by
:class:`~tests.support.misbehaving_upstream.MisbehavingUpstream` on loopback, and the proxy runs on
a real loopback server.

"Well-formed in the client's own format":

* a 200 is an answer of the client's API (chat ``chat.completion``, Anthropic ``message``,
  Responses ``response``), with what its SDK reads of the right types;
* anything else is an error object of the client's API (OpenAI's ``{"error": …}``, Anthropic's
  ``{"type": "error", …}``) with a 4xx/5xx status — never a 500 of the proxy's own, an empty reply
  or the provider's body in another format;
* a stream is SSE whose every event is JSON of the client's format and which ends as the format
  ends (``[DONE]``; ``message_stop`` or an ``error`` event; ``response.completed`` /
  ``.incomplete`` / ``.failed`` or ``error``). A translated stream's events are checked for
  the client format's shape one by one; a passed-through stream is relayed event by event as the
  provider wrote it (the proxy's guarantee there is the framing and the end, checked here too).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from tests.support.config import make_config, model_entry
from tests.support.misbehaving_upstream import MisbehavingUpstream, Writer, http_answer

CHAT, ANTHROPIC, OLLAMA, RESPONSES, GEMINI = "openai-chat", "anthropic-messages", "ollama-chat", "openai-responses", "gemini"
CLIENT_CHAT, CLIENT_MESSAGES, CLIENT_RESPONSES, CLIENT_GEMINI = "chat", "messages", "responses", "gemini"
PAIRS = [
    (CLIENT_CHAT, CHAT), (CLIENT_CHAT, ANTHROPIC), (CLIENT_CHAT, OLLAMA), (CLIENT_CHAT, GEMINI),
    (CLIENT_MESSAGES, CHAT), (CLIENT_MESSAGES, ANTHROPIC), (CLIENT_MESSAGES, OLLAMA), (CLIENT_MESSAGES, GEMINI),
    (CLIENT_RESPONSES, CHAT), (CLIENT_RESPONSES, ANTHROPIC), (CLIENT_RESPONSES, OLLAMA), (CLIENT_RESPONSES, RESPONSES), (CLIENT_RESPONSES, GEMINI),
    (CLIENT_GEMINI, CHAT), (CLIENT_GEMINI, ANTHROPIC), (CLIENT_GEMINI, OLLAMA), (CLIENT_GEMINI, GEMINI),
]  # fmt: skip
PASSED_THROUGH = {(CLIENT_CHAT, CHAT), (CLIENT_MESSAGES, ANTHROPIC), (CLIENT_RESPONSES, RESPONSES), (CLIENT_GEMINI, GEMINI)}
CASES = ["malformed", "empty", "truncated", "unknown", "bad_tool_args", "wrong_types", "usage_strings"]

# ---------------------------------------------------------------------------------------------
# What the providers send


def sse(*events: tuple[str | None, Any]) -> bytes:
    out = b""
    for name, data in events:
        payload = data if isinstance(data, bytes) else orjson.dumps(data)
        out += (f"event: {name}\n".encode() if name else b"") + b"data: " + payload + b"\n\n"
    return out


def ndjson(*lines: Any) -> bytes:
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


def whole(body: Any, content_type: str = "application/json") -> bytes:
    return http_answer(body=body if isinstance(body, bytes) else orjson.dumps(body), headers={"Content-Type": content_type})


def cut_short(body: bytes, content_type: str) -> Writer:
    """A head promising a body (or a stream) and part of it, then the connection closes."""

    async def write(writer: asyncio.StreamWriter) -> None:
        length = f"Content-Length: {len(body) + 500}\r\n" if content_type == "application/json" else ""
        writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n{length}Connection: close\r\n\r\n".encode() + body)
        await writer.drain()

    return write


CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{not json"}}


def chat_answer(case: str, stream: bool) -> bytes | Writer:
    chunk = lambda delta, finish=None: {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "up", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # noqa: E731
    good = [(None, chunk({"role": "assistant", "content": "hi"})), (None, chunk({}, "stop")), (None, b"[DONE]")]
    completion = lambda message, **extra: {"id": "c", "object": "chat.completion", "created": 1, "model": "up", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}], **extra}  # noqa: E731
    if not stream:
        return {
            "malformed": lambda: whole(completion("oops")),
            "empty": lambda: whole({"id": "c", "object": "chat.completion", "choices": []}),
            "truncated": lambda: cut_short(orjson.dumps(completion({"role": "assistant", "content": "hi"}))[:40], "application/json"),
            "unknown": lambda: whole(completion({"role": "assistant", "content": "hi", "x_vendor": {"a": 1}}, x_unknown=[1, 2])),
            "bad_tool_args": lambda: whole(completion({"role": "assistant", "content": None, "tool_calls": [CALL]})),
            "wrong_types": lambda: whole(completion({"role": "assistant", "content": 5})),
            "usage_strings": lambda: whole(completion({"role": "assistant", "content": "hi"}, usage={"prompt_tokens": "3", "completion_tokens": "1", "total_tokens": "4"})),
        }[case]()
    event_stream = "text/event-stream"
    return {
        "malformed": lambda: whole(sse((None, chunk("oops")), (None, {"choices": "nope"}), (None, b"[DONE]")), event_stream),
        "empty": lambda: whole(sse((None, {"id": "c", "object": "chat.completion.chunk", "choices": []}), (None, b"[DONE]")), event_stream),
        "truncated": lambda: cut_short(sse(good[0]), event_stream),
        "unknown": lambda: whole(sse(("vendor.thing", {"type": "vendor.thing"}), good[0], (None, {"id": "c", "x": 1, "choices": []}), *good[1:]), event_stream),
        "bad_tool_args": lambda: whole(
            sse(
                (None, chunk({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{not"}}]})),
                (None, chunk({"tool_calls": [{"index": 0, "function": {"arguments": " json"}}]})),
                (None, chunk({}, "tool_calls")),
                (None, b"[DONE]"),
            ),
            event_stream,
        ),
        "wrong_types": lambda: whole(sse((None, chunk({"role": "assistant", "content": 5})), *good[1:]), event_stream),
        "usage_strings": lambda: whole(sse(*good[:2], (None, {"id": "c", "object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": "3", "completion_tokens": "1"}}), good[2]), event_stream),
    }[case]()


def anthropic_answer(case: str, stream: bool) -> bytes | Writer:
    message = lambda content, **extra: {"id": "msg_up", "type": "message", "role": "assistant", "model": "up", "content": content, "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 1}, **extra}  # noqa: E731
    start = ("message_start", {"type": "message_start", "message": message([], usage={"input_tokens": 3, "output_tokens": 0})})
    text = [
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ]
    end = [
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    if not stream:
        return {
            "malformed": lambda: whole(message(42)),
            "empty": lambda: whole(message([])),
            "truncated": lambda: cut_short(orjson.dumps(message([{"type": "text", "text": "hi"}]))[:40], "application/json"),
            "unknown": lambda: whole(message([{"type": "mystery_block", "x": 1}, {"type": "text", "text": "hi"}], x_unknown=True)),
            "bad_tool_args": lambda: whole(message([{"type": "tool_use", "id": "toolu_1", "name": "f", "input": "{not json"}], stop_reason="tool_use")),
            "wrong_types": lambda: whole(message([{"type": "text", "text": 5}])),
            "usage_strings": lambda: whole(message([{"type": "text", "text": "hi"}], usage={"input_tokens": "3", "output_tokens": "1"})),
        }[case]()
    event_stream = "text/event-stream"
    return {
        "malformed": lambda: whole(
            sse(("message_start", {"type": "message_start", "message": "oops"}), ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": "oops"}), ("message_delta", {"type": "message_delta", "delta": "x", "usage": [1]}), *end[1:]),
            event_stream,
        ),
        "empty": lambda: whole(sse(start, *end), event_stream),
        "truncated": lambda: cut_short(sse(start, *text[:2]), event_stream),
        "unknown": lambda: whole(sse(start, ("mystery", {"type": "mystery"}), *text, ("ping", {"type": "ping"}), *end), event_stream),
        "bad_tool_args": lambda: whole(
            sse(
                start,
                ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{not json"}}),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 1}}),
                end[1],
            ),
            event_stream,
        ),
        "wrong_types": lambda: whole(sse(("message_start", {"type": "message_start", "message": {"content": 5}}), *end[1:]), event_stream),
        "usage_strings": lambda: whole(
            sse(("message_start", {"type": "message_start", "message": message([], usage={"input_tokens": "3", "output_tokens": "0"})}), *text, *end), event_stream
        ),
    }[case]()


def ollama_answer(case: str, stream: bool) -> bytes | Writer:
    line = lambda message, done=False, **extra: {"model": "up", "created_at": "2026-01-01T00:00:00Z", "message": message, "done": done, **extra}  # noqa: E731
    last = {"model": "up", "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop", "prompt_eval_count": 3, "eval_count": 1}
    hi = {"role": "assistant", "content": "hi"}
    if not stream:
        return {
            "malformed": lambda: whole(line("oops", True)),
            "empty": lambda: whole({"model": "up", "done": True, "done_reason": "stop"}),
            "truncated": lambda: cut_short(orjson.dumps(line(hi, True))[:40], "application/json"),
            "unknown": lambda: whole(line({**hi, "x_vendor": 1}, True, x_unknown=[1])),
            "bad_tool_args": lambda: whole(line({"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{not json"}}]}, True, done_reason="stop")),
            "wrong_types": lambda: whole(line({"role": "assistant", "content": "hi", "tool_calls": 5}, True, done_reason="stop")),
            "usage_strings": lambda: whole(line(hi, True, done_reason="stop", prompt_eval_count="3", eval_count="1")),
        }[case]()
    ndjson_type = "application/x-ndjson"
    return {
        "malformed": lambda: whole(ndjson(line("oops"), {"done": "yes", "message": 7}, last), ndjson_type),
        "empty": lambda: whole(ndjson({"model": "up", "done": True}), ndjson_type),
        "truncated": lambda: cut_short(ndjson(line(hi)), ndjson_type),
        "unknown": lambda: whole(ndjson(line(hi, x=1), {"type": "mystery"}, last), ndjson_type),
        "bad_tool_args": lambda: whole(ndjson(line({"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{not json"}}]}), last), ndjson_type),
        "wrong_types": lambda: whole(ndjson(line({"role": "assistant", "content": 5}), last), ndjson_type),
        "usage_strings": lambda: whole(ndjson(line(hi), {**last, "prompt_eval_count": "3", "eval_count": "1"}), ndjson_type),
    }[case]()


def responses_answer(case: str, stream: bool) -> bytes | Writer:
    response = lambda output, status="completed", **extra: {"id": "resp_up", "object": "response", "created_at": 1, "status": status, "model": "up", "output": output, "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4}, **extra}  # noqa: E731
    item = {"id": "msg_1", "type": "message", "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": "hi", "annotations": []}]}
    created = ("response.created", {"type": "response.created", "sequence_number": 0, "response": response([], "in_progress")})
    completed = lambda output: ("response.completed", {"type": "response.completed", "sequence_number": 9, "response": response(output)})  # noqa: E731
    if not stream:
        return {
            "malformed": lambda: whole(response("oops")),
            "empty": lambda: whole(response([])),
            "truncated": lambda: cut_short(orjson.dumps(response([item]))[:40], "application/json"),
            "unknown": lambda: whole(response([item, {"type": "mystery_item"}], x_unknown=1)),
            "bad_tool_args": lambda: whole(response([{"id": "fc_1", "type": "function_call", "status": "completed", "call_id": "call_1", "name": "f", "arguments": "{not json"}])),
            "wrong_types": lambda: whole(response([{**item, "content": [{"type": "output_text", "text": 5, "annotations": []}]}])),
            "usage_strings": lambda: whole(response([item], usage={"input_tokens": "3", "output_tokens": "1", "total_tokens": "4"})),
        }[case]()
    event_stream = "text/event-stream"
    return {
        "malformed": lambda: whole(sse(created, ("response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": 1, "delta": 42}), completed([])), event_stream),
        "empty": lambda: whole(sse(created, completed([])), event_stream),
        "truncated": lambda: cut_short(sse(created), event_stream),
        "unknown": lambda: whole(sse(created, ("response.mystery", {"type": "response.mystery", "sequence_number": 1}), completed([item])), event_stream),
        "bad_tool_args": lambda: whole(sse(created, completed([{"id": "fc_1", "type": "function_call", "status": "completed", "call_id": "call_1", "name": "f", "arguments": "{not json"}])), event_stream),
        "wrong_types": lambda: whole(sse(created, completed([{**item, "content": [{"type": "output_text", "text": 5, "annotations": []}]}])), event_stream),
        "usage_strings": lambda: whole(sse(created, ("response.completed", {"type": "response.completed", "sequence_number": 9, "response": response([item], usage={"input_tokens": "3"})})), event_stream),
    }[case]()


def gemini_answer(case: str, stream: bool) -> bytes | Writer:
    usage = {"promptTokenCount": 3, "candidatesTokenCount": 1, "totalTokenCount": 4}
    chunk = lambda parts, finish=None, **extra: {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0, **({"finishReason": finish} if finish else {})}], "modelVersion": "up", **extra}  # noqa: E731
    hi = [{"text": "hi"}]
    bad_call = [{"functionCall": {"name": "f", "args": "{not json"}}]
    if not stream:
        return {
            "malformed": lambda: whole({"candidates": [{"content": "oops"}], "usageMetadata": usage}),
            "empty": lambda: whole({"candidates": [], "usageMetadata": usage}),
            "truncated": lambda: cut_short(orjson.dumps(chunk(hi, "STOP", usageMetadata=usage))[:40], "application/json"),
            "unknown": lambda: whole(chunk([{"mysteryPart": {"a": 1}}, *hi], "STOP", usageMetadata=usage, xUnknown=[1])),
            "bad_tool_args": lambda: whole(chunk(bad_call, "STOP", usageMetadata=usage)),
            "wrong_types": lambda: whole(chunk([{"text": 5}], "STOP", usageMetadata=usage)),
            "usage_strings": lambda: whole(chunk(hi, "STOP", usageMetadata={"promptTokenCount": "3", "candidatesTokenCount": "1"})),
        }[case]()
    event_stream = "text/event-stream"
    return {
        "malformed": lambda: whole(sse((None, {"candidates": "oops"}), (None, {"candidates": [{"content": {"parts": "x"}}]}), (None, chunk([], "STOP", usageMetadata=usage))), event_stream),
        "empty": lambda: whole(sse((None, {"candidates": [{"finishReason": "STOP", "index": 0}], "usageMetadata": usage})), event_stream),
        "truncated": lambda: cut_short(sse((None, chunk(hi))), event_stream),
        "unknown": lambda: whole(sse((None, {"mystery": 1}), (None, chunk([{"mysteryPart": 1}, *hi])), (None, chunk([], "STOP", usageMetadata=usage))), event_stream),
        "bad_tool_args": lambda: whole(sse((None, chunk(bad_call)), (None, chunk([], "STOP", usageMetadata=usage))), event_stream),
        "wrong_types": lambda: whole(sse((None, chunk([{"text": 5}])), (None, chunk([], "STOP", usageMetadata=usage))), event_stream),
        "usage_strings": lambda: whole(sse((None, chunk(hi)), (None, chunk([], "STOP", usageMetadata={"promptTokenCount": "3"}))), event_stream),
    }[case]()


ANSWERS: dict[str, Callable[[str, bool], bytes | Writer]] = {CHAT: chat_answer, ANTHROPIC: anthropic_answer, OLLAMA: ollama_answer, RESPONSES: responses_answer, GEMINI: gemini_answer}


def provider(wire: str, url: str) -> dict[str, Any]:
    root = url.removesuffix("/v1")
    return {
        CHAT: {"base_url": url},
        ANTHROPIC: {"base_url": root, "api": "anthropic"},
        OLLAMA: {"base_url": root, "api": "ollama", "native_chat": True},
        RESPONSES: {"base_url": url, "wire": "openai-responses"},
        GEMINI: {"base_url": root, "api": "gemini"},
    }[wire]


# ---------------------------------------------------------------------------------------------
# What the clients send, and what their format allows back

PATHS = {CLIENT_CHAT: "/v1/chat/completions", CLIENT_MESSAGES: "/v1/messages", CLIENT_RESPONSES: "/v1/responses"}
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}


def client_path(client: str, stream: bool) -> str:
    if client == CLIENT_GEMINI:  # the model and the stream are in the path
        return "/v1beta/models/auto:streamGenerateContent?alt=sse" if stream else "/v1beta/models/auto:generateContent"
    return PATHS[client]


def client_body(client: str, stream: bool) -> dict[str, Any]:
    if client == CLIENT_CHAT:
        return {"model": "auto", "stream": stream, "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": SCHEMA}}]}
    if client == CLIENT_MESSAGES:
        return {"model": "auto", "stream": stream, "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "f", "input_schema": SCHEMA}]}
    if client == CLIENT_GEMINI:
        return {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "tools": [{"functionDeclarations": [{"name": "f", "parameters": SCHEMA}]}]}
    return {"model": "auto", "stream": stream, "store": False, "input": "hi", "tools": [{"type": "function", "name": "f", "parameters": SCHEMA}]}


def check_error(client: str, status: int, raw: bytes) -> None:
    assert 400 <= status < 600 and status != 500, status
    assert b"failed inside the proxy" not in raw, raw  # the answer was judged, not a translator broken by it
    body = orjson.loads(raw)
    if client == CLIENT_MESSAGES:
        assert body["type"] == "error" and isinstance(body["error"]["type"], str) and isinstance(body["error"]["message"], str), body
    elif client == CLIENT_GEMINI:  # Google's {"error": {"code", "message", "status"}}
        assert isinstance(body["error"]["code"], int) and isinstance(body["error"]["message"], str) and isinstance(body["error"]["status"], str), body
    else:
        assert isinstance(body["error"]["message"], str) and isinstance(body["error"]["code"], str), body


def check_answer(client: str, body: Any, *, translated: bool = True) -> None:
    """A whole 200 answer as the client's SDK reads it (a passed-through one's blocks are the model's)."""
    if client == CLIENT_CHAT:
        assert body["object"] == "chat.completion" and body["choices"], body
        message = body["choices"][0]["message"]
        assert message["role"] == "assistant" and (message["content"] is None or isinstance(message["content"], str)), body
        for call in message.get("tool_calls") or []:
            assert isinstance(call["id"], str) and isinstance(call["function"]["name"], str) and isinstance(call["function"]["arguments"], str), body
    elif client == CLIENT_MESSAGES:
        assert body["type"] == "message" and body["role"] == "assistant" and isinstance(body["content"], list), body
        for block in body["content"]:
            assert isinstance(block["type"], str), body
            if block["type"] == "text":
                assert isinstance(block["text"], str), body
            if block["type"] == "tool_use" and translated:
                assert isinstance(block["id"], str) and isinstance(block["name"], str) and isinstance(block["input"], dict), body
    elif client == CLIENT_GEMINI:
        assert isinstance(body["candidates"], list) or isinstance(body["promptFeedback"], dict), body
        check_gemini_candidates(body, translated)
    else:
        assert body["object"] == "response" and isinstance(body["output"], list) and isinstance(body["status"], str), body
        for item in body["output"]:
            assert isinstance(item["type"], str), body
            if item["type"] == "function_call":
                assert isinstance(item["call_id"], str) and isinstance(item["arguments"], str), body
            if item["type"] == "message":
                assert all(isinstance(part["type"], str) for part in item["content"]), body


def check_gemini_candidates(chunk: Any, translated: bool) -> None:
    """A response or chunk's candidates as google-genai reads them (a passed-through one's parts are the model's)."""
    for candidate in chunk.get("candidates") or []:
        assert isinstance(candidate, dict), chunk
        parts = (candidate.get("content") or {}).get("parts") or []
        assert isinstance(parts, list) and all(isinstance(part, dict) for part in parts), chunk
        for part in parts if translated else []:
            if "functionCall" in part:
                assert isinstance(part["functionCall"]["name"], str) and isinstance(part["functionCall"].get("args", {}), dict), chunk
            if "text" in part:
                assert isinstance(part["text"], str), chunk


def gemini_stream_ends(data: bytes) -> bool:
    """A Gemini stream has no end marker: its last event is a chunk with a finishReason, or an error."""
    event = orjson.loads(data)
    return "error" in event or any(c.get("finishReason") for c in event.get("candidates") or [])


def events_of(raw: bytes) -> list[tuple[str | None, bytes]]:
    out = []
    for block in raw.replace(b"\r\n", b"\n").split(b"\n\n"):
        lines = [line for line in block.split(b"\n") if line and not line.startswith(b":")]
        if not lines:
            continue
        name = next((line[6:].strip().decode() for line in lines if line.startswith(b"event:")), None)
        data = b"\n".join(line[5:].lstrip() for line in lines if line.startswith(b"data:"))
        out.append((name, data))
    return out


ENDS = {
    CLIENT_CHAT: lambda name, data: data == b"[DONE]",
    CLIENT_MESSAGES: lambda name, data: orjson.loads(data)["type"] in ("message_stop", "error"),
    CLIENT_RESPONSES: lambda name, data: orjson.loads(data)["type"] in ("response.completed", "response.incomplete", "response.failed", "error"),
    CLIENT_GEMINI: lambda name, data: gemini_stream_ends(data),
}


def check_event(client: str, name: str | None, data: bytes) -> None:
    """One translated event as the client's SDK reads it."""
    event = orjson.loads(data)
    if client == CLIENT_CHAT:
        if "error" in event:
            assert isinstance(event["error"]["message"], str), event
            return
        assert isinstance(event["choices"], list), event
        for choice in event["choices"]:
            assert isinstance(choice["delta"], dict), event
            for call in choice["delta"].get("tool_calls") or []:
                assert isinstance(call["index"], int), event
    elif client == CLIENT_MESSAGES:
        assert event["type"] == name, (name, event)
        if name == "message_start":
            assert isinstance(event["message"]["id"], str) and isinstance(event["message"]["content"], list), event
        if name == "content_block_delta":
            assert isinstance(event["delta"]["type"], str) and isinstance(event["index"], int), event
        if name == "error":
            assert isinstance(event["error"]["message"], str), event
    elif client == CLIENT_GEMINI:
        if "error" in event:
            assert isinstance(event["error"]["message"], str) and isinstance(event["error"]["code"], int), event
            return
        assert isinstance(event.get("candidates", []), list), event
        check_gemini_candidates(event, True)
    else:  # the relay's own error event has no sequence number: the stream's numbers are the provider's
        assert isinstance(event["type"], str) and (event["type"] == "error" or isinstance(event["sequence_number"], int)), event
        if event["type"] in ("response.completed", "response.incomplete", "response.failed"):
            check_answer(CLIENT_RESPONSES, event["response"])


def check_stream(client: str, raw: bytes, *, translated: bool) -> None:
    events = events_of(raw)
    assert events, raw
    for name, data in events[:-1] if client == CLIENT_CHAT else events:
        if client == CLIENT_CHAT and data == b"[DONE]":
            raise AssertionError(f"[DONE] before the end: {raw[-500:]!r}")
        if translated:
            check_event(client, name, data)
        else:
            orjson.loads(data)  # relayed as the provider wrote it: JSON of its (the client's) format
    name, data = events[-1]
    assert ENDS[client](name, data), raw[-500:]


# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize(("client", "wire"), PAIRS, ids=[f"{c}->{w}" for c, w in PAIRS])
async def test_every_hostile_answer_reaches_the_client_well_formed_in_its_own_format(proxy, client, wire, case, stream):
    async with MisbehavingUpstream() as upstream:
        upstream.then(ANSWERS[wire](case, stream))
        config = make_config(
            providers={"mock": provider(wire, upstream.url)},
            models=[model_entry("main")],
            upstream={"connect_timeout_seconds": 30, "first_byte_timeout_seconds": 30, "idle_timeout_seconds": 30, "max_attempts": 1},
        )
        served = await proxy(config)
        resp = await served.post(client_path(client, stream), json=client_body(client, stream))
        raw = await resp.read()
    assert upstream.requests, "the provider was asked"
    if resp.status != 200:
        check_error(client, resp.status, raw)
    elif resp.content_type == "text/event-stream":
        assert stream, raw[:300]
        check_stream(client, raw, translated=(client, wire) not in PASSED_THROUGH)
    else:
        assert resp.content_type == "application/json" and not stream, (resp.content_type, raw[:300])
        check_answer(client, orjson.loads(raw), translated=(client, wire) not in PASSED_THROUGH)
    if case in ("unknown", "bad_tool_args"):  # what is still an answer is served as one
        assert resp.status == 200, raw[:500]
    if case in ("malformed", "truncated") and not stream:  # what is none is an error, never a 200
        assert resp.status != 200, raw[:500]
    if case in ("wrong_types", "usage_strings"):  # values of the wrong types are no answer either (issue #42):
        if not stream:  # never an empty or zeroed 200
            assert resp.status != 200, raw[:500]
        elif (client, wire) not in PASSED_THROUGH:  # a translated stream ends with the client's error event
            assert resp.status != 200 or b"error" in raw[-600:], raw[-600:]


NOT_JSON_EVENT = {  # a stream that starts well, then sends an event that is not JSON
    CHAT: lambda: whole(sse((None, {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "up", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}, "finish_reason": None}]}), (None, b"{not json")), "text/event-stream"),
    ANTHROPIC: lambda: whole(
        sse(
            ("message_start", {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 3}}}),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "hi"}}),
            ("content_block_delta", b"{not json"),
        ),
        "text/event-stream",
    ),
    GEMINI: lambda: whole(sse((None, {"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "index": 0}]}), (None, b"{not json")), "text/event-stream"),
}


@pytest.mark.parametrize("wire", list(NOT_JSON_EVENT))
async def test_a_gemini_clients_json_array_stays_one_valid_json_array_when_the_provider_sends_no_json(proxy, wire):
    """``streamGenerateContent`` without ``alt=sse`` is answered as one JSON array: an event of the provider's
    that is not JSON (relayed as it came on a passed-through SSE stream) must not break it; the array ends
    with an error element in Google's shape (issue #42)."""
    async with MisbehavingUpstream() as upstream:
        upstream.then(NOT_JSON_EVENT[wire]())
        config = make_config(
            providers={"mock": provider(wire, upstream.url)},
            models=[model_entry("main")],
            upstream={"connect_timeout_seconds": 30, "first_byte_timeout_seconds": 30, "idle_timeout_seconds": 30, "max_attempts": 1},
        )
        served = await proxy(config)
        resp = await served.post("/v1beta/models/auto:streamGenerateContent", json=client_body(CLIENT_GEMINI, True))
        raw = await resp.read()
    assert resp.status == 200 and resp.content_type == "application/json", raw[:300]
    chunks = orjson.loads(raw)  # one valid JSON array
    assert isinstance(chunks, list) and len(chunks) >= 2, raw
    check_gemini_candidates(chunks[0], True)
    error = chunks[-1]["error"]
    assert isinstance(error["code"], int) and isinstance(error["status"], str) and "not JSON" in error["message"], chunks[-1]
