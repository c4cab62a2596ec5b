"""A resent conversation parsed from what it adds (router.core.resent_prefix): always the body's own
parse, on plain data — generated bodies and every way a next body can differ from a kept one."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.core.request_view import units_with
from router.core.resent_prefix import OPENING_BYTES, PER_OPENING, ResentBodies, Resumed
from router.core.tokens import DEFAULT_ESTIMATOR, TokenEstimator

DEPTH = 128


def chat(messages: list[Any], **tail: Any) -> dict[str, Any]:
    return {"model": "m", "messages": messages, **tail}


def turn(i: int) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": '{"p":1}'}}]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i} é\n\"quoted\" \\ {'x' * 40}"},
    ]


OPENING = [{"role": "system", "content": "you are an agent " * 30}, {"role": "user", "content": "fix the bug"}]


def kept(bodies: ResentBodies, body: Any, raw: bytes | None = None, resumed: Resumed | None = None) -> Any:
    raw = orjson.dumps(body) if raw is None else raw
    return bodies.keep(raw, orjson.loads(raw) if resumed is None else resumed.body, "messages", DEPTH, None, resumed)


def resumed_as_parsed(bodies: ResentBodies, raw: bytes) -> Resumed | None:
    """resume(raw), holding it to orjson's parse of the same bytes (None is always allowed)."""
    found = bodies.resume(raw, "messages", DEPTH)
    if found is not None:
        assert found.body == orjson.loads(raw)
        assert list(found.body) == list(orjson.loads(raw))  # the keys in the body's order
    return found


def test_the_next_turn_resumes_every_message_of_the_last_and_shares_their_objects():
    bodies = ResentBodies(1 << 20, min_bytes=0)
    first = chat(OPENING + turn(1), tools=[{"type": "function", "function": {"name": "read"}}], stream=True)
    kept(bodies, first)
    earlier = bodies.bodies()[0].body
    nxt = chat(OPENING + turn(1) + turn(2), tools=first["tools"], stream=True)
    found = resumed_as_parsed(bodies, orjson.dumps(nxt))
    assert found is not None and found.count == len(first["messages"])
    assert all(a is b for a, b in zip(found.body["messages"], earlier["messages"]))
    assert found.body["tools"] is earlier["tools"]  # the tail repeated too: its values are the earlier's
    assert found.body["messages"] is not earlier["messages"] and found.body is not earlier


def test_the_same_body_again_resumes_whole():
    bodies = ResentBodies(1 << 20, min_bytes=0)
    body = chat(OPENING + turn(1))
    kept(bodies, body)
    found = resumed_as_parsed(bodies, orjson.dumps(body))
    assert found is not None and found.count == len(body["messages"])


def test_a_turn_on_a_turn_resumes_from_the_newest_body_which_replaces_the_earlier():
    bodies = ResentBodies(1 << 20, min_bytes=0)
    kept(bodies, chat(OPENING))
    for i in range(1, 5):
        raw = orjson.dumps(chat(OPENING + [m for t in range(1, i + 1) for m in turn(t)]))
        found = resumed_as_parsed(bodies, raw)
        assert found is not None and found.count == 2 + 2 * (i - 1)
        kept(bodies, None, raw, found)
        assert len(bodies) == 1


def test_an_edited_message_resumes_up_to_the_one_before_it():
    bodies = ResentBodies(1 << 20, min_bytes=0)
    messages = OPENING + turn(1) + turn(2)
    kept(bodies, chat(messages))
    edited = [*messages[:3], {**messages[3], "content": "changed"}, *messages[4:]]
    found = resumed_as_parsed(bodies, orjson.dumps(chat(edited)))
    assert found is not None and found.count == 3


def test_a_shorter_conversation_resumes_what_it_keeps():
    bodies = ResentBodies(1 << 20, min_bytes=0)
    kept(bodies, chat(OPENING + turn(1) + turn(2)))
    found = resumed_as_parsed(bodies, orjson.dumps(chat(OPENING + turn(1))))
    assert found is not None and found.count == 4


def test_a_tail_that_changed_is_parsed_with_the_elements_added():
    """Codex's client_metadata changes every turn: the messages before it are still taken."""
    bodies = ResentBodies(1 << 20, min_bytes=0)
    kept(bodies, chat(OPENING + turn(1), metadata={"turn": 1}))
    nxt = chat(OPENING + turn(1) + turn(2), metadata={"turn": 2}, stream=True)
    found = resumed_as_parsed(bodies, orjson.dumps(nxt))
    assert found is not None and found.count == 4
    kept(bodies, None, orjson.dumps(nxt), found)
    again = chat(OPENING + turn(1) + turn(2) + turn(3), metadata={"turn": 2}, stream=True)
    found = resumed_as_parsed(bodies, orjson.dumps(again))
    assert found is not None and found.count == 6 and found.body["metadata"] is bodies.bodies()[-1].body["metadata"]


def test_a_key_written_again_after_the_array_takes_its_first_places_value_as_a_whole_parse_does():
    bodies = ResentBodies(1 << 20, min_bytes=0)
    kept(bodies, chat(OPENING))
    raw = orjson.dumps(chat(OPENING))[:-1] + b',"model":"again","messages":[{"role":"user","content":"x"}]}'
    assert resumed_as_parsed(bodies, raw) is not None  # held to orjson's parse: model "again", the later messages


def test_spaces_as_pythons_json_dumps_writes_them_are_parsed_whole():
    bodies = ResentBodies(1 << 20, min_bytes=0)
    raw = b'{"model": "m", "messages": [{"role": "system", "content": "s"}]}'
    kept(bodies, None, raw)
    assert bodies.resume(raw, "messages", DEPTH) is None


def test_a_body_written_otherwise_than_orjson_writes_it_is_dropped_when_first_compared():
    bodies = ResentBodies(1 << 20, min_bytes=0)
    spaced = b'{"model":"m","messages":[{"role":"user","content":"\\u00e9"}]}'  # escaped non-ASCII
    kept(bodies, None, spaced)
    assert len(bodies) == 1
    assert bodies.resume(spaced, "messages", DEPTH) is None
    assert len(bodies) == 0


def test_a_duplicate_key_in_the_tail_is_never_resumed_from():
    bodies = ResentBodies(1 << 20, min_bytes=0)
    raw = b'{"messages":[{"role":"user","content":"a"}],"tools":[1],"tools":[2]}'
    kept(bodies, None, raw)
    nxt = b'{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}],"tools":[1],"tools":[2]}'
    assert resumed_as_parsed(bodies, nxt) is None


@pytest.mark.parametrize(
    "between, resumes",
    [
        (b"", True),
        (b" \n", True),
        (b',{"role":"user","content":"b"}', True),
        (b', {"role":"user","content":"b"} ', True),
        (b",", False),  # a trailing comma: no JSON
        (b",,", False),
        (b'{"role":"user"}', False),  # no comma
        (b',{"role":"user"],"x":[1', False),  # closes the array early: parsed whole, which refuses it
        (b',{"role":"user","content":"\xff"}', False),  # not UTF-8
        (b",1e400", False),  # a number only the faithful parse holds
    ],
)
def test_the_bytes_between_must_be_nothing_or_a_comma_and_elements(between, resumes):
    bodies = ResentBodies(1 << 20, min_bytes=0)
    body = chat([{"role": "user", "content": "a"}], stream=False)
    raw = orjson.dumps(body)
    kept(bodies, body)
    close = raw.index(b'],"stream"')
    found = resumed_as_parsed(bodies, raw[:close] + between + raw[close:])
    assert (found is not None) is resumes


def test_another_conversation_with_the_same_opening_is_kept_beside_it():
    bodies = ResentBodies(1 << 20, min_bytes=0)
    kept(bodies, chat(OPENING + turn(1)))
    other = chat([OPENING[0], {"role": "user", "content": "another task"}, *turn(7)])
    found = resumed_as_parsed(bodies, orjson.dumps(other))
    assert found is not None and found.count == 1  # only the system message is shared
    kept(bodies, None, orjson.dumps(other), found)
    assert len(bodies) == 2  # neither replaced the other
    found = resumed_as_parsed(bodies, orjson.dumps(chat(OPENING + turn(1) + turn(2))))
    assert found is not None and found.count == 4


def test_the_bodies_kept_stay_within_their_bytes_and_per_opening():
    bodies = ResentBodies(40_000, min_bytes=0)
    for i in range(40):
        kept(bodies, chat([OPENING[0], {"role": "user", "content": f"task {i} " * 200}]))
        assert bodies.held <= 40_000
    assert sum(1 for known in bodies.bodies() if known.raw[:OPENING_BYTES] == bodies.bodies()[0].raw[:OPENING_BYTES]) <= PER_OPENING
    assert bodies.held == sum(len(known.raw) for known in bodies.bodies())
    assert kept(bodies, chat([{"role": "user", "content": "x" * 20_000}])) is None  # a quarter of it or more
    assert kept(ResentBodies(0, min_bytes=0), chat(OPENING)) is None  # off
    assert kept(ResentBodies(1 << 20), chat(OPENING)) is None  # below MIN_BYTES: parsed whole for less


def test_a_body_measured_after_resuming_takes_the_shared_units_sizes_and_counts_the_same():
    bodies = ResentBodies(1 << 20, min_bytes=0)
    first = kept(bodies, chat(OPENING + turn(1)))
    first.measure(DEFAULT_ESTIMATOR, first.body["messages"], None, 0)
    raw = orjson.dumps(chat(OPENING + turn(1) + turn(2)))
    found = resumed_as_parsed(bodies, raw)
    second = kept(bodies, None, raw, found)
    assert second.prior is first.measured
    messages = second.body["messages"]
    assert second.measure(DEFAULT_ESTIMATOR, messages, None, found.count) == DEFAULT_ESTIMATOR.measure(messages)
    other = TokenEstimator(image_tokens=5)  # another estimator measures every unit itself
    assert second.measure(other, messages, None, found.count) == other.measure(messages)


def test_the_tools_a_resumed_body_repeats_are_counted_once_and_new_ones_again(monkeypatch):
    import router.core.tokens as tokens

    tools = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]
    bodies = ResentBodies(1 << 20, min_bytes=0)
    first = kept(bodies, chat(OPENING + turn(1), tools=tools, instructions="be brief " * 20))

    def extras(body: dict[str, Any]) -> list[Any]:  # as the Responses view counts its instructions: in an object of its own
        return [*body["tools"], {"instructions": body["instructions"]}]

    first.measure(DEFAULT_ESTIMATOR, first.body["messages"], extras(first.body), 0)
    counted: list[Any] = []
    real = tokens.tools_chars
    monkeypatch.setattr(tokens, "tools_chars", lambda value: counted.append(value) or real(value))
    raw = orjson.dumps(chat(OPENING + turn(1) + turn(2), tools=tools, instructions="be brief " * 20))
    found = resumed_as_parsed(bodies, raw)
    second = kept(bodies, None, raw, found)
    messages, repeated = second.body["messages"], extras(second.body)
    assert second.body["tools"] is first.body["tools"]
    assert second.measure(DEFAULT_ESTIMATOR, messages, repeated, found.count) == DEFAULT_ESTIMATOR.measure(messages, repeated)
    assert counted == [repeated]  # only by the measure compared with: the resumed one took the earlier count
    counted.clear()
    changed = [*repeated[:-1], {"instructions": "be thorough"}]
    assert second.measure(DEFAULT_ESTIMATOR, messages, changed, found.count) == DEFAULT_ESTIMATOR.measure(messages, changed)
    assert len(counted) == 2  # other values: counted by both


@pytest.mark.parametrize(
    ("value", "other", "same"),
    [
        ([], [], True),
        ([{"a": [1]}], [{"a": [1]}], False),  # equal, but other objects: not known the same
        ({"a": "x"}, {"a": "x"}, False),  # only lists of such objects are looked into
    ],
)
def test_same_objects_is_identity_one_list_and_one_object_deep(value, other, same):
    from router.core.resent_prefix import same_objects

    assert same_objects(value, other) is same
    shared = {"k": [1]}
    assert same_objects([shared, {"a": shared["k"], "b": "s"}], [shared, {"a": shared["k"], "b": "s"}])
    assert not same_objects([{"a": shared["k"], "b": "s"}], [{"b": "s", "a": shared["k"]}])  # another key order: other JSON


# --- generated: every body resumed equals its bytes' parse ---

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False, allow_infinity=False), _text)
_value = st.recursive(_leaf, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_text, inner, max_size=3)), max_leaves=8)
_message = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "tool"]), "content": _value})
_body = st.fixed_dictionaries(
    {"messages": st.lists(_message, min_size=1, max_size=5)}, optional={"model": _text, "tools": _value, "stream": st.booleans()}
)


def _written(body: dict[str, Any], spaced: bool) -> bytes:
    import json

    return json.dumps(body, ensure_ascii=False).encode() if spaced else orjson.dumps(body)


@given(
    first=_body,
    added=st.lists(_message, max_size=3),
    cut=st.integers(0, 5),
    edit=st.one_of(st.none(), st.integers(0, 5)),
    spaced=st.booleans(),
    tail_changed=st.booleans(),
    junk=st.sampled_from([b"", b" ", b",", b"]", b"}", b',"', b"x"]),
    at=st.integers(0, 10_000),
)
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_body_resumed_is_its_bytes_parse(first, added, cut, edit, spaced, tail_changed, junk, at):
    bodies = ResentBodies(1 << 22, min_bytes=0)
    raw = _written(first, spaced)
    bodies.keep(raw, orjson.loads(raw), "messages", DEPTH, None, None)
    messages = first["messages"][: max(1, len(first["messages"]) - cut)] + added
    if edit is not None and edit < len(messages):
        messages[edit] = {**messages[edit], "content": "edited"}
    nxt = {**first, "messages": messages}
    if tail_changed:
        nxt["stream"] = not nxt.get("stream", False)
    nraw = orjson.dumps(nxt)
    found = resumed_as_parsed(bodies, nraw)
    if not spaced and not tail_changed and edit is None and not cut:
        assert found is not None and found.count == len(first["messages"])  # the usual next turn always resumes
    if found is not None:
        bodies.keep(nraw, found.body, "messages", DEPTH, None, found)
        resumed_as_parsed(bodies, nraw)
    # bytes broken anywhere: resumed only into their own parse, never into a body they are not
    broken = nraw[: at % (len(nraw) + 1)] + junk + nraw[at % (len(nraw) + 1) :]
    try:
        orjson.loads(broken)
    except orjson.JSONDecodeError:
        assert bodies.resume(broken, "messages", DEPTH) is None
    else:
        resumed_as_parsed(bodies, broken)


@given(first=_body, changed=st.lists(st.integers(0, 8), max_size=4), dropped=st.integers(0, 2), added=st.lists(_message, max_size=2), spaced=st.booleans())
@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_an_array_written_from_the_clients_bytes_is_orjsons_writing_of_it(first, changed, dropped, added, spaced):
    """What goes upstream: the body's own elements copied from its bytes, the changed ones written,
    byte for byte what orjson writes for the whole list."""
    bodies = ResentBodies(1 << 22, min_bytes=0)
    raw = _written(first, spaced)
    known = bodies.keep(raw, orjson.loads(raw), "messages", DEPTH, None, None)
    bodies.resume(raw, "messages", DEPTH)  # lays it out (when its bytes are orjson's)
    out = list(known.body["messages"])
    for index in changed:
        if index < len(out):
            out[index] = {**out[index], "content": "rewritten"}
    out = out[: len(out) - dropped] + added
    payload = {"model": "x", "messages": out, "stream": True}
    assert orjson.dumps({**payload, "messages": known.written(out)}) == orjson.dumps(payload)
    if not spaced and out and not changed and not dropped and not added:
        assert isinstance(known.written(out), orjson.Fragment)  # nothing changed: all of it copied


# --- the array as it went upstream, taken again by the next turn ---


def _next_kept(bodies: ResentBodies, body: dict[str, Any]) -> Any:
    raw = orjson.dumps(body)
    found = bodies.resume(raw, "messages", DEPTH)
    return bodies.keep(raw, found.body if found is not None else orjson.loads(raw), "messages", DEPTH, None, found)


def _sent(known: Any, rewrites: dict[int, Any]) -> tuple[list[Any], bytes]:
    """What a wire's write-back sends for ``rewrites`` (position → new content) through the kept body."""
    messages = known.elements
    write = lambda written: units_with(messages, range(len(messages)), written, "content")  # noqa: E731
    out = known.rewritten(messages, rewrites, lambda position: position, write) if rewrites else write(rewrites)
    return out, orjson.dumps({"model": "x", "messages": known.written(out)})


def test_the_next_turn_with_the_same_rewrites_sends_the_very_elements_and_bytes_sent_before():
    bodies = ResentBodies(1 << 20, min_bytes=0)
    messages = OPENING + turn(1) + turn(2) + turn(3)
    first = _next_kept(bodies, chat(messages))
    bodies.resume(orjson.dumps(chat(messages)), "messages", DEPTH)  # lays the first body out
    rewrites = {3: "[pinch-router: old read result omitted (60 characters)]", 5: "[... elided ...]"}
    out, sent = _sent(first, rewrites)
    nxt = _next_kept(bodies, chat(messages + turn(4)))
    assert nxt.resumed == len(messages)
    again, sent_again = _sent(nxt, dict(rewrites))  # the same content objects, at the same positions
    assert again[3] is out[3] and again[5] is out[5]  # the elements made last turn, taken again
    assert again[len(messages):] == nxt.elements[len(messages):] and all(a is b for a, b in zip(again[len(messages):], nxt.elements[len(messages):]))
    expected = units_with(nxt.elements, range(len(nxt.elements)), rewrites, "content")
    assert again == expected and sent_again == orjson.dumps({"model": "x", "messages": expected})
    # other content at a position: made afresh
    other, _ = _sent(_next_kept(bodies, chat(messages + turn(4) + turn(5))), {3: "another text", 5: rewrites[5]})
    assert other[3] is not out[3] and other[3]["content"] == "another text"


def test_a_turn_that_rewrites_one_more_result_takes_the_elements_made_before_it():
    """pinch's ledger adds the turn's newly old results to what it rewrites: the elements made before
    the first one whose rewrites differ are taken again, the very objects; the array is the write-back's."""
    bodies = ResentBodies(1 << 20, min_bytes=0)
    messages = OPENING + turn(1) + turn(2) + turn(3)
    first = _next_kept(bodies, chat(messages))
    rewrites = {3: "[pinch-router: old read result omitted (60 characters)]", 5: "[... elided ...]"}
    out, _ = _sent(first, rewrites)
    nxt = _next_kept(bodies, chat(messages + turn(4)))
    more = {**rewrites, 7: "[... elided too ...]"}  # the same two, and one more after them
    again, sent = _sent(nxt, more)
    assert again[3] is out[3] and again[5] is out[5]
    expected = units_with(nxt.elements, range(len(nxt.elements)), more, "content")
    assert again == expected and sent == orjson.dumps({"model": "x", "messages": expected})
    # a result before them rewritten anew: made again from there
    anew, _ = _sent(_next_kept(bodies, chat(messages + turn(4) + turn(5))), {**more, 3: "another text"})
    assert anew[3] is not out[3] and anew[3]["content"] == "another text" and anew[5] is not out[5]


def test_an_array_that_is_not_the_kept_bodys_own_is_written_and_nothing_of_it_kept():
    bodies = ResentBodies(1 << 20, min_bytes=0)
    messages = OPENING + turn(1) + turn(2)
    known = _next_kept(bodies, chat(messages))
    other = [*known.elements[:-1], {"role": "tool", "tool_call_id": "c2", "content": "another"}]  # a wire's array that differs
    rewrites = {3: "[pinch-router: old read result omitted (60 characters)]"}
    out = known.rewritten(other, rewrites, lambda position: position, lambda written: units_with(other, range(len(other)), written, "content"))
    assert out == units_with(other, range(len(other)), rewrites, "content") and known.sent is None


@given(
    first=_body,
    turns=st.lists(
        st.tuples(
            st.integers(0, 2), st.lists(_message, max_size=2), st.lists(st.tuples(st.integers(0, 8), st.booleans()), max_size=4), st.booleans()
        ),
        min_size=1,
        max_size=4,
    ),
)
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_array_sent_through_the_kept_bodies_is_what_the_write_back_makes(first, turns):
    """Turn after turn, each body resuming the last (some first dropping its last messages), each rewriting
    some elements (often with the very content the turn before sent there): the array is the
    write-back's, and its bytes orjson's writing."""
    bodies = ResentBodies(1 << 22, min_bytes=0)
    messages, previous = list(first["messages"]), {}
    known = _next_kept(bodies, {**first, "messages": messages})
    for cut, added, picks, repeat in [(0, [], [], False)] + turns:
        messages = messages[: max(1, len(messages) - cut)] + added  # a client may drop its last messages (a retry)
        body = {**first, "messages": messages}
        known = _next_kept(bodies, body)
        bodies.resume(orjson.dumps(body), "messages", DEPTH)  # lays it out, when it was kept whole
        rewrites = {p: (previous[p] if again and p in previous else f"new {p}") for p, again in picks if p < len(messages)}
        if repeat:  # the turn before's rewrites, as they were: what a ledger reapplied sends
            rewrites = {p: text for p, text in previous.items() if p < len(messages)}
        out, sent = _sent(known, rewrites)
        expected = units_with(known.elements, range(len(known.elements)), rewrites, "content")
        assert out == expected and all(a is b for i, (a, b) in enumerate(zip(out, known.elements)) if i not in rewrites)
        assert sent == orjson.dumps({"model": "x", "messages": expected})
        previous = rewrites
