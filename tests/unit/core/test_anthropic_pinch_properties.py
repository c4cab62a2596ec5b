"""Property-based: pinch on Anthropic transcripts keeps every invariant (ARCHITECTURE §5).

Pinch runs on the neutral view (:class:`MessagesConversation`); its rewrites go back
into the client's own messages by result position. Whatever the transcript, only the ``content`` of old ``tool_result``
blocks may change — never a thinking block, a signature, a ``tool_use``, a
``cache_control``, an image, a reminder or a message — and every ``tool_use`` keeps
exactly one result.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from router.core.pinch import prune_results
from router.wire.anthropic_messages.view import MessagesConversation, count_input_tokens
from tests.support.anthropic_factories import (
    assistant,
    image,
    reminder,
    text,
    thinking,
    tool_result,
    tool_use,
    user,
)

CACHED = {"type": "ephemeral", "ttl": "1h", "scope": "session"}
result_text = st.builds(lambda n, c: (c * n)[:n], st.sampled_from([0, 10, 300, 3000, 9000]), st.sampled_from(["ok\n", "FAILED x\n", "ü✓ "]))
result_content = st.one_of(
    result_text,
    st.lists(st.one_of(result_text.map(text), result_text.map(lambda t: text(t, cache_control=CACHED)), st.just(image())), max_size=3),
)


@st.composite
def transcripts(draw: Any) -> list[dict[str, Any]]:
    messages = [user(reminder(), text("fix the parser"))]
    for turn in range(draw(st.integers(1, 7))):
        calls = [f"toolu_{turn}_{i}" for i in range(draw(st.integers(1, 3)))]
        blocks = ([thinking(f"step {turn}")] if draw(st.booleans()) else []) + [tool_use(c, command=f"cat f{turn}") for c in calls]
        messages.append(assistant(*blocks))
        results = [tool_result(c, draw(result_content), is_error=draw(st.booleans()), **({"cache_control": CACHED} if draw(st.booleans()) else {})) for c in calls]
        messages.append(user(*results, *([reminder("todo")] if draw(st.booleans()) else [])))
    if draw(st.booleans()):
        messages += [assistant(text("done")), user("thanks")]
    return messages


def pinch(messages: list[dict[str, Any]], budget: int, keep: int) -> list[dict[str, Any]]:
    """Pinch as the chain runs it on an Anthropic request: on the view, written back by the adapter."""
    conversation = MessagesConversation(None, messages)
    rewrites, _ = prune_results(conversation, budget, keep, 400)
    return conversation.messages_with(rewrites)


@settings(max_examples=150, deadline=None)
@given(transcripts(), st.sampled_from([0, 500, 5000, 10**6]), st.integers(1, 3))
def test_only_old_tool_result_contents_change(messages: list[dict[str, Any]], budget: int, keep: int) -> None:
    original = copy.deepcopy(messages)
    out = pinch(messages, budget, keep)
    assert messages == original  # the input is not mutated
    assert len(out) == len(messages) and [m["role"] for m in out] == [m["role"] for m in messages]
    for before, after in zip(messages, out):
        if before["role"] != "user" or isinstance(before["content"], str):
            assert after == before
            continue
        assert len(after["content"]) == len(before["content"])
        for b, a in zip(before["content"], after["content"]):
            if b["type"] != "tool_result":
                assert a == b
                continue
            assert {k: v for k, v in a.items() if k != "content"} == {k: v for k, v in b.items() if k != "content"}
            if isinstance(b["content"], list):  # images and cache-marked blocks are kept, in order
                kept = [x for x in b["content"] if x["type"] != "text"]
                assert [x for x in a["content"] if x["type"] != "text"] == kept
    assert count_input_tokens({"messages": out}) <= count_input_tokens({"messages": messages})


@settings(max_examples=100, deadline=None)
@given(transcripts(), st.sampled_from([0, 500, 5000]), st.integers(1, 3))
def test_every_tool_use_keeps_exactly_one_result(messages: list[dict[str, Any]], budget: int, keep: int) -> None:
    out = pinch(messages, budget, keep)
    uses = [b["id"] for m in out if m["role"] == "assistant" and isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for m in out if isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_result"]
    assert sorted(results) == sorted(uses) and len(set(results)) == len(results)


@settings(max_examples=100, deadline=None)
@given(transcripts(), st.sampled_from([0, 500]), st.integers(1, 3))
def test_the_last_turns_are_never_touched_and_pinch_is_idempotent(messages: list[dict[str, Any]], budget: int, keep: int) -> None:
    out = pinch(messages, budget, keep)
    assistants = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    protected = assistants[-keep] if len(assistants) >= keep else 0
    assert out[protected:] == messages[protected:]
    assert pinch(out, budget, keep) == out


def test_a_long_old_result_is_compressed_and_the_recent_one_kept() -> None:
    messages = [user("go"), assistant(tool_use("t1")), user(tool_result("t1", "x" * 20000, cache_control=CACHED)),
                assistant(tool_use("t2")), user(tool_result("t2", "y" * 20000))]
    out = pinch(messages, 1000, 1)
    old = out[2]["content"][0]
    assert len(old["content"]) < 1000 and old["cache_control"] == CACHED and old["tool_use_id"] == "t1"
    assert out[4] is messages[4]
