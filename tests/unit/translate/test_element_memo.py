"""The element memo: what a translation made of each element, taken again only for the very same objects."""

from __future__ import annotations

import copy
from typing import Any

import orjson

from router.translate.element_memo import ElementMemo
from router.translate.messages_to_chat import chat_view, messages_to_chat_body


def counting() -> tuple[list[Any], Any]:
    called: list[Any] = []

    def each(element: Any) -> tuple[str, Any]:
        called.append(element)
        return ("made", element["n"])

    return called, each


def test_a_resent_array_takes_the_results_of_the_elements_it_repeats() -> None:
    memo: ElementMemo[Any] = ElementMemo()
    called, each = counting()
    first = [{"n": 1}, {"n": 2}]
    made = memo.map(first, each)
    grown = [*first, {"n": 3}]
    again = memo.map(grown, each)
    assert again == [("made", 1), ("made", 2), ("made", 3)]
    assert called == [*first, grown[2]]  # only the new element was made
    assert again[0] is made[0]


def test_equal_objects_are_not_the_same_element() -> None:
    memo: ElementMemo[Any] = ElementMemo()
    called, each = counting()
    memo.map([{"n": 1}, {"n": 2}], each)
    fresh = [{"n": 1}, {"n": 2}]  # the same content parsed again: new objects
    memo.map(fresh, each)
    assert called[2:] == fresh


def test_the_repeated_elements_are_the_leading_same_objects() -> None:
    from router.translate.element_memo import repeated

    a, b, c = {"n": 1}, {"n": 2}, {"n": 3}
    assert repeated([a, b], [a, b, c]) == 2 and repeated([a, b, c], [a, b]) == 2 and repeated([], [a]) == 0
    assert repeated([a, b, c], [a, copy.deepcopy(b), c]) == 1  # equal is not the same
    assert repeated([a, b], [b, a]) == 0


def test_an_element_replaced_is_made_again_and_those_after_it_are_not() -> None:
    memo: ElementMemo[Any] = ElementMemo()
    called, each = counting()
    array = [{"n": 1}, {"n": 2}, {"n": 3}]
    memo.map(array, each)
    changed = [array[0], {"n": 20}, array[2]]  # as pinch rewrites an old result
    assert memo.map(changed, each) == [("made", 1), ("made", 20), ("made", 3)]
    assert called[3:] == [changed[1]]
    shifted = [array[0], array[2]]  # the same object at another place is made again
    assert memo.map(shifted, each) == [("made", 1), ("made", 3)]
    assert called[4:] == [array[2]]


def test_it_keeps_the_arrays_of_its_last_conversations_only() -> None:
    memo: ElementMemo[Any] = ElementMemo(arrays=2)
    called, each = counting()
    a, b, c = [{"n": 1}], [{"n": 2}], [{"n": 3}]
    for array in (a, b, c, a):  # a was the oldest when c came: forgotten
        memo.map(array, each)
    assert called == [a[0], b[0], c[0], a[0]]
    memo.map(c, each)  # c is still kept
    assert len(called) == 4


def test_a_resumed_conversation_translates_as_a_fresh_parse_of_it() -> None:
    messages = [
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": [{"type": "text", "text": "looking"}, {"type": "tool_use", "id": "t1", "name": "bash", "input": {"c": "ls"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "a.py"}]}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "bash", "input": {"c": "cat a.py"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "print(1)"}, {"type": "text", "text": "go on"}]},
    ]
    body = {"model": "m", "max_tokens": 100, "system": "be brief", "messages": messages[:3]}
    before = orjson.dumps(body)
    messages_to_chat_body(body, "up")
    resumed = {**body, "messages": messages}  # the first three the very objects translated before
    fresh = copy.deepcopy(resumed)
    assert messages_to_chat_body(resumed, "up") == messages_to_chat_body(fresh, "up")
    assert chat_view(None, messages) == chat_view(None, copy.deepcopy(messages))
    assert orjson.dumps(body) == before  # nothing translated was changed in place


def _tool_use(call: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call, "name": "bash", "input": {"c": call}}


def _result(call: str, text: str = "out") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call, "content": text}


# every turn kind the passes keep state across: calls with results, a result missing (sent as
# "(no result)"), a duplicate and a stray result (dropped), user turns in a row (joined), images
CONVERSATION: list[dict[str, Any]] = [
    {"role": "user", "content": "fix it"},
    {"role": "user", "content": [{"type": "text", "text": "please"}]},
    {"role": "assistant", "content": [_tool_use("a"), _tool_use("b")]},
    {"role": "user", "content": [_result("a"), _result("a", "again"), _result("zz")]},
    {"role": "user", "content": "and then"},
    {"role": "assistant", "content": [{"type": "text", "text": "ok"}, _tool_use("c")]},
    {"role": "user", "content": [_result("c"), {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}}]},
    {"role": "assistant", "content": [_tool_use("d")]},
    {"role": "user", "content": [_result("d"), {"type": "text", "text": "next"}]},
    {"role": "user", "content": "more"},
    {"role": "assistant", "content": "done"},
    {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
]


def translated(messages: list[dict[str, Any]]) -> bytes:
    from router.translate.chat_shape import strict_chat_messages
    from router.translate.messages_to_chat import STRICT

    chat = messages_to_chat_body({"model": "m", "max_tokens": 10, "system": "sys", "messages": messages}, "up")
    chat["messages"] = strict_chat_messages(chat["messages"], memo=STRICT)
    return orjson.dumps(chat)


def test_every_turn_of_a_resent_conversation_translates_as_parsed_afresh() -> None:
    """Each turn resends the one before's messages (the same objects), one rewritten now and then
    (as pinch rewrites an old result); the memos' answer is the translation of a fresh parse."""
    messages: list[dict[str, Any]] = []
    for turn, message in enumerate(CONVERSATION):
        messages = [*messages, message]
        if turn in (5, 9):  # an earlier message replaced by a new object, the rest resent
            messages[3] = {"role": "user", "content": [_result("a", f"elided {turn}"), _result("b")]}
        for sent in (messages, messages[:-1], messages):  # a retry of a shorter body in between too
            assert translated(sent) == translated(copy.deepcopy(sent)), f"turn {turn}"


def _call(name: str, call_id: str | None = None) -> dict[str, Any]:
    return {"functionCall": {"name": name, "args": {"c": name}, **({"id": call_id} if call_id else {})}}


def _response(name: str, text: str = "out", call_id: str | None = None) -> dict[str, Any]:
    return {"functionResponse": {"name": name, "response": {"output": text}, **({"id": call_id} if call_id else {})}}


# Gemini's turn kinds the view's pass keeps state across: calls without ids (named by their place),
# results matched by name and by id, a duplicate and a stray result, an image, user turns in a row
GEMINI_CONVERSATION: list[dict[str, Any]] = [
    {"role": "user", "parts": [{"text": "fix it"}]},
    {"role": "user", "parts": [{"text": "please"}]},
    {"role": "model", "parts": [{"text": "looking"}, _call("ls"), _call("cat")]},
    {"role": "user", "parts": [_response("ls"), _response("ls", "again"), _response("nope")]},
    {"role": "user", "parts": [{"text": "and then"}]},
    {"role": "model", "parts": [_call("grep", "g1")]},
    {"role": "user", "parts": [_response("grep", "found", "g1"), {"inlineData": {"mimeType": "image/png", "data": "iVBOR"}}]},
    {"role": "model", "parts": [{"text": "thinking", "thought": True}, _call("ls")]},
    {"role": "user", "parts": [_response("ls", "a.py"), {"text": "next"}]},
    {"role": "model", "parts": [{"text": "done"}]},
    {"role": "user", "parts": [{"text": "thanks"}]},
]


def gemini_translated(contents: list[dict[str, Any]]) -> bytes:
    from router.core.results import Candidate
    from router.translate.gemini_to_chat import GeminiToChat
    from router.translate.protocol import AnswerIds

    body = {"systemInstruction": {"parts": [{"text": "sys"}]}, "contents": contents, "stream": False}
    candidate = Candidate(model="m", provider="p", upstream_model="up", reasoning_content=True)
    return orjson.dumps(GeminiToChat(AnswerIds("t" * 24, 0)).chat_request(body, candidate))


def test_every_turn_of_a_resent_gemini_conversation_translates_as_parsed_afresh() -> None:
    """As the Messages translation's: each turn resends the contents before (the same objects), one
    rewritten now and then; the memos' answer is the translation of a fresh parse."""
    contents: list[dict[str, Any]] = []
    for turn, content in enumerate(GEMINI_CONVERSATION):
        contents = [*contents, content]
        if turn in (5, 9):
            contents[3] = {"role": "user", "parts": [_response("ls", f"elided {turn}"), _response("cat")]}
        for sent in (contents, contents[:-1], contents):
            assert gemini_translated(sent) == gemini_translated(copy.deepcopy(sent)), f"turn {turn}"


def test_a_resent_gemini_conversation_takes_the_views_of_the_contents_it_repeats() -> None:
    from router.translate.gemini_to_chat import CONTENT_VIEWS, chat_view

    contents = GEMINI_CONVERSATION[:6]
    first = chat_view(None, contents, CONTENT_VIEWS)
    again = chat_view(None, [*contents, *GEMINI_CONVERSATION[6:]], CONTENT_VIEWS)
    # made before the last model content repeated (index 5): the very objects; from it on, made anew
    assert again[: len(first) - 1] == first[:-1] and all(a is b for a, b in zip(again[: len(first) - 1], first))
    assert again[len(first) - 1] is not first[-1] and again == chat_view(None, copy.deepcopy([*contents, *GEMINI_CONVERSATION[6:]]))


def _fc(call: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call, "name": "shell", "arguments": orjson.dumps({"c": call}).decode()}


def _fco(call: str, text: str = "out") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call, "output": text}


# The Responses pass's state: calls joined to the assistant text before them, outputs matched to calls
# (a duplicate and a stray dropped), a custom tool call, reasoning left out, an item no chat has, user
# and developer messages in a row, a compaction trigger last (a summary asked) and then not last
RESPONSES_CONVERSATION: list[Any] = [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]},
    {"type": "message", "role": "user", "content": "please"},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "additional_tools", "tools": [{"type": "namespace", "name": "functions", "tools": [{"type": "custom", "name": "exec2"}]}]},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "looking"}]},
    _fc("a"),
    _fc("b"),
    _fco("a"),
    _fco("a", "again"),
    _fco("zz"),
    _fco("b"),
    {"type": "custom_tool_call", "call_id": "c", "name": "exec", "input": "ls"},
    {"type": "custom_tool_call_output", "call_id": "c", "output": "a.py"},
    {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    {"type": "compaction_trigger"},
    {"type": "message", "role": "user", "content": "go on"},
    _fc("d"),
    _fco("d", [{"type": "output_text", "text": "done"}]),
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
]


RESPONSES_TOOLS: list[Any] = [
    {"type": "function", "name": "shell", "parameters": {"type": "object"}},
    {"type": "web_search"},
    {"type": "namespace", "name": "functions", "tools": [{"type": "custom", "name": "exec", "format": {"type": "grammar", "syntax": "lark"}}, {"type": "mcp"}]},
]


def responses_translated(items: list[Any]) -> tuple[bytes, tuple[str, ...], frozenset[str]]:
    from router.core.results import Candidate
    from router.translate.protocol import AnswerIds
    from router.translate.responses_to_chat import ResponsesToChat

    body = {"model": "m", "instructions": "be brief", "input": items, "tools": RESPONSES_TOOLS}
    translator = ResponsesToChat(AnswerIds("t" * 24, 0))
    chat = translator.chat_request(body, Candidate(model="m", provider="p", upstream_model="up"))
    return orjson.dumps(chat), translator.dropped, translator.frame.custom_tools


def test_every_turn_of_a_resent_responses_conversation_translates_as_parsed_afresh() -> None:
    """As the Messages translation's: each turn resends the items before (the same objects), one
    rewritten now and then, a shorter body retried between; the memos' answer and what they report
    dropped are the translation's of a fresh parse."""
    items: list[Any] = []
    for turn, item in enumerate(RESPONSES_CONVERSATION):
        items = [*items, item]
        if turn in (9, 17):
            items[8] = _fco("a", f"elided {turn}")
        for sent in (items, items[:-1] or items, items):
            assert responses_translated(sent) == responses_translated(copy.deepcopy(sent)), f"turn {turn}"


def test_a_resent_responses_conversation_takes_what_was_made_of_the_items_it_repeats() -> None:
    from router.translate.responses_to_chat import _items_pass

    items = RESPONSES_CONVERSATION[:14]
    first = _items_pass(items)
    again = _items_pass([*items, *RESPONSES_CONVERSATION[14:]])
    # taken again up to the last item repeated before which no call is open (the custom call, 12): the
    # very objects; from it on (its assistant message and its output) made anew
    assert all(a is b for a, b in zip(again[: len(first) - 2], first)) and again[: len(first)] == first
    assert again[len(first) - 2] is not first[-2] and again[len(first) - 1] is not first[-1]
    assert again == _items_pass(copy.deepcopy([*items, *RESPONSES_CONVERSATION[14:]]))


def test_a_resent_bodys_tools_are_translated_once() -> None:
    """The tools a body resends (the very objects, as a resumed parse makes them) are the chat tools made
    before; new objects are made afresh, to the same."""
    from router.translate.gemini_to_chat import gemini_to_chat_body
    from router.translate.responses_to_chat import responses_to_chat

    declarations = [{"name": "ls", "description": "list", "parameters": {"type": "OBJECT", "properties": {"p": {"type": "STRING", "nullable": True}}}}]
    gemini = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "tools": [{"functionDeclarations": declarations}, {"googleSearch": {}}]}
    first, again = gemini_to_chat_body(gemini, "up")["tools"], gemini_to_chat_body(gemini, "up")["tools"]
    assert again[0] is first[0] and again == gemini_to_chat_body(copy.deepcopy(gemini), "up")["tools"]
    body = {"model": "m", "input": "hi", "tools": RESPONSES_TOOLS}
    one, two, fresh = responses_to_chat(body, [{"role": "user", "content": "hi"}]), responses_to_chat(body, [{"role": "user", "content": "hi"}]), responses_to_chat(copy.deepcopy(body), [{"role": "user", "content": "hi"}])
    assert two.body["tools"][0] is one.body["tools"][0] and (two.body, two.dropped) == (fresh.body, fresh.dropped)
    assert fresh.dropped == ("tool web_search", "tool mcp")
