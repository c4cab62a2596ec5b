"""The one token estimator: every part of a request counts, and it errs on the side of over-counting."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.core.tokens import (
    CHARS_PER_TOKEN,
    DEFAULT_ESTIMATOR,
    TokenEstimator,
    estimate_prompt_tokens,
)
from tests.support.factories import assistant, image_part, tool, user

OVERHEAD = DEFAULT_ESTIMATOR.per_message_overhead


def tokens(message: dict[str, Any], estimator: TokenEstimator = DEFAULT_ESTIMATOR) -> int:
    return estimator.message_tokens(message)


def test_text_counts_ceil_chars_over_four_plus_the_per_message_overhead():
    message = {"role": "user", "content": "x" * 41}
    assert tokens(message) == math.ceil((len("user") + 41) / CHARS_PER_TOKEN) + OVERHEAD


def test_a_message_without_content_still_costs_its_overhead():
    assert tokens({"role": "assistant", "content": None}) == math.ceil(len("assistant") / 4) + OVERHEAD


def test_text_parts_count_like_the_same_text_in_a_string():
    text = "read the file and fix the failing test " * 20
    as_parts = user([{"type": "text", "text": text[:300]}, {"type": "text", "text": text[300:]}])
    assert tokens(as_parts) == tokens(user(text))


def test_tool_results_count_their_content_and_call_id():
    short, long = tool("call_1", "ok"), tool("call_1", "ok" + "x" * 4000)
    assert tokens(long) - tokens(short) == 1000
    assert tokens(tool("call_" + "9" * 400, "ok")) - tokens(short) == 100


def test_tool_call_names_and_arguments_count():
    bare = assistant(None, [("call_1", "bash", "{}")])
    long_args = assistant(None, [("call_1", "bash", '{"command": "' + "x" * 4000 + '"}')])
    long_name = assistant(None, [("call_1", "b" * 404, "{}")])
    assert 1000 <= tokens(long_args) - tokens(bare) <= 1004  # 4013 more characters of arguments
    assert tokens(long_name) - tokens(bare) == 100
    assert tokens(bare) > tokens(assistant(None))


def test_every_parallel_tool_call_counts():
    one = assistant(None, [("a", "bash", '{"cmd": "ls"}')])
    three = assistant(None, [("a", "bash", '{"cmd": "ls"}'), ("b", "bash", '{"cmd": "ls"}'), ("c", "bash", '{"cmd": "ls"}')])
    assert tokens(three) - tokens(assistant(None)) >= 3 * (tokens(one) - tokens(assistant(None))) - 2


def test_unknown_keys_on_a_tool_call_count():
    plain = assistant(None, [("call_1", "bash", "{}")])
    signed = assistant(None, [("call_1", "bash", "{}")])
    signed["tool_calls"][0]["extra_content"] = {"google": {"thought_signature": "s" * 4000}}
    assert tokens(signed) - tokens(plain) >= 1000


def call_chars(call: dict[str, Any]) -> int:
    """The documented count of one tool call: framing + every function value + every call value but function/type."""
    def chars(value: Any) -> int:
        return len(value) if isinstance(value, str) else len(orjson.dumps(value))
    function = call["function"]
    return 12 + sum(map(chars, function.values())) + sum(chars(v) for k, v in call.items() if k not in ("function", "type"))


@pytest.mark.parametrize(
    "call",
    [
        {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}},  # the usual shape
        {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}, "index": 0},
        {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": {"cmd": "ls"}}},  # arguments as an object
        {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}", "strict": "s" * 40}},
        {"id": "call_1", "extra": "e" * 40, "function": {"name": "bash", "arguments": "{}"}},  # three keys, no type
        {"id": 7, "type": "function", "function": {"name": "bash", "arguments": "{}"}},
    ],
)
def test_a_tool_call_counts_the_same_whatever_its_shape(call: dict[str, Any]):
    # the usual shape is counted on a faster path; it must agree with the general rule
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    expected = math.ceil((len("assistant") + call_chars(call)) / CHARS_PER_TOKEN) + OVERHEAD
    assert tokens(message) == expected


def test_a_measurement_keeps_each_message_size_and_the_prompt_total():
    messages = [user("x" * 41), assistant(None, [("c1", "bash", "{}")]), user([image_part(), {"type": "text", "text": "look"}])]
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
    measured = DEFAULT_ESTIMATOR.measure(messages, tools)
    assert [DEFAULT_ESTIMATOR.chars_tokens(size) for size in measured.sizes] == [tokens(m) for m in messages]
    assert measured.tokens == estimate_prompt_tokens(messages, tools)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("reasoning_content", "r" * 4000),
        ("name", "n" * 4000),
        ("cache_control", {"type": "ephemeral", "note": "c" * 4000}),
        ("some_future_field", ["f" * 4000]),
    ],
)
def test_unknown_and_extra_message_keys_count(key: str, value: Any):
    plain = assistant("done")
    assert tokens({**plain, key: value}) - tokens(plain) >= 1000


def test_unknown_part_types_count_their_whole_json():
    audio = {"type": "input_audio", "input_audio": {"data": "A" * 8000, "format": "wav"}}
    assert tokens(user([audio])) - tokens(user([])) >= 2000


def test_non_standard_object_content_counts():
    assert tokens(user({"odd": "o" * 4000})) - tokens(user("")) >= 1000


def test_each_image_counts_a_fixed_amount_whatever_its_size():
    small = user([{"type": "text", "text": "what is this"}, image_part("data:image/png;base64,AAAA")])
    huge = user([{"type": "text", "text": "what is this"}, image_part("data:image/png;base64," + "A" * 2_000_000)])
    two = user([{"type": "text", "text": "what is this"}, image_part(), image_part()])
    text_only = user([{"type": "text", "text": "what is this"}])
    assert tokens(small) == tokens(huge) == tokens(text_only) + DEFAULT_ESTIMATOR.image_tokens
    assert tokens(two) == tokens(text_only) + 2 * DEFAULT_ESTIMATOR.image_tokens


@pytest.mark.parametrize("kind", ["image_url", "input_image", "image"])
def test_every_image_part_type_counts_as_an_image(kind: str):
    estimator = TokenEstimator(image_tokens=777, per_message_overhead=0)
    assert tokens(user([{"type": kind, kind: {"url": "x"}}]), estimator) == math.ceil(len("user") / 4) + 777


def test_configured_overhead_and_image_cost_are_used():
    estimator = TokenEstimator(image_tokens=10, per_message_overhead=100)
    assert tokens(user([image_part()]), estimator) == math.ceil(len("user") / 4) + 100 + 10


def test_a_prompt_is_its_messages_plus_its_tool_schemas():
    messages = [user("fix the bug"), assistant(None, [("c1", "bash", '{"cmd": "pytest"}')]), tool("c1", "1 failed")]
    tools = [{"type": "function", "function": {"name": "bash", "description": "d" * 4000, "parameters": {"type": "object"}}}]
    per_message = sum(tokens(m) for m in messages)
    assert estimate_prompt_tokens(messages) == per_message
    assert estimate_prompt_tokens(messages, tools) == per_message + math.ceil(len(orjson.dumps(tools)) / 4)
    assert estimate_prompt_tokens(messages, tools) == DEFAULT_ESTIMATOR.prompt_tokens(messages, tools)


def test_estimate_uses_the_given_estimator():
    messages = [user([image_part()])]
    assert estimate_prompt_tokens(messages, estimator=TokenEstimator(image_tokens=5)) < estimate_prompt_tokens(messages)


# Over-counting, not under-counting: the estimate never falls below a quarter of
# the characters a model would read (every string outside image data), and
# growing any of them never lowers it.

readable = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300)


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["user", "assistant", "tool", "parts"]))
    if kind == "user":
        return user(draw(readable))
    if kind == "assistant":
        calls = draw(st.lists(st.tuples(readable, readable, readable), max_size=3))
        return assistant(draw(st.none() | readable), calls)
    if kind == "tool":
        return tool(draw(readable), draw(readable), name=draw(readable))
    texts = draw(st.lists(readable, max_size=3))
    return user([{"type": "text", "text": t} for t in texts] + [image_part()] * draw(st.integers(0, 2)))


def readable_chars(message: dict[str, Any]) -> int:
    """Characters of every string value a model reads (not keys, not part types, not image data)."""
    chars = 0
    for key, value in message.items():
        if isinstance(value, str):
            chars += len(value)
        elif key == "content" and isinstance(value, list):
            chars += sum(len(p["text"]) for p in value if p.get("type") == "text")
        elif key == "tool_calls":
            chars += sum(len(c["id"]) + len(c["function"]["name"]) + len(c["function"]["arguments"]) for c in value)
    return chars


@given(messages())
def test_the_estimate_never_undercounts_readable_text(message: dict[str, Any]):
    assert tokens(message) >= math.ceil(readable_chars(message) / CHARS_PER_TOKEN) + OVERHEAD


@given(messages(), st.text(min_size=1, max_size=50))
def test_longer_text_never_lowers_the_estimate(message: dict[str, Any], extra: str):
    grown = dict(message)
    if isinstance(grown.get("content"), str):
        grown["content"] += extra
    elif grown.get("tool_calls"):
        first = grown["tool_calls"][0]
        grown["tool_calls"] = [{**first, "function": {**first["function"], "arguments": first["function"]["arguments"] + extra}}]
        grown["tool_calls"] += message["tool_calls"][1:]
    else:
        grown["reasoning_content"] = extra
    assert tokens(grown) >= tokens(message)
