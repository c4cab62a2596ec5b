"""The pure measurements behind eval-pinch: unchanged prefix, cache pricing, references, recency."""

from __future__ import annotations

import pytest

from router.core.tokens import TokenEstimator, tools_tokens
from router.tools.pinch_measures import (
    ANTHROPIC,
    CachePricing,
    SentRequest,
    as_cached,
    message_terms,
    price_session,
    prompt_units,
    recency_kept,
    reference_terms,
    referenced_results,
    results_by_call,
    unchanged_prefix_share,
    unchanged_prefix_tokens,
)
from router.wire.openai_chat.pinch import prune_context
from router.wire.openai_chat.view import trim_candidates
from tests.support.factories import assistant, system, tool, user

ESTIMATOR = TokenEstimator()
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


def conversation(results: int = 3, chars: int = 2000) -> list[dict]:
    messages = [system("You are a coding agent."), user("Fix the bug in django/db/models/query.py")]
    for i in range(results):
        messages += [assistant(f"Step {i}.", [(f"call_{i}", "bash", '{"cmd": "ls"}')]), tool(f"call_{i}", f"result {i} " + "x" * chars)]
    return messages


# --- unchanged prefix ---------------------------------------------------------------


def test_a_request_that_extends_the_previous_one_repeats_all_of_it() -> None:
    before = conversation(2)
    after = conversation(3)
    assert unchanged_prefix_tokens(before, after, ESTIMATOR, TOOLS) == ESTIMATOR.prompt_tokens(before, TOOLS)


def test_the_first_request_has_no_prefix() -> None:
    assert unchanged_prefix_tokens(None, conversation(), ESTIMATOR, TOOLS) == 0


def test_a_rewrite_ends_the_prefix_inside_the_rewritten_message() -> None:
    before = conversation(3)
    after = list(before)
    rewritten = {**before[3], "content": before[3]["content"][:100] + " [cut]"}
    after[3] = rewritten
    prefix = unchanged_prefix_tokens(before, after, ESTIMATOR)
    whole_messages = ESTIMATOR.prompt_tokens(before[:3])
    # the rewritten result still shares its role, id and first 100 characters
    assert whole_messages < prefix < whole_messages + ESTIMATOR.message_tokens(rewritten)
    # nothing after the first change counts, though the later messages are equal again
    assert prefix < ESTIMATOR.prompt_tokens(after) - ESTIMATOR.prompt_tokens(after[4:])


def test_tool_schemas_count_as_the_start_of_every_request() -> None:
    messages = conversation(1)
    changed_first = [system("Another system prompt."), *messages[1:]]
    shared = len('{"role":"system","content":"')
    share = ESTIMATOR.message_tokens(changed_first[0]) * shared // len(b'{"role":"system","content":"Another system prompt."}')
    assert unchanged_prefix_tokens(messages, changed_first, ESTIMATOR, TOOLS) == tools_tokens(TOOLS) + share


def test_pruning_again_at_the_same_settings_changes_nothing_so_the_prefix_is_whole() -> None:
    messages = conversation(5)
    budget = ESTIMATOR.prompt_tokens(messages) // 2
    first, _ = prune_context(messages, budget, 1, 400)
    again, _ = prune_context(first, budget, 1, 400)
    assert unchanged_prefix_tokens(first, again, ESTIMATOR) == ESTIMATOR.prompt_tokens(again)


# --- pricing ------------------------------------------------------------------------


def test_warm_requests_pay_read_price_for_the_prefix_and_write_price_for_the_rest() -> None:
    requests = [SentRequest(1000, 0, 0), SentRequest(1500, 1000, 20), SentRequest(1800, 200, 20)]
    cost = price_session(requests, ANTHROPIC)
    assert (cost.cached_tokens, cost.fresh_tokens) == (1200, 3100)
    assert cost.cost == pytest.approx(1.25 * 3100 + 0.1 * 1200)
    assert cost.prefix_share == pytest.approx(1200 / 4300)
    assert cost.fresh_per_request == pytest.approx(3100 / 3)


def test_a_gap_longer_than_the_cache_lifetime_makes_the_whole_request_fresh() -> None:
    warm = SentRequest(2000, 1900, ANTHROPIC.lifetime_seconds)
    cold = SentRequest(2000, 1900, ANTHROPIC.lifetime_seconds + 1)
    first = SentRequest(1900, 0, 0)
    assert price_session([first, warm], ANTHROPIC).cached_tokens == 1900
    cost = price_session([first, cold], ANTHROPIC)
    assert cost.cached_tokens == 0
    assert cost.cost == pytest.approx(1.25 * 3900)
    assert cost.prefix_tokens == 1900  # the prefix is still there; only the cache forgot it


def test_without_a_cache_every_token_costs_one() -> None:
    requests = [SentRequest(1000, 0, 0), SentRequest(1500, 1000, 1)]
    cost = price_session(requests, None)
    assert (cost.cost, cost.cached_tokens, cost.fresh_tokens) == (2500, 0, 2500)


def test_a_zero_lifetime_caches_nothing() -> None:
    cost = price_session([SentRequest(10, 0, 0), SentRequest(20, 10, 1)], CachePricing(0.1, 1.25, 0))
    assert cost.cached_tokens == 0


# --- references ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("open django/db/models/query.py now", {"django/db/models/query.py"}),
        ("see setup.cfg and README.md.", {"setup.cfg", "README.md"}),
        ("call get_queryset() on QuerySet", {"get_queryset", "QuerySet"}),
        ("use os.path.join here", {"os.path.join"}),
        ("the quick brown fox jumps over the lazy dog", set()),
        ("a_b x.y", set()),  # too short to mean anything
    ],
)
def test_reference_terms_are_paths_and_code_identifiers(text: str, terms: set[str]) -> None:
    assert reference_terms(text) == terms


def test_message_terms_include_tool_call_arguments() -> None:
    message = assistant("Let me look.", [("c1", "bash", '{"cmd": "cat src/app/views.py"}')])
    assert "src/app/views.py" in message_terms(message)


def test_an_old_result_is_referenced_when_the_next_step_uses_what_only_it_has() -> None:
    messages = [
        system("agent"),
        user("task"),
        assistant("s1", [("c1", "bash", '{"cmd": "grep"}')]),
        tool("c1", "found it in src/payments/refund_handler.py line 40"),
        assistant("s2", [("c2", "bash", '{"cmd": "ls"}')]),
        tool("c2", "listing of build_artifacts and setup.cfg"),
        assistant("s3", [("c3", "bash", '{"cmd": "cat setup.cfg"}')]),  # protected tail: mentions setup.cfg
        tool("c3", "[metadata]"),
    ]
    terms = [message_terms(m) for m in messages]
    next_step = message_terms(assistant("fix", [("c4", "bash", '{"cmd": "sed -i s/a/b/ src/payments/refund_handler.py setup.cfg"}')]))
    candidates = trim_candidates(messages, 1)
    assert candidates == [3, 5]
    # setup.cfg is in the tail, so only the refund handler's result is needed from the old ones
    assert referenced_results(terms, next_step, candidates, tail_start=6) == [3]


def test_nothing_is_referenced_by_a_step_without_terms() -> None:
    messages = conversation(3)
    terms = [message_terms(m) for m in messages]
    assert referenced_results(terms, frozenset(), trim_candidates(messages, 1), 6) == []


# --- the recency baseline -------------------------------------------------------------


def test_recency_compresses_the_oldest_results_first_until_the_prompt_fits() -> None:
    messages = conversation(4)
    candidates = trim_candidates(messages, 1)  # results 0, 1 and 2; result 3 is protected
    total = ESTIMATOR.prompt_tokens(messages)
    one_result = ESTIMATOR.message_tokens(messages[3])
    assert recency_kept(messages, candidates, total, 400, ESTIMATOR) == set(candidates)
    assert recency_kept(messages, candidates, total - 10, 400, ESTIMATOR) == set(candidates[1:])
    assert recency_kept(messages, candidates, total - one_result - 10, 400, ESTIMATOR) == set(candidates[2:])
    assert recency_kept(messages, candidates, 0, 400, ESTIMATOR) == set()


def test_recency_is_given_the_forms_first_sight_sends_and_compresses_past_them() -> None:
    """With first sight, recency sends the same first-sight texts as the mode (#49): a result sent short
    costs what it is sent as, and one whose compression saves nothing beyond that stays."""
    messages = conversation(4)
    candidates = trim_candidates(messages, 1)
    forms = {candidates[0]: tool("call_0", "[pinch-router: same output as the earlier call bash ls]")}
    sent = [forms.get(i, m) for i, m in enumerate(messages)]
    total = ESTIMATOR.prompt_tokens(sent)
    assert total < ESTIMATOR.prompt_tokens(messages)
    # at the tokens first sight sends, nothing needs compressing (on the originals the two oldest would go)
    assert recency_kept(messages, candidates, total, 400, ESTIMATOR, forms=forms) == set(candidates)
    assert recency_kept(messages, candidates, total, 400, ESTIMATOR) == {candidates[2]}
    # below it, the oldest one's compression saves nothing beyond its short text: the next one goes
    assert recency_kept(messages, candidates, total - 10, 400, ESTIMATOR, forms=forms) == {candidates[0], candidates[2]}


def test_recency_at_the_tokens_of_a_uniform_prune_keeps_nothing() -> None:
    messages = conversation(4)
    budget = ESTIMATOR.prompt_tokens(messages) // 2
    _, stats = prune_context(messages, budget, 1, 400)
    assert recency_kept(messages, trim_candidates(messages, 1), stats.final_tokens, 400, ESTIMATOR) == set()


def test_a_result_that_cannot_be_shortened_stays_verbatim_under_recency() -> None:
    messages = [system("s"), user("u"), assistant("a", [("c1", "bash", "{}")]), tool("c1", "ok"), assistant("b"), user("next")]
    assert recency_kept(messages, [3], 0, 400, ESTIMATOR) == {3}


def test_prompt_units_are_read_in_the_order_a_prefix_cache_reads_them():
    tool_schema = {"name": "Bash", "input_schema": {}}
    anthropic = {"messages": [{"role": "user", "content": "hi"}], "system": [{"type": "text", "text": "S"}], "tools": [tool_schema], "model": "m"}
    assert prompt_units(anthropic) == [tool_schema, {"type": "text", "text": "S"}, {"role": "user", "content": "hi"}]
    assert prompt_units({"system": "S", "messages": []}) == [{"system": "S"}]
    responses = {"input": [{"type": "message", "role": "user", "content": "hi"}], "instructions": "I", "tools": [tool_schema]}
    assert prompt_units(responses) == [tool_schema, {"instructions": "I"}, {"type": "message", "role": "user", "content": "hi"}]
    assert prompt_units({"input": "hi"}) == [{"input": "hi"}]


def test_as_cached_leaves_out_breakpoints_and_reads_a_string_as_its_text_block():
    marked = {"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}
    assert as_cached(marked) == as_cached({"role": "user", "content": "x"}) == {"role": "user", "content": [{"type": "text", "text": "x"}]}
    assert as_cached({"type": "function_call_output", "output": "x"}) == {"type": "function_call_output", "output": "x"}  # not a message


def test_the_unchanged_prefix_share_is_the_share_of_tokens_before_the_first_change():
    first = [{"role": "user", "content": "a" * 400}]
    grown = [*first, {"role": "assistant", "content": "b" * 400}]
    assert unchanged_prefix_share(None, grown, TokenEstimator()) == 0.0
    assert unchanged_prefix_share(first, first, TokenEstimator()) == 1.0
    assert 0.45 < unchanged_prefix_share(first, grown, TokenEstimator()) < 0.55
    assert unchanged_prefix_share(first, [], TokenEstimator()) == 0.0


def test_results_by_call_finds_the_tool_results_of_every_wire():
    units = [
        {"role": "tool", "tool_call_id": "c1", "content": "chat"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "anthropic"}]}, {"type": "text", "text": "x"}]},
        {"type": "function_call_output", "call_id": "f1", "output": "responses"},
        {"role": "user", "content": "no result"},
    ]
    assert results_by_call(units) == {"c1": b'"chat"', "t1": b'[{"type":"text","text":"anthropic"}]', "f1": b'"responses"'}


def test_gemini_pricing_bills_cached_tokens_at_a_tenth_with_no_write_premium() -> None:
    from router.tools.pinch_measures import ANTHROPIC, GEMINI, SentRequest, price_session

    requests = [SentRequest(1000, 0, 0.0), SentRequest(1200, 1000, 10.0)]
    assert price_session(requests, GEMINI).cost == 1000 + 0.1 * 1000 + 200
    assert price_session(requests, ANTHROPIC).cost == 1.25 * 1000 + 0.1 * 1000 + 1.25 * 200
