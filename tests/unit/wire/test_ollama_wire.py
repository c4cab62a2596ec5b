"""The Ollama client wire on plain data: registry and paths, validation, the view, the body a translation
reads, errors, the NDJSON framing, its answers and what its endpoints outside the chat answer."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import orjson
import pytest

from router.core.errors import ApiError, InvalidRequest
from router.core.request_view import BodyChanges, RequestTarget
from router.core.tokens import TokenEstimator
from router.wire import adapters, body_format, chain_target, request_format
from router.wire.ollama.adapter import KEEP_ALIVE, OLLAMA_ADAPTER as WIRE
from router.wire.ollama.answers import NdjsonFraming, answer_line, created_at, is_last_line, read_usage
from router.wire.ollama.models import show, tag, tags
from router.wire.ollama.validation import validate_ollama_body
from router.wire.routes import ListedModel

CHAT, GENERATE = RequestTarget({"action": "chat"}), RequestTarget({"action": "generate"})
PNG = "iVBORw0KGgo" + "A" * 40_000  # a base64 PNG of ~30 KB
SHELL = {"type": "function", "function": {"name": "shell", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}


def view(body, target=CHAT):
    parsed = WIRE.parse(body, 2000, target)
    assert not isinstance(parsed, ApiError), parsed
    return parsed


def chat(*messages, **extra):
    return {"model": "auto", "messages": list(messages), **extra}


def user(text="hi", **extra):
    return {"role": "user", "content": text, **extra}


def assistant_calls(*calls, content=""):
    return {"role": "assistant", "content": content, "tool_calls": [{"function": {"name": name, "arguments": args}, **({"id": i} if i else {})} for name, args, i in calls]}


def result(text, name="shell", call_id=None):
    return {"role": "tool", "content": text, "tool_name": name, **({"tool_call_id": call_id} if call_id else {})}


def test_it_is_registered_at_ollamas_paths_and_names_everything_under_api():
    assert adapters()["ollama"] is WIRE and WIRE.paths == ("/api/{action:chat|generate}",)
    assert chain_target("/api/chat") == (WIRE, {"action": "chat"}) and chain_target("/api/generate") == (WIRE, {"action": "generate"})
    assert chain_target("/api/tags") is None
    for path in ("/api/chat", "/api/pull", "/api/embed", "/api/anything"):
        assert request_format(path, {"anthropic-version": "2023-06-01"}) is WIRE  # the path decides
    assert request_format("/v1/chat/completions", {}) is not WIRE


@pytest.mark.parametrize(
    ("body", "wire"),
    [
        ({"model": "m", "prompt": "hi"}, "ollama"),
        ({"model": "m", "messages": [user()], "options": {"num_ctx": 8192}}, "ollama"),
        ({"model": "m", "messages": [user(images=[PNG])]}, "ollama"),
        ({"model": "m", "messages": [user()]}, "openai-chat"),  # nothing only Ollama's has: chat's
    ],
)
def test_a_saved_body_is_ollamas_by_what_only_ollamas_have(body, wire):
    assert body_format(body, {}).name == wire


def test_a_stream_is_the_default_as_in_ollamas_api():
    assert view(chat(user())).stream is True
    assert view(chat(user(), stream=None)).stream is True
    assert view(chat(user(), stream=False)).stream is False
    assert isinstance(WIRE.stream_framing(view(chat(user()))), NdjsonFraming)


@pytest.mark.parametrize(
    ("body", "target", "param"),
    [
        ([], CHAT, None),
        (chat(user(), model=""), CHAT, "model"),
        (chat(user(), stream="yes"), CHAT, "stream"),
        (chat(), CHAT, "messages"),  # Ollama would load the model: the proxy loads none
        ({"model": "m"}, CHAT, "messages"),
        (chat({"role": "developer", "content": "x"}), CHAT, "messages.0.role"),
        (chat(user(["parts"])), CHAT, "messages.0.content"),  # Ollama's Go decoding refuses it too
        (chat(user(images=[1])), CHAT, "messages.0.images"),
        (chat(user(), assistant_calls(("shell", '{"command": "ls"}', None))), CHAT, "messages.1.tool_calls[0].function.arguments"),
        (chat(user(), {"role": "assistant", "tool_calls": [{"function": {}}]}), CHAT, "messages.1.tool_calls[0].function"),
        (chat(user(), format="xml"), CHAT, "format"),
        (chat(user(), options={"num_predict": "many"}), CHAT, "options.num_predict"),
        (chat(user(), options={"temperature": "hot"}), CHAT, "options.temperature"),
        (chat(user(), options={"stop": [1]}), CHAT, "options.stop"),
        (chat(user(), options=[]), CHAT, "options"),
        (chat(user(), think="max"), CHAT, "think"),
        (chat(user(), keep_alive=[]), CHAT, "keep_alive"),
        (chat(user(), tools=[{"type": "function", "function": {"name": ""}}]), CHAT, "tools[0].function.name"),
        (chat(user(), tools=[{"type": "web_search"}]), CHAT, "tools[0]"),
        ({"model": "m", "prompt": ""}, GENERATE, "prompt"),
        ({"model": "m", "prompt": "def f(", "suffix": "    return x"}, GENERATE, "suffix"),  # fill in the middle
        ({"model": "m", "prompt": "[INST] hi [/INST]", "raw": True}, GENERATE, "raw"),
        ({"model": "m", "prompt": "hi", "system": 3}, GENERATE, "system"),
    ],
)
def test_what_ollama_refuses_and_what_the_proxy_cannot_serve_is_a_400_naming_the_field(body, target, param):
    with pytest.raises(InvalidRequest) as refused:
        validate_ollama_body(body, target.path["action"])
    assert refused.value.param == param
    answer = WIRE.render_error(WIRE.parse(body, 2000, target))
    assert answer.status == 400 and set(orjson.loads(answer.body)) == {"error"}


def test_the_view_reads_tools_images_json_the_output_limit_thinking_and_the_turn():
    body = chat(
        {"role": "system", "content": "be brief"}, user("fix the parser", images=[PNG]), assistant_calls(("shell", {"command": "ls"}, None)),
        result("main.py"), tools=[SHELL], format={"type": "object"}, options={"num_predict": 900, "num_ctx": 8192}, think="high",
    )
    parsed = view(body)
    assert (parsed.wire, parsed.model, parsed.offers_tools, parsed.tools_present, parsed.has_images, parsed.json_output, parsed.thinking) == ("ollama", "auto", True, True, True, True, True)
    assert parsed.output_limit == 900 and parsed.usage_requested
    assert parsed.turn_text.task == "fix the parser" and parsed.turn_text.step == 'shell({"command":"ls"})'
    assert parsed.opening == ("system", "be brief", "user", "fix the parser")
    assert view(chat(user(), options={"num_predict": -1})).output_limit is None  # -1: no limit
    assert not view(chat(user(), format="", think=False)).json_output


def test_an_image_is_counted_as_an_image_not_as_its_base64():
    estimator = TokenEstimator(image_tokens=1000)
    with_image = estimator.prompt_tokens(list(view(chat(user("what is this", images=[PNG]))).units))
    assert 1000 < with_image < 1100  # 40 KB of base64 would be 10,000 tokens as text


def test_a_tool_result_is_named_by_its_call_id_else_by_its_tool_name_in_order():
    conversation = view(chat(
        user(), assistant_calls(("read", {"path": "a"}, None), ("shell", {"command": "ls"}, None), ("read", {"path": "b"}, None)),
        result("A", "read"), result("ls", "shell"), result("B", "read"),
        assistant_calls(("grep", {}, "call_9")), result("found", "something-else", "call_9"),
    )).conversation  # fmt: skip
    units = conversation.result_units()
    assert units == [2, 3, 4, 6]
    assert [conversation.tool_name(u) for u in units] == ["read", "shell", "read", "grep"]
    assert [conversation.tool_call(u) for u in units] == [("read", '{"path":"a"}'), ("shell", '{"command":"ls"}'), ("read", '{"path":"b"}'), ("grep", "{}")]
    assert [r.id for r in conversation.tool_results()] == ["#2", "#3", "#4", "call_9"]  # the client's id when it sends one
    assert conversation.turn_starts() == [1, 5]


def test_a_generate_request_is_its_system_and_prompt():
    parsed = view({"model": "m", "prompt": "say hi", "system": "be brief", "images": [PNG], "stream": False}, GENERATE)
    assert [m["role"] for m in parsed.conversation.messages] == ["system", "user"] and parsed.has_images and not parsed.stream
    assert parsed.turn_text.task == "say hi" and parsed.conversation.generate


def test_the_translations_source_has_the_chains_changes_and_leaves_the_body_alone():
    body = chat(user("list"), assistant_calls(("shell", {"command": "ls"}, None)), result("x" * 5000), user("and now?"),
                options={"num_predict": 9000, "temperature": 0.2}, keep_alive="5m", prompt="stray")
    before = orjson.dumps(body)
    parsed = view(body)
    source = WIRE.translation_source(body, parsed, BodyChanges(upstream_model="up", rewrites={0: "[pinched]"}, output_tokens=4000, translated=True))
    assert orjson.dumps(body) == before
    assert (source["model"], source["stream"], source["options"], source["keep_alive"]) == ("up", True, {"num_predict": 4000, "temperature": 0.2}, "5m")
    assert [m["content"] for m in source["messages"]] == ["list", "", "[pinched]", "and now?"] and "prompt" not in source  # a chat's has none
    unchanged = {k: v for k, v in body.items() if k != "prompt"} | {"model": "up", "stream": True}
    assert orjson.loads(WIRE.upstream_body(body, parsed, BodyChanges(upstream_model="up"))) == unchanged
    generate = {"model": "m", "prompt": "hi", "options": {"num_predict": 10}}
    source = WIRE.translation_source(generate, view(generate, GENERATE), BodyChanges(upstream_model="up", output_tokens=4000, translated=True))
    assert source["prompt"] == "hi" and source["options"] == {"num_predict": 10} and source["messages"] == [user("hi")]


def test_a_rewritten_result_with_images_comes_back_as_text():
    body = chat(user(), assistant_calls(("screenshot", {}, None)), result("the screen", "screenshot") | {"images": [PNG]})
    parsed = view(body)
    assert parsed.conversation.tool_results()[0].content == [{"type": "text", "text": "the screen"}, {"type": "image_url"}]
    kept = WIRE.translation_source(body, parsed, BodyChanges(upstream_model="up", rewrites={0: [{"type": "text", "text": "short"}, {"type": "image_url"}]}))
    dropped = WIRE.translation_source(body, parsed, BodyChanges(upstream_model="up", rewrites={0: "[gone]"}))
    assert kept["messages"][2] == {**body["messages"][2], "content": "short"}
    assert dropped["messages"][2] == {"role": "tool", "content": "[gone]", "tool_name": "screenshot"}


def test_errors_are_ollamas_and_a_broken_stream_ends_with_an_error_line():
    error = WIRE.render_error(ApiError(404, "no such model", "invalid_request_error", "model_not_found"), "req_1")
    assert (error.status, orjson.loads(error.body)) == (404, {"error": "no such model"})
    framing = NdjsonFraming()
    assert framing.events(WIRE.stream_error("upstream stream interrupted: gone", "upstream_stream_interrupted", 3)) == b'{"error":"upstream stream interrupted: gone"}\n'


def test_the_framing_writes_a_line_an_event_and_a_keep_alive_still_parses():
    framing = NdjsonFraming()
    events = b'data: {"a":1}\n\ndata: {"b":\ndata: 2}\n\n'
    out = framing.events(events) + KEEP_ALIVE + framing.events(b'data: {"done":true}\n\n') + framing.close()
    assert out.endswith(b"\n") and [json.loads(line) for line in out.splitlines()] == [{"a": 1}, {"b": 2}, {"done": True}]
    assert framing.content_type == "application/x-ndjson"


def test_answers_lines_their_end_and_their_usage():
    last = answer_line(False, "m", created_at(0), "hi", "hmm", None, "stop", (12, 3))
    assert last["message"] == {"role": "assistant", "content": "hi", "thinking": "hmm"} and last["done"] is True
    assert (last["prompt_eval_count"], last["eval_count"], last["total_duration"]) == (12, 3, 0)
    raw = orjson.dumps(last)
    assert is_last_line(raw) and not is_last_line(orjson.dumps(answer_line(False, "m", "t", "hi"))) and not is_last_line(b'{"text": "\\"done\\": true"}')
    assert read_usage(raw).prompt_tokens == 12 and read_usage(raw).completion_tokens == 3 and read_usage(b"{}") is None
    assert answer_line(True, "m", "t", "hi") == {"model": "m", "created_at": "t", "response": "hi", "done": False}


@pytest.mark.parametrize("epoch", [0, 951782400, 1709164800, 1_765_000_123, 4_107_542_399, 253402300799])
def test_created_at_is_rfc_3339_utc_as_a_calendar_says(epoch):
    assert created_at(epoch) == datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_the_model_list_and_a_model_shown_as_ollamas_clients_read_them():
    from ollama import ListResponse, ShowResponse

    model = ListedModel("local-coder", 65_536, 8_192, "qwen3-coder via ollama", ("tools", "json_mode"))
    listed = ListResponse.model_validate_json(orjson.dumps(tags([model])), strict=True)
    assert listed.models[0].model == "local-coder" and tag(model)["name"] == "local-coder" and len(tag(model)["digest"]) == 64
    shown = ShowResponse.model_validate_json(orjson.dumps(show(model)), strict=True)
    assert shown.capabilities == ["completion", "tools"] and shown.modelinfo["pinch-router.context_length"] == 65_536
    assert shown.parameters == "num_ctx 65536"
    alias = show(ListedModel("auto", description="a routing alias", capabilities=("tools", "vision")))
    assert alias["capabilities"] == ["completion", "tools", "vision"] and "pinch-router.context_length" not in alias["model_info"]
