"""The chat validator's short path for the usual message shapes decides exactly as the full check does.

``validate_chat_body`` recognises the common messages (text content, a tool result, an
assistant's function calls) without ``_check_message``; generated messages near those
shapes — every field of the wrong type, missing or odd — must get the very same verdict:
the same error (message and param) for an invalid one, and for a valid body the same
``has_images`` / ``tool_history`` the view used to find with passes of its own.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.core.content import has_image_part
from router.core.errors import InvalidRequest
from router.wire.openai_chat.validation import _check_message, validate_chat_body

ODD = st.one_of(st.none(), st.integers(), st.booleans(), st.just([]), st.just({}), st.just(""), st.text(max_size=3))


def maybe(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly the valid value, else an odd one: whole valid messages with one field off are the hard case."""
    return st.one_of(value, value, value, ODD)


functions = st.fixed_dictionaries({}, optional={"name": maybe(st.just("bash")), "arguments": maybe(st.just('{"cmd": "ls"}'))})
calls = st.fixed_dictionaries({}, optional={"id": maybe(st.just("call_1")), "type": maybe(st.just("function")), "function": maybe(functions)})
parts = st.one_of(
    st.fixed_dictionaries({"type": st.just("text")}, optional={"text": maybe(st.just("hi"))}),
    st.fixed_dictionaries({"type": st.sampled_from(["image_url", "input_image", "image"])}, optional={"image_url": st.just({"url": "x"})}),
    ODD,
)
messages = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "role": maybe(st.sampled_from(["system", "developer", "user", "assistant", "tool", "function", "robot"])),
            "content": st.one_of(st.text(max_size=5), st.lists(parts, max_size=3), ODD),
            "tool_call_id": maybe(st.just("call_1")),
            "tool_calls": st.one_of(st.lists(maybe(calls), max_size=3), ODD),
            "name": maybe(st.just("bash")),
        },
    ),
    ODD,
)


CALL = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}
USUAL = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "fix it"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "assistant", "content": "looking", "tool_calls": [CALL, CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
    {"role": "function", "name": "bash", "content": "ok"},
]
PLACES = [
    ("role",), ("content",), ("tool_call_id",), ("tool_calls",), ("name",), ("tool_calls", 0), ("tool_calls", 0, "id"),
    ("tool_calls", 0, "function"), ("tool_calls", 0, "function", "name"), ("tool_calls", 0, "function", "arguments"),
]
GONE = object()


def with_change(message: dict[str, Any], place: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A deep copy of ``message`` with ``place`` set to ``value`` (removed for GONE) where the place exists."""
    changed = orjson.loads(orjson.dumps(message))
    holder = changed
    for step in place[:-1]:
        if isinstance(holder, dict) and step in holder or isinstance(holder, list) and step < len(holder):
            holder = holder[step]
        else:
            return changed
    last = place[-1]
    if value is GONE:
        if isinstance(holder, dict):
            holder.pop(last, None)
        elif isinstance(holder, list) and last < len(holder):
            del holder[last]
    elif isinstance(holder, dict) or isinstance(holder, list) and last < len(holder):
        holder[last] = value
    return changed


# a usual message with one field (nested ones included) made odd or taken away: the short path's edge
near_usual = st.builds(with_change, st.sampled_from(USUAL), st.sampled_from(PLACES), st.one_of(ODD, st.just(GONE)))


def full_check(body_messages: list[Any]) -> tuple[str, str | None] | tuple[bool, bool]:
    """The verdict of _check_message on every message, with the view's former any() passes."""
    try:
        for index, message in enumerate(body_messages):
            _check_message(message, index)
    except InvalidRequest as exc:
        return exc.message, exc.param
    images = any(has_image_part(m.get("content")) for m in body_messages)
    history = any(m.get("role") in ("tool", "function") or m.get("tool_calls") for m in body_messages)
    return images, history


def verdict(body_messages: list[Any]) -> tuple[str, str | None] | tuple[bool, bool]:
    try:
        parsed = validate_chat_body({"model": "auto", "messages": body_messages})
    except InvalidRequest as exc:
        return exc.message, exc.param
    return parsed.has_images, parsed.tool_history


@settings(max_examples=1500, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(messages, near_usual, st.sampled_from(USUAL)), min_size=1, max_size=4))
def test_the_short_path_and_the_full_check_agree_on_every_message(body_messages):
    assert verdict(body_messages) == full_check(body_messages)


@pytest.mark.parametrize(
    ("message", "param"),
    [
        ({"role": "tool", "content": "ok"}, "messages[0].tool_call_id"),
        ({"role": "user", "content": "hi", "tool_calls": []}, "messages[0].tool_calls"),
        ({"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {"name": "f"}}]}, "messages[0].tool_calls[0].function.arguments"),
        ({"role": "assistant", "tool_calls": [{"id": 1, "function": {"name": "f", "arguments": "{}"}}]}, "messages[0].tool_calls[0].id"),
        ({"role": "robot", "content": "hi"}, "messages[0].role"),
        ({"role": "user", "content": 3}, "messages[0].content"),
    ],
)
def test_a_near_usual_message_that_is_invalid_is_named(message, param):
    with pytest.raises(InvalidRequest) as raised:
        validate_chat_body({"messages": [message]})
    assert raised.value.param == param


@pytest.mark.parametrize(
    ("body_messages", "images", "history"),
    [
        ([{"role": "user", "content": "hi"}], False, False),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}], True, False),
        ([{"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]}], False, True),
        ([{"role": "assistant", "content": "", "tool_calls": []}], False, False),
        ([{"role": "function", "content": "ok", "name": "f"}], False, True),
        ([{"role": "tool", "content": [{"type": "text", "text": "ok"}], "tool_call_id": "c"}], False, True),
    ],
)
def test_what_the_validation_pass_sees_for_the_view(body_messages, images, history):
    parsed = validate_chat_body({"messages": body_messages})
    assert (parsed.has_images, parsed.tool_history) == (images, history)
