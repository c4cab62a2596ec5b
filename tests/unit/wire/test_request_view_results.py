"""Every wire format's conversation finds its tool results as units; each result's content and id
are read from its unit (``result_key``, ``result_id_key``), the same as ``tool_results()`` says."""

from __future__ import annotations

from typing import Any

import pytest

from router.core.request_view import Conversation, stable_id
from router.wire.anthropic_messages.view import MessagesConversation
from router.wire.openai_chat.view import ChatConversation
from router.wire.openai_responses.view import ResponsesConversation
from tests.support import anthropic_factories as anthropic
from tests.support.factories import agent_session, tool
from tests.support.wire_factories import (
    function_call,
    function_call_output,
    input_message,
)


def chat() -> ChatConversation:
    messages = agent_session(3)
    messages.append({"role": "tool", "content": "no id"})  # known by its position
    messages.append(tool("call_x", [{"type": "text", "text": "parts"}]))
    return ChatConversation(messages)


def responses() -> ResponsesConversation:
    items = [input_message("user", "go"), function_call("c1"), function_call_output("c1", "one"), function_call("c2"),
             function_call_output("c2", [{"type": "input_text", "text": "two"}]), {"type": "function_call_output", "output": "no id"}]
    return ResponsesConversation(items)


def messages() -> MessagesConversation:
    turns = [anthropic.user("go"), anthropic.assistant(anthropic.tool_use("t1"), anthropic.tool_use("t2")),
             anthropic.user(anthropic.tool_result("t1", "a"), anthropic.tool_result("t2", [anthropic.text("b")]), anthropic.reminder())]
    return MessagesConversation([anthropic.text("sys")], turns)


@pytest.mark.parametrize("make", [chat, responses, messages], ids=["openai chat", "responses", "anthropic"])
def test_results_read_from_their_units_are_the_tool_results(make: Any) -> None:
    conversation: Conversation = make()
    results = conversation.tool_results()
    units = conversation.units
    assert list(conversation.result_units()) == [r.unit for r in results] and results
    for result in results:
        holder = units[result.unit]
        assert holder.get(conversation.result_key) is result.content
        assert stable_id(holder.get(conversation.result_id_key), result.unit) == result.id


def test_a_result_without_a_call_id_is_known_by_its_unit() -> None:
    conversation = chat()
    assert [r.id for r in conversation.tool_results()][-2:] == [f"#{len(conversation.units) - 2}", "call_x"]
    assert responses().tool_results()[-1].id == "#5"


@pytest.mark.parametrize("make", [chat, responses, messages], ids=["openai chat", "responses", "anthropic"])
def test_the_last_turns_start_where_turn_starts_says_and_fewer_turns_protect_from_the_first_unit(make: Any) -> None:
    conversation: Conversation = make()
    turns = list(conversation.turn_starts())
    assert turns == sorted(turns) and turns
    for count in range(1, len(turns) + 1):
        assert conversation.last_turns_start(count) == turns[-count]
    assert conversation.last_turns_start(len(turns) + 1) == 0  # fewer turns than asked: nothing is a candidate
