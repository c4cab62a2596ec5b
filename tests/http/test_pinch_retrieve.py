"""``pinch_retrieve`` end to end (issue #44): a long new tool output is cut at first sight, the model
(the mock upstream) calls the tool, the proxy answers it itself with the whole output and continues
the upstream call — and the client, on each wire, streamed or not, gets one well-formed answer with
no trace of the internal call.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson
import pytest

from router.core.retrieve import TOOL_NAME
from router.tools.decision_text import decision_detail
from router.tools.mock_answers import RETRIEVE_LEAD_IN
from router.tools.mock_upstream import Behaviour
from tests.support.config import make_config, model_entry
from tests.support.wire_factories import BASH, anthropic_body, anthropic_user, function_call, function_call_output, input_message, responses_body, sse_events, tool_result, tool_use

SHELL = {"type": "function", "function": {"name": "bash", "description": "Run a command.", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
RESPONSES_SHELL = {"type": "function", "name": "bash", "description": "Run a command.", "parameters": SHELL["function"]["parameters"]}


def long_log(lines: int = 400) -> str:
    """A build log of ``lines`` distinct lines (no run a lossless rule folds), an error in the middle."""
    out = [f"[{i:04d}] {hashlib.sha256(str(i).encode()).hexdigest()[:40]} compiled" for i in range(lines)]
    out[lines // 2] = "error: undefined reference to `parse_header'"
    return "\n".join(out)


LOG = long_log()
LOG_JSON = json.dumps(LOG)[1:-1]  # as it reads in a JSON body
TASK = "Fix the build of the parser."


def chat_request(stream: bool) -> tuple[str, dict[str, Any]]:
    messages = [
        {"role": "user", "content": TASK},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_make", "type": "function", "function": {"name": "bash", "arguments": '{"command":"make"}'}}]},
        {"role": "tool", "tool_call_id": "call_make", "content": LOG},
    ]
    return "/v1/chat/completions", {"model": "auto", "messages": messages, "tools": [SHELL], "stream": stream}


def ollama_request(stream: bool) -> tuple[str, dict[str, Any]]:
    messages = [
        {"role": "user", "content": TASK},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "bash", "arguments": {"command": "make"}}}]},
        {"role": "tool", "content": LOG, "tool_name": "bash"},
    ]
    return "/api/chat", {"model": "auto", "messages": messages, "tools": [SHELL], "stream": stream}


def messages_request(stream: bool) -> tuple[str, dict[str, Any]]:
    body = anthropic_body(anthropic_user(TASK), tool_use("toolu_make", command="make"), anthropic_user(tool_result("toolu_make", LOG)), tools=[BASH], stream=stream)
    return "/v1/messages", {**body, "model": "auto"}


def responses_request(stream: bool) -> tuple[str, dict[str, Any]]:
    items = [input_message("user", TASK), function_call("call_make", "bash", command="make"), function_call_output("call_make", LOG)]
    return "/v1/responses", {**responses_body(*items, tools=[RESPONSES_SHELL], stream=stream, store=False), "model": "auto"}


def gemini_request(stream: bool) -> tuple[str, dict[str, Any]]:
    contents = [
        {"role": "user", "parts": [{"text": TASK}]},
        {"role": "model", "parts": [{"functionCall": {"name": "bash", "args": {"command": "make"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "bash", "response": {"output": LOG}}}]},
    ]
    declaration = {"name": "bash", "description": "Run a command.", "parameters": SHELL["function"]["parameters"]}
    action = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"/v1beta/models/auto:{action}", {"contents": contents, "tools": [{"functionDeclarations": [declaration]}]}


REQUESTS = {"gemini": gemini_request, "openai-chat": chat_request, "anthropic-messages": messages_request, "openai-responses": responses_request, "ollama": ollama_request}
PROVIDERS = {"openai": {}, "responses": {"wire": "openai-responses"}, "anthropic": {"api": "anthropic"}, "gemini": {"api": "gemini"}, "ollama": {"api": "ollama", "native_chat": True}}


@pytest.fixture
def start(proxy, mock_upstream):
    async def started(provider: str) -> tuple[Any, Any]:
        mock, url = mock_upstream
        settings = {"base_url": url.removesuffix("/v1") if provider in ("anthropic", "ollama") else url, **PROVIDERS[provider]}
        config = make_config(
            url,
            middlewares=["session-fingerprint", "pinch-prune", "capability-gate", "upstream-forward"],
            providers={"up": settings},
            models=[model_entry("main", provider="up", context_window=200_000, max_output_tokens=8_000)],
            pinch={"enabled": True, "budget_tokens": 150_000},
        )
        return mock, await proxy(config)

    return started


def provider_paths(mock: Any) -> list[Any]:
    return [r for r in mock.received if r.path in ("/v1/chat/completions", "/v1/messages", "/api/chat", "/v1/responses") or ":generateContent" in r.path or ":streamGenerateContent" in r.path]



# a Responses API provider serves Responses clients only (nothing translates to it)
PAIRS = [(wire, provider) for wire in sorted(REQUESTS) for provider in sorted(PROVIDERS) if provider != "responses" or wire == "openai-responses"]


@pytest.mark.parametrize(("wire", "provider"), PAIRS)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_a_retrieve_call_is_answered_by_the_proxy_and_the_client_never_sees_it(start, wire: str, provider: str, stream: bool) -> None:
    mock, client = await start(provider)
    path, body = REQUESTS[wire](stream)
    response = await client.post(path, json=body, headers={"x-router-session": f"retrieve-{wire}-{provider}-{stream}"})
    raw = await response.read()
    assert response.status == 200, raw[:500]
    sent = provider_paths(mock)
    assert len(sent) == 2, [r.path for r in mock.received]
    first, second = sent[0].body, sent[1].body
    # the first round: the log cut, its marker naming the call, the tool declared after the client's own
    first_text = json.dumps(first)
    assert f'{TOOL_NAME}(\\"' in first_text and LOG_JSON not in first_text
    # as the provider declares them (Gemini: a declaration list per tool)
    names = [d["name"] for t in first["tools"] for d in t.get("functionDeclarations") or [t.get("function") or t]]
    assert names[-1] == TOOL_NAME and len(names) == 2
    # the second: the same request, the round's call and the proxy's answer (the whole log) appended
    assert LOG_JSON in json.dumps(second)
    assert second["tools"] == first["tools"]
    # the client's answer: well-formed in its own format, with no trace of the internal call
    # (the mock's answer may quote the cut output, whose first line names the tool: only a call would be a trace)
    assert f'"{TOOL_NAME}"'.encode() not in raw and b'_retrieve"' not in raw
    if stream:
        assert_stream_well_formed(wire, raw)
        if provider == "openai":  # the text the first round streamed before its call stays
            assert RETRIEVE_LEAD_IN.strip().encode() in raw.replace(b"\\", b"")
    else:
        orjson.loads(raw)
        assert response.headers["x-router-retrieve-calls"] == "1"
    assert int(response.headers["x-router-pinch-first-sight-saved"]) > 1000
    rows = (await (await client.get("/v1/decisions")).json())["data"]
    assert rows[0]["retrieve_calls"] == 1 and rows[0]["retrieve_tokens"] > len(LOG) // 5
    assert f"1 pinch_retrieve call answered by the proxy, {rows[0]['retrieve_tokens']:,} tokens added" in decision_detail(rows[0])


def assert_stream_well_formed(wire: str, raw: bytes) -> None:
    if wire == "ollama":
        lines = [orjson.loads(line) for line in raw.splitlines() if line.strip()]
        assert lines[-1]["done"] is True and all(not line.get("done") for line in lines[:-1])
        return
    if wire == "openai-chat":
        assert raw.rstrip().endswith(b"data: [DONE]")
        return
    if wire == "gemini":
        chunks = [orjson.loads(line[5:]) for line in raw.split(b"\n") if line.startswith(b"data:")]
        finished = [c for c in chunks if any(candidate.get("finishReason") for candidate in c.get("candidates", ()))]
        assert finished == chunks[-1:]  # one end, the last chunk
        return
    events = sse_events(raw)
    names = [name for name, _ in events]
    if wire == "anthropic-messages":
        assert names[0] == "message_start" and names[-1] == "message_stop" and names.count("message_start") == 1
        assert names.count("message_delta") == 1
        # block indices: each started once, in order, each stopped
        starts = [data["index"] for name, data in events if name == "content_block_start"]
        stops = [data["index"] for name, data in events if name == "content_block_stop"]
        assert starts == list(range(len(starts))) and sorted(stops) == starts
    else:
        assert names[0] == "response.created" and names[-1] == "response.completed" and names.count("response.completed") == 1
        numbers = [data["sequence_number"] for _, data in events]
        assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))  # gapless, though events were held back
        added = [data["output_index"] for name, data in events if name == "response.output_item.added"]
        assert added == list(range(len(added)))
        assert len(events[-1][1]["response"]["output"]) == len(added)  # every item the client was sent


async def test_the_cut_text_is_sent_byte_for_byte_on_every_later_turn(start) -> None:
    mock, client = await start("openai")
    path, body = chat_request(False)
    headers = {"x-router-session": "retrieve-resend"}
    assert (await client.post(path, json=body, headers=headers)).status == 200
    first_turn = provider_paths(mock)[0]
    later = {**body, "messages": [*body["messages"], {"role": "assistant", "content": "Fixed it."}, {"role": "user", "content": "Now run the tests."}]}
    mock.received.clear()
    assert (await client.post(path, json=later, headers=headers)).status == 200
    (second_turn,) = provider_paths(mock)  # no cut output among the latest results: no retrieve round
    cut = first_turn.body["messages"][2]["content"]
    assert cut.startswith("[pinch-router: ") and second_turn.body["messages"][2]["content"] == cut
    assert orjson.dumps(first_turn.body["messages"][2]) in second_turn.raw  # the very bytes
    assert second_turn.body["tools"] == first_turn.body["tools"]  # the declaration too: the cached prefix holds


async def test_a_client_without_tools_gets_no_tool_and_no_cut(start) -> None:
    mock, client = await start("openai")
    path, body = chat_request(False)
    del body["tools"]
    response = await client.post(path, json=body, headers={"x-router-session": "retrieve-no-tools"})
    assert response.status == 200
    (sent,) = provider_paths(mock)
    assert "tools" not in sent.body and sent.body["messages"][2]["content"] == LOG


async def test_a_retrieve_round_that_fails_ends_the_stream_with_the_clients_error_event(start) -> None:
    mock, client = await start("anthropic")
    mock.then(Behaviour(event_delay=0.02), Behaviour(status=500))  # the first round's events reach the client one by one
    path, body = messages_request(True)
    response = await client.post(path, json=body, headers={"x-router-session": "retrieve-fails"})
    events = sse_events(await response.read())
    names = [name for name, _ in events]
    assert response.status == 200 and names[0] == "message_start" and names[-1] == "error"
    assert "answered 500" in events[-1][1]["error"]["message"]
    assert TOOL_NAME not in "".join(orjson.dumps(data).decode() for _, data in events)


async def test_a_retrieve_round_that_fails_before_the_client_got_a_byte_is_the_attempt_failing(start) -> None:
    mock, client = await start("anthropic")
    mock.then(Behaviour(), Behaviour(status=500))
    path, body = messages_request(False)
    response = await client.post(path, json=body, headers={"x-router-session": "retrieve-fails-whole"})
    answer = await response.json()
    assert response.status == 502 and answer["type"] == "error" and "answered 500" in answer["error"]["message"]
    rows = (await (await client.get("/v1/decisions")).json())["data"]
    assert rows[0]["status"] == 502 and rows[0]["retrieve_calls"] == 1
