"""An Ollama client's request as chat's, and chat's answer (whole and streamed) as Ollama's lines; and through chat
to a native Ollama provider, the same request and answer (the pair composed by the registry)."""

from __future__ import annotations

import orjson
import pytest

from router.core.request_view import BodyChanges, RequestTarget
from router.core.results import Candidate
from router.translate.ollama_to_chat import ChatToOllamaLines, OllamaToChat, image_url
from router.translate.protocol import MalformedAnswer
from router.translate.registry import translator
from router.wire.ollama.adapter import OLLAMA_ADAPTER as WIRE
from router.wire.ollama.answers import NdjsonFraming
from tests.support.wire_factories import ANSWER_IDS

CANDIDATE = Candidate("local-coder", "p", "qwen3-coder", context_window=65_536)
THINKER = Candidate("thinker", "p", "r1", reasoning_content=True)
PNG, JPEG = "iVBORw0KGgoAAAA", "/9j/4AAQSkZJRg"
SHELL = {"type": "function", "function": {"name": "shell", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}


def source(body, action="chat", **changes):
    parsed = WIRE.parse(body, 2000, RequestTarget({"action": action}))
    assert not hasattr(parsed, "status"), parsed
    return WIRE.translation_source(body, parsed, BodyChanges(upstream_model=CANDIDATE.upstream_model, translated=True, **changes))


def chat_of(body, candidate=CANDIDATE, action="chat"):
    translation = OllamaToChat(ANSWER_IDS)
    return translation, translation.chat_request(source(body, action), candidate)


def test_a_tool_loop_from_a_client_that_keeps_no_call_ids_is_paired_by_name_and_order():
    body = {"model": "auto", "messages": [
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "list and read"},
        {"role": "assistant", "content": "", "thinking": "let me look", "tool_calls": [
            {"function": {"name": "shell", "arguments": {"command": "ls"}}}, {"function": {"name": "read", "arguments": {"path": "a"}}}]},
        {"role": "tool", "content": "A", "tool_name": "read"}, {"role": "tool", "content": "a\nb", "tool_name": "shell"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_x", "function": {"name": "shell", "arguments": {}}}]},
        {"role": "tool", "content": "done", "tool_call_id": "call_x"},
    ], "tools": [SHELL], "stream": False}  # fmt: skip
    _, chat = chat_of(body)
    messages = chat["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool", "assistant", "tool"]
    assert [c["id"] for c in messages[2]["tool_calls"]] == ["call_2_0", "call_2_1"]  # the same on every turn
    assert messages[2]["tool_calls"][0]["function"] == {"name": "shell", "arguments": '{"command":"ls"}'}
    assert [(m["tool_call_id"], m["content"]) for m in messages[3:5]] == [("call_2_1", "A"), ("call_2_0", "a\nb")]  # by name, not order
    assert messages[6]["tool_call_id"] == "call_x" and "reasoning_content" not in messages[2]  # only for a model that wants it back
    _, thinker = chat_of(body, THINKER)
    assert thinker["messages"][2]["reasoning_content"] == "let me look"
    assert chat["tools"] == [SHELL] and "stream" not in chat and chat["model"] == "qwen3-coder"


def test_images_options_format_and_think_as_chats():
    body = {"model": "auto", "messages": [{"role": "user", "content": "what is it", "images": [PNG, JPEG]}],
            "options": {"num_predict": 300, "temperature": 0.1, "top_k": 40, "num_ctx": 4096, "stop": ["\n\n"], "seed": 7},
            "format": {"type": "object"}, "think": "high", "keep_alive": "10m"}  # fmt: skip
    translation, chat = chat_of(body)
    assert chat["messages"][0]["content"] == [
        {"type": "text", "text": "what is it"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{JPEG}"}},
    ]
    assert (chat["max_tokens"], chat["temperature"], chat["stop"], chat["seed"]) == (300, 0.1, ["\n\n"], 7)
    assert "top_k" not in chat and "num_ctx" not in chat and "keep_alive" not in chat
    assert chat["response_format"] == {"type": "json_schema", "json_schema": {"name": "output", "schema": {"type": "object"}}}
    assert chat["reasoning_effort"] == "high" and chat["stream"] is True and chat["stream_options"] == {"include_usage": True}
    assert translation.dropped == ()
    _, plain = chat_of({"model": "m", "messages": [{"role": "user", "content": "x"}], "format": "json", "think": True})
    assert plain["response_format"] == {"type": "json_object"} and "reasoning_effort" not in plain
    assert image_url("data:image/gif;base64,R0lG") == "data:image/gif;base64,R0lG" and image_url("AAAA").startswith("data:image/png")


def test_a_tool_results_images_follow_the_results_in_a_user_message():
    body = {"model": "m", "messages": [
        {"role": "user", "content": "look"}, {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "shot", "arguments": {}}}]},
        {"role": "tool", "content": "the screen", "tool_name": "shot", "images": [PNG]}, {"role": "user", "content": "well?"},
    ]}  # fmt: skip
    _, chat = chat_of(body)
    assert [m["role"] for m in chat["messages"]] == ["user", "assistant", "tool", "user"]
    assert chat["messages"][3]["content"][0]["type"] == "image_url" and chat["messages"][3]["content"][-1] == {"type": "text", "text": "well?"}


def test_a_generate_request_is_answered_in_generates_shape_and_names_what_it_cannot_carry():
    translation, chat = chat_of({"model": "m", "prompt": "say hi", "system": "be brief", "template": "{{ .Prompt }}", "context": [1, 2], "stream": False}, action="generate")
    assert chat["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "say hi"}]
    assert translation.dropped == ("template", "context")
    answer = orjson.loads(translation.response(completion("hello")))
    assert answer["response"] == "hello" and "message" not in answer and answer["done"] is True and answer["model"] == "local-coder"


def completion(text=None, calls=(), finish="stop", reasoning=None):
    message = {"role": "assistant", "content": text, **({"reasoning_content": reasoning} if reasoning else {})}
    if calls:
        message["tool_calls"] = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls]
    return {"id": "c", "object": "chat.completion", "created": 1, "model": "up", "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}}  # fmt: skip


def test_a_whole_answer_as_ollamas():
    translation, _ = chat_of({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": False})
    answer = orjson.loads(translation.response(completion(None, [("call_1", "shell", '{"command":"ls"}'), ("", "read", "not json")], "tool_calls", "hmm")))
    assert answer["message"] == {"role": "assistant", "content": "", "thinking": "hmm", "tool_calls": [
        {"id": "call_1", "function": {"name": "shell", "arguments": {"command": "ls"}}},
        {"id": f"call_{ANSWER_IDS.token[:12]}_1", "function": {"name": "read", "arguments": {"arguments": "not json"}}},
    ]}  # fmt: skip
    assert (answer["done"], answer["done_reason"], answer["prompt_eval_count"], answer["eval_count"]) == (True, "stop", 40, 9)
    assert answer["created_at"] == "2023-11-14T22:13:20Z"
    cut = orjson.loads(translation.response(completion("partial", finish="length")))
    assert cut["done_reason"] == "length"
    quiet, _ = chat_of({"model": "m", "messages": [{"role": "user", "content": "x"}], "think": False})
    assert "thinking" not in orjson.loads(quiet.response(completion("hi", reasoning="hmm")))["message"]
    with pytest.raises(MalformedAnswer):
        translation.response({"choices": "no"})


def chunk(delta=None, finish=None, usage=None, choices=True):
    body = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "up", "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if choices else []}
    return b"data: " + orjson.dumps({**body, **({"usage": usage} if usage else {})}) + b"\n\n"


def lines(stream, *events, cut=7):
    raw = b"".join(events)
    out = b"".join(stream.feed(raw[i : i + cut]) for i in range(0, len(raw), cut)) + stream.finish()
    return [orjson.loads(line) for line in NdjsonFraming().events(out).splitlines()]


def test_a_stream_as_ollamas_lines_with_the_calls_whole_in_one_line():
    stream = ChatToOllamaLines("local-coder", "t", "call_abc")
    got = lines(
        stream,
        chunk({"role": "assistant", "reasoning_content": "hm"}), chunk({"content": "Let me "}), chunk({"content": "look."}),
        chunk({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "shell", "arguments": '{"comm'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'and":"ls"}'}}]}),
        chunk(finish="tool_calls"), chunk(usage={"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}, choices=False), b"data: [DONE]\n\n",
    )  # fmt: skip
    assert [(l["message"].get("thinking"), l["message"]["content"]) for l in got[:3]] == [("hm", ""), (None, "Let me "), (None, "look.")]
    assert got[3]["message"]["tool_calls"] == [{"id": "call_1", "function": {"name": "shell", "arguments": {"command": "ls"}}}] and got[3]["done"] is False
    assert got[-1]["done"] is True and got[-1]["done_reason"] == "stop" and (got[-1]["prompt_eval_count"], got[-1]["eval_count"]) == (5, 2)
    assert len(got) == 5 and stream.usage.prompt_tokens == 5


def test_a_stream_cut_before_its_finish_reason_owes_no_last_line_and_one_after_it_gets_it():
    assert lines(ChatToOllamaLines("m", "t", "c"), chunk({"content": "hal"})) == [{"model": "m", "created_at": "t", "message": {"role": "assistant", "content": "hal"}, "done": False}]
    ended = lines(ChatToOllamaLines("m", "t", "c", generate=True), chunk({"content": "hi"}), chunk(finish="length"))
    assert ended[0]["response"] == "hi" and ended[-1]["done_reason"] == "length" and ended[-1]["done"] is True


def test_to_a_native_ollama_provider_the_request_goes_through_chat_and_the_answer_comes_back():
    make = translator("ollama", "ollama-chat", ANSWER_IDS)
    body = {"model": "auto", "messages": [{"role": "user", "content": "hi", "images": [PNG]}], "options": {"num_predict": 100}, "stream": False}
    native = orjson.loads(make.request(source(body), CANDIDATE))
    assert native["messages"] == [{"role": "user", "content": "hi", "images": [PNG]}]
    assert native["options"] == {"num_predict": 100, "num_ctx": 65_536} and native["stream"] is False  # the model's own window
    answer = orjson.loads(make.response({"model": "qwen3-coder", "message": {"role": "assistant", "content": "a cat"}, "done": True, "done_reason": "stop", "prompt_eval_count": 3, "eval_count": 2}))
    assert answer["message"]["content"] == "a cat" and answer["eval_count"] == 2 and answer["model"] == "local-coder"
