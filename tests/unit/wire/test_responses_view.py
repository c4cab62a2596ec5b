"""Responses input items as the neutral view: units, tool results, turns, and what the gate sees."""

from __future__ import annotations

from typing import Any

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from router.translate.responses_to_chat import responses_to_chat
from router.wire.openai_chat.view import extract_turn_text
from router.wire.openai_responses.validation import check_responses_body, validate_responses_body
from router.wire.openai_responses.view import (
    OPENAI_RESPONSES,
    is_model_item,
    items_with,
    responses_view,
)
from tests.http.test_agent_fixtures import load
from tests.support.wire_factories import (
    EXEC_COMMAND,
    function_call,
    function_call_output,
    input_image,
    input_message,
    reasoning_item,
    responses_body,
)


def view_of(body: dict[str, Any]) -> Any:
    return responses_view(body, validate_responses_body(body), 2000)


def test_codex_transcript_units_results_and_turns() -> None:
    body = load("codex/0004-POST-v1-responses.json")["body"]
    view = view_of(body)
    conversation = view.conversation
    assert view.wire == OPENAI_RESPONSES and view.stream is True and view.model == "mock-model"
    assert list(view.units) == body["input"]
    # outputs only: never the reasoning items, their encrypted content, the calls or the messages
    assert [(r.unit, r.id) for r in conversation.tool_results()] == [(6, "call_mock_4"), (12, "call_mock_10")]
    assert conversation.tool_results()[0].content == body["input"][6]["output"]
    # each run of the model's items (reasoning, call / assistant message) is one turn
    assert conversation.turn_starts() == [4, 7, 10]
    assert [conversation.tool_name(r.unit) for r in conversation.tool_results()] == ["exec_command", "exec_command"]
    assert view.offers_tools and view.tools_present and not view.has_images and not view.json_output
    assert view.tools == body["tools"]
    assert view.turn_text.task == "which of them is Python?"
    assert view.turn_text.step == 'exec_command({"cmd":"ls"})'
    assert view.opening[0::2] == ("system", "system", "user")  # the developer messages, then the first user message


def test_instructions_open_the_session_and_are_counted() -> None:
    view = view_of(responses_body(input_message("user", "hi"), instructions="be brief"))
    assert view.opening == ("system", "be brief", "user", "hi")
    assert view.tools == [{"instructions": "be brief"}]


def test_images_in_messages_or_outputs_are_seen() -> None:
    message = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "see"}, input_image()]}
    assert view_of(responses_body(message)).has_images
    output = function_call_output("c1", [input_image()])
    assert view_of(responses_body(input_message("user", "x"), function_call("c1"), output)).has_images
    assert not view_of(responses_body()).has_images


def test_json_output_is_read_from_text_format() -> None:
    assert view_of(responses_body(text={"format": {"type": "json_schema", "name": "a", "schema": {}}})).json_output
    assert view_of(responses_body(text={"format": {"type": "json_object"}})).json_output
    assert not view_of(responses_body(text={"format": {"type": "text"}})).json_output


def test_tool_history_without_tools_offered_still_needs_a_tool_model() -> None:
    view = view_of(responses_body(input_message("user", "x"), function_call("c1"), function_call_output("c1", "y")))
    assert view.tools_present and not view.offers_tools


def checked_view(body: dict[str, Any]) -> Any:
    checked = check_responses_body(body, 64)
    assert checked.request is not None
    return responses_view(body, checked.request, 2000, checked)


def test_codex_code_mode_offers_its_tools_in_additional_tools_and_its_custom_outputs_are_results() -> None:
    # Codex on its default model: no tools, its exec (a custom tool) in an additional_tools item; its
    # outputs custom_tool_call_output items of text parts (issue #44: pinch saw neither)
    body = load("on-defaults/codex/0002-POST-v1-responses.json")["body"]
    assert not body.get("tools") and body["input"][0]["type"] == "additional_tools"
    for view in (view_of(body), checked_view(body)):  # the view's own scan, and the fused check's
        conversation = view.conversation
        assert view.offers_tools and view.tools_present
        assert [(r.unit, r.id) for r in conversation.tool_results()] == [(9, "call_mock_7")]
        assert conversation.tool_results()[0].content == body["input"][9]["output"]
        assert conversation.tool_name(9) == "exec"
        assert conversation.tool_call(9) == ("exec", body["input"][8]["input"])  # its freeform input for arguments
    # without the additional_tools item: no tools offered, the history still needs a tool model
    view = checked_view({**body, "input": body["input"][1:]})
    assert not view.offers_tools and view.tools_present and [r.id for r in view.conversation.tool_results()] == ["call_mock_7"]


def test_a_custom_output_is_a_result_on_every_path_of_the_check_and_only_with_a_call_id_and_an_output() -> None:
    call = {"type": "custom_tool_call", "call_id": "c1", "name": "exec", "input": "text(1)"}
    outputs = [
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "plain"},  # the short path: a string
        {"type": "custom_tool_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "a"}]},  # usual parts
        {"type": "custom_tool_call_output", "call_id": "c1", "output": [input_image(), {"type": "input_text", "text": "a"}]},  # the long path
    ]
    for output in outputs:
        body = responses_body(input_message("user", "x"), call, output)
        for view in (view_of(body), checked_view(body)):
            assert [r.id for r in view.conversation.tool_results()] == ["c1"] and view.tools_present
            assert view.conversation.tool_name(2) == "exec"
    assert view_of(responses_body(input_message("user", "x"), call, outputs[2])).has_images
    for odd in ({"type": "custom_tool_call_output", "call_id": 7, "output": "x"}, {"type": "custom_tool_call_output", "call_id": "c1", "output": {"x": 1}}):
        body = responses_body(input_message("user", "x"), call, odd)  # passes as sent, as before, but is no result
        assert view_of(body).conversation.tool_results() == [] and checked_view(body).conversation.tool_results() == []


def test_the_output_limit_is_max_output_tokens() -> None:
    assert view_of(responses_body(max_output_tokens=300)).output_limit == 300
    assert view_of(responses_body()).output_limit is None


def test_rewrites_replace_only_the_outputs_they_name() -> None:
    items = [input_message("user", "go"), reasoning_item("r"), function_call("c1"), function_call_output("c1", "long"), function_call("c2"), function_call_output("c2", "kept")]
    view = view_of(responses_body(*items, tools=[EXEC_COMMAND]))
    results = view.conversation.result_units()
    out = items_with(items, results, {0: "[compressed]"})
    assert out[3] == {**items[3], "output": "[compressed]"} and items[3]["output"] == "long"
    assert all(out[i] is items[i] for i in (0, 1, 2, 4, 5))
    assert items_with(items, results, {}) is items


# --- the turn text, read from the items themselves -------------------------------------------------------------------

_text = st.text(alphabet="abc xyz\n", max_size=40)
_part = st.one_of(
    st.builds(lambda t: {"type": "input_text", "text": t}, _text),
    st.builds(lambda t: {"type": "output_text", "text": t}, _text),
    st.just({"type": "input_image", "image_url": "data:image/png;base64,AAAA"}),
    st.builds(lambda t: {"type": "refusal", "refusal": t}, _text),
)
_message = st.builds(
    lambda role, content: {"type": "message", "role": role, "content": content},
    st.sampled_from(["user", "assistant", "developer", "system"]),
    st.one_of(_text, st.lists(_part, max_size=3)),
)
_call = st.builds(lambda n, args: {"type": "function_call", "call_id": f"c{n}", "name": "exec_command", "arguments": args}, st.integers(0, 3), _text)
_output = st.builds(lambda n, out: {"type": "function_call_output", "call_id": f"c{n}", "output": out}, st.integers(0, 3), _text)
_reasoning = st.just({"type": "reasoning", "id": "rs_1", "summary": []})


@settings(max_examples=300, deadline=None)
@example(  # a user message with an image keeps its parts: their texts join by a newline there
    items=[{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_image", "image_url": "data:,"}, {"type": "input_text", "text": "b"}]}],
    max_chars=40,
)
@given(items=st.lists(st.one_of(_message, _call, _output, _reasoning), min_size=1, max_size=12), max_chars=st.integers(4, 60))
def test_the_turn_text_is_the_one_the_chat_translation_of_the_items_gives(items, max_chars) -> None:
    """The view reads its items directly; what it finds is what the chat view finds in the same
    conversation translated to chat (the pair the turn text was defined on)."""
    user_parts_ok = all(
        not (i.get("role") == "user" and isinstance(i.get("content"), list) and any(p["type"] == "refusal" for p in i["content"])) for i in items
    )
    assume(user_parts_ok)  # a user message holds no refusal part (the validation refuses it)
    body = responses_body(*items)
    chat = responses_to_chat({}, items).body["messages"]
    expected = extract_turn_text(chat, max_chars)
    assert responses_view(body, validate_responses_body(body), max_chars).turn_text == expected
    checked = check_responses_body(body, 64)  # the fused check's scan: the task among the user messages it noted
    assert checked.request is not None
    assert responses_view(body, checked.request, max_chars, checked).turn_text == expected
