"""A translated chat body's bytes: orjson's writing of it, the messages a conversation resends written once."""

from __future__ import annotations

import copy
from typing import Any

import orjson

from router.translate.chat_bytes import chat_body_bytes


def message(n: int, text: str = "out") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"c{n}", "content": f"{text} {n} é \u2028 \"q\" \x00"}


def body(messages: list[Any]) -> dict[str, Any]:
    return {"model": "up", "messages": [{"role": "system", "content": "sys"}, *messages], "max_tokens": 10, "tools": [{"n": orjson.Fragment(b"1e30")}]}


def test_every_turn_of_a_resent_conversation_is_written_as_orjson_writes_it() -> None:
    messages: list[Any] = []
    for turn in range(8):
        messages = [*messages, message(turn)]
        if turn in (3, 6):  # one rewritten (a new object), the rest resent
            messages[1] = message(1, f"elided {turn}")
        for sent in (messages, messages[:-1], messages, list(reversed(messages))):
            chat = body(sent)
            assert chat_body_bytes(chat) == orjson.dumps(chat), f"turn {turn}"


def test_a_resent_message_is_its_bytes_of_the_turn_before() -> None:
    """The very object at the same place: its writing is taken again, not made (a message is never
    changed in place — this one is, to show it)."""
    messages = [message(0), message(1), message(2)]
    chat_body_bytes(body(messages))
    messages[1]["content"] = "changed in place"
    again = orjson.loads(chat_body_bytes(body([*messages, message(3)])))
    assert again["messages"][2]["content"] == message(1)["content"]
    assert again["messages"][4] == message(3)
    other = [message(0), *messages[1:]]  # another first message: another conversation, written afresh
    assert orjson.loads(chat_body_bytes(body(other)))["messages"][2]["content"] == "changed in place"


def test_bodies_with_fewer_than_two_messages_or_a_fragment_like_its_mark_are_written_whole() -> None:
    odd = {"model": "m", "n": orjson.Fragment(b'"\x00"'), "messages": [message(0), message(1)]}
    for chat in ({"model": "m", "messages": []}, {"model": "m", "messages": [message(0)]}, {"model": "m"}, odd):
        assert chat_body_bytes(copy.deepcopy(chat) if chat is not odd else chat) == orjson.dumps(chat)
