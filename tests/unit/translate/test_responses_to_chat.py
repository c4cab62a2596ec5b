"""A Responses request translated to chat completions: items to messages, tools, options."""

from __future__ import annotations

from typing import Any

import pytest

from router.translate import compaction
from router.wire.openai_responses.compaction import SUMMARY_LEAD_IN, encode_summary
from router.translate.responses_to_chat import responses_to_chat
from router.wire.openai_responses.validation import validate_responses_body
from tests.http.test_agent_fixtures import load
from tests.support.wire_factories import (
    EXEC_COMMAND,
    NAMESPACE_TOOL,
    WEB_SEARCH_TOOL,
    function_call,
    function_call_output,
    input_image,
    input_message,
    reasoning_item,
    responses_body,
)


def translate(body: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    translation = responses_to_chat(body, validate_responses_body(body).items)
    return translation.body, translation.dropped


def test_codex_after_two_prompts_becomes_a_chat_conversation_in_the_same_order() -> None:
    body = load("codex/0004-POST-v1-responses.json")["body"]
    chat, dropped = translate(body)
    items = body["input"]
    roles = [(m["role"], [c["id"] for c in m.get("tool_calls", [])], m.get("tool_call_id")) for m in chat["messages"]]
    assert roles == [
        ("system", [], None),
        ("system", [], None),
        ("user", [], None),
        ("user", [], None),
        ("assistant", ["call_mock_4"], None),  # the reasoning item before it is not sent
        ("tool", [], "call_mock_4"),
        ("assistant", [], None),
        ("user", [], None),
        ("assistant", ["call_mock_10"], None),
        ("tool", [], "call_mock_10"),
    ]
    developer = items[1]["content"]
    assert chat["messages"][1]["content"] == "\n\n".join(p["text"] for p in developer)  # two input_text parts joined
    assert chat["messages"][3]["content"] == "list the files"
    assert chat["messages"][4]["tool_calls"][0]["function"] == {"name": "exec_command", "arguments": '{"cmd":"ls"}'}
    assert chat["messages"][5]["content"] == items[6]["output"]
    assert chat["messages"][6]["content"] == items[8]["content"][0]["text"]
    assert "encrypted_content" not in str(chat) and "rs_mock" not in str(chat)
    assert [t["function"]["name"] for t in chat["tools"]] == [t["name"] for t in body["tools"] if t["type"] == "function"]
    assert chat["tools"][0]["function"]["parameters"] == body["tools"][0]["parameters"]
    assert dropped == ("tool namespace:multi_agent_v1", "tool web_search")
    assert chat["tool_choice"] == "auto" and chat["parallel_tool_calls"] is True
    assert chat["stream"] is True and chat["stream_options"] == {"include_usage": True}
    assert chat["prompt_cache_key"] == body["prompt_cache_key"]
    assert not {"input", "store", "include", "client_metadata", "reasoning", "reasoning_effort"} & set(chat)


def test_instructions_become_the_leading_system_message() -> None:
    chat, _ = translate(responses_body(input_message("user", "hi"), instructions="be brief"))
    assert chat["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


def test_a_string_input_is_one_user_message() -> None:
    chat, _ = translate({"model": "m", "input": "hello"})
    assert chat == {"model": "m", "messages": [{"role": "user", "content": "hello"}]}


def test_an_input_image_becomes_an_image_url_part() -> None:
    content = [{"type": "input_text", "text": "what is it?"}, input_image("https://example.test/cat.png", "low")]
    chat, _ = translate(responses_body({"type": "message", "role": "user", "content": content}))
    assert chat["messages"][0]["content"] == [
        {"type": "text", "text": "what is it?"},
        {"type": "image_url", "image_url": {"url": "https://example.test/cat.png", "detail": "low"}},
    ]


def test_parallel_calls_share_one_assistant_message_with_the_text_before_them() -> None:
    chat, _ = translate(
        responses_body(
            input_message("user", "go"),
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "running both"}]},
            reasoning_item("two at once"),
            function_call("c1", cmd="ls"),
            function_call("c2", cmd="pwd"),
            function_call_output("c1", "a.py"),
            function_call_output("c2", "/w"),
        )
    )
    assistant = chat["messages"][1]
    assert assistant["content"] == "running both" and [c["id"] for c in assistant["tool_calls"]] == ["c1", "c2"]
    assert [(m["role"], m.get("tool_call_id")) for m in chat["messages"][2:]] == [("tool", "c1"), ("tool", "c2")]


def test_a_call_after_an_item_dropped_joins_the_assistant_message_before_it() -> None:
    """An item chat cannot express between the assistant's message and its call is noted in its place;
    the call still joins the message (a note there was taken for the message: a 502)."""
    chat, dropped = translate(
        responses_body(
            input_message("user", "go"),
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "searching"}]},
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
            function_call("c1", cmd="ls"),
            function_call_output("c1", "a.py"),
        )
    )
    assert [(m["role"], m.get("content")) for m in chat["messages"]] == [("user", "go"), ("assistant", "searching"), ("tool", "a.py")]
    assert [c["id"] for c in chat["messages"][1]["tool_calls"]] == ["c1"]
    assert dropped == ("item web_search_call",)


def test_a_call_after_a_tool_output_starts_a_new_assistant_message() -> None:
    chat, _ = translate(
        responses_body(input_message("user", "go"), function_call("c1"), function_call_output("c1", "x"), function_call("c2"), function_call_output("c2", "y"))
    )
    assert [m["role"] for m in chat["messages"]] == ["user", "assistant", "tool", "assistant", "tool"]
    assert chat["messages"][1]["content"] is None


def test_only_the_first_output_of_a_call_id_is_sent() -> None:
    chat, dropped = translate(
        responses_body(input_message("user", "go"), function_call("c1"), function_call_output("c1", "first"), function_call_output("c1", "again"))
    )
    tools = [m for m in chat["messages"] if m["role"] == "tool"]
    assert tools == [{"role": "tool", "tool_call_id": "c1", "content": "first"}]
    assert dropped == ("item function_call_output:c1 (no unanswered call with that id)",)


def test_a_call_id_reused_in_a_later_turn_keeps_its_own_output() -> None:
    chat, dropped = translate(
        responses_body(
            input_message("user", "go"), function_call("call_0"), function_call_output("call_0", "first"),
            input_message("user", "again"), function_call("call_0"), function_call_output("call_0", "second"),
        )
    )
    assert [m.get("content") for m in chat["messages"] if m["role"] == "tool"] == ["first", "second"]
    assert dropped == ()


def test_an_output_without_its_call_is_not_sent() -> None:
    chat, dropped = translate(responses_body(input_message("user", "go"), function_call_output("ghost", "x")))
    assert [m["role"] for m in chat["messages"]] == ["user"]
    assert dropped == ("item function_call_output:ghost (no unanswered call with that id)",)


def test_an_output_given_as_parts_is_sent_as_its_text() -> None:
    chat, _ = translate(responses_body(function_call("c1"), function_call_output("c1", [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}])))
    assert chat["messages"][-1]["content"] == "a\n\nb"


def test_an_item_type_chat_cannot_express_is_dropped_and_reported() -> None:
    chat, dropped = translate(responses_body(input_message("user", "hi"), {"type": "web_search_call", "id": "ws_1", "status": "completed"}))
    assert chat["messages"] == [{"role": "user", "content": "hi"}]
    assert dropped == ("item web_search_call",)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"tool_choice": "required"}, {"tool_choice": "required"}),
        ({"tool_choice": {"type": "function", "name": "exec_command"}}, {"tool_choice": {"type": "function", "function": {"name": "exec_command"}}}),
        ({"tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": []}}, {}),
        ({"parallel_tool_calls": False}, {"parallel_tool_calls": False}),
    ],
)
def test_tool_options_follow_the_tools(extra: dict[str, Any], expected: dict[str, Any]) -> None:
    chat, _ = translate(responses_body(tools=[EXEC_COMMAND], **extra))
    assert {k: chat[k] for k in ("tool_choice", "parallel_tool_calls") if k in chat} == expected
    assert chat["tools"] == [{"type": "function", "function": {k: EXEC_COMMAND[k] for k in ("name", "description", "parameters", "strict")}}]


def test_with_only_tools_chat_cannot_run_no_tools_and_no_tool_options_are_sent() -> None:
    chat, dropped = translate(responses_body(tools=[NAMESPACE_TOOL, WEB_SEARCH_TOOL], tool_choice="auto", parallel_tool_calls=True))
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(chat)
    assert dropped == ("tool namespace:multi_agent_v1", "tool web_search")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ({"format": {"type": "text"}}, None),
        ({"format": {"type": "json_object"}}, {"type": "json_object"}),
        (
            {"format": {"type": "json_schema", "name": "answer", "schema": {"type": "object"}, "strict": True}},
            {"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": True}},
        ),
    ],
)
def test_text_format_becomes_response_format(text: dict[str, Any], expected: dict[str, Any] | None) -> None:
    chat, _ = translate(responses_body(text=text))
    assert chat.get("response_format") == expected


def test_limits_and_sampling_are_carried_and_responses_only_fields_are_not() -> None:
    chat, _ = translate(
        responses_body(
            max_output_tokens=256, temperature=0.2, top_p=0.9, user="u1", reasoning={"effort": "low", "summary": "auto"},
            store=False, include=["reasoning.encrypted_content"], truncation="auto", metadata={"a": "b"},
        )
    )
    assert chat["max_tokens"] == 256 and chat["temperature"] == 0.2 and chat["top_p"] == 0.9 and chat["user"] == "u1"
    assert chat["reasoning_effort"] == "low"
    assert not {"max_output_tokens", "store", "include", "truncation", "metadata", "stream", "stream_options"} & set(chat)


# --- Codex on its default model: code mode, its tools in an additional_tools item ----------------------------------

EXEC = {"type": "custom", "name": "exec", "description": "Run JavaScript: `await tools.exec_command(...)`",
        "format": {"type": "grammar", "syntax": "lark", "definition": "start: SOURCE"}}  # fmt: skip
WAIT = {"type": "function", "name": "wait", "parameters": {"type": "object", "properties": {"cell_id": {"type": "string"}}}}
ADDITIONAL = {"type": "additional_tools", "role": "developer", "tools": [
    {"type": "namespace", "name": "functions", "tools": [EXEC, WAIT]},
    {"type": "namespace", "name": "clock", "tools": [{"type": "function", "name": "sleep", "parameters": {"type": "object"}}]},
]}  # fmt: skip


def test_the_proxys_pinch_retrieve_stays_after_the_tools_of_additional_tools_items() -> None:
    # declared last in ``tools`` (router.core.retrieve), it follows Codex's code-mode tools in chat too (issue #44)
    from router.core.retrieve import RETRIEVE_TOOL

    declared = {"type": "function", "name": RETRIEVE_TOOL.name, "description": RETRIEVE_TOOL.description, "parameters": RETRIEVE_TOOL.parameters}
    chat, _ = translate({**responses_body(ADDITIONAL, input_message("user", "list the files")), "tools": [declared]})
    assert [t["function"]["name"] for t in chat["tools"]] == ["exec", "wait", "pinch_retrieve"]
    chat, _ = translate({**responses_body(ADDITIONAL, input_message("user", "x")), "tools": [WAIT | {"name": "own"}, declared]})
    assert [t["function"]["name"] for t in chat["tools"]] == ["own", "exec", "wait", "pinch_retrieve"]


def test_codex_code_mode_tools_and_calls_reach_chat_as_functions_and_come_back_as_custom_calls() -> None:
    from router.translate.chat_to_responses import ChatStreamTranslator, ResponseFrame, completion_to_response

    script = 'text(await tools.exec_command({cmd: "ls"}))'
    body = responses_body(
        ADDITIONAL,
        input_message("user", "list the files"),
        {"type": "custom_tool_call", "call_id": "c1", "name": "exec", "input": script},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "main.py"},
    )
    chat, dropped = translate(body)
    assert [t["function"]["name"] for t in chat["tools"]] == ["exec", "wait"]  # the functions namespace opened
    assert chat["tools"][0]["function"]["parameters"]["required"] == ["input"]
    assert dropped == ("tool namespace:clock",)
    call, result = chat["messages"][-2:]
    assert call["tool_calls"][0]["function"] == {"name": "exec", "arguments": '{"input":' + orjson_str(script) + "}"}
    assert result == {"role": "tool", "tool_call_id": "c1", "content": "main.py"}

    frame = ResponseFrame("resp_x", 0, body, responses_to_chat(body, body["input"]).custom_tools)
    assert frame.custom_tools == {"exec"}
    chat_call = {"id": "c2", "type": "function", "function": {"name": "exec", "arguments": '{"input": "exit()"}'}}
    completion = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [chat_call]}, "finish_reason": "tool_calls"}]}
    (item,) = completion_to_response(completion, frame)["output"]
    assert (item["type"], item["call_id"], item["name"], item["input"]) == ("custom_tool_call", "c2", "exec", "exit()")
    stream = ChatStreamTranslator(frame)
    events = stream.start()
    for fragment in ('{"inp', 'ut": "exit()"}'):
        events += stream.feed({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c2", "function": {"name": "exec", "arguments": fragment}}]}}]})
    events += stream.finish()
    kinds = [e["type"] for e in events]
    assert "response.function_call_arguments.delta" not in kinds
    assert kinds[-4:] == ["response.custom_tool_call_input.delta", "response.custom_tool_call_input.done", "response.output_item.done", "response.completed"]
    assert events[-2]["item"]["input"] == "exit()" and events[-1]["response"]["output"][0]["type"] == "custom_tool_call"


def orjson_str(text: str) -> str:
    import orjson

    return orjson.dumps(text).decode()


def test_a_compaction_trigger_asks_the_chat_model_for_a_summary_and_rules_out_tool_calls() -> None:
    body = responses_body(input_message("user", "list the files"), {"type": "compaction_trigger"}, tools=[EXEC_COMMAND], tool_choice="auto")
    chat, dropped = translate(body)
    assert chat["messages"] == [{"role": "user", "content": "list the files"}, {"role": "user", "content": compaction.PROMPT}]
    assert chat["tool_choice"] == "none" and chat["tools"] and dropped == ()


def test_a_compaction_item_the_proxy_made_reaches_chat_as_its_summary_and_anothers_is_dropped() -> None:
    ours = {"type": "compaction", "id": "cmp_1", "encrypted_content": encode_summary("ls listed main.py")}
    theirs = {"type": "compaction", "id": "cmp_2", "encrypted_content": "gAAAAB-opaque"}
    chat, dropped = translate(responses_body(ours, theirs, input_message("user", "go on")))
    assert chat["messages"] == [{"role": "user", "content": SUMMARY_LEAD_IN + "ls listed main.py"}, {"role": "user", "content": "go on"}]
    assert dropped == ("item compaction",)
