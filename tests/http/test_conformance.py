"""Every answer the proxy gives is valid against the providers' own schemas, as a strict client checks it.

Every (client wire, provider wire) pair the proxy serves × (whole answer, stream; a Gemini client's
stream both as SSE and as Google's JSON array) × (plain text, a tool call), through the app to
``mock-upstream`` on loopback: chat completions and Responses answers against the official OpenAI
OpenAPI spec (``tests/data/openapi/``), Messages answers against the ``anthropic`` SDK's models and
its stream accumulator, Gemini answers against the ``google-genai`` SDK's types and its own stream
reader, Ollama answers (NDJSON streamed) against the ``ollama`` client's types; and the error bodies of every
wire against its error schema. Stream framing is checked too:
SSE ``event:`` names equal each event's ``type``, Responses ``sequence_number``s count 0, 1, … and
the events come in the order the APIs send them.

A violation fails the test unless it is on :data:`SPEC_ARTIFACTS`, the short list of places where
the schema, not the answer, is what is wrong (each entry says why). See docs/conformance.md.
"""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_args

import orjson
import pytest
from multidict import CIMultiDict

from router.config import ProviderSettings
from router.providers import provider_adapter
from router.translate.registry import TRANSLATORS
from router.wire import adapters
from router.wire.anthropic_messages.view import ANTHROPIC_MESSAGES
from router.wire.gemini.parts import GEMINI
from router.wire.openai_chat.view import OPENAI_CHAT
from router.wire.openai_responses.view import OPENAI_RESPONSES
from router.wire.ollama.answers import NDJSON, OLLAMA_CHAT
from router.wire.ollama.view import OLLAMA
from tests.support.config import make_config, model_entry
from tests.support.conformance import (
    Violation,
    accumulated_message,
    anthropic_violations,
    chat_history_violations,
    gemini_violations,
    google_error_violations,
    ollama_error_violations,
    ollama_violations,
    openai_violations,
    responses_event_violations,
    sdk_response,
    sdk_stream_chunks,
)


@dataclass(frozen=True)
class Artifact:
    """A place where the schema, not the answer, is wrong, for the reason ``why``: a violation whose schema,
    path and rule match the regexes ``schema``, ``at`` and ``rule``, with ``found`` (JSON) there, is excused;
    with ``nullable``, only where the spec marks the field ``nullable: true``."""

    why: str
    schema: str
    at: str
    rule: str
    found: str
    nullable: bool = False

    def excuses(self, violation: Violation) -> bool:
        return (
            all(re.fullmatch(pattern, value) for pattern, value in ((self.schema, violation.schema), (self.at, violation.at), (self.rule, violation.rule)))
            and violation.found == self.found
            and (violation.nullable or not self.nullable)
        )


SPEC_ARTIFACTS = [
    Artifact(
        "`nullable: true` is OpenAPI 3.0's keyword, the spec is 3.1, whose validators no longer read it: a null "
        "the spec means to allow (a chunk's `finish_reason` before the last) reads as a wrong type",
        schema=".*", at=".*", rule="type|enum", found="null", nullable=True,
    ),
    Artifact(
        "`usage: null` in `response.created`/`response.in_progress`, before there is any: what OpenAI's API sends "
        "(the spec's own examples of both events), though its `usage` allows no null (docs/conformance.md)",
        schema="ResponseCreatedEvent|ResponseInProgressEvent", at="/response/usage", rule="type", found="null",
    ),
    Artifact(
        "413 `request_too_large` is an error type Anthropic documents (its edge sends it before the API), which "
        "the SDK's `ErrorObject` union lacks",
        schema="ErrorResponse", at="/error/type", rule="union_tag_invalid", found='"request_too_large"',
    ),
]


# --- the providers the mock stands in for, by the wire they speak -------------------------------

PROVIDERS: dict[str, Callable[[str], dict[str, Any]]] = {
    OPENAI_CHAT: lambda url: {"base_url": url},
    ANTHROPIC_MESSAGES: lambda url: {"base_url": url.removesuffix("/v1"), "api": "anthropic"},
    OLLAMA_CHAT: lambda url: {"base_url": url.removesuffix("/v1"), "api": "ollama", "native_chat": True},
    OPENAI_RESPONSES: lambda url: {"base_url": url, "wire": "openai-responses"},
    GEMINI: lambda url: {"base_url": url.removesuffix("/v1"), "api": "gemini"},
}

# --- the clients: path and request body (text, or with a tool the mock then calls) --------------

CHAT_TOOL = {"type": "function", "function": {"name": "shell", "description": "Run a command", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
RESPONSES_TOOL = {"type": "function", "name": "shell", "description": "Run a command", "parameters": CHAT_TOOL["function"]["parameters"], "strict": False}
MESSAGES_TOOL = {"name": "Bash", "description": "Run a command", "input_schema": CHAT_TOOL["function"]["parameters"]}
GEMINI_TOOL = {"functionDeclarations": [{"name": "shell", "description": "Run a command", "parametersJsonSchema": CHAT_TOOL["function"]["parameters"]}]}


def chat_request(stream: bool, tools: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "auto", "messages": [{"role": "user", "content": "list the files"}]}
    if tools:
        body["tools"] = [CHAT_TOOL]
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    return body


def responses_request(stream: bool, tools: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "auto", "input": "list the files", "store": False, "stream": stream}
    return body | {"tools": [RESPONSES_TOOL]} if tools else body


def messages_request(stream: bool, tools: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "auto", "max_tokens": 1024, "messages": [{"role": "user", "content": "list the files"}], "stream": stream}
    return body | {"tools": [MESSAGES_TOOL]} if tools else body


def ollama_request(stream: bool, tools: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "auto", "messages": [{"role": "user", "content": "list the files"}], "stream": stream}  # Ollama streams unless told not to
    return body | {"tools": [CHAT_TOOL]} if tools else body


def gemini_request(stream: bool, tools: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": "list the files"}]}]}
    return body | {"tools": [GEMINI_TOOL]} if tools else body


# The modes an answer comes in: whole, streamed; a Gemini client's stream also as Google's JSON array
# (``:streamGenerateContent`` without ``?alt=sse``), which the proxy writes itself.
WHOLE, STREAM, JSON_ARRAY = "whole", "stream", "stream as JSON array"


def gemini_path(mode: str, model: str = "auto") -> str:
    action = {WHOLE: "generateContent", STREAM: "streamGenerateContent?alt=sse", JSON_ARRAY: "streamGenerateContent"}[mode]
    return f"/v1beta/models/{model}:{action}"


CLIENTS: dict[str, tuple[Callable[[str], str], Callable[[bool, bool], dict[str, Any]]]] = {
    OPENAI_CHAT: (lambda mode: "/v1/chat/completions", chat_request),
    OPENAI_RESPONSES: (lambda mode: "/v1/responses", responses_request),
    ANTHROPIC_MESSAGES: (lambda mode: "/v1/messages", messages_request),
    GEMINI: (gemini_path, gemini_request),
    OLLAMA: (lambda mode: "/api/chat", ollama_request),
}
# A stream's content type when it is not server-sent events: Ollama's NDJSON (Gemini's JSON array is a mode of its own).
STREAM_TYPES = {OLLAMA: NDJSON}


def modes(client_wire: str) -> list[str]:
    return [WHOLE, STREAM, JSON_ARRAY] if client_wire == GEMINI else [WHOLE, STREAM]

PAIRS = [
    (OPENAI_CHAT, OPENAI_CHAT),
    (OPENAI_CHAT, ANTHROPIC_MESSAGES),
    (OPENAI_CHAT, OLLAMA_CHAT),
    (OPENAI_RESPONSES, OPENAI_CHAT),
    (OPENAI_RESPONSES, ANTHROPIC_MESSAGES),
    (OPENAI_RESPONSES, OLLAMA_CHAT),
    (OPENAI_RESPONSES, OPENAI_RESPONSES),
    (ANTHROPIC_MESSAGES, OPENAI_CHAT),
    (ANTHROPIC_MESSAGES, ANTHROPIC_MESSAGES),
    (ANTHROPIC_MESSAGES, OLLAMA_CHAT),
    (OPENAI_CHAT, GEMINI),
    (OPENAI_RESPONSES, GEMINI),
    (ANTHROPIC_MESSAGES, GEMINI),
    (GEMINI, GEMINI),
    (GEMINI, OPENAI_CHAT),
    (GEMINI, ANTHROPIC_MESSAGES),
    (GEMINI, OLLAMA_CHAT),
    (OLLAMA, OPENAI_CHAT),
    (OLLAMA, ANTHROPIC_MESSAGES),
    (OLLAMA, OLLAMA_CHAT),
    (OLLAMA, GEMINI),
]


def provider_wires() -> set[str]:
    """Every wire a configurable provider speaks: each valid combination of ``api``, ``wire`` and ``native_chat``."""
    fields = ProviderSettings.model_fields
    wires = set()
    for api, wire, native in itertools.product(get_args(fields["api"].annotation), get_args(fields["wire"].annotation), (False, True)):
        try:
            settings = ProviderSettings(base_url="http://127.0.0.1:9", api=api, wire=wire, native_chat=native)
        except ValueError:
            continue
        wires.add(provider_adapter(settings).chat_wire(settings))
    return wires


def test_every_pair_the_proxy_serves_is_checked():
    """A new wire or pair is added here by the change that adds it: the same format is a pass-through, a
    registered translation a translated pair."""
    served = {(client, provider) for client in adapters() for provider in provider_wires() if client == provider or (client, provider) in TRANSLATORS}
    assert set(PAIRS) == served
    assert set(CLIENTS) == set(adapters()) and set(PROVIDERS) == provider_wires()


def test_the_checks_find_what_a_strict_client_refuses_and_excuse_only_the_artifacts():
    from anthropic.types import Message

    whole = {"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None, "message": {"role": "assistant", "content": "hi"}}]}
    assert [(v.at, v.rule) for v in openai_violations("CreateChatCompletionResponse", whole)] == [("/choices/0/message", "required")]  # no refusal
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": None}]}
    assert not_excused(openai_violations("CreateChatCompletionStreamResponse", chunk)) == []  # null where the spec says nullable
    chunk["choices"][0]["finish_reason"] = "done"
    assert not_excused(openai_violations("CreateChatCompletionStreamResponse", chunk)) != []
    assert [v.at for v in responses_event_violations({"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "content_index": 0, "delta": "x", "logprobs": []})] == ["/"]  # no sequence_number
    assert [v.rule for v in responses_event_violations({"type": "response.invented", "sequence_number": 0})] == ["enum"]
    message = {"id": "m", "type": "message", "role": "assistant", "model": "m", "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": "2"}}
    assert [(v.at, v.rule) for v in anthropic_violations(Message, orjson.dumps(message))] == [("/usage/output_tokens", "int_type")]  # strict: no "2" for 2



def test_the_gemini_checks_find_what_a_strict_client_refuses():
    from google.genai.types import GenerateContentResponse

    def found(answer: dict[str, Any]) -> list[tuple[str, str]]:
        return [(v.at, v.rule) for v in gemini_violations(GenerateContentResponse, orjson.dumps(answer))]

    def answer(**candidate: Any) -> dict[str, Any]:
        return {"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "index": 0, **candidate}], "usageMetadata": {"promptTokenCount": 1}}

    assert found(answer(finishReason="STOP")) == []
    assert found(answer(finish_reason="STOP")) == [("/candidates/0/finish_reason", "extra_forbidden")]  # the wire's camelCase only
    assert found(answer(finishReason="DONE")) == [("/", "enum")]  # the SDK's enums take any string, with a warning
    assert found(answer(finishReason="STOP", tokenCount="3")) == [("/candidates/0/tokenCount", "int_type")]  # strict
    assert found(answer(finishReason="STOP", bogus=1)) == [("/candidates/0/bogus", "extra_forbidden")]
    assert found(answer() | {"sdkHttpResponse": {"headers": {}}}) == [("/sdkHttpResponse", "sdk_side")]
    assert found(answer(finishMessage="done")) == [("/candidates/0/finish_message", "dropped_by_sdk")]  # in the type, not read from the Gemini API
    empty = answer(finishReason="STOP")
    empty["candidates"][0]["content"]["parts"] = []
    assert [v.rule for v in chat_history_violations([sdk_response(empty)])] == ["invalid_turn"]
    assert [v.rule for v in chat_history_violations([sdk_response(answer())])] == ["no_finish_reason"]
    error = {"error": {"code": 404, "message": "no such model", "status": "NOT_FOUND", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "MODEL_NOT_FOUND", "domain": "pinch-router"}]}}
    assert google_error_violations(error, 404) == []
    assert [(v.at, v.rule) for v in google_error_violations(error, 400)] == [("/error/code", "http_status")]
    error["error"] |= {"status": "INVALID_ARGUMENT"}
    error["error"]["details"][0]["reason"] = "model_not_found"
    assert sorted((v.at, v.rule) for v in google_error_violations(error)) == [("/error/details/0/reason", "pattern"), ("/error/status", "const")]


# --- running one request through the proxy ------------------------------------------------------


@dataclass
class Checked:
    """One answer checked: how many bodies or events were validated, and every violation found."""

    validated: int
    violations: list[Violation]


async def serve(proxy, mock_url: str, client_wire: str, provider_wire: str, mode: str, tools: bool):
    model = model_entry("main", provider="up", supports={"tools": True, "vision": False, "json_mode": True})
    client = await proxy(make_config(mock_url, providers={"up": PROVIDERS[provider_wire](mock_url)}, models=[model]))
    path, request = CLIENTS[client_wire]
    return await client.post(path(mode), json=request(mode != WHOLE, tools))


def sse_blocks(raw: bytes) -> list[tuple[str | None, bytes]]:
    """A stream as (``event:`` name or None, ``data:`` payload) pairs; comments (keep-alives) left out.
    Lines may end in CRLF, as Google's do (SSE allows CRLF, LF and CR)."""
    out = []
    for block in raw.replace(b"\r\n", b"\n").split(b"\n\n"):
        name, data = None, []
        for line in block.split(b"\n"):
            if line.startswith(b"event:"):
                name = line[6:].strip().decode()
            elif line.startswith(b"data:"):
                data.append(line[5:].strip())
        if data:
            out.append((name, b"\n".join(data)))
    return out


def check_chat(raw: bytes, stream: bool, tools: bool) -> Checked:
    if not stream:
        body = orjson.loads(raw)
        problems = openai_violations("CreateChatCompletionResponse", body)
        problems += _expect(body["choices"][0]["finish_reason"] == ("tool_calls" if tools else "stop"), "finish_reason", body["choices"][0]["finish_reason"])
        return Checked(1, problems)
    blocks = sse_blocks(raw)
    problems = _expect(blocks[-1] == (None, b"[DONE]"), "the stream's end", blocks[-1])
    chunks = [orjson.loads(data) for _, data in blocks[:-1]]
    problems += [v for chunk in chunks for v in openai_violations("CreateChatCompletionStreamResponse", chunk)]
    problems += _expect(all(name is None for name, _ in blocks), "SSE event names", [n for n, _ in blocks])
    problems += _expect(chunks[-1]["choices"] == [] and chunks[-1].get("usage") is not None, "the usage chunk last", chunks[-1])
    return Checked(len(chunks), problems)


RESPONSES_ORDER = re.compile(
    r"response\.created response\.in_progress"
    r"( response\.output_item\.added"
    r"( response\.content_part\.added( response\.output_text\.delta)+ response\.output_text\.done response\.content_part\.done"
    r"|( response\.function_call_arguments\.delta)* response\.function_call_arguments\.done)"
    r" response\.output_item\.done)+"
    r" response\.completed"
)


def check_responses(raw: bytes, stream: bool, tools: bool) -> Checked:
    if not stream:
        body = orjson.loads(raw)
        problems = openai_violations("Response", body) + _expect_output(body, tools)
        return Checked(1, problems)
    blocks = sse_blocks(raw)
    events = [orjson.loads(data) for _, data in blocks]
    problems = [v for event in events for v in responses_event_violations(event)]
    problems += _expect([name for name, _ in blocks] == [e["type"] for e in events], "SSE event names", [n for n, _ in blocks])
    problems += _expect([e["sequence_number"] for e in events] == list(range(len(events))), "sequence numbers", [e.get("sequence_number") for e in events])
    order = " ".join(e["type"] for e in events)
    problems += _expect(RESPONSES_ORDER.fullmatch(order) is not None, "event order", order)
    problems += _expect_output(events[-1]["response"], tools)
    return Checked(len(events), problems)


def _expect_output(response: dict[str, Any], tools: bool) -> list[Violation]:
    kinds = [item["type"] for item in response.get("output", [])]
    return _expect(kinds == (["function_call"] if tools else ["message"]), "output items", kinds)


MESSAGES_ORDER = re.compile(
    r"message_start( ping)?"
    r"( content_block_start( ping| content_block_delta)* content_block_stop)+"
    r" message_delta message_stop"
)


def check_messages(raw: bytes, stream: bool, tools: bool) -> Checked:
    from anthropic.types import Message, RawMessageStreamEvent

    if not stream:
        problems = anthropic_violations(Message, raw)
        return Checked(1, problems + _expect_blocks(orjson.loads(raw), tools))
    blocks = sse_blocks(raw)
    events = [orjson.loads(data) for _, data in blocks]
    problems = _expect([name for name, _ in blocks] == [e["type"] for e in events], "SSE event names", [n for n, _ in blocks])
    order = " ".join(e["type"] for e in events)
    problems += _expect(MESSAGES_ORDER.fullmatch(order) is not None, "event order", order)
    content = [data for (_, data), event in zip(blocks, events) if event["type"] != "ping"]  # no type of the SDK's: its keep-alive
    problems += [v for data in content for v in anthropic_violations(RawMessageStreamEvent, data, "RawMessageStreamEvent")]
    if not problems:
        message = accumulated_message(content)
        problems += anthropic_violations(Message, message.to_json().encode()) + _expect_blocks(message.to_dict(), tools)
    return Checked(len(content), problems)


def _expect_blocks(message: dict[str, Any], tools: bool) -> list[Violation]:
    kinds = [block["type"] for block in message["content"]]
    problems = _expect(kinds == (["tool_use"] if tools else ["text"]), "content blocks", kinds)
    return problems + _expect(message["stop_reason"] == ("tool_use" if tools else "end_turn"), "stop_reason", message["stop_reason"])


def check_gemini(raw: bytes, mode: str, tools: bool) -> Checked:
    """A Gemini answer: each response or chunk a strict ``GenerateContentResponse``; a stream's chunks
    also as the SDK's own SSE reader makes them, and whole or streamed, a turn the SDK's ``Chat`` keeps."""
    from google.genai.types import GenerateContentResponse

    if mode == WHOLE:
        problems = gemini_violations(GenerateContentResponse, raw)
        chunks = [orjson.loads(raw)]
        if not problems:
            problems += chat_history_violations([sdk_response(chunks[0])])
        return Checked(1, problems + _expect_parts(chunks, tools))
    if mode == STREAM:
        blocks = sse_blocks(raw)
        problems = _expect(all(name is None for name, _ in blocks), "SSE event names (Google sends none)", [n for n, _ in blocks])
        payloads = [data for _, data in blocks]
    else:
        array = orjson.loads(raw)  # the whole body is one JSON array of chunks
        problems = _expect(isinstance(array, list) and array != [], "one JSON array of chunks", str(raw[:80]))
        payloads = [orjson.dumps(chunk) for chunk in array] if isinstance(array, list) else []
    problems += [v for data in payloads for v in gemini_violations(GenerateContentResponse, data)]
    chunks = [orjson.loads(data) for data in payloads]
    finishing = [n for n, chunk in enumerate(chunks) if any(c.get("finishReason") for c in chunk.get("candidates") or [])]
    problems += _expect(finishing == [len(chunks) - 1], "finishReason on the last chunk, only", finishing)
    problems += _expect("usageMetadata" in chunks[-1], "usageMetadata in the last chunk", chunks[-1])
    if not problems:
        read = sdk_stream_chunks(raw) if mode == STREAM else [sdk_response(chunk) for chunk in chunks]
        problems += _expect(len(read) == len(chunks) and not any(isinstance(r, dict) for r in read), "the SDK's SSE reader reads each chunk", len(read))
        problems += chat_history_violations(read) if not problems else []
    return Checked(len(chunks), problems + _expect_parts(chunks, tools))


def _expect_parts(chunks: list[dict[str, Any]], tools: bool) -> list[Violation]:
    """The answer's parts over all chunks: a call of the offered tool with its command, or text; a model turn ending in STOP."""
    candidates = [chunk["candidates"][0] for chunk in chunks if chunk.get("candidates")]
    problems = _expect(all(c.get("content", {}).get("role") == "model" for c in candidates), "every content's role is model", [c.get("content", {}).get("role") for c in candidates])
    parts = [part for c in candidates for part in c.get("content", {}).get("parts") or []]
    calls = [part["functionCall"] for part in parts if "functionCall" in part]
    text = "".join(part.get("text", "") for part in parts if not part.get("thought"))
    if tools:
        problems += _expect(len(calls) == 1 and isinstance(calls[0].get("args", {}).get("command"), str) and text == "", "one functionCall with its args, no text", parts)
    else:
        problems += _expect(calls == [] and text.strip() != "", "text, no functionCall", parts)
    return problems + _expect(candidates[-1].get("finishReason") == "STOP", "finishReason", candidates[-1].get("finishReason"))


def ollama_lines(raw: bytes) -> tuple[list[bytes], list[Violation]]:
    """A stream's NDJSON lines, and what is wrong with its framing: each line one JSON object, ended by a newline, none blank."""
    lines = raw.split(b"\n")
    problems = _expect(lines[-1] == b"" and all(line.strip() for line in lines[:-1]), "one JSON object a line, each ended, none blank", raw[-120:])
    return [line for line in lines if line.strip()], problems


def check_ollama(raw: bytes, mode: str, tools: bool) -> Checked:
    """An Ollama chat answer: each line (or the whole) a strict ``ChatResponse`` of the ``ollama`` client, ``done``
    on the last only, which has ``done_reason`` and the counts; tool calls whole, arguments an object."""
    from ollama import ChatResponse

    lines, problems = ([raw], []) if mode == WHOLE else ollama_lines(raw)
    problems += [v for line in lines for v in ollama_violations(ChatResponse, line)]
    answers = [orjson.loads(line) for line in lines]
    problems += _expect([a.get("done") for a in answers] == [False] * (len(answers) - 1) + [True], "done on the last line only", [a.get("done") for a in answers])
    last = answers[-1]
    problems += _expect(last.get("done_reason") == "stop" and last.get("prompt_eval_count", 0) > 0 and last.get("eval_count", 0) > 0, "done_reason and the counts last", last)
    calls = [call for a in answers for call in a.get("message", {}).get("tool_calls") or []]
    text = "".join(a.get("message", {}).get("content", "") for a in answers)
    if tools:
        whole = len(calls) == 1 and calls[0]["function"]["name"] == "shell" and isinstance(calls[0]["function"]["arguments"].get("command"), str)
        problems += _expect(whole and text == "", "one tool call, whole, its arguments an object; no text", calls)
    else:
        problems += _expect(calls == [] and text.strip() != "", "text, no tool call", answers)
    return Checked(len(answers), problems)


def _expect(ok: bool, what: str, found: Any) -> list[Violation]:
    return [] if ok else [Violation("the API's behaviour", what, "expected", str(found)[:300])]


CHECKS: dict[str, Callable[[bytes, str, bool], Checked]] = {
    OPENAI_CHAT: lambda raw, mode, tools: check_chat(raw, mode != WHOLE, tools),
    OPENAI_RESPONSES: lambda raw, mode, tools: check_responses(raw, mode != WHOLE, tools),
    ANTHROPIC_MESSAGES: lambda raw, mode, tools: check_messages(raw, mode != WHOLE, tools),
    GEMINI: check_gemini,
    OLLAMA: check_ollama,
}


def not_excused(violations: list[Violation]) -> list[str]:
    return [str(v) for v in violations if not any(artifact.excuses(v) for artifact in SPEC_ARTIFACTS)]


ANSWERS = [(client, provider, mode, content) for client, provider in PAIRS for mode in modes(client) for content in ("text", "tool call")]


@pytest.mark.parametrize(("client_wire", "provider_wire", "mode", "content"), ANSWERS, ids=[f"{c}->{p}-{m}-{t}" for c, p, m, t in ANSWERS])
async def test_every_answer_is_valid_against_the_clients_schema(proxy, mock_upstream, client_wire, provider_wire, mode, content):
    _, url = mock_upstream
    tools = content == "tool call"
    response = await serve(proxy, url, client_wire, provider_wire, mode, tools)
    assert response.status == 200, await response.text()
    assert response.headers["x-router-wire"] == f"{client_wire}->{provider_wire}"
    assert response.content_type == (STREAM_TYPES.get(client_wire, "text/event-stream") if mode == STREAM else "application/json")
    checked = CHECKS[client_wire](await response.read(), mode, tools)
    assert checked.validated > 0
    problems = not_excused(checked.violations)
    assert problems == [], "\n".join(problems)


# --- the errors of every wire, against its error schema ------------------------------------------


@dataclass(frozen=True)
class ErrorCase:
    """One way to get an error: a client wire, the provider behind it, the request, what the mock does."""

    client: str
    name: str
    status: int
    provider: str = OPENAI_CHAT
    method: str = "POST"
    path: str | None = None  # the client wire's path unless set
    body: dict[str, Any] | None = None  # the client's text request, changed by these keys (None values removed)
    raw: bytes | None = None  # sent as is, instead of a JSON body
    upstream_status: int = 200  # what the mock answers
    server: dict[str, Any] | None = None
    wrong_key: bool = False  # sends a key the server does not take, the way the wire's clients send one
    model: str | None = None  # the model asked for (in the body, or a Gemini client's path)
    mode: str = WHOLE


# A key the server does not take, sent as each wire's clients send theirs.
WRONG_KEY = {GEMINI: {"x-goog-api-key": "wrong"}, ANTHROPIC_MESSAGES: {"x-api-key": "wrong"}}
UNKNOWN_MODEL = "no-such-model"

ERROR_CASES = [
    *(
        case
        for wire in CLIENTS
        for case in (
            *(ErrorCase(wire, f"unknown model{'' if mode == WHOLE else f', {mode}'}", 404, model=UNKNOWN_MODEL, mode=mode) for mode in modes(wire)),
            ErrorCase(wire, "no API key", 401, server={"api_keys": ["the-key"]}, wrong_key=True),
            ErrorCase(wire, "upstream 4xx relayed as it came", 400, provider=wire, upstream_status=400),
            ErrorCase(wire, "upstream 4xx translated", 400, provider=OPENAI_CHAT if wire != OPENAI_CHAT else ANTHROPIC_MESSAGES, upstream_status=400),
            ErrorCase(wire, "no upstream answers", 502, upstream_status=500),
            ErrorCase(wire, "body too large", 413, server={"max_body_mb": 0.001}, body={"pad": "x" * 2000}),
            ErrorCase(wire, "not JSON", 400, raw=b"{not json"),
        )
        if case.provider in PROVIDERS  # no provider speaks Ollama's client API: its requests are always translated
    ),
    *(ErrorCase(wire, "a Gemini provider's 4xx translated", 400, provider=GEMINI, upstream_status=400) for wire in CLIENTS if wire != GEMINI),
    ErrorCase(OPENAI_CHAT, "malformed body", 400, body={"messages": None}),
    ErrorCase(OPENAI_CHAT, "unknown path", 404, method="GET", path="/v1/no-such-endpoint"),
    ErrorCase(OPENAI_CHAT, "wrong method", 405, method="GET"),
    ErrorCase(OPENAI_RESPONSES, "malformed body", 400, body={"input": 3}),
    ErrorCase(OPENAI_RESPONSES, "state kept on a server", 400, body={"previous_response_id": "resp_1"}),
    ErrorCase(ANTHROPIC_MESSAGES, "malformed body", 400, body={"messages": [{"role": "tool", "content": "x"}]}),
    ErrorCase(ANTHROPIC_MESSAGES, "count_tokens malformed", 400, path="/v1/messages/count_tokens", body={"messages": []}),
    ErrorCase(GEMINI, "malformed body", 400, body={"contents": 3}),
    ErrorCase(GEMINI, "malformed body, streamed", 400, body={"contents": [{"role": "model", "parts": []}]}, mode=STREAM),
    ErrorCase(GEMINI, "unknown model under /v1", 404, path=f"/v1/models/{UNKNOWN_MODEL}:generateContent"),
    ErrorCase(GEMINI, "unknown model's entry", 404, method="GET", path=f"/v1beta/models/{UNKNOWN_MODEL}"),
    ErrorCase(GEMINI, "unknown path", 404, method="GET", path="/v1beta/no-such-endpoint"),
    ErrorCase(GEMINI, "wrong method", 405, method="GET"),
    ErrorCase(GEMINI, "countTokens malformed", 400, path="/v1beta/models/auto:countTokens", body={"contents": 3}),
    ErrorCase(OLLAMA, "malformed body", 400, body={"messages": [{"role": "user", "content": ["parts"]}]}),
    ErrorCase(OLLAMA, "malformed body, streamed", 400, body={"messages": []}, mode=STREAM),
    ErrorCase(OLLAMA, "unknown path", 404, method="GET", path="/api/no-such-endpoint"),
    ErrorCase(OLLAMA, "wrong method", 405, method="GET"),
    ErrorCase(OLLAMA, "unknown model shown", 404, path="/api/show", body={"model": UNKNOWN_MODEL}),
    ErrorCase(OLLAMA, "a model pulled", 403, path="/api/pull", body={"model": "llama3"}),
]


async def error_response(proxy, mock, url: str, case: ErrorCase):
    from router.tools.mock_upstream import Behaviour

    mock.default = Behaviour(status=case.upstream_status)
    model = model_entry("main", provider="up", supports={"tools": True, "vision": False, "json_mode": True})
    config = make_config(url, providers={"up": PROVIDERS[case.provider](url)}, models=[model], **({"server": case.server} if case.server else {}))
    client = await proxy(config)
    path_of, request = CLIENTS[case.client]
    path = case.path or (gemini_path(case.mode, case.model or "auto") if case.client == GEMINI else path_of(case.mode))
    body = request(case.mode != WHOLE, False) | (case.body or {}) | ({"model": case.model} if case.model and case.client != GEMINI else {})
    body = {k: v for k, v in body.items() if v is not None}
    headers = WRONG_KEY.get(case.client, {"Authorization": "Bearer wrong"}) if case.wrong_key else None
    if case.raw is not None:
        return await client.request(case.method, path, data=case.raw, headers={"Content-Type": "application/json"})
    return await client.request(case.method, path, json=body if case.method == "POST" else None, headers=headers)


def error_violations(client_wire: str, raw: bytes, headers: Any, status: int) -> list[Violation]:
    if client_wire == OLLAMA:
        return ollama_error_violations(orjson.loads(raw))
    if client_wire == GEMINI:
        return google_error_violations(orjson.loads(raw), status)
    if client_wire != ANTHROPIC_MESSAGES:
        return openai_violations("ErrorResponse", orjson.loads(raw))
    from anthropic.types.shared import ErrorResponse

    problems = anthropic_violations(ErrorResponse, raw)
    request_id = orjson.loads(raw).get("request_id")
    return problems + _expect(isinstance(request_id, str) and headers.get("request-id") == request_id, "request_id in body and request-id header", (request_id, headers.get("request-id")))


@pytest.mark.parametrize("mode", [WHOLE, STREAM, JSON_ARRAY])
@pytest.mark.parametrize("content", ["text", "tool call"])
async def test_mock_upstreams_own_gemini_answers_are_valid_with_thoughts_too(http, mock_upstream, mode, content):
    """``mock-upstream`` asked directly, as a client pointed at it is answered (its JSON array, which the proxy
    never asks for, included), with the thought part ``includeThoughts`` adds."""
    _, url = mock_upstream
    body = gemini_request(mode != WHOLE, content == "tool call") | {"generationConfig": {"thinkingConfig": {"includeThoughts": True}}}
    async with http.post(url.removesuffix("/v1") + gemini_path(mode, "gemini-mock"), json=body) as response:
        assert response.status == 200 and response.content_type == ("text/event-stream" if mode == STREAM else "application/json")
        raw = await response.read()
    checked = check_gemini(raw, mode, content == "tool call")
    assert checked.validated > 0 and not_excused(checked.violations) == []
    chunks = [orjson.loads(raw)] if mode == WHOLE else [orjson.loads(d) for _, d in sse_blocks(raw)] if mode == STREAM else orjson.loads(raw)
    assert any(part.get("thought") for chunk in chunks for part in chunk["candidates"][0]["content"]["parts"])


@pytest.mark.parametrize("path", ["/v1beta/models/auto:countTokens", "/v1/models/main:countTokens"])
async def test_a_gemini_count_tokens_answer_is_valid_too(proxy, mock_upstream, path):
    """``countTokens``, which the proxy answers itself: a strict ``CountTokensResponse``."""
    from google.genai.types import CountTokensResponse

    _, url = mock_upstream
    client = await proxy(make_config(url))
    response = await client.post(path, json=gemini_request(False, True))
    assert response.status == 200
    raw = await response.read()
    assert not_excused(gemini_violations(CountTokensResponse, raw)) == [] and orjson.loads(raw)["totalTokens"] > 0


@pytest.mark.parametrize("case", ERROR_CASES, ids=[f"{c.client}-{c.name}" for c in ERROR_CASES])
async def test_every_error_body_is_valid_against_the_wires_error_schema(proxy, mock_upstream, case):
    mock, url = mock_upstream
    response = await error_response(proxy, mock, url, case)
    raw = await response.read()
    assert response.status == case.status, raw
    assert response.content_type == "application/json"  # a JSON error, also where a stream was asked for
    problems = not_excused(error_violations(case.client, raw, response.headers, response.status))
    assert problems == [], "\n".join(problems)


# What the edge answers itself: ({path}, status). What aiohttp refuses while it parses, before any
# handler; then, each with the header of another wire's client, since the path decides the shape (issue
# #42: an ``anthropic-version`` header on a chat, Responses or Gemini path changes nothing), a framing
# error again, a wrong method and an internal error; and an Expect header the proxy cannot meet.
EDGE_REFUSALS = {
    "header over 8 KB": (b"POST {path} HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 9000 + b"\r\n\r\n", 431),
    "bad request line": (b"POST {path} HTTP/1.1 xx\r\n\r\n", 400),
    "brotli body": (b"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Encoding: br\r\nContent-Length: 2\r\n\r\n{}", 415),
    "anthropic-version, framing error": (b"POST {path} HTTP/1.1\r\nHost: x\r\nanthropic-version: 2023-06-01\r\nX-A: " + b"a" * 9000 + b"\r\n\r\n", 431),
    "anthropic-version, wrong method": (b"PATCH {path} HTTP/1.1\r\nHost: x\r\nanthropic-version: 2023-06-01\r\nContent-Length: 0\r\n\r\n", 405),
    "anthropic-version, internal error": (
        b"POST {path} HTTP/1.1\r\nHost: x\r\nanthropic-version: 2023-06-01\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
        500,
    ),
    # an expectation the proxy does not meet (only 100-continue is one), also one that is no text
    "unknown Expect": (b"POST {path} HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", 417),
    "Expect not UTF-8": (b"POST {path} HTTP/1.1\r\nHost: x\r\nExpect: \xff\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", 417),
}


@pytest.mark.parametrize("refusal", list(EDGE_REFUSALS))
@pytest.mark.parametrize("client_wire", list(CLIENTS))
async def test_an_edge_error_is_in_the_error_schema_of_the_path_it_came_to(proxy, mock_upstream, monkeypatch, client_wire, refusal):
    """aiohttp refuses the framing errors before the app sees a request (``router/http/framing_errors.py``),
    the others are answered outside the chain (``router/http/errors.py``); the answer is still the wire's
    error, by the path in the request line, whatever the headers."""
    from router.http import edge

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug in the proxy")

    if refusal.endswith("internal error"):
        monkeypatch.setattr(edge, "read_checked_json_body", broken)
    _, url = mock_upstream
    client = await proxy(make_config(url))
    template, status = EDGE_REFUSALS[refusal]
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    try:
        writer.write(template.replace(b"{path}", CLIENTS[client_wire][0](WHOLE).encode()))
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(65536), 5)
    finally:
        writer.close()
    head, _, raw = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = CIMultiDict(line.split(": ", 1) for line in lines[1:])
    assert int(lines[0].split(" ")[1]) == status and headers["Content-Type"].startswith("application/json"), answer[:300]
    problems = not_excused(error_violations(client_wire, raw, headers, status))
    assert problems == [], "\n".join(problems)


BROKEN_STREAMS = [
    (OPENAI_CHAT, OPENAI_CHAT, STREAM),
    (OPENAI_CHAT, ANTHROPIC_MESSAGES, STREAM),
    (OPENAI_CHAT, GEMINI, STREAM),
    (OPENAI_RESPONSES, OPENAI_CHAT, STREAM),
    (OPENAI_RESPONSES, OPENAI_RESPONSES, STREAM),
    (OPENAI_RESPONSES, GEMINI, STREAM),
    (ANTHROPIC_MESSAGES, OPENAI_CHAT, STREAM),
    (ANTHROPIC_MESSAGES, ANTHROPIC_MESSAGES, STREAM),
    (ANTHROPIC_MESSAGES, GEMINI, STREAM),
    (GEMINI, GEMINI, STREAM),
    (GEMINI, GEMINI, JSON_ARRAY),
    (GEMINI, OPENAI_CHAT, STREAM),
    (GEMINI, OPENAI_CHAT, JSON_ARRAY),
    (OLLAMA, OPENAI_CHAT, STREAM),
]


@pytest.mark.parametrize(("client_wire", "provider_wire", "mode"), BROKEN_STREAMS, ids=[f"{c}->{p}-{m}" for c, p, m in BROKEN_STREAMS])
async def test_the_event_that_ends_a_broken_stream_is_valid_too(proxy, mock_upstream, client_wire, provider_wire, mode):
    """The provider's connection breaks mid-stream: the client's last event is its wire's error event, valid
    like the events before it (a chat ``{"error"}`` chunk is an ``ErrorResponse``; Anthropic's ``error``
    event has its error's shape; a Responses ``error`` event carries the next ``sequence_number``; Google's
    is its error object as one more chunk, of the SSE stream or of the JSON array, which stays valid JSON)."""
    from google.genai.types import GenerateContentResponse
    from router.tools.mock_upstream import Behaviour

    mock, url = mock_upstream
    mock.default = Behaviour(cut_after_events=4)
    response = await serve(proxy, url, client_wire, provider_wire, mode, tools=False)
    raw = await response.read()
    if client_wire == OLLAMA:
        from ollama import ChatResponse

        lines, problems = ollama_lines(raw)
        blocks = [(None, line) for line in lines]
    elif mode == STREAM:
        blocks = sse_blocks(raw)
    else:
        blocks = [(None, orjson.dumps(chunk)) for chunk in orjson.loads(raw)]
    if client_wire == OLLAMA:  # its error line, after lines that are answers
        name, data = blocks[-1]
        problems += ollama_error_violations(orjson.loads(data)) + [v for _, line in blocks[:-1] for v in ollama_violations(ChatResponse, line)]
    elif client_wire == OPENAI_CHAT:
        assert blocks[-1] == (None, b"[DONE]")
        name, data = blocks[-2]
        problems = openai_violations("ErrorResponse", orjson.loads(data))
        problems += [v for _, chunk in blocks[:-2] for v in openai_violations("CreateChatCompletionStreamResponse", orjson.loads(chunk))]
    elif client_wire == OPENAI_RESPONSES:
        name, data = blocks[-1]
        events = [orjson.loads(payload) for _, payload in blocks]
        problems = [v for event in events for v in responses_event_violations(event)]
        problems += _expect([e.get("sequence_number") for e in events] == list(range(len(events))), "sequence numbers", [e.get("sequence_number") for e in events])
    elif client_wire == GEMINI:
        name, data = blocks[-1]
        problems = google_error_violations(orjson.loads(data)) + [v for _, chunk in blocks[:-1] for v in gemini_violations(GenerateContentResponse, chunk)]
        if mode == STREAM:  # the SDK's reader raises on the error chunk, as on Google's own
            problems += _expect(isinstance(sdk_stream_chunks(raw)[-1], dict), "the SDK reads the last chunk as an error", raw[-200:])
    else:
        from anthropic.types import RawMessageStreamEvent
        from anthropic.types.shared import ErrorResponse

        name, data = blocks[-1]
        problems = anthropic_violations(ErrorResponse, data)
        problems += [v for _, event in blocks[:-1] if b'"ping"' not in event for v in anthropic_violations(RawMessageStreamEvent, event, "RawMessageStreamEvent")]
    assert b"upstream stream interrupted" in data and name in (None, "error")
    problems = not_excused(problems)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("mode", [WHOLE, STREAM])
@pytest.mark.parametrize("client_wire", [wire for wire in CLIENTS if wire != GEMINI])  # Gemini's model is in its path
async def test_a_request_without_a_model_is_answered_as_auto_on_every_wire(proxy, mock_upstream, client_wire, mode):
    """The real APIs require ``model``; the proxy routes a request without one as ``auto`` (docs/conformance.md),
    and its answer is as valid as any."""
    _, url = mock_upstream
    client = await proxy(make_config(url))
    path, request = CLIENTS[client_wire]
    body = {k: v for k, v in request(mode == STREAM, False).items() if k != "model"}
    response = await client.post(path(mode), json=body)
    assert response.status == 200 and response.headers["x-router-model"] == "main"
    problems = not_excused(CHECKS[client_wire](await response.read(), mode, False).violations)
    assert problems == [], "\n".join(problems)
