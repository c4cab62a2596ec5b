"""pinch_retrieve's pure core: the id a call asks for, the answer it gets, the declaration's cost (issue #44)."""

from __future__ import annotations

from typing import Any

import json
from hypothesis import given, settings
from hypothesis import strategies as st

from router.core.retrieve import DESCRIPTION, MAX_ANSWER_CHARS, PARAMETERS, TOOL_NAME, answer_call, declaration_tokens, requested_id
from router.core.tokens import tools_chars, tools_tokens

ORIGINALS = {"call_1": "the whole output\nline two", "toolu_9": "x" * (MAX_ANSWER_CHARS + 10)}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
with_id = st.fixed_dictionaries({"id": json_values | st.sampled_from([*ORIGINALS, " call_1 ", '"call_1"'])})


def test_the_id_is_read_from_a_json_text_or_an_object_as_models_write_it() -> None:
    assert requested_id('{"id": "call_1"}') == "call_1"
    assert requested_id({"id": "call_1"}) == "call_1"
    assert requested_id(b'{"id":" \\"call_1\\" "}') == "call_1"  # quoted as the marker shows it
    for bad in ("", "not json", "[]", '{"id": 3}', '{"id": ""}', {"ID": "call_1"}, None, 5, {"id": "x" * 513}):
        assert requested_id(bad) is None


def test_a_call_gets_the_original_or_says_why_there_is_none() -> None:
    assert answer_call('{"id": "call_1"}', ORIGINALS.get) == ("the whole output\nline two", True)
    text, found = answer_call('{"id": "call_404"}', ORIGINALS.get)
    assert not found and "no shortened output has the id 'call_404'" in text
    text, found = answer_call("{}", ORIGINALS.get)
    assert not found and 'needs {"id": "<id>"}' in text
    text, found = answer_call({"id": "toolu_9"}, ORIGINALS.get)
    assert found and len(text) < MAX_ANSWER_CHARS + 100 and text.endswith("the last 10 characters are not shown]")


@settings(max_examples=400, deadline=None)
@given(st.one_of(json_values, st.text(max_size=60), st.binary(max_size=60), json_values.map(json.dumps), with_id, with_id.map(json.dumps)))
def test_any_arguments_get_an_answer_and_never_raise(arguments: Any) -> None:
    text, found = answer_call(arguments, ORIGINALS.get)
    assert isinstance(text, str) and text
    assert found == (requested_id(arguments) in ORIGINALS)


@settings(max_examples=200, deadline=None)
@given(st.none() | st.lists(st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries({"name": st.text(max_size=40), "description": st.text(max_size=80)})}), max_size=5))
def test_the_declaration_is_counted_as_the_estimator_counts_tool_schemas(own: Any) -> None:
    # from the tools' measured characters, exactly what counting the tools with the declaration, less without, gives
    declared = {"type": "function", "function": {"name": TOOL_NAME, "description": DESCRIPTION, "parameters": PARAMETERS}}
    added = declaration_tokens(tools_chars(own))
    assert added == tools_tokens([*(own or ()), declared]) - tools_tokens(own)
    assert 60 < added < 150
