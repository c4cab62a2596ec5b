"""prune_context and the compression of one tool result (ARCHITECTURE §5), on plain data."""

from __future__ import annotations

import copy
import re
from typing import Any

import orjson
import pytest

from router.core.pinch import (
    MIN_SUMMARIZE_CHARS,
    CompressionKind,
    RelevanceOrderError,
    compress_tool_result,
    is_compressed,
)
from router.core.results import PinchMode
from router.core.tokens import DEFAULT_ESTIMATOR, TokenEstimator
from router.wire.openai_chat.pinch import prune_context, tool_name_for
from router.wire.openai_chat.view import trim_candidates
from tests.support.factories import assistant, image_part, system, tool, user

MAX_CHARS = 400


class UnusableEstimator(TokenEstimator):
    """Refuses to measure: proves a caller's measurement was used."""

    def message_sizes(self, messages: list[dict[str, Any]]) -> list[int]:
        raise AssertionError("measured again")
MARKER = re.compile(r"\[\.\.\. pinch-router removed (\d+) characters \.\.\.\]")


def log_text(chars: int, tag: str = "line") -> str:
    """A tool result of about ``chars`` characters, in lines like a test log."""
    lines, size, i = [], 0, 0
    while size < chars:
        line = f"{tag} {i}: some output of the tool"
        lines.append(line)
        size += len(line) + 1
        i += 1
    return "\n".join(lines)[:chars]


def session(results: list[Any], tool_names: list[str] | None = None, closing: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """system, user, then one turn per result: an assistant call and its tool result; then ``closing``."""
    messages = [system("You are a coding agent."), user("Fix the failing test in parser.py")]
    for i, content in enumerate(results):
        name = tool_names[i] if tool_names else "bash"
        messages.append(assistant(f"step {i}", [(f"call_{i}", name, f'{{"cmd": "step {i}"}}')]))
        messages.append(tool(f"call_{i}", content))
    return messages + (closing or [])


def prune(messages: list[dict[str, Any]], budget: int = 0, keep: int = 1, order: Any = None, **kwargs: Any):
    return prune_context(messages, budget, keep, MAX_CHARS, order, **kwargs)


def changed(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[int]:
    return [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a is not b]


# --- within budget -------------------------------------------------------------------------


def test_within_budget_returns_the_same_list_and_says_so():
    messages = session([log_text(2000), "ok"])
    total = DEFAULT_ESTIMATOR.prompt_tokens(messages)
    sent, stats = prune(messages, budget=total)
    assert sent is messages
    assert stats.mode is PinchMode.WITHIN_BUDGET
    assert stats.original_tokens == stats.final_tokens == total
    assert stats.saved_tokens == 0 and stats.compressed == 0


def test_one_token_over_budget_prunes():
    messages = session([log_text(2000), "ok"])
    total = DEFAULT_ESTIMATOR.prompt_tokens(messages)
    _, stats = prune(messages, budget=total - 1)
    assert stats.mode is PinchMode.UNIFORM and stats.compressed == 1


# --- what is protected ------------------------------------------------------------------------


@pytest.mark.parametrize("keep", [1, 2, 3])
def test_the_last_turns_are_untouched(keep: int):
    messages = session([log_text(1000, f"r{i}") for i in range(6)])
    sent, stats = prune(messages, keep=keep)
    protected = [i for i, m in enumerate(messages) if m["role"] == "assistant"][-keep]
    assert all(sent[i] is messages[i] for i in range(protected, len(messages)))
    assert changed(messages, sent) == [i for i in range(protected) if messages[i]["role"] == "tool"]
    assert stats.compressed == 6 - keep


def test_the_in_progress_turn_is_untouched():
    # the last assistant message asked for two tools; their results are what the model is about to read
    messages = session([log_text(1000), log_text(1000)])
    messages.append(assistant("two more", [("call_a", "bash", "{}"), ("call_b", "grep", "{}")]))
    messages += [tool("call_a", log_text(3000)), tool("call_b", log_text(3000))]
    sent, _ = prune(messages, keep=1)
    assert sent[-1] is messages[-1] and sent[-2] is messages[-2] and sent[-3] is messages[-3]
    assert changed(messages, sent) == [3, 5]


def test_fewer_turns_than_keep_last_turns_compresses_nothing():
    messages = session([log_text(5000), log_text(5000)])
    sent, stats = prune(messages, keep=3)
    assert sent is messages
    assert stats.mode is PinchMode.UNIFORM
    assert stats.compressed == 0 and stats.final_tokens == stats.original_tokens


def test_user_system_and_assistant_messages_are_never_touched():
    messages = session([log_text(1000)] * 3, closing=[user("x" * 9000), assistant("y" * 9000)])
    messages.insert(3, user("z" * 9000))
    sent, _ = prune(messages, keep=1)
    assert all(sent[i] is m for i, m in enumerate(messages) if m["role"] != "tool")


# --- compressing one result ---------------------------------------------------------------------


def test_a_long_result_keeps_head_and_tail_around_a_marker_that_counts_what_was_removed():
    original = log_text(5000)
    sent, stats = prune(session([original, "ok"]))
    text = sent[3]["content"]
    match = MARKER.search(text)
    assert match is not None
    head, tail = text[: match.start()].rstrip("\n"), text[match.end() :].lstrip("\n")
    assert original.startswith(head) and original.endswith(tail)
    assert len(head) >= MAX_CHARS // 4 and len(tail) >= MAX_CHARS // 4  # ~3/8 each, cut at a line break
    assert int(match.group(1)) == len(original) - len(text[: match.start()]) - len(text[match.end() + 1 :])
    assert len(text) <= MAX_CHARS
    assert (stats.elided, stats.placeholders) == (1, 0)


def test_a_long_result_without_line_breaks_is_cut_at_three_eighths():
    original = "a" * 3000
    compressed = compress_tool_result(tool("c", original), "bash", MAX_CHARS)
    assert compressed is not None
    keep = MAX_CHARS * 3 // 8
    assert compressed.message["content"] == f"{'a' * keep}\n[... pinch-router removed {3000 - 2 * keep} characters ...]\n{'a' * keep}"


def test_a_short_result_becomes_a_placeholder_naming_the_tool_and_its_size():
    original = log_text(300)
    sent, stats = prune(session([original, "ok"], tool_names=["view_file", "bash"]))
    assert sent[3]["content"] == f"[pinch-router: old view_file result omitted ({len(original)} characters)]"
    assert (stats.elided, stats.placeholders) == (0, 1)


def test_the_tool_name_comes_from_the_matching_call_among_several():
    messages = [
        user("go"),
        assistant(None, [("c1", "grep", "{}"), ("c2", "view_file", "{}"), ("c3", "bash", "{}")]),
        tool("c2", "x"),
        tool("c3", "x"),
        tool("c1", "x"),
    ]
    assert [tool_name_for(messages, i) for i in (2, 3, 4)] == ["view_file", "bash", "grep"]


def test_placeholders_name_parallel_calls_right_in_any_order():
    # several results answer one assistant message; relevance mode asks for names newest first
    messages = [
        user("go"),
        assistant(None, [("c1", "grep", "{}"), ("c2", "view_file", "{}"), ("c3", "bash", "{}")]),
        tool("c2", log_text(300)),
        tool("c3", log_text(300)),
        tool("c1", log_text(300)),
        assistant("done", []),
    ]
    for order in ([0, 1, 2], [2, 1, 0]):
        sent, _ = prune(messages, order=order)
        names = [re.match(r"\[pinch-router: old (\S+) result", sent[i]["content"]).group(1) for i in (2, 3, 4)]  # type: ignore[union-attr]
        assert names == ["view_file", "bash", "grep"] == [tool_name_for(messages, i) for i in (2, 3, 4)]


def test_a_measurement_made_earlier_is_used_instead_of_measuring_again():
    messages = session([log_text(3000), log_text(300), "ok"])
    measured = DEFAULT_ESTIMATOR.measure(messages)
    assert prune(messages, measured=measured, estimator=UnusableEstimator()) == prune(messages)


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (tool("unknown_id", "x", name="legacy_fn"), "legacy_fn"),  # no matching call: the message's name
        (tool("unknown_id", "x"), "tool"),  # nothing to go on
        (tool("c1", "x", name="ignored"), "bash"),  # the call wins over the name
    ],
)
def test_the_tool_name_falls_back_to_the_message_name_then_tool(result: dict[str, Any], expected: str):
    messages = [user("go"), assistant(None, [("c1", "bash", "{}")]), result]
    assert tool_name_for(messages, 2) == expected


def test_a_strange_tool_name_is_kept_to_one_short_line():
    messages = [user("go"), assistant(None, [("c1", "multi\nline " + "n" * 200, "{}")]), tool("c1", "x")]
    name = tool_name_for(messages, 2)
    assert "\n" not in name and len(name) == 64 and name.startswith("multi line")


@pytest.mark.parametrize("size", [0, 1, 10, 40, 57, 60, 100, 399, 400, 401, 5000])
def test_a_message_never_grows(size: int):
    message = tool("call_0", "x" * size)
    compressed = compress_tool_result(message, "bash", MAX_CHARS)
    if compressed is None:
        return
    assert len(compressed.message["content"]) < size
    assert compressed.tokens_after < compressed.tokens_before == DEFAULT_ESTIMATOR.message_tokens(message)
    assert compressed.tokens_after == DEFAULT_ESTIMATOR.message_tokens(compressed.message)


def test_a_result_shorter_than_its_placeholder_is_left_alone():
    messages = session(["ok", "done"])
    sent, stats = prune(messages)
    assert sent is messages and stats.compressed == 0


@pytest.mark.parametrize("content", [None, [image_part()], [{"type": "input_audio", "input_audio": {"data": "A" * 9000}}], {"odd": "x" * 9000}])
def test_content_that_is_not_text_is_left_alone(content: Any):
    messages = session([content, "ok"])
    sent, stats = prune(messages)
    assert sent is messages and stats.compressed == 0


def test_text_parts_are_compressed_and_everything_else_is_kept():
    long_text, short_text = log_text(3000), log_text(200)
    parts = [
        {"type": "text", "text": long_text, "cache_control": {"type": "ephemeral"}},
        image_part(),
        {"type": "text", "text": short_text},
        {"type": "future_part", "data": "keep me"},
    ]
    result = tool("call_0", parts, name="view", cache_control={"type": "ephemeral"}, vendor_field=[1, 2])
    messages = session([None, "ok"])
    messages[3] = result
    sent, stats = prune(messages)
    out = sent[3]
    assert {k: v for k, v in out.items() if k != "content"} == {k: v for k, v in result.items() if k != "content"}
    new_parts = out["content"]
    assert len(new_parts) == 4 and new_parts[1] is parts[1] and new_parts[3] is parts[3]
    assert new_parts[0]["cache_control"] == {"type": "ephemeral"} and MARKER.search(new_parts[0]["text"])
    assert new_parts[2] == {"type": "text", "text": f"[pinch-router: old bash result omitted ({len(short_text)} characters)]"}
    assert stats.elided == 1 and stats.placeholders == 0  # one message, counted once, as elided


def test_every_key_of_a_compressed_message_is_kept_in_order():
    result = {"role": "tool", "tool_call_id": "call_0", "name": "bash", "content": log_text(3000), "cache_control": {"type": "ephemeral"}, "x-custom": "v"}
    compressed = compress_tool_result(result, "bash", MAX_CHARS)
    assert compressed is not None and compressed.kind is CompressionKind.ELIDED
    assert list(compressed.message) == list(result)
    assert all(compressed.message[k] == result[k] for k in result if k != "content")


# --- idempotence and purity ---------------------------------------------------------------------


@pytest.mark.parametrize("order", [None, "reversed"])
def test_pruning_the_output_again_changes_nothing(order: str | None):
    messages = session([log_text(5000), log_text(300), log_text(1000), [{"type": "text", "text": log_text(2000)}], "ok"])
    first_order = None if order is None else list(reversed(range(len(trim_candidates(messages, 1)))))
    once, _ = prune(messages, order=first_order)
    again_order = None if order is None else list(reversed(range(len(trim_candidates(once, 1)))))
    twice, stats = prune(once, order=again_order)
    assert twice is once
    assert stats.compressed == 0


def test_our_marker_and_placeholder_are_recognised():
    assert is_compressed("head\n[... pinch-router removed 123 characters ...]\ntail")
    assert is_compressed("[pinch-router: old bash result omitted (321 characters)]")
    assert not is_compressed("[pinch-router: old bash result omitted (321 characters)] and more")
    assert not is_compressed("plain tool output")


def test_the_input_is_not_mutated():
    messages = session([log_text(5000), log_text(300), [{"type": "text", "text": log_text(2000)}, image_part()], "ok"])
    snapshot = copy.deepcopy(messages)
    prune(messages)
    prune(messages, order=[2, 0, 1])
    assert messages == snapshot


def test_no_relevance_order_is_byte_for_byte_the_default():
    messages = session([log_text(5000), log_text(300), log_text(1000), "ok"])
    with_none, stats_none = prune_context(messages, 0, 1, MAX_CHARS, relevance_order=None)
    without, stats_without = prune_context(messages, 0, 1, MAX_CHARS)
    assert orjson.dumps(with_none) == orjson.dumps(without)
    assert stats_none == stats_without


# --- uniform and relevance modes ---------------------------------------------------------------


def test_uniform_mode_compresses_every_candidate_even_past_the_budget():
    messages = session([log_text(3000, f"r{i}") for i in range(5)])
    budget = DEFAULT_ESTIMATOR.prompt_tokens(messages) - 10
    sent, stats = prune(messages, budget=budget)
    assert stats.mode is PinchMode.UNIFORM
    assert changed(messages, sent) == trim_candidates(messages, 1)
    assert stats.final_tokens < budget - 1000


def test_an_old_relevant_result_survives_while_a_newer_one_is_compressed():
    messages = session([log_text(3000, "old"), log_text(3000, "new"), log_text(3000, "other"), "ok"])
    candidates = trim_candidates(messages, 1)  # the three long results
    total = DEFAULT_ESTIMATOR.prompt_tokens(messages)
    budget = total - 100  # one compression covers the deficit
    # least relevant first: the newer result (1), then the other (2), the oldest (0) most relevant
    sent, stats = prune(messages, budget=budget, order=[1, 2, 0])
    assert stats.mode is PinchMode.RELEVANCE
    assert sent[candidates[0]] is messages[candidates[0]]  # old but relevant: verbatim
    assert MARKER.search(sent[candidates[1]]["content"])  # newer, less relevant: compressed
    assert sent[candidates[2]] is messages[candidates[2]]  # deficit covered: compression stopped
    assert stats.compressed == 1 and stats.final_tokens <= budget


def test_relevance_mode_goes_down_the_order_until_the_deficit_is_covered():
    messages = session([log_text(3000, f"r{i}") for i in range(4)] + ["ok"])
    one = DEFAULT_ESTIMATOR.message_tokens(messages[3]) - DEFAULT_ESTIMATOR.message_tokens(
        compress_tool_result(messages[3], "bash", MAX_CHARS).message  # type: ignore[union-attr]
    )
    total = DEFAULT_ESTIMATOR.prompt_tokens(messages)
    sent, stats = prune(messages, budget=total - one - 1, order=[3, 1, 0, 2])
    candidates = trim_candidates(messages, 1)
    assert changed(messages, sent) == sorted([candidates[3], candidates[1]])
    assert stats.compressed == 2


def test_relevance_mode_never_compresses_more_than_uniform():
    messages = session([log_text(3000), log_text(300), "ok", log_text(1000), "ok"])
    count = len(trim_candidates(messages, 1))
    _, uniform = prune(messages)
    sent, relevance = prune(messages, order=list(range(count))[::-1])
    assert relevance.compressed == uniform.compressed  # impossible budget: everything compressible, no more
    assert relevance.final_tokens == uniform.final_tokens


@pytest.mark.parametrize("order", [[0, 1], [0, 1, 1], [0, 1, 3], [2, 1, 0, -1]])
def test_a_relevance_order_that_does_not_fit_the_candidates_is_refused(order: list[int]):
    messages = session([log_text(3000)] * 3 + ["ok"])
    with pytest.raises(RelevanceOrderError):
        prune(messages, order=order)


# --- stats and settings -------------------------------------------------------------------------


def test_stats_are_exact_and_tool_schemas_count_toward_the_budget():
    messages = session([log_text(3000), log_text(300), "ok"])
    tools = [{"type": "function", "function": {"name": "bash", "description": "d" * 8000, "parameters": {"type": "object"}}}]
    only_messages = DEFAULT_ESTIMATOR.prompt_tokens(messages)
    same, within = prune(messages, budget=only_messages)
    assert same is messages and within.mode is PinchMode.WITHIN_BUDGET
    sent, stats = prune(messages, budget=only_messages, tools=tools)  # the schemas push it over
    assert stats.mode is PinchMode.UNIFORM
    assert stats.original_tokens == DEFAULT_ESTIMATOR.prompt_tokens(messages, tools)
    assert stats.final_tokens == DEFAULT_ESTIMATOR.prompt_tokens(sent, tools)
    assert stats.compressed == stats.elided + stats.placeholders == 2


def test_stats_use_the_given_estimator():
    estimator = TokenEstimator(image_tokens=1, per_message_overhead=50)
    messages = session([log_text(3000), log_text(300), "ok"])
    sent, stats = prune(messages, estimator=estimator)
    assert stats.original_tokens == estimator.prompt_tokens(messages)
    assert stats.final_tokens == estimator.prompt_tokens(sent)


@pytest.mark.parametrize(
    ("budget", "keep", "max_chars"),
    [(-1, 1, 4000), (100, 0, 4000), (100, 1, MIN_SUMMARIZE_CHARS - 1)],
)
def test_unusable_settings_are_refused(budget: int, keep: int, max_chars: int):
    with pytest.raises(ValueError):
        prune_context(session(["x"]), budget, keep, max_chars)


def test_the_smallest_allowed_max_summarize_chars_still_shrinks_every_long_result():
    for size in (MIN_SUMMARIZE_CHARS + 1, 10_000, 1_000_000):
        compressed = compress_tool_result(tool("c", "y" * size), "bash", MIN_SUMMARIZE_CHARS)
        assert compressed is not None and len(compressed.message["content"]) <= MIN_SUMMARIZE_CHARS
