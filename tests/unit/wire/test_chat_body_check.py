"""The chat wire's check before the depth walk answers every body exactly as the walk, then the validation.

The chat edge validates a body in the same pass that proves its usual messages shallow and
float-free, so the depth walk covers only the rest (:func:`router.wire.openai_chat.validation.check_chat_body`).
For every body the answer must be the one of the two apart — the same error (status, code,
message, param), and for a served body the same parsed body, view and upstream bytes: a
too-deep body is ``json_too_deep`` whatever else is wrong with it, and a number orjson may
have altered is still found and parsed again from the raw bytes. Generated bodies put deep
nesting (at and around ``server.max_json_depth``) and odd numbers where the proof must not
reach: message extras, tool-call and function extras, tool arguments, content parts, the
body's own fields — mixed with invalid messages.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.core.errors import ApiError
from router.core.request_view import BodyChanges
from router.core.resent_prefix import ResentBodies
from router.http.request_body import keep_accepted, parse_checked_json_body, parse_json_body
from router.wire.openai_chat.adapter import OPENAI_CHAT_ADAPTER as CHAT
from router.wire.openai_chat.validation import ChatFacts, check_chat_body
from tests.support.factories import agent_session, assistant, tool, user

# Literals orjson reads as a float that may not be what was written (and 1e400, which it refuses),
# beside ordinary ones; written into the raw bytes as they are.
NUMBER_LITERALS = ["0.0", "1e-400", "1e400", "123456789012345678901234567890", "0.5", "-3", "7"]


def nested(levels: int, leaf: Any = "x") -> Any:
    """``levels`` containers, alternating objects and lists, around ``leaf``."""
    value = leaf
    for i in range(levels):
        value = [value] if i % 2 else {"k": value}
    return value


def answer_apart(raw: bytes, max_depth: int) -> Any:
    """The edge before the check: the depth walk of the whole body, then the wire's parse."""
    body = parse_json_body(raw, max_depth)
    return outcome(body, body if isinstance(body, ApiError) else CHAT.parse(body, 2000))


def answer_checked(raw: bytes, max_depth: int) -> Any:
    """The edge now: the check before the walk, which covers only what the check did not prove."""
    read = parse_checked_json_body(raw, max_depth, CHAT.check_body)
    if isinstance(read, ApiError):
        return outcome(read, read)
    view = CHAT.parse(read.body, 2000) if read.checked is None else CHAT.parse_checked(read.body, read.checked, 2000)
    return outcome(read.body, view)


def outcome(body: Any, view: Any) -> Any:
    """What a client and the upstream see of an answer: the error, or the body, the view and the bytes sent."""
    if isinstance(view, ApiError):
        return ("error", view.status, view.code, view.message, view.param)
    fields = {f.name: getattr(view, f.name) for f in dataclasses.fields(view) if f.name != "conversation"}
    sent = CHAT.upstream_body(body, view, BodyChanges(upstream_model="m"))
    return ("served", orjson.dumps(body), orjson.dumps(view.conversation.messages), fields, sent)


def raw_body(body: Any, numbers: list[str]) -> bytes:
    """``body`` as JSON, each string ``"#n"`` in it replaced by the number literal ``numbers[n]``."""
    raw = orjson.dumps(body)
    for n, literal in enumerate(numbers):
        raw = raw.replace(b'"#%d"' % n, literal.encode())
    return raw


# A value that may be deep, a float or plain: what is put where the proof must look.
odd_values = st.one_of(
    st.builds(nested, st.integers(0, 10)),
    st.builds(nested, st.integers(0, 10), st.sampled_from(["#0", "#1", "#2", "#3", "#4"])),
    st.sampled_from(["#0", "#1", "#2", "#3", "#4", "#5", "#6", None, True, 3, "text", [], {}]),
)
extras = st.dictionaries(st.sampled_from(["name", "extra", "cache_control", "index", "type"]), odd_values, max_size=2)


# Every strategy a composite draws from is made once, here: one made inside a draw is made and
# validated again for every example (hypothesis checks a new strategy's whole graph on its first draw).
MESSAGE_KINDS = st.sampled_from(["user", "system", "assistant", "calls", "tool", "parts", "odd"])
ODD_MESSAGES = st.one_of(odd_values, st.just({"role": "robot", "content": "x"}), st.just({"content": "no role"}))
PART_LISTS = st.lists(st.one_of(st.just({"type": "text", "text": "hi"}), st.builds(lambda v: {"type": "text", "text": v}, odd_values),
                                st.builds(lambda v: {"type": "image_url", "image_url": v}, odd_values)), max_size=3)
ARGUMENTS = st.one_of(st.just('{"cmd": "ls"}'), odd_values)
FUNCTION_EXTRAS = st.dictionaries(st.sampled_from(["strict", "extra"]), odd_values, max_size=1)
CALL_EXTRAS = st.dictionaries(st.sampled_from(["type", "index", "extra"]), st.one_of(st.just("function"), odd_values), max_size=2)
CALL_CONTENTS = st.sampled_from([None, "", "looking"])
CALL_IDS, RESULTS, CONTENTS = st.one_of(st.just("call_1"), odd_values), st.one_of(st.just("ok"), odd_values), st.one_of(st.just("text"), st.none(), odd_values)


@st.composite
def messages(draw: st.DrawFn) -> Any:
    """The usual shapes, mostly as agents send them, else with extras, odd fields or deep values in them."""
    kind = draw(MESSAGE_KINDS)
    if kind == "odd":
        return draw(ODD_MESSAGES)
    if kind == "parts":
        message: dict[str, Any] = {"role": "user", "content": draw(PART_LISTS)}
    elif kind == "calls":
        function: dict[str, Any] = {"name": "bash", "arguments": draw(ARGUMENTS)}
        function.update(draw(FUNCTION_EXTRAS))
        call: dict[str, Any] = {"id": "call_1", "function": function}
        call.update(draw(CALL_EXTRAS))
        message = {"role": "assistant", "content": draw(CALL_CONTENTS), "tool_calls": [call] * draw(st.integers(1, 2))}
        if draw(st.booleans()):
            del message["content"]
    elif kind == "tool":
        message = {"role": "tool", "tool_call_id": draw(CALL_IDS), "content": draw(RESULTS)}
    else:
        message = {"role": kind, "content": draw(CONTENTS)}
    message.update(draw(extras))
    return message


MODELS, MESSAGE_LISTS = st.sampled_from(["auto", "gpt-x", "", 5]), st.lists(messages(), max_size=6)
BODY_FIELDS = st.dictionaries(st.sampled_from(["temperature", "max_tokens", "metadata", "tools", "stream"]), odd_values, max_size=2)
NUMBER_ORDERS = st.permutations(NUMBER_LITERALS)


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    body: dict[str, Any] = {"model": draw(MODELS), "messages": draw(MESSAGE_LISTS)}
    body.update(draw(BODY_FIELDS))
    return raw_body(body, draw(NUMBER_ORDERS))


@given(raw=bodies(), max_depth=st.sampled_from([3, 5, 6, 7, 8, 9, 10, 128]))
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_checked_body_gets_the_answer_of_the_walk_then_the_validation(raw, max_depth):
    assert answer_checked(raw, max_depth) == answer_apart(raw, max_depth)


SESSION = {"model": "auto", "messages": agent_session(results=3)}


@pytest.mark.parametrize(
    ("body", "max_depth", "code"),
    [  # code "ok": served
        # an invalid message ahead of a too-deep one, and behind it: the depth is the answer
        ({"messages": [{"role": "robot"}, user("hi", extra=nested(6))]}, 8, "json_too_deep"),
        ({"messages": [user("hi", extra=nested(6)), {"role": "robot"}]}, 8, "json_too_deep"),
        # a usual message one level too deep in its tool arguments (an object, not JSON text)
        ({"messages": [assistant(calls=[("c1", "bash", "{}")]) | {"tool_calls": [{"id": "c1", "function": {"name": "bash", "arguments": nested(3)}}]}]}, 8, "json_too_deep"),
        ({"messages": [assistant(calls=[("c1", "bash", "{}")]) | {"tool_calls": [{"id": "c1", "function": {"name": "bash", "arguments": nested(2)}}]}]}, 8, "invalid_request"),
        # the deepest usual message fits a limit of 6, not 5 (then nothing is proven, all is walked)
        ({"messages": [assistant(calls=[("c1", "bash", "{}")])]}, 6, "ok"),
        ({"messages": [assistant(calls=[("c1", "bash", "{}")])]}, 5, "json_too_deep"),
        # a call's or a function's own extras
        ({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "index": nested(4), "function": {"name": "f", "arguments": ""}}]}]}, 8, "json_too_deep"),
        ({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": nested(4), "function": {"name": "f", "arguments": ""}}]}]}, 8, "json_too_deep"),
        ({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "", "x": nested(3)}}]}]}, 8, "json_too_deep"),
        ({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "", "x": nested(2)}}]}]}, 8, "ok"),
        ({"messages": [tool("c1", "out", extra=nested(5))]}, 8, "ok"),
        ({"messages": [tool("c1", "out", extra=nested(6))]}, 8, "json_too_deep"),
    ],
)
def test_the_depth_is_judged_before_the_messages(body, max_depth, code):
    answer = answer_checked(orjson.dumps(body), max_depth)
    assert answer == answer_apart(orjson.dumps(body), max_depth)
    assert answer[0] == "served" if code == "ok" else answer[2] == code


@pytest.mark.parametrize("literal", ["0.0", "1e-400", "123456789012345678901234567890", "1e400"])
def test_a_suspect_number_in_a_message_is_still_parsed_again(literal):
    raw = raw_body({"messages": [user("hi", extra="#0")]}, [literal])
    answer = answer_checked(raw, 128)
    assert answer == answer_apart(raw, 128)
    assert answer[0] == "served" and literal.encode() in answer[4]  # sent upstream as the client wrote it


def test_a_transcript_of_usual_messages_leaves_the_walk_nothing_of_them():
    checked = check_chat_body(SESSION, 128)
    assert checked.request is not None
    assert checked.walk["messages"] == []
    assert checked.walk.keys() == SESSION.keys()


@pytest.mark.parametrize(
    "message",
    [
        user("hi", name="bob"),  # a key the check does not look into
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},  # content parts
        {"role": "tool", "tool_call_id": "c1", "content": None, "extra": 1},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "index": 0, "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}", "strict": True}}]},
    ],
)
def test_a_message_with_more_than_the_checked_fields_is_left_to_the_walk(message):
    checked = check_chat_body({"messages": [user("hi"), message]}, 128)
    assert checked.walk["messages"] == [message]


def test_an_invalid_body_is_left_whole_to_the_walk():
    body = {"messages": [user("hi"), {"role": "robot"}]}
    assert check_chat_body(body, 128)[:2] == (None, body)


# --- a body resumed from the earlier turn it repeats (router.core.resent_prefix) ---


def answer_resumed(raw: bytes, earlier: bytes, max_depth: int) -> tuple[Any, int]:
    """The edge with the bodies it kept: ``earlier`` accepted first (kept when served), then ``raw``;
    the answer to ``raw`` and how many of its messages it took from ``earlier``."""
    resent = ResentBodies(1 << 22, min_bytes=0)
    first = parse_checked_json_body(earlier, max_depth, CHAT.check_body, resent, "messages")
    if not isinstance(first, ApiError) and first.checked is not None and not isinstance(CHAT.parse_checked(first.body, first.checked, 2000), ApiError):
        keep_accepted(resent, first, "messages", max_depth)
    read = parse_checked_json_body(raw, max_depth, CHAT.check_body, resent, "messages")
    if isinstance(read, ApiError):
        return outcome(read, read), 0
    view = CHAT.parse(read.body, 2000) if read.checked is None else CHAT.parse_checked(read.body, read.checked, 2000)
    reused = 0 if isinstance(view, ApiError) else view.reused_units
    if not isinstance(view, ApiError):
        assert reused == (read.resumed.count if read.resumed is not None and read.checked is not None else 0)
        view = dataclasses.replace(view, reused_units=0)  # the one field that says it was resumed
    return outcome(read.body, view), reused


TURN_MESSAGES = st.lists(messages(), min_size=1, max_size=6)
TURN_FIELDS = st.dictionaries(st.sampled_from(["temperature", "max_tokens", "tools", "stream"]), odd_values, max_size=2)


@st.composite
def turns(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A body and an earlier turn of it (its first messages, the rest of the body the same), written alike."""
    body: dict[str, Any] = {"model": "auto", "messages": draw(TURN_MESSAGES)}
    body.update(draw(TURN_FIELDS))
    numbers = draw(NUMBER_ORDERS)
    earlier = {**body, "messages": body["messages"][: draw(st.integers(1, len(body["messages"])))]}
    return raw_body(body, numbers), raw_body(earlier, numbers)


@given(bodies=turns(), max_depth=st.sampled_from([3, 5, 6, 7, 8, 9, 10, 128]))
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_body_resumed_from_its_earlier_turn_gets_the_answer_of_the_walk_then_the_validation(bodies, max_depth):
    raw, earlier = bodies
    assert answer_resumed(raw, earlier, max_depth)[0] == answer_apart(raw, max_depth)


def test_a_transcripts_next_turn_is_resumed_and_answered_alike():
    first = {"model": "auto", "messages": agent_session(results=3), "tools": [{"type": "function", "function": {"name": "bash"}}]}
    nxt = {**first, "messages": [*first["messages"], assistant(calls=[("c9", "bash", '{"cmd": "ls"}')]), tool("c9", "a\nb")]}
    answer, reused = answer_resumed(orjson.dumps(nxt), orjson.dumps(first), 128)
    assert reused == len(first["messages"])
    assert answer == answer_apart(orjson.dumps(nxt), 128)


def test_a_resumed_check_carries_where_the_earlier_messages_held_images_and_tools():
    image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:x"}}]}
    first = {"messages": [user("hi"), image, assistant(calls=[("c1", "bash", "{}")]), tool("c1", "ok")]}
    resent = ResentBodies(1 << 20, min_bytes=0)
    read = parse_checked_json_body(orjson.dumps(first), 128, CHAT.check_body, resent, "messages")
    keep_accepted(resent, read, "messages", 128)
    nxt = {"messages": [*first["messages"], user("more")]}
    read = parse_checked_json_body(orjson.dumps(nxt), 128, CHAT.check_body, resent, "messages")
    assert read.resumed is not None and read.checked.reused == 4
    assert read.checked.facts == check_chat_body(nxt, 128).facts == ChatFacts(first_image=1, first_tool=2, users=[0, 1, 4], results=[3])
    assert (read.checked.request.has_images, read.checked.request.tool_history) == (True, True)
    assert read.checked.walk["messages"] == []  # the new message is proven; the earlier ones were walked before


def test_the_settings_and_tools_a_resumed_body_repeats_are_not_walked_again_and_new_ones_are(monkeypatch):
    import router.http.request_body as request_body

    deep_tool = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {"a": {"b": {"c": {}}}}}}}
    first = {"model": "auto", "messages": [user("hi"), assistant("ok")], "tools": [deep_tool], "temperature": 0.5}
    resent = ResentBodies(1 << 20, min_bytes=0)
    keep_accepted(resent, parse_checked_json_body(orjson.dumps(first), 128, CHAT.check_body, resent, "messages"), "messages", 128)
    walked: list[Any] = []
    real = request_body.json_shape
    monkeypatch.setattr(request_body, "json_shape", lambda value, depth: walked.append(value) or real(value, depth))
    nxt = {**first, "messages": [*first["messages"], user("more")]}
    read = parse_checked_json_body(orjson.dumps(nxt), 128, CHAT.check_body, resent, "messages")
    assert read.resumed is not None and read.body["tools"] is read.resumed.parent.body["tools"]
    assert walked == [{"messages": []}]  # the model, the tools and the temperature were the kept body's, walked then
    # new tools are the body's own: walked, and one too deep for the limit refused as a whole parse refuses it
    changed = {**nxt, "tools": [deep_tool, {**deep_tool, "function": {"name": "b2", "parameters": {"x": {"y": {"z": {"w": {"v": {}}}}}}}}]}
    walked.clear()
    read = parse_checked_json_body(orjson.dumps(changed), 128, CHAT.check_body, resent, "messages")
    assert "tools" in walked[0] and "model" not in walked[0]
    fresh = ResentBodies(1 << 20, min_bytes=0)  # a limit the kept body's tools nest within (9 levels), the new ones not (10)
    keep_accepted(fresh, parse_checked_json_body(orjson.dumps(first), 9, CHAT.check_body, fresh, "messages"), "messages", 9)
    refused = parse_checked_json_body(orjson.dumps(changed), 9, CHAT.check_body, fresh, "messages")
    assert isinstance(refused, ApiError) and refused.code == "json_too_deep"
