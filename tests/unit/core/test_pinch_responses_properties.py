"""Property-based: pinch on Responses transcripts (Codex's shape) keeps every invariant of ARCHITECTURE §5.

Only ``function_call_output`` items are ever rewritten, and only their
``output``; reasoning items (``encrypted_content`` included), messages and
calls go out as the very same objects; no item is added, removed or moved, so
each call id keeps exactly its one output, in place; the protected turns are
untouched, the input is not mutated, and compressing again changes nothing.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from router.core.pinch import prune_results
from router.core.request_view import BodyChanges
from router.core.turns import candidate_results
from router.wire.openai_responses.validation import validate_responses_body
from router.wire.openai_responses.view import (
    ResponsesConversation,
    body_with_changes,
    items_with,
    responses_view,
)
from tests.support.wire_factories import (
    function_call,
    function_call_output,
    input_message,
    reasoning_item,
    responses_body,
)
from tests.unit.core.test_pinch_properties import log

SIZES = [0, 10, 200, 1000, 5000, 20_000]
output_text = st.builds(log, st.sampled_from(SIZES), st.integers(0, 100), st.booleans())
output = st.one_of(output_text, st.lists(output_text.map(lambda t: {"type": "input_text", "text": t}), min_size=1, max_size=3))


@st.composite
def codex_transcripts(draw: st.DrawFn) -> list[dict[str, Any]]:
    items = [input_message("developer", "You are Codex."), input_message("user", "<environment_context/>"), input_message("user", "fix it")]
    for turn in range(draw(st.integers(0, 8))):
        if draw(st.booleans()):
            items.append({**reasoning_item(f"step {turn}", f"sealed-{turn}-" + "x" * draw(st.sampled_from([0, 50, 3000]))), "id": f"rs_{turn}"})
        if draw(st.integers(0, 3)) == 0:
            items.append({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": draw(output_text)}]})
        calls = [f"call_{turn}_{j}" for j in range(draw(st.integers(0, 3)))]
        items += [function_call(c, cmd="ls") for c in calls]
        items += [function_call_output(c, draw(output)) for c in calls]
        if draw(st.integers(0, 4)) == 0:
            items.append(input_message("user", "go on"))
    return items


@settings(max_examples=150, deadline=None)
@given(codex_transcripts(), st.sampled_from([0, 500, 5000, 10**9]), st.integers(1, 4), st.sampled_from([240, 1000, 4000]), st.booleans())
def test_pinch_on_a_responses_transcript_keeps_every_invariant(items, budget, keep_last_turns, max_chars, by_relevance) -> None:
    frozen = copy.deepcopy(items)
    conversation = ResponsesConversation(items)
    results = conversation.tool_results()
    candidates = candidate_results(conversation, keep_last_turns)
    order = list(reversed(range(len(candidates)))) if by_relevance else None
    rewrites, stats = prune_results(conversation, budget, keep_last_turns, max_chars, order)
    out = items_with(items, conversation.result_units(), rewrites)

    assert items == frozen  # the input is not mutated
    assert len(out) == len(items)
    rewritten_units = {results[p].unit for p in rewrites}
    assert all(items[results[p].unit]["type"] == "function_call_output" for p in rewrites)
    for index, (before, after) in enumerate(zip(items, out)):
        if index in rewritten_units:
            assert {k: v for k, v in after.items() if k != "output"} == {k: v for k, v in before.items() if k != "output"}
            assert type(after["output"]) is type(before["output"])
        else:
            assert after is before  # reasoning (encrypted_content), messages, calls: the very same object
    # one output per call id, in place: the sequence of (type, call_id) is unchanged
    assert [(i["type"], i.get("call_id")) for i in out] == [(i["type"], i.get("call_id")) for i in items]
    turns = conversation.turn_starts()
    if len(turns) >= keep_last_turns:
        protected = turns[-keep_last_turns]
        assert all(out[i] is items[i] for i in range(protected, len(items)))
    else:
        assert not rewrites
    assert stats.final_tokens <= stats.original_tokens
    # compressing what was compressed changes nothing
    again, _ = prune_results(ResponsesConversation(out), budget, keep_last_turns, max_chars, order)
    assert items_with(out, ResponsesConversation(out).result_units(), again) == out


@settings(max_examples=60, deadline=None)
@given(codex_transcripts(), st.sampled_from([0, 2000]))
def test_the_pinched_body_is_still_a_valid_responses_request(items, budget) -> None:
    body = responses_body(*items, store=False, stream=True)
    view = responses_view(body, validate_responses_body(body), 2000)
    rewrites, _ = prune_results(view.conversation, budget, 1, 240)
    sent = body_with_changes(body, view, BodyChanges("up", rewrites))
    assert validate_responses_body(sent).items == tuple(sent["input"])
    assert [i for i in sent["input"] if i["type"] == "reasoning"] == [i for i in items if i["type"] == "reasoning"]
