"""Translating Anthropic Messages ↔ OpenAI chat: requests, answers and streams, both ways."""

from __future__ import annotations

import orjson
import pytest

from router.tools.mock_answers import ScriptedAnswer, ToolCall
from router.tools.mock_anthropic import events as mock_anthropic_events
from router.tools.mock_anthropic import message as mock_anthropic_message
from router.translate.chat_to_messages import (
    MessagesToChatStream,
    chat_to_messages_body,
    message_to_chat_completion,
)
from router.translate.json_values import tool_input
from router.translate.messages_to_chat import (
    NO_RESULT,
    ChatToMessagesStream,
    chat_completion_to_message,
    messages_to_chat_body,
)
from tests.support.anthropic_factories import (
    BASH,
    PNG,
    assistant,
    body,
    captured,
    image,
    reminder,
    text,
    thinking,
    tool_result,
    tool_use,
    user,
)
from tests.support.factories import assistant as chat_assistant
from tests.support.factories import image_part, system, tool
from tests.support.factories import user as chat_user


def sse_events(raw: list[bytes]) -> list[tuple[str, dict]]:
    """(event name, data) of Anthropic SSE frames."""
    out = []
    for frame in raw:
        lines = frame.decode().strip().split("\n")
        name = lines[0].removeprefix("event: ")
        out.append((name, orjson.loads(lines[1].removeprefix("data: "))))
    return out


def chat_chunks(raw: list[bytes]) -> list[object]:
    out = []
    for frame in raw:
        data = frame.decode().strip().removeprefix("data: ")
        out.append(data if data == "[DONE]" else orjson.loads(data))
    return out


# ---- Anthropic request → chat request


def test_claude_codes_request_becomes_a_chat_request() -> None:
    sent = captured("claude-code/0004-POST-v1-messages.json")["body"]
    chat = messages_to_chat_body(sent, "qwen2.5-coder:7b")
    assert chat["model"] == "qwen2.5-coder:7b" and chat["max_tokens"] == 128000
    assert chat["stream"] is True and chat["stream_options"] == {"include_usage": True}
    assert {"thinking", "context_management", "output_config", "metadata", "system"}.isdisjoint(chat)
    roles = [m["role"] for m in chat["messages"]]
    assert roles == ["system", "user", "system", "assistant", "tool", "assistant", "user", "assistant", "tool"]
    assert not chat["messages"][0]["content"].startswith("x-anthropic-billing-header")
    assert chat["messages"][1]["content"][0]["text"].startswith("<system-reminder>")  # reminders are context: kept
    assert chat["messages"][3]["tool_calls"] == [{"id": "toolu_mock_2", "type": "function", "function": {"name": "Bash", "arguments": '{"command":"ls"}'}}]
    assert chat["messages"][4] == {"role": "tool", "tool_call_id": "toolu_mock_2", "content": "main.py\nnotes.txt"}
    assert "reasoning_content" not in chat["messages"][3]
    assert [t["function"]["name"] for t in chat["tools"]] == [t["name"] for t in sent["tools"]]
    assert chat["tools"][0]["function"]["parameters"] == sent["tools"][0]["input_schema"]
    assert all(set(m) <= {"role", "content", "tool_calls", "tool_call_id"} for m in chat["messages"])


def test_the_safeguards_field_never_leaves_for_a_chat_provider() -> None:
    sent = captured("claude-code-tui/0001-POST-v1-messages.json")["body"]
    assert "safeguards" in sent
    assert b"classifier_context" not in orjson.dumps(messages_to_chat_body(sent, "m"))


def test_thinking_goes_back_as_reasoning_content_when_the_provider_needs_it() -> None:
    sent = body(user("go"), assistant(thinking("plan"), tool_use("t1")), user(tool_result("t1", "ok")))
    chat = messages_to_chat_body(sent, "deepseek", reasoning_content=True)
    assert chat["messages"][2]["reasoning_content"] == "plan"


def test_one_result_per_call_survives_duplicates_orphans_and_missing_results() -> None:
    sent = body(
        user("go"),
        assistant(tool_use("t1"), tool_use("t2")),
        user(tool_result("t1", "first"), tool_result("t1", "again"), tool_result("ghost", "?"), text("more")),
        assistant("done"),
    )
    chat = messages_to_chat_body(sent, "m")["messages"]
    tools = [(m["tool_call_id"], m["content"]) for m in chat if m["role"] == "tool"]
    assert tools == [("t1", "first"), ("t2", NO_RESULT)]
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "tool", "tool", "user", "assistant"]


def test_images_become_data_urls_also_from_tool_results() -> None:
    sent = body(user(text("what is this?"), image()), assistant(tool_use("t1")), user(tool_result("t1", [text("shot"), image(media_type="image/jpeg")])))
    chat = messages_to_chat_body(sent, "m")["messages"]
    assert chat[1]["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    assert chat[3] == {"role": "tool", "tool_call_id": "t1", "content": "shot"}
    assert chat[4]["content"] == [{"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{PNG}"}}]


@pytest.mark.parametrize(
    "choice, expected",
    [({"type": "auto"}, "auto"), ({"type": "any"}, "required"), ({"type": "none"}, "none"),
     ({"type": "tool", "name": "Bash"}, {"type": "function", "function": {"name": "Bash"}})],
)
def test_tool_choice_is_mapped(choice: dict, expected: object) -> None:
    assert messages_to_chat_body(body(tool_choice=choice), "m")["tool_choice"] == expected


def test_parallel_tool_use_off_stop_sequences_and_json_output_are_mapped() -> None:
    schema = {"type": "object", "properties": {"title": {"type": "string"}}}
    chat = messages_to_chat_body(
        body(tool_choice={"type": "auto", "disable_parallel_tool_use": True}, stop_sequences=["END"], temperature=0.2, top_k=5,
             output_config={"format": {"type": "json_schema", "schema": schema}, "effort": "low"}),
        "m",
    )
    assert chat["parallel_tool_calls"] is False and chat["stop"] == ["END"] and chat["temperature"] == 0.2
    assert chat["response_format"] == {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}
    assert "top_k" not in chat and "reasoning_effort" not in chat


def test_server_tools_are_not_sent_to_a_chat_provider() -> None:
    chat = messages_to_chat_body(body(tools=[BASH, {"type": "web_search_20250305", "name": "web_search"}]), "m")
    assert [t["function"]["name"] for t in chat["tools"]] == ["Bash"]


# ---- chat answer → Anthropic answer


def completion(message: dict, finish: str, usage: dict | None = None) -> dict:
    return {"id": "cmpl1", "object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage or {"prompt_tokens": 120, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 20}}}


def test_a_tool_call_answer_becomes_a_tool_use_message() -> None:
    answer = completion(chat_assistant(None, [("call_1", "Bash", '{"command": "ls"}')]), "tool_calls")
    message = chat_completion_to_message(answer, "claude-opus-5-5", input_estimate=99, message_id="msg_1")
    assert message["content"] == [{"type": "tool_use", "id": "call_1", "name": "Bash", "input": {"command": "ls"}}]
    assert message["stop_reason"] == "tool_use" and message["type"] == "message" and message["model"] == "claude-opus-5-5"
    assert message["usage"] == {"input_tokens": 100, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 20, "output_tokens": 7}


@pytest.mark.parametrize("finish, stop", [("stop", "end_turn"), ("length", "max_tokens"), ("content_filter", "refusal"), (None, "end_turn")])
def test_finish_reasons_become_stop_reasons(finish: str | None, stop: str) -> None:
    assert chat_completion_to_message(completion(chat_assistant("hi"), finish), "m", 5, message_id="msg_1")["stop_reason"] == stop


def test_without_upstream_usage_the_input_is_the_estimate_never_zero() -> None:
    message = chat_completion_to_message({"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]}, "m", 321, message_id="msg_1")
    assert message["usage"]["input_tokens"] == 321


@pytest.mark.parametrize("arguments, expected", [('{"a": 1}', {"a": 1}), ("", {}), ("[1]", {"arguments": "[1]"}), ("{broken", {"arguments": "{broken"})])
def test_tool_arguments_become_an_input_object(arguments: str, expected: dict) -> None:
    assert tool_input(arguments) == expected


def chat_stream_chunks() -> list[dict]:
    """What an OpenAI-compatible server streams for text then two interleaved tool calls, usage last."""
    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {"id": "c1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def call(index: int, arguments: str, id_: str | None = None, name: str | None = None) -> dict:
        function = {"arguments": arguments, **({"name": name} if name else {})}
        return {"index": index, **({"id": id_, "type": "function"} if id_ else {}), "function": function}

    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Let me "}),
        chunk({"content": "look."}),
        chunk({"tool_calls": [call(0, "", "call_a", "Bash")]}),
        chunk({"tool_calls": [call(0, '{"comm')]}),
        chunk({"tool_calls": [call(1, '{"pattern":', "call_b", "Grep")]}),
        chunk({"tool_calls": [call(0, 'and": "ls"}')]}),
        chunk({"tool_calls": [call(1, ' "x"}')]}),
        chunk({}, "tool_calls"),
        {"id": "c1", "choices": [], "usage": {"prompt_tokens": 4000, "completion_tokens": 30}},
    ]


def test_a_chat_stream_becomes_anthropic_events_one_by_one() -> None:
    stream = ChatToMessagesStream(model="claude-opus-5-5", input_estimate=3900, message_id="msg_1")
    raw = [frame for chunk in chat_stream_chunks() for frame in stream.chunk(chunk)] + stream.finish()
    events = sse_events(raw)
    names = [name for name, _ in events]
    assert names == [
        "message_start", "ping",
        "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_start", "content_block_delta",
        "content_block_delta", "content_block_delta", "content_block_stop", "content_block_stop",
        "message_delta", "message_stop",
    ]
    assert all(data["type"] == name for name, data in events)
    start = events[0][1]["message"]
    assert start["usage"]["input_tokens"] == 3900 and start["model"] == "claude-opus-5-5" and start["content"] == []
    assert events[6][1]["content_block"] == {"type": "tool_use", "id": "call_a", "name": "Bash", "input": {}}
    rebuilt: dict[int, str] = {}
    for name, data in events:
        if name == "content_block_delta" and data["delta"]["type"] == "input_json_delta":
            rebuilt[data["index"]] = rebuilt.get(data["index"], "") + data["delta"]["partial_json"]
    assert {i: orjson.loads(s) for i, s in rebuilt.items()} == {1: {"command": "ls"}, 2: {"pattern": "x"}}
    final = events[-2][1]
    assert final["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert final["usage"]["input_tokens"] == 4000 and final["usage"]["output_tokens"] == 30


def test_reasoning_streams_as_a_thinking_block_when_carried() -> None:
    stream = ChatToMessagesStream(model="m", input_estimate=10, message_id="msg_1", reasoning_content=True)
    chunks = [{"choices": [{"delta": {"reasoning_content": "hmm"}}]}, {"choices": [{"delta": {"content": "hi"}, "finish_reason": "stop"}]}]
    events = sse_events([f for c in chunks for f in stream.chunk(c)] + stream.finish())
    blocks = [d["content_block"]["type"] for n, d in events if n == "content_block_start"]
    assert blocks == ["thinking", "text"] and events[-2][1]["delta"]["stop_reason"] == "end_turn"


# ---- chat request → Anthropic request


def test_an_openai_chat_request_becomes_a_messages_request() -> None:
    chat = {
        "model": "auto",
        "messages": [
            system("be brief"),
            chat_user([{"type": "text", "text": "what is it?"}, image_part(f"data:image/png;base64,{PNG}")]),
            chat_assistant("checking", [("call_1", "Bash", '{"command": "ls"}'), ("call_2", "Bash", "not json")]),
            tool("call_1", "a.py"),
            tool("call_2", [{"type": "text", "text": "b.py"}]),
            chat_user("thanks"),
        ],
        "tools": [{"type": "function", "function": {"name": "Bash", "description": "shell", "parameters": BASH["input_schema"]}}],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "stop": "END",
        "stream": True,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}},
    }
    sent = chat_to_messages_body(chat, "claude-haiku", default_max_tokens=4096)
    assert sent["model"] == "claude-haiku" and sent["system"] == "be brief" and sent["max_tokens"] == 4096
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    assert sent["messages"][0]["content"][1] == image()
    assert sent["messages"][1]["content"] == [text("checking"), tool_use("call_1", command="ls"), {"type": "tool_use", "id": "call_2", "name": "Bash", "input": {"arguments": "not json"}}]
    assert sent["messages"][2]["content"] == [tool_result("call_1", "a.py"), tool_result("call_2", "b.py"), text("thanks")]
    assert sent["tools"] == [{"name": "Bash", "input_schema": BASH["input_schema"], "description": "shell"}]
    assert sent["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert sent["stop_sequences"] == ["END"] and sent["stream"] is True
    assert sent["output_config"] == {"format": {"type": "json_schema", "schema": {"type": "object"}}}


def test_the_clients_output_limit_is_kept() -> None:
    chat = {"messages": [chat_user("hi")], "max_completion_tokens": 500, "max_tokens": 900}
    assert chat_to_messages_body(chat, "c", default_max_tokens=4096)["max_tokens"] == 500


# ---- Anthropic answer → chat answer


def scripted_tool_call() -> ScriptedAnswer:
    return ScriptedAnswer(tool_call=ToolCall("toolu_1", "Bash", {"command": "ls -la"}), reasoning="I will look.")


def test_an_anthropic_message_becomes_a_chat_completion() -> None:
    request = body(user("list"), thinking={"type": "enabled"})
    completion_ = message_to_chat_completion(mock_anthropic_message(request, scripted_tool_call()), "claude", 1_700_000_000)
    assert completion_["created"] == 1_700_000_000  # when the answer was made, not 0
    choice = completion_["choices"][0]
    assert choice["logprobs"] is None and choice["message"]["refusal"] is None  # what OpenAI sends when there are none
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"] == [{"id": "toolu_1", "type": "function", "function": {"name": "Bash", "arguments": '{"command":"ls -la"}'}}]
    assert choice["message"]["reasoning_content"] == "I will look."
    assert completion_["usage"]["prompt_tokens"] > 0


def test_an_anthropic_stream_becomes_chat_chunks_with_the_same_tool_arguments() -> None:
    request = body(user("list"), stream=True)
    stream = MessagesToChatStream(model="claude", created=1_700_000_000, include_usage=True)
    raw = []
    for frame in mock_anthropic_events(request, scripted_tool_call()):
        data = frame.decode().split("data: ", 1)[1]
        raw += stream.event(orjson.loads(data))
    chunks = chat_chunks(raw)
    assert chunks[-1] == "[DONE]" and stream.finish() == []
    calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks[:-2] if c["choices"] and "tool_calls" in c["choices"][0]["delta"]]
    assert calls[0]["id"] == "toolu_1" and calls[0]["function"]["name"] == "Bash"
    assert orjson.loads("".join(c["function"]["arguments"] for c in calls)) == {"command": "ls -la"}
    finishes = [c["choices"][0]["finish_reason"] for c in chunks[:-1] if c["choices"]]
    assert finishes[-1] == "tool_calls"
    usage = chunks[-2]["usage"]
    assert chunks[-2]["choices"] == [] and usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0


def test_an_anthropic_error_event_becomes_an_error_chunk_and_done() -> None:
    stream = MessagesToChatStream(model="claude", created=1_700_000_000)
    chunks = chat_chunks(stream.event({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
    assert chunks == [{"error": {"message": "Overloaded", "type": "upstream_error", "param": None, "code": "overloaded_error"}}, "[DONE]"]


def test_reminders_reach_the_chat_provider() -> None:
    chat = messages_to_chat_body(body(user(reminder("x"), text("go"))), "m")
    assert chat["messages"][1]["content"][0]["text"].startswith("<system-reminder>")


@pytest.mark.parametrize("stream", [True, False])
def test_a_call_the_provider_sent_without_an_id_gets_one_unique_in_the_conversation(stream):
    """Some chat servers send calls without ids: ``toolu_0`` in every answer made a session's tool_use ids repeat."""
    def tool_use_ids(message_id: str) -> list[str]:
        if not stream:
            answer = completion(chat_assistant(None, [("", "Bash", '{"command": "ls"}')]), "tool_calls")
            return [b["id"] for b in chat_completion_to_message(answer, "m", 5, message_id=message_id)["content"] if b["type"] == "tool_use"]
        stream_ = ChatToMessagesStream(model="m", input_estimate=5, message_id=message_id)
        head = {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "type": "function", "function": {"name": "Bash", "arguments": "{}"}}]}}]}
        events = stream_.chunk(head) + stream_.chunk({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}) + stream_.finish()
        starts = [orjson.loads(e.split(b"data: ", 1)[1]) for e in events if e.startswith(b"event: content_block_start")]
        return [s["content_block"]["id"] for s in starts if s["content_block"]["type"] == "tool_use"]

    first, second = tool_use_ids("msg_aaa"), tool_use_ids("msg_bbb")
    assert first == ["toolu_aaa_0"] and second == ["toolu_bbb_0"]
