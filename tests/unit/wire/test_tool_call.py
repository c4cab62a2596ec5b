"""Every wire format's conversation names the call that produced a result: its tool and its arguments
as the model wrote them (Conversation.tool_call), for first sight's pointers to earlier results."""

from __future__ import annotations

from typing import Any

import pytest

from router.core.request_view import call_arguments
from router.wire.anthropic_messages.view import MessagesConversation
from router.wire.gemini.view import GeminiConversation
from router.wire.ollama.view import OllamaConversation
from router.wire.openai_chat.view import ChatConversation
from router.wire.openai_responses.view import ResponsesConversation
from tests.support import anthropic_factories as anthropic
from tests.support.factories import assistant, tool, user
from tests.support.gemini_factories import call as gemini_call
from tests.support.gemini_factories import model as gemini_model
from tests.support.gemini_factories import response as gemini_response
from tests.support.gemini_factories import user as gemini_user
from tests.support.wire_factories import function_call, function_call_output, input_message


def calls(conversation: Any) -> list[tuple[str, str]]:
    return [conversation.tool_call(unit) for unit in conversation.result_units()]


def test_chat_names_the_call_by_its_id_with_its_arguments_as_written() -> None:
    written = '{"path": "src/a.py",  "lines": [1, 2]}'  # spacing and key order as the model wrote them
    messages = [
        user("go"),
        assistant(None, [("c1", "read_file", written), ("c2", "bash", '{"command": "ls"}')]),
        tool("c2", "a.py"),
        tool("c1", "text"),
        {"role": "tool", "tool_call_id": "unknown", "name": "grep", "content": "x"},
    ]
    assert calls(ChatConversation(messages)) == [("bash", '{"command": "ls"}'), ("read_file", written), ("grep", "")]


def test_anthropic_writes_an_input_object_one_fixed_way() -> None:
    turns = [
        anthropic.user("go"),
        anthropic.assistant(anthropic.tool_use("t1", "Read", file_path="src/a.py", limit=20), anthropic.tool_use("t2", "Bash", command="ls")),
        anthropic.user(anthropic.tool_result("t1", "a"), anthropic.tool_result("t2", "b")),
    ]
    assert calls(MessagesConversation([anthropic.text("sys")], turns)) == [("Read", '{"file_path":"src/a.py","limit":20}'), ("Bash", '{"command":"ls"}')]


def test_anthropic_names_the_call_in_the_nearest_assistant_message_before_the_result() -> None:
    # an id used twice (a client replaying a loop): each result is named by the call just before it,
    # not by the conversation's last call with that id; one answered further back, by that call; one
    # whose call comes only after it, by none: a result's name reads nothing after it (pinch keeps it)
    turns = [
        anthropic.user("go"),
        anthropic.assistant(anthropic.tool_use("t1", "Bash", command="ls"), anthropic.tool_use("t2", "Read", file_path="b.py")),
        anthropic.user(anthropic.tool_result("t1", "a.py")),
        anthropic.assistant(anthropic.tool_use("t1", "Bash", command="pwd")),
        anthropic.user(anthropic.tool_result("t1", "/src"), anthropic.tool_result("t2", "b"), anthropic.tool_result("t9", "?")),
        anthropic.assistant(anthropic.tool_use("t9", "Read", file_path="a.py")),
    ]
    conversation = MessagesConversation([anthropic.text("sys")], turns)
    assert calls(conversation) == [("Bash", '{"command":"ls"}'), ("Bash", '{"command":"pwd"}'), ("Read", '{"file_path":"b.py"}'), ("tool", "")]
    assert conversation.names_from_earlier_units


def test_responses_names_the_function_call_with_its_call_id() -> None:
    items = [input_message("user", "go"), function_call("c1", "exec_command", cmd="ls"), function_call_output("c1", "a.py"), function_call_output("c9", "?")]
    assert calls(ResponsesConversation(items)) == [("exec_command", '{"cmd":"ls"}'), ("tool", "")]


def test_gemini_names_the_call_by_its_id_else_by_its_name_and_order() -> None:
    with_ids = GeminiConversation(None, [gemini_user("x"), gemini_model(gemini_call(call_id="c1", dir_path="src")), gemini_user(gemini_response("a.py", call_id="c1"))])
    assert calls(with_ids) == [("list_directory", '{"dir_path":"src"}')]
    two = {"role": "model", "parts": [gemini_call(call_id=None, dir_path="src"), gemini_call(call_id=None, dir_path="tests")]}
    answered = {"role": "user", "parts": [gemini_response("a.py", call_id=None), gemini_response("t.py", call_id=None)]}
    assert calls(GeminiConversation(None, [gemini_user("x"), two, answered])) == [("list_directory", '{"dir_path":"src"}'), ("list_directory", '{"dir_path":"tests"}')]


@pytest.mark.parametrize(
    ("arguments", "written"),
    [("as written ", "as written "), (None, ""), ({"b": 1, "a": [2, {"d": 3, "c": 4}]}, '{"a":[2,{"c":4,"d":3}],"b":1}'), ({"n": 10**30}, "")],
    ids=["a string", "none", "an object: sorted keys", "what JSON cannot hold"],
)
def test_call_arguments(arguments: Any, written: str) -> None:
    assert call_arguments(arguments) == written


class Counted(dict):
    """A message that counts the lookups of its role."""

    roles = 0

    def get(self, key: Any, default: Any = None) -> Any:
        if key == "role":
            Counted.roles += 1
        return super().get(key, default)


def test_naming_every_result_walks_back_to_the_nearest_assistant_once_in_total() -> None:
    # a hostile body: thousands of results and no assistant message before them; a walk back per
    # result would look at ~n²/2 messages (chat's, Messages' and Ollama's views share one walk)
    n = 2_000
    conversations = [
        MessagesConversation([anthropic.text("sys")], [Counted(user(f"go {i}")) if i == 0 else Counted(anthropic.user(anthropic.tool_result(f"t{i}", "x"))) for i in range(n)]),
        ChatConversation([Counted(user("go")), *(Counted(tool(f"c{i}", "x")) for i in range(n))]),
        OllamaConversation([Counted(user("go")), *(Counted({"role": "tool", "content": "x", "tool_name": "bash"}) for _ in range(n))]),
        # and matched by name and order, without ids: the n-th "bash" result answers the n-th "bash" call
        OllamaConversation([
            Counted(user("go")),
            Counted({"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "bash", "arguments": {"n": 1}}}] * 2}),
            *(Counted({"role": "tool", "content": "x", "tool_name": "bash"}) for _ in range(n)),
        ]),
    ]
    for conversation in conversations:
        Counted.roles = 0
        named = calls(conversation)
        assert len(named) >= n - 1
        assert Counted.roles <= 4 * n, type(conversation).__name__  # linear: a walk per result is ~n²/2 = 2,000,000
    assert named[:3] == [("bash", '{"n":1}'), ("bash", '{"n":1}'), ("bash", "")]  # the last one's: two calls, n results
