"""The Messages, Responses and Gemini wires' fused checks answer every body as the walk, then the validation and the view.

Each of these wires validates a body in the pass that proves its usual messages (items,
contents) shallow and float-free and gathers the view's facts on the way
(:func:`~router.wire.anthropic_messages.validation.check_messages_body`,
:func:`~router.wire.openai_responses.validation.check_responses_body`,
:func:`~router.wire.gemini.validation.check_gemini_body`), as chat does
(tests/unit/wire/test_chat_body_check.py). For every body the answer must be the one of the
unfused passes — the depth walk of the whole body, then ``parse`` — the same error (status,
code, message, param), and for a served body the same view (every field, the units, the tool
results, the turns) and the same bytes sent upstream, passed through and for a translation.
Generated bodies mix the usual shapes with deep values, odd numbers and invalid parts where
the proof must not reach; the agents' captured bodies (tests/data/agents) are checked too.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.core.errors import ApiError
from router.core.request_view import BodyChanges, RequestTarget
from router.core.json_body import faithful_loads
from router.core.resent_prefix import ResentBodies
from router.http.request_body import keep_accepted, parse_checked_json_body, parse_json_body
from router.wire.anthropic_messages.adapter import ANTHROPIC_MESSAGES_ADAPTER as MESSAGES
from router.wire.anthropic_messages.validation import check_messages_body
from router.wire.gemini.adapter import GEMINI_ADAPTER as GEMINI
from router.core.errors import InvalidRequest
from router.wire.gemini.body import signed
from router.wire.gemini.parts import SKIP_SIGNATURE, current_turn_start, first_call_at, signature_of
from router.wire.gemini.validation import check_gemini_body, validate_gemini_body
from router.wire.gemini.view import GeminiConversation
from router.wire.openai_responses.adapter import OPENAI_RESPONSES_ADAPTER as RESPONSES
from router.wire.openai_responses.validation import check_responses_body
from tests.unit.wire.test_chat_body_check import NUMBER_LITERALS, nested, odd_values, raw_body

AGENTS = Path(__file__).resolve().parents[2] / "data" / "agents"
GENERATE = RequestTarget(path={"model": "gemini-x", "action": "generateContent"})
TARGETS = [GENERATE, RequestTarget(path={"model": "g", "action": "streamGenerateContent"}, query={"alt": "sse"}), RequestTarget(path={"model": "g", "action": "countTokens"})]


def view_of(wire: Any, body: Any, checked: Any, target: RequestTarget) -> Any:
    return wire.parse(body, 2000, target) if checked is None else wire.parse_checked(body, checked, 2000, target)


def answer_apart(wire: Any, raw: bytes, max_depth: int, target: RequestTarget) -> Any:
    """The edge without the fused check: the depth walk of the whole body, then the wire's parse."""
    body = parse_json_body(raw, max_depth)
    return outcome(wire, body, body if isinstance(body, ApiError) else wire.parse(body, 2000, target))


def answer_checked(wire: Any, raw: bytes, max_depth: int, target: RequestTarget) -> Any:
    """The edge now: the wire's check before the walk, which covers only what the check did not prove."""
    read = parse_checked_json_body(raw, max_depth, wire.check_body)
    if isinstance(read, ApiError):
        return outcome(wire, read, read)
    return outcome(wire, read.body, view_of(wire, read.body, read.checked, target))


def outcome(wire: Any, body: Any, view: Any) -> Any:
    """What a client, the stages and the upstream see of an answer: the error, or the view and the bytes sent."""
    if isinstance(view, ApiError):
        return ("error", view.status, view.code, view.message, view.param)
    # as JSON: a number no double holds is an orjson.Fragment in the body, equal only to itself
    fields = {f.name: orjson.dumps(getattr(view, f.name), default=repr) for f in dataclasses.fields(view) if f.name != "conversation"}
    conversation = view.conversation
    results = conversation.result_units()
    seen = (
        orjson.dumps(list(conversation.units)),
        conversation.tool_results(),
        results,
        conversation.turn_starts(),
        [conversation.tool_name(unit) for unit in results],
        {name: getattr(conversation, name) for name in ("proxy_thinking", "needs_thinking_off", "proxy_items") if hasattr(conversation, name)},
    )
    sent = [wire.upstream_body(body, view, BodyChanges(upstream_model="m", translated=translated, output_tokens=5)) for translated in (False, True)]
    return ("served", orjson.dumps(body), fields, seen, sent)


def same_answer(wire: Any, raw: bytes, max_depth: int, target: RequestTarget = GENERATE) -> Any:
    answer = answer_checked(wire, raw, max_depth, target)
    assert answer == answer_apart(wire, raw, max_depth, target)
    return answer


NUMBERS = st.permutations(NUMBER_LITERALS)
DEPTHS = st.sampled_from([3, 5, 6, 7, 8, 9, 10, 11, 128])
extras = st.dictionaries(st.sampled_from(["cache_control", "extra", "id", "status", "citations"]), odd_values, max_size=2)
texts = st.sampled_from(["hi", "", "<system-reminder>ctx</system-reminder>", "x-anthropic-billing-header: cc", "look at utils.py"])


# Every strategy a composite below draws from is made once, here: one made inside a draw is made and
# validated again for every example (hypothesis checks a new strategy's whole graph on its first
# draw), which was most of these tests' CPU (~75 % of the slowest's profile), not the checks.
T_IDS, C_IDS = st.sampled_from(["t1", "t2"]), st.sampled_from(["c1", "c2"])
FIELD_COUNTS = st.sampled_from([0, 0, 1, 2])


def fields(names: list[str], *values: Any) -> dict[int, st.SearchStrategy[dict[str, Any]]]:
    """Top-level fields of ``names`` with ``values`` (or an odd value), by how many at most (``FIELD_COUNTS``)."""
    return {size: st.dictionaries(st.sampled_from(names), st.one_of(odd_values, *values), max_size=size) for size in (0, 1, 2)}


def usually(draw: st.DrawFn, usual: st.SearchStrategy[Any], odd: st.SearchStrategy[Any] = odd_values) -> Any:
    """``usual``, and one time in eight ``odd`` (a deep value, an odd number, a wrong type): most
    bodies generated are then valid, so that the view and the bytes sent are compared too."""
    return draw(odd) if draw(st.integers(0, 7)) == 0 else draw(usual)


def with_extras(draw: st.DrawFn, value: dict[str, Any]) -> dict[str, Any]:
    return {**value, **draw(extras)} if draw(st.integers(0, 5)) == 0 else value


# --- Anthropic Messages ----------------------------------------------------------------------


BLOCK_KINDS = st.sampled_from(["text"] * 3 + ["tool_use"] * 2 + ["tool_result"] * 2 + ["tool_result_parts", "image", "thinking", "other", "odd"])
TOOL_INPUTS = st.one_of(st.just({"command": "ls"}), st.builds(lambda v: {"v": v}, odd_values))
RESULT_CONTENTS = st.one_of(texts, st.none())
RESULT_PARTS = st.lists(st.one_of(st.just({"type": "text", "text": "out"}), st.just({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}),
                                  st.just({"type": "tool_result", "tool_use_id": "t1"}), odd_values), max_size=3)
IMAGE_SOURCE = st.just({"type": "base64", "media_type": "image/png", "data": "AA"})
SIGNATURES = st.sampled_from(["", "pinch-router:reasoning_content", "EqQB", None])
OTHER_BLOCK_TYPES = st.sampled_from(["document", "server_tool_use", "redacted_thinking", 5])
MESSAGE_ROLES = st.sampled_from(["user"] * 4 + ["assistant"] * 4 + ["system", "robot", None])
MESSAGES_MODELS, MAX_TOKENS = st.sampled_from(["auto"] * 5 + ["claude-x", "", 5]), st.sampled_from([1024] * 6 + [0, "many", True])
MESSAGES_FIELDS = fields(["system", "tools", "thinking", "metadata", "stream", "stop_sequences", "temperature"], st.just([{"type": "text", "text": "sys"}]),
                         st.just({"type": "enabled", "budget_tokens": 2000}), st.just([{"name": "Bash", "input_schema": {"type": "object"}}]))


@st.composite
def messages_blocks(draw: st.DrawFn) -> Any:
    kind = draw(BLOCK_KINDS)
    if kind == "text":
        block: Any = {"type": "text", "text": usually(draw, texts)}
    elif kind == "tool_use":
        block = {"type": "tool_use", "id": draw(T_IDS), "name": "Bash", "input": usually(draw, TOOL_INPUTS)}
    elif kind == "tool_result":
        block = {"type": "tool_result", "tool_use_id": usually(draw, T_IDS), "content": usually(draw, RESULT_CONTENTS)}
    elif kind == "tool_result_parts":
        block = {"type": "tool_result", "tool_use_id": "t1", "content": draw(RESULT_PARTS), "is_error": draw(st.booleans())}
    elif kind == "image":
        block = {"type": "image", "source": usually(draw, IMAGE_SOURCE)}
    elif kind == "thinking":
        block = {"type": "thinking", "thinking": "hmm", "signature": draw(SIGNATURES)}
    elif kind == "other":
        block = {"type": draw(OTHER_BLOCK_TYPES)}
    else:
        return draw(odd_values)
    return with_extras(draw, block)


@st.composite
def messages_messages(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 20)) == 0:
        return draw(odd_values)
    role = draw(MESSAGE_ROLES)
    content = usually(draw, MESSAGE_CONTENTS)
    message: dict[str, Any] = {"role": role, "content": content}
    return with_extras(draw, message)


MESSAGE_CONTENTS = st.one_of(texts, st.lists(messages_blocks(), min_size=0, max_size=4))
MESSAGE_LISTS = st.lists(messages_messages(), max_size=6)


@st.composite
def messages_bodies(draw: st.DrawFn) -> bytes:
    body: dict[str, Any] = {"model": draw(MESSAGES_MODELS), "max_tokens": draw(MAX_TOKENS), "messages": draw(MESSAGE_LISTS)}
    body.update(draw(MESSAGES_FIELDS[draw(FIELD_COUNTS)]))
    return raw_body(body, draw(NUMBERS))


@given(raw=messages_bodies(), max_depth=DEPTHS)
@settings(max_examples=1200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_messages_check_gets_the_answer_of_the_walk_then_the_validation_and_the_view(raw, max_depth):
    same_answer(MESSAGES, raw, max_depth)


# Where the fused check proves a usual block by counting its keys (a text, a tool call whose input
# alone is walked, a tool result of text), each of these must still reach the walk.
MESSAGES_UNPROVEN_BLOCKS = [
    ("assistant", {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"v": nested(9)}}),
    ("assistant", {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"n": "#1"}}),
    ("assistant", {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}, "cache_control": nested(9)}),
    ("assistant", {"type": "text", "text": "hi", "citations": nested(9)}),
    ("user", {"type": "tool_result", "tool_use_id": "t1", "content": "ok", "is_error": "#2"}),
    ("user", {"type": "tool_result", "tool_use_id": "t1", "content": "ok", "is_error": True, "extra": nested(9)}),
    ("user", {"type": "tool_result", "tool_use_id": "t1", "is_error": nested(9)}),
    ("user", {"type": "tool_result", "tool_use_id": "t1", "content": None, "cache_control": nested(9)}),
    ("user", {"type": "tool_result", "tool_use_id": "t1", "content": "ok", "cache_control": {"type": "ephemeral", "n": "#1"}}),
    ("user", {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "ok", "x": nested(9)}]}),
]


@pytest.mark.parametrize(("role", "block"), MESSAGES_UNPROVEN_BLOCKS)
@pytest.mark.parametrize("max_depth", [8, 9, 12])
def test_messages_check_leaves_deep_values_and_numbers_of_usual_blocks_to_the_walk(role, block, max_depth):
    # after a text block, and alone (a user turn of one tool result takes a path of its own)
    for content in ([{"type": "text", "text": "x"}, block], [block]):
        messages = [{"role": "user", "content": "hi"}, {"role": role, "content": content}]
        for numbers in (["0.5", "1e-400", "1e400"], ["1e400", "1e-400", "0.5"]):
            same_answer(MESSAGES, raw_body({"model": "auto", "max_tokens": 100, "messages": messages}, numbers), max_depth)


# --- OpenAI Responses ------------------------------------------------------------------------


RESPONSES_PARTS = st.one_of(
    st.builds(lambda t, k: {"type": k, "text": t}, st.one_of(texts, odd_values), st.sampled_from(["input_text", "output_text"])),
    st.just({"type": "input_image", "image_url": "data:image/png;base64,AA"}), st.just({"type": "input_image"}),
    st.just({"type": "refusal", "refusal": "no"}), odd_values,
)


@st.composite
def responses_parts(draw: st.DrawFn) -> Any:
    return draw(RESPONSES_PARTS)


ITEM_KINDS = st.sampled_from(["message"] * 2 + ["easy", "function_call", "function_call", "function_call_output", "function_call_output", "reasoning", "custom_tool_call", "item_reference", "odd"])
ITEM_CONTENTS = st.one_of(texts, st.lists(responses_parts(), max_size=3))
ITEM_ROLES = st.sampled_from(["user"] * 3 + ["assistant"] * 3 + ["developer", "system", "robot", None])
CALL_NAMES, CALL_ARGUMENTS = st.sampled_from(["shell", "apply_patch"]), st.just('{"cmd":"ls"}')
REASONING_IDS, ENCRYPTED = st.sampled_from(["rs_pinch_ab_0", "rs_01"]), st.sampled_from([None, "gAAA"])


@st.composite
def responses_items(draw: st.DrawFn) -> Any:
    kind = draw(ITEM_KINDS)
    if kind in ("message", "easy"):
        item: Any = {"role": draw(ITEM_ROLES), "content": usually(draw, ITEM_CONTENTS)}
        if kind == "message":
            item["type"] = "message"
    elif kind == "function_call":
        item = {"type": "function_call", "call_id": usually(draw, C_IDS), "name": draw(CALL_NAMES), "arguments": usually(draw, CALL_ARGUMENTS)}
    elif kind == "function_call_output":
        item = {"type": "function_call_output", "call_id": usually(draw, C_IDS), "output": usually(draw, ITEM_CONTENTS)}
    elif kind == "reasoning":
        item = {"type": "reasoning", "id": draw(REASONING_IDS), "summary": [], "encrypted_content": draw(ENCRYPTED)}
    elif kind in ("custom_tool_call", "item_reference"):
        item = {"type": kind, "call_id": "c3", "id": "x"}
    else:
        return draw(odd_values)
    return with_extras(draw, item)


RESPONSES_MODELS, INPUTS = st.sampled_from(["auto"] * 5 + ["gpt-x", "", 5]), st.one_of(st.lists(responses_items(), max_size=6), texts)
RESPONSES_FIELDS = fields(["instructions", "tools", "store", "max_output_tokens", "text", "stream", "tool_choice"], st.just(False), st.just("be brief"),
                          st.just([{"type": "function", "name": "shell", "parameters": {}}]))


@st.composite
def responses_bodies(draw: st.DrawFn) -> bytes:
    body: dict[str, Any] = {"model": draw(RESPONSES_MODELS), "input": usually(draw, INPUTS)}
    body.update(draw(RESPONSES_FIELDS[draw(FIELD_COUNTS)]))
    return raw_body(body, draw(NUMBERS))


@given(raw=responses_bodies(), max_depth=DEPTHS)
@settings(max_examples=1200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_responses_check_gets_the_answer_of_the_walk_then_the_validation_and_the_view(raw, max_depth):
    same_answer(RESPONSES, raw, max_depth)


# Where the fused check proves a usual item by counting its keys (a call, an output or a message of
# text, with a string id or status), each of these must still reach the walk.
RESPONSES_UNPROVEN_ITEMS = [
    {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}", "id": nested(9)},
    {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}", "status": "#1"},
    {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}", "id": "fc_1", "extra": nested(9)},
    {"type": "function_call_output", "call_id": "c1", "output": "ok", "extra": "#2"},
    {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "ok", "x": nested(9)}]},
    {"type": "message", "role": "user", "content": "hi", "id": "#1"},
    {"role": "user", "content": "hi", "status": nested(9)},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok", "annotations": nested(9)}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "ok"}, {"type": "input_file", "file_data": nested(9)}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "ok"}, {"type": "input_file", "n": "#1"}]},
    {"role": "user", "content": [{"type": "input_text", "text": "ok"}], "extra": nested(9)},
]


@pytest.mark.parametrize("item", RESPONSES_UNPROVEN_ITEMS)
@pytest.mark.parametrize("max_depth", [8, 9, 12])
def test_responses_check_leaves_deep_values_and_numbers_of_usual_items_to_the_walk(item, max_depth):
    for numbers in (["0.5", "1e-400", "1e400"], ["1e400", "1e-400", "0.5"]):
        same_answer(RESPONSES, raw_body({"model": "auto", "input": [{"role": "user", "content": "hi"}, item]}, numbers), max_depth)


# --- Gemini ----------------------------------------------------------------------------------


PART_KINDS = st.sampled_from(["text", "text", "thought", "call", "response", "response_parts", "image", "snake", "odd"])
CALLS = st.one_of(st.just({"name": "shell", "args": {"cmd": "ls"}}), st.builds(lambda v: {"name": "shell", "args": v}, odd_values), odd_values)
FUNCTION_RESPONSES = st.one_of(st.just({"name": "shell", "response": {"output": "ok"}}), st.builds(lambda v: {"name": "shell", "id": "r1", "response": v}, odd_values), odd_values)
INLINE_DATA = st.one_of(st.just({"mimeType": "image/png", "data": "AA"}), odd_values)


@st.composite
def gemini_parts(draw: st.DrawFn) -> Any:
    kind = draw(PART_KINDS)
    if kind == "text":
        part: Any = {"text": usually(draw, texts)}
    elif kind == "thought":
        part = {"text": "hmm", "thought": True, "thoughtSignature": "c2ln"}
    elif kind == "call":
        part = {"functionCall": draw(CALLS)}
        if draw(st.booleans()):
            part["thoughtSignature"] = "c2ln"
    elif kind == "response":
        part = {"functionResponse": draw(FUNCTION_RESPONSES)}
    elif kind == "response_parts":
        part = {"functionResponse": {"name": "shell", "response": {}, "parts": [{"inlineData": {"mimeType": "image/png", "data": "AA"}}]}}
    elif kind == "image":
        part = {"inlineData": draw(INLINE_DATA)}
    elif kind == "snake":
        part = {"function_call": {"name": "shell", "args": {}}}
    else:
        return draw(odd_values)
    return with_extras(draw, part)


PART_LISTS = st.lists(gemini_parts(), max_size=4)
CONTENT_ROLES = st.sampled_from(["user"] * 3 + ["model"] * 3 + ["function", "robot", None, "absent"])


@st.composite
def gemini_contents(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 20)) == 0:
        return draw(odd_values)
    content: dict[str, Any] = {"parts": usually(draw, PART_LISTS)}
    role = draw(CONTENT_ROLES)
    if role != "absent":
        content["role"] = role
    return with_extras(draw, content)


CONTENTS_KEYS, CONTENT_LISTS = st.sampled_from(["contents", "contents", "contents_snake"]), st.lists(gemini_contents(), max_size=6)
GEMINI_FIELDS = fields(["systemInstruction", "tools", "generationConfig", "toolConfig", "safetySettings"], st.just({"parts": [{"text": "sys"}]}),
                       st.just({"maxOutputTokens": 100}), st.just([{"functionDeclarations": [{"name": "shell", "parameters": {"type": "object"}}]}]))


@st.composite
def gemini_bodies(draw: st.DrawFn) -> bytes:
    key = draw(CONTENTS_KEYS)
    body: dict[str, Any] = {key.replace("_snake", ""): draw(CONTENT_LISTS)}
    body.update(draw(GEMINI_FIELDS[draw(FIELD_COUNTS)]))
    return raw_body(body, draw(NUMBERS))


@given(raw=gemini_bodies(), max_depth=DEPTHS, target=st.sampled_from(TARGETS))
@settings(max_examples=1200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_gemini_check_gets_the_answer_of_the_walk_then_the_validation_and_the_view(raw, max_depth, target):
    same_answer(GEMINI, raw, max_depth, target)


def unsigned_first_calls(contents: list[Any]) -> list[tuple[int, int]]:
    """The reference: the first call of each model content in Google's current turn that has no
    thought signature, found with the parts' own helpers."""
    start = current_turn_start(contents)
    found = []
    for c in range(start, len(contents)):
        content = contents[c]
        if content.get("role") == "model" and (first := first_call_at(content["parts"])) is not None and signature_of(content["parts"][first]) is None:
            found.append((c, first))
    return found


@given(raw=gemini_bodies(), stale=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)), max_size=3))
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_gemini_view_finds_the_unsigned_calls_the_upstream_body_signs(raw, stale):
    """The view's own pass finds the places ``signed`` used to look up (the current turn's unsigned
    first calls), so the body sent is the same with them as without."""
    body = parse_json_body(raw, 64)
    try:
        parsed = validate_gemini_body(body, "m", "generateContent")
    except InvalidRequest:
        return  # an ApiError (too deep, a suspect number) is no object either
    conversation = GeminiConversation(parsed.system, parsed.contents)
    assert conversation.unsigned_calls == unsigned_first_calls(parsed.contents)
    stale = [(c, p) for c, p in stale if c < len(parsed.contents) and p < len(parsed.contents[c]["parts"])]
    assert signed(parsed.contents, stale, conversation.unsigned_calls) == signed(parsed.contents, stale, unsigned_first_calls(parsed.contents))


def test_gemini_unsigned_calls_are_those_of_the_current_turn_only():
    call = {"functionCall": {"name": "shell", "args": {}}}
    contents = [
        {"role": "user", "parts": [{"text": "old task"}]},
        {"role": "model", "parts": [{"text": "looking"}, call]},  # before the current turn: not signed
        {"role": "user", "parts": [{"text": "new task"}]},
        {"role": "model", "parts": [call, dict(call)]},
        {"role": "user", "parts": [{"functionResponse": {"name": "shell", "response": {"output": "ok"}}}]},
        {"role": "model", "parts": [{**call, "thoughtSignature": "c2ln"}]},
        {"role": "model", "parts": [{**call, "thoughtSignature": ""}]},
    ]
    assert GeminiConversation(None, contents).unsigned_calls == [(3, 0), (6, 0)]
    out, added = signed(contents, (), unsigned_first_calls(contents))
    assert added == 2 and out[3]["parts"][0]["thoughtSignature"] == SKIP_SIGNATURE and "thoughtSignature" not in out[3]["parts"][1]
    assert out[1] is contents[1] and out[5] is contents[5]
    head = contents[:1]
    assert signed(head, [(0, 0)], []) == (head, 0) and signed(head, [(0, 0)], [])[0] is head  # nothing to sign: the very same list


# Where the fused check proves a usual content without walking it (it counts the keys it checked
# and walks only a call's and a response's objects), each of these must still reach the walk.
GEMINI_UNPROVEN_PARTS = [
    {"functionCall": {"name": "shell", "args": nested(9)}},
    {"functionCall": {"name": "shell", "args": {"n": "#1"}}},
    {"functionCall": {"name": "shell", "args": {}, "id": nested(9)}},
    {"functionResponse": {"name": "shell", "response": {"output": nested(9)}}},
    {"functionResponse": {"name": "shell", "response": {"n": "#2"}}},
    {"functionResponse": {"name": "shell", "id": nested(9), "response": {"output": "ok"}}},
    {"functionResponse": {"name": "shell", "id": "#1", "response": {"output": "ok"}}},
    {"functionResponse": {"name": "shell", "response": {"output": "ok"}, "willContinue": nested(9)}},
    {"functionCall": {"name": "shell", "args": {}, "extra": nested(9)}},
    {"functionCall": {"name": "shell", "id": "#2"}},
    {"text": "hmm", "thought": "#1"},
    {"text": "hmm", "thought": nested(9)},
    {"text": "hmm", "thoughtSignature": nested(9)},
    {"functionCall": {"name": "shell", "args": {}}, "thoughtSignature": "#2"},
]


@pytest.mark.parametrize("part", GEMINI_UNPROVEN_PARTS)
@pytest.mark.parametrize("role", ["model", "user"])
@pytest.mark.parametrize("max_depth", [8, 9, 12])
def test_gemini_check_leaves_deep_values_and_numbers_of_usual_parts_to_the_walk(part, role, max_depth):
    # after a text part, and alone (a user content of one function response takes a path of its own)
    for parts in ([{"text": "hi"}, part], [part]):
        for numbers in (["0.5", "1e-400", "1e400"], ["1e400", "1e-400", "0.5"]):
            same_answer(GEMINI, raw_body({"contents": [{"role": role, "parts": parts}]}, numbers), max_depth)
    same_answer(GEMINI, raw_body({"contents": [{"role": role, "parts": [{"text": "hi"}], "extra": part}]}, ["1e400", "0.5", "1e-400"]), max_depth)


# --- the agents' own bodies ------------------------------------------------------------------

WIRE_OF_PATH = {"/v1/messages": MESSAGES, "/v1/responses": RESPONSES}


def captured() -> list[Any]:
    found = []
    for path in sorted(AGENTS.glob("*/*.json")):
        recorded = json.loads(path.read_text())
        if not isinstance(recorded, dict) or recorded.get("method") != "POST" or not isinstance(recorded.get("body"), dict):
            continue
        route = recorded["path"]
        if route in WIRE_OF_PATH:
            found.append(pytest.param(WIRE_OF_PATH[route], recorded["body"], GENERATE, id=f"{path.parent.name}/{path.name}"))
        elif route.startswith("/v1beta/models/") and ":" in route:
            model, action = route.removeprefix("/v1beta/models/").split(":", 1)
            target = RequestTarget(path={"model": model, "action": action}, query=recorded.get("query") or {})
            found.append(pytest.param(GEMINI, recorded["body"], target, id=f"{path.parent.name}/{path.name}"))
    return found


@pytest.mark.parametrize(("wire", "body", "target"), captured())
def test_an_agents_captured_body_gets_the_same_answer(wire, body, target):
    raw = orjson.dumps(body)
    for max_depth in (8, 10, 128):  # their tool schemas nest deeper than 8: refused alike
        same_answer(wire, raw, max_depth, target)
    assert same_answer(wire, raw, 128, target)[0] == "served"


def test_every_wire_has_captured_bodies():
    wires = {id(param.values[0]) for param in captured()}
    assert wires == {id(MESSAGES), id(RESPONSES), id(GEMINI)}


# --- what the proof leaves to the walk -------------------------------------------------------

SESSION_MESSAGES = {
    "model": "auto", "max_tokens": 100, "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": [{"type": "text", "text": "looking"}, {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]},
    ],
}  # fmt: skip
SESSION_RESPONSES = {
    "model": "auto", "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a.py"},
    ],
}  # fmt: skip
SESSION_GEMINI = {
    "contents": [
        {"role": "user", "parts": [{"text": "fix it"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "shell", "args": {"cmd": "ls"}}, "thoughtSignature": "c2ln"}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "shell", "response": {"output": "a.py"}}}]},
    ],
}  # fmt: skip


@pytest.mark.parametrize(
    ("check", "body", "key"),
    [(check_messages_body, SESSION_MESSAGES, "messages"), (check_responses_body, SESSION_RESPONSES, "input"), (check_gemini_body, SESSION_GEMINI, "contents")],
)
def test_a_session_of_usual_turns_leaves_the_walk_none_of_them(check, body, key):
    checked = check(body, 128)
    assert checked[0] is not None
    assert checked.walk[key] == []
    assert checked.walk.keys() == body.keys()
    assert check(body, 7).walk is body  # below the least limit there is, nothing is proven


@pytest.mark.parametrize(
    ("wire", "body", "max_depth", "code"),
    [
        # a tool_use input one level deeper than the limit, and one at it (block 5, input 6, …)
        (MESSAGES, {**SESSION_MESSAGES, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "B", "input": {"k": nested(3)}}]}]}, 8, "json_too_deep"),
        (MESSAGES, {**SESSION_MESSAGES, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "B", "input": {"k": nested(2)}}]}]}, 8, "ok"),
        # an invalid message ahead of a too-deep one: the depth is the answer
        (MESSAGES, {**SESSION_MESSAGES, "messages": [{"role": "robot"}, {"role": "user", "content": [{"type": "text", "text": "x", "x": nested(5)}]}]}, 8, "json_too_deep"),
        (RESPONSES, {**SESSION_RESPONSES, "input": [{"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text", "text": "x", "x": nested(4)}]}]}, 8, "json_too_deep"),
        (RESPONSES, {**SESSION_RESPONSES, "input": [{"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text", "text": "x", "x": nested(3)}]}]}, 8, "ok"),
        (GEMINI, {"contents": [{"role": "model", "parts": [{"functionCall": {"name": "f", "args": nested(3)}}]}]}, 8, "json_too_deep"),
        (GEMINI, {"contents": [{"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"k": nested(1)}}}]}]}, 8, "ok"),
    ],
)
def test_the_depth_is_judged_before_the_validation(wire, body, max_depth, code):
    answer = same_answer(wire, orjson.dumps(body), max_depth)
    assert answer[0] == "served" if code == "ok" else answer[2] == code


@pytest.mark.parametrize("literal", ["0.0", "1e-400", "123456789012345678901234567890", "1e400"])
@pytest.mark.parametrize(
    ("wire", "body"),
    [
        (MESSAGES, {"max_tokens": 10, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "B", "input": {"n": "#0"}}]}]}),
        (RESPONSES, {"input": [{"type": "function_call_output", "call_id": "c", "output": "x", "n": "#0"}]}),
        (GEMINI, {"contents": [{"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"n": "#0"}}}]}]}),
    ],
)
def test_a_suspect_number_in_a_usual_turn_is_still_parsed_again(wire, body, literal):
    answer = same_answer(wire, raw_body(body, [literal]), 128)
    assert answer[0] == "served" and literal.encode() in answer[4][0]  # sent upstream as the client wrote it


# --- a body resumed from its earlier turn (router.core.resent_prefix) ---


def earlier_turn(raw: bytes, key: str, count: int) -> bytes | None:
    """``raw`` with only the first ``count`` elements of its ``key`` array, written alike (None: it has no such array)."""
    try:
        body = faithful_loads(raw)
    except ValueError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get(key), list) or not body[key]:
        return None
    return orjson.dumps({**body, key: body[key][:count]})


def answer_resumed(wire: Any, raw: bytes, earlier: bytes, max_depth: int, target: RequestTarget = GENERATE) -> tuple[Any, int]:
    """The edge with the bodies it kept: ``earlier`` first (kept when served), then ``raw``; the answer
    to ``raw``, and how many of its units it took from ``earlier``'s measurement."""
    resent, key = ResentBodies(1 << 22, min_bytes=0), wire.conversation_key
    first = parse_checked_json_body(earlier, max_depth, wire.check_body, resent, key)
    if not isinstance(first, ApiError) and first.checked is not None and not isinstance(view_of(wire, first.body, first.checked, target), ApiError):
        keep_accepted(resent, first, key, max_depth)
    read = parse_checked_json_body(raw, max_depth, wire.check_body, resent, key)
    if isinstance(read, ApiError):
        return outcome(wire, read, read), 0
    view = view_of(wire, read.body, read.checked, target)
    reused = 0 if isinstance(view, ApiError) else view.reused_units
    if not isinstance(view, ApiError):
        view = dataclasses.replace(view, reused_units=0)  # the one field that says it was resumed
    return outcome(wire, read.body, view), reused


BODIES = {id(MESSAGES): messages_bodies(), id(RESPONSES): responses_bodies(), id(GEMINI): gemini_bodies()}
TARGET_CHOICES = st.sampled_from(TARGETS)


@pytest.mark.parametrize("wire", [MESSAGES, RESPONSES, GEMINI], ids=["messages", "responses", "gemini"])
@given(data=st.data(), count=st.integers(1, 6), max_depth=DEPTHS)
@settings(max_examples=900, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_body_resumed_from_its_earlier_turn_gets_the_answer_of_the_walk_then_the_validation_and_the_view(wire, data, count, max_depth):
    raw = data.draw(BODIES[id(wire)])
    target = data.draw(TARGET_CHOICES) if wire is GEMINI else GENERATE
    earlier = earlier_turn(raw, wire.conversation_key, count)
    if earlier is not None:
        assert answer_resumed(wire, raw, earlier, max_depth, target)[0] == answer_apart(wire, raw, max_depth, target)


@pytest.mark.parametrize(("wire", "body", "target"), captured())
def test_an_agents_next_turn_resumes_its_earlier_turns_units_and_gets_the_same_answer(wire, body, target):
    """Each captured agent body after its earlier turn (the same body without its last message,
    item or content) was served: the earlier turn's units are taken, and the answer is the walk's,
    then the validation's and the view's."""
    raw, key = orjson.dumps(body), wire.conversation_key
    if not isinstance(body.get(key), list) or len(body[key]) < 2:
        return
    answer, reused = answer_resumed(wire, raw, earlier_turn(raw, key, len(body[key]) - 1), 128, target)
    assert answer == answer_apart(wire, raw, 128, target)
    assert answer[0] == "served" and reused > 0  # the earlier turn's units were taken


@pytest.mark.parametrize(
    ("wire", "system", "other"),
    [
        (MESSAGES, {"system": "be brief"}, {"system": "be thorough, and brief"}),
        (MESSAGES, {"system": "be brief"}, {}),
        (GEMINI, {"systemInstruction": {"parts": [{"text": "be brief"}]}}, {"systemInstruction": {"parts": [{"text": "be thorough"}]}}),
    ],
)
def test_a_system_that_changed_after_the_conversation_is_placed_again_not_resumed(wire, system, other):
    """The system is the layout's first unit; when the body's tail says another, the messages are still
    taken from the earlier parse but the check places every unit again."""
    key = wire.conversation_key
    if wire is MESSAGES:
        turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "text", "text": "yes"}]}, {"role": "user", "content": "go"}]
        base = {"model": "auto", "max_tokens": 100}
    else:
        turns = [{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [{"text": "yes"}]}, {"role": "user", "parts": [{"text": "go"}]}]
        base = {}
    earlier = orjson.dumps({**base, key: turns[:2], **system})
    raw = orjson.dumps({**base, key: turns, **other})
    answer, reused = answer_resumed(wire, raw, earlier, 128)
    assert answer == answer_apart(wire, raw, 128, GENERATE)
    assert reused == 0
    same, reused = answer_resumed(wire, orjson.dumps({**base, key: turns, **system}), earlier, 128)
    assert reused > 0  # the same system: resumed
