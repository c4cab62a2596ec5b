"""The openai-responses wire adapter: parse, errors, the passthrough body, and the translator to chat."""

from __future__ import annotations

import orjson
import pytest

from router.core.errors import ApiError
from router.core.request_view import BodyChanges
from router.core.results import Candidate
from router.translate.protocol import MalformedAnswer
from router.translate.responses_to_chat import ResponsesToChat
from router.wire import adapters
from router.wire.openai_responses.adapter import OPENAI_RESPONSES_ADAPTER
from tests.http.test_agent_fixtures import load
from tests.support.wire_factories import (
    ANSWER_IDS,
    EXEC_COMMAND,
    function_call,
    function_call_output,
    input_message,
    reasoning_item,
    responses_body,
    sse_events,
)

ADAPTER = OPENAI_RESPONSES_ADAPTER


def test_the_adapter_is_registered_for_v1_responses() -> None:
    assert adapters()["openai-responses"] is ADAPTER and ADAPTER.paths == ("/v1/responses",)


def test_a_stateful_request_is_an_openai_error_naming_the_field() -> None:
    error = ADAPTER.parse(responses_body(previous_response_id="resp_1"), 2000)
    assert isinstance(error, ApiError) and error.status == 400 and error.param == "previous_response_id"
    body = orjson.loads(ADAPTER.render_error(error).body)
    assert body["error"]["param"] == "previous_response_id" and body["error"]["type"] == "invalid_request_error"


def test_passthrough_body_changes_only_what_the_chain_changed() -> None:
    body = load("codex/0004-POST-v1-responses.json")["body"]
    view = ADAPTER.parse(body, 2000)
    assert not isinstance(view, ApiError)
    sent = orjson.loads(ADAPTER.upstream_body(body, view, BodyChanges("gpt-up", {0: "[pinched]"}, prompt_cache_key="other")))
    assert list(sent) == list(body)  # the client's keys, in its order
    assert sent["model"] == "gpt-up"
    assert sent["input"][6] == {**body["input"][6], "output": "[pinched]"}
    assert [i for n, i in enumerate(sent["input"]) if n != 6] == [i for n, i in enumerate(body["input"]) if n != 6]
    assert sent["prompt_cache_key"] == body["prompt_cache_key"]  # the client's own key is kept
    assert {k: v for k, v in sent.items() if k not in ("model", "input")} == {k: v for k, v in body.items() if k not in ("model", "input")}


def test_passthrough_lowers_the_output_limit_never_adds_one() -> None:
    body = responses_body(max_output_tokens=9000)
    view = ADAPTER.parse(body, 2000)
    assert orjson.loads(ADAPTER.upstream_body(body, view, BodyChanges("m", output_tokens=4000)))["max_output_tokens"] == 4000
    plain = responses_body()
    view = ADAPTER.parse(plain, 2000)
    assert "max_output_tokens" not in orjson.loads(ADAPTER.upstream_body(plain, view, BodyChanges("m", output_tokens=4000)))


def test_the_stream_error_is_a_responses_error_event() -> None:
    ((name, data),) = sse_events(ADAPTER.stream_error("upstream stream interrupted: no data for 5s", "upstream_stream_interrupted", 7))
    assert name == "error" and data == {
        "type": "error", "code": "upstream_stream_interrupted", "message": "upstream stream interrupted: no data for 5s", "param": None,
        "sequence_number": 7,  # the next after the 7 events sent before it (0–6), as the spec requires
    }


def test_usage_is_read_from_response_completed_with_cached_tokens() -> None:
    event = {"type": "response.completed", "response": {"usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 80}, "output_tokens": 7, "total_tokens": 107}}}
    usage = ADAPTER.read_usage(orjson.dumps(event))
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens) == (100, 7, 80)


def translated(body: dict, rewrites: dict | None = None) -> tuple[ResponsesToChat, dict]:
    view = ADAPTER.parse(body, 2000)
    assert not isinstance(view, ApiError)
    translator = ResponsesToChat(ANSWER_IDS)
    return translator, orjson.loads(translator.request(ADAPTER.upstream_body(body, view, BodyChanges("qwen-up", rewrites or {})), Candidate("qwen", "p", "qwen-up")))


def test_the_translator_sends_chat_with_the_chains_changes() -> None:
    body = responses_body(
        input_message("user", "go"), reasoning_item("r"), function_call("c1", cmd="ls"), function_call_output("c1", "long output"), tools=[EXEC_COMMAND], stream=True
    )
    translator, chat = translated(body, {0: "[pinched]"})
    assert chat["model"] == "qwen-up"
    assert chat["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "[pinched]"}
    assert chat["stream_options"] == {"include_usage": True}
    assert translator.frame.request["model"] == "qwen-up" and translator.frame.response_id.startswith("resp_")


def test_the_translator_turns_a_completion_into_a_response() -> None:
    translator, _ = translated(responses_body())
    completion = {"choices": [{"message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
    response = orjson.loads(translator.response(orjson.dumps(completion)))
    assert response["object"] == "response" and response["output"][0]["content"][0]["text"] == "Hi"
    assert response["usage"]["input_tokens"] == 3 and response["usage"]["total_tokens"] == 4
    for not_a_completion in (b"not json", b"[]", b'{"choices": []}', b'{"choices": [{"message": "hi"}]}'):
        with pytest.raises(MalformedAnswer):  # the attempt fails; the client never gets the provider's body
            translator.response(not_a_completion)


def chat_sse(*chunks: dict, done: bool = True) -> bytes:
    return b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + (b"data: [DONE]\n\n" if done else b"")


def test_a_chat_stream_cut_anywhere_translates_to_the_same_events() -> None:
    raw = chat_sse(
        {"choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}},
    )
    outcomes = []
    for cut in (1, 7, len(raw) // 2, len(raw) - 3):
        translator, _ = translated(responses_body(stream=True))
        stream = translator.stream()
        out = stream.feed(raw[:cut]) + stream.feed(raw[cut:]) + stream.finish()
        outcomes.append([(name, data.get("delta")) for name, data in sse_events(out)])
        assert stream.usage is not None and stream.usage.total_tokens == 7
    assert all(o == outcomes[0] for o in outcomes)
    assert outcomes[0][-1] == ("response.completed", None) and ("response.output_text.delta", "Hel") in outcomes[0]


def test_a_chat_stream_closed_before_it_finished_fails_the_response() -> None:
    translator, _ = translated(responses_body(stream=True))
    stream = translator.stream()
    out = stream.feed(chat_sse({"choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}]}, done=False)) + stream.finish()
    name, data = sse_events(out)[-1]
    assert name == "response.failed" and data["response"]["error"]["code"] == "upstream_stream_interrupted"
    assert data["response"]["output"] == []  # the open message never finished
