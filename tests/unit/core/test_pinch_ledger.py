"""The session pinch ledger and its cache-timed batches (router.core.pinch_ledger, router.core.cache_timing)."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest

from router.core.cache_timing import (
    PAYBACK_REQUESTS,
    CacheState,
    CacheVerdict,
    cache_lifetime,
    cache_state,
    rewrite_pays,
)
from router.core.pinch import is_compressed
from router.core.pinch_ledger import (
    EMPTY_LEDGER,
    MAX_LEDGER_RESULTS,
    BatchOrder,
    Ledger,
    PinchPolicy,
    PinchSession,
    SessionPinch,
    WindowLimit,
    content_digest,
    pinch_conversation,
)
from router.core.results import PinchMode
from router.core.tokens import DEFAULT_ESTIMATOR
from router.wire.openai_chat.pinch import pinch_session, prune_context
from router.wire.openai_chat.view import ChatConversation
from tests.support.factories import (
    agent_session,
    assistant,
    system,
    tool,
    tool_output,
    user,
)

KEEP, MAX_CHARS = 1, 400
WARM = CacheState(CacheVerdict.WARM, "warm cache (idle 10s <= 300s)", requests=3)
COLD = CacheState(CacheVerdict.COLD, "cache cold (idle 412s > 300s)", requests=3)
NO_CACHE = CacheState(CacheVerdict.NONE, "provider caches nothing")


def tokens(messages: list[dict[str, Any]]) -> int:
    return DEFAULT_ESTIMATOR.prompt_tokens(messages)


def pinch(
    messages: list[dict[str, Any]], ledger: Ledger = EMPTY_LEDGER, *, budget: int, cache: CacheState = COLD, **options: Any
) -> SessionPinch:
    options.setdefault("low_watermark", 0.6)
    return pinch_session(messages, ledger, budget_tokens=budget, keep_last_turns=KEEP, max_summarize_chars=MAX_CHARS, cache=cache, **options)


def elided_all(messages: list[dict[str, Any]]) -> int:
    """The prompt's tokens with every old result compressed once (elided or a placeholder, none turned)."""
    return prune_context(messages, 0, KEEP, MAX_CHARS)[1].final_tokens


def placeholder_ids(messages: list[dict[str, Any]]) -> list[str]:
    return [m["tool_call_id"] for m in messages if m.get("role") == "tool" and m["content"].startswith("[pinch-router: old ")]


def compressed_ids(messages: list[dict[str, Any]]) -> list[str]:
    return [m["tool_call_id"] for m in messages if m.get("role") == "tool" and is_compressed(m["content"])]


# --- the ledger ---------------------------------------------------------------------------------


def test_the_ledger_is_reapplied_byte_for_byte_on_every_later_turn() -> None:
    first = pinch(agent_session(6), budget=tokens(agent_session(6)) - 1)
    assert first.stats.newly_compressed > 0
    ledger = first.ledger
    for turns in range(7, 11):
        later = pinch(agent_session(turns), ledger, budget=10**9, cache=WARM)  # no new batch: only the ledger
        assert later.stats.reapplied == first.stats.newly_compressed and later.stats.newly_compressed == 0
        prefix = len(first.messages) - 2  # up to the last result the first turn could compress
        assert orjson.dumps(later.messages[:prefix]) == orjson.dumps(first.messages[:prefix])
        ledger = later.ledger


def test_within_budget_after_reapplying_nothing_new_is_compressed() -> None:
    first = pinch(agent_session(6), budget=tokens(agent_session(6)) - 1)
    next_turn = agent_session(7)
    after_ledger = tokens(next_turn) - sum(
        DEFAULT_ESTIMATOR.message_tokens(a) - DEFAULT_ESTIMATOR.message_tokens(b)
        for a, b in zip(agent_session(6), first.messages, strict=True)
    )
    result = pinch(next_turn, first.ledger, budget=after_ledger, cache=COLD)  # cold: it would batch if it had to
    assert (result.stats.mode, result.stats.reason) == (PinchMode.WITHIN_BUDGET, "within budget")
    assert result.stats.newly_compressed == 0 and result.stats.reapplied == first.stats.newly_compressed
    assert result.stats.final_tokens == after_ledger
    assert result.ledger is first.ledger


@pytest.mark.parametrize(
    ("cache", "no_cache_watermark", "watermark"),
    [(COLD, 0.7, 0.6), (NO_CACHE, 1.0, 1.0), (NO_CACHE, 0.7, 0.7)],
    ids=["cold: to the low watermark", "no cache: to the budget", "no cache: to no_cache_watermark"],
)
def test_over_budget_one_batch_compresses_oldest_first_down_to_the_low_watermark(
    cache: CacheState, no_cache_watermark: float, watermark: float
) -> None:
    messages = agent_session(12)
    budget = tokens(messages) * 3 // 4
    result = pinch(messages, budget=budget, cache=cache, no_cache_watermark=no_cache_watermark)
    target = int(watermark * budget)
    assert result.stats.final_tokens <= target
    ids = compressed_ids(result.messages)
    assert ids == [f"call_{i}" for i in range(len(ids))], "oldest first, none skipped"
    # one result fewer would not have reached the watermark: the batch stops there
    last = next(m for m in messages if m.get("tool_call_id") == ids[-1])
    saved_by_last = DEFAULT_ESTIMATOR.message_tokens(last) - DEFAULT_ESTIMATOR.message_tokens(result.messages[messages.index(last)])
    assert result.stats.final_tokens + saved_by_last > target
    assert result.stats.mode is PinchMode.UNIFORM and result.stats.reason == f"over budget; {cache.reason}"
    assert len(result.ledger) == result.stats.newly_compressed == len(ids)


def test_a_relevance_order_picks_which_new_results_join_the_ledger() -> None:
    messages = agent_session(8)
    ledger = pinch(agent_session(3), budget=tokens(agent_session(3)) - 1).ledger  # call_0 and call_1 are in it
    candidates = 7  # call_0 … call_6; call_7 is the in-progress turn
    order = [6, 0, 5, 1, 4, 2, 3]  # least relevant first, mixing ledger and new candidates
    result = pinch(messages, ledger, budget=tokens(messages) * 3 // 4, relevance_order=order)
    new = [i for i in compressed_ids(result.messages) if i not in ("call_0", "call_1")]
    assert len(order) == candidates and result.stats.mode is PinchMode.RELEVANCE
    expected = [f"call_{p}" for p in order if p not in (0, 1)][: len(new)]
    assert sorted(new) == sorted(expected)


@pytest.mark.parametrize(("cache", "watermark"), [(NO_CACHE, 1.0), (COLD, 0.6)], ids=["no cache: to the budget", "cold: to the low watermark"])
def test_a_relevance_batch_leaves_out_a_result_whose_saving_it_did_not_need(cache: CacheState, watermark: float) -> None:
    # least worth first: call_0 (small), then call_1, whose compression alone reaches the target
    messages = agent_session(4)
    messages[3] = tool("call_0", tool_output("small", 1_600))
    messages[5] = tool("call_1", tool_output("big", 40_000))
    order = [0, 1, 2]
    compress_all = pinch(messages, budget=0, cache=cache, relevance_order=order)
    small, big = (tokens([messages[i]]) - tokens([compress_all.messages[i]]) for i in (3, 5))
    assert big > 2 * small > 0
    budget = (tokens(messages) - (big + small) // 2) * 10 // int(watermark * 10)
    target = math.floor(watermark * budget)
    assert tokens(messages) - big <= target < tokens(messages) - small, "call_1 alone reaches the target, call_0 alone does not"
    result = pinch(messages, budget=budget, cache=cache, relevance_order=order)
    assert compressed_ids(result.messages) == ["call_1"], "call_0's saving was not needed: it stays verbatim"
    assert result.messages[3] is messages[3]
    assert result.stats.final_tokens <= target and result.stats.newly_compressed == 1
    # the uniform order (oldest first) is left as it is: it compresses both
    assert compressed_ids(pinch(messages, budget=budget, cache=cache).messages) == ["call_0", "call_1"]


def test_largest_first_order_compresses_the_biggest_new_results_first() -> None:
    messages = agent_session(5)
    messages[5] = tool("call_1", tool_output("big", 12_000))
    result = pinch(messages, budget=tokens(messages) - 100, batch_order=BatchOrder.LARGEST, low_watermark=1.0)
    assert compressed_ids(result.messages) == ["call_1"]


def test_a_compressed_result_never_returns_whatever_the_budget_and_cache() -> None:
    ledger = pinch(agent_session(6), budget=tokens(agent_session(6)) // 2).ledger
    before = compressed_ids(pinch(agent_session(6), ledger, budget=10**9, cache=WARM).messages)
    for cache in (WARM, COLD, NO_CACHE):
        for budget in (10**9, 1):
            sent = pinch(agent_session(9), ledger, budget=budget, cache=cache).messages
            assert set(before) <= set(compressed_ids(sent))


def test_a_changed_result_is_not_mistaken_for_the_one_the_ledger_compressed() -> None:
    ledger = pinch(agent_session(6), budget=tokens(agent_session(6)) // 2).ledger
    edited = agent_session(7)
    edited[5] = tool("call_1", tool_output("rerun"))  # same id, new content
    result = pinch(edited, ledger, budget=10**9, cache=WARM)
    assert result.messages[5] is edited[5]
    assert "call_1" not in compressed_ids(result.messages)


def test_after_client_side_compaction_the_ledger_applies_to_what_is_still_present() -> None:
    messages = agent_session(8)
    first = pinch(messages, budget=tokens(messages) // 2)
    assert compressed_ids(first.messages)[:2] == ["call_0", "call_1"]
    # the client replaced its first turns with a summary of them
    compacted = [messages[0], user("Summary of the work so far."), *messages[6:], assistant("Step 8.", [("call_8", "bash", "{}")]), tool("call_8", "ok")]
    result = pinch(compacted, first.ledger, budget=10**9, cache=WARM)
    still_present = [i for i in compressed_ids(first.messages) if any(m.get("tool_call_id") == i for m in compacted[:-1])]
    assert compressed_ids(result.messages) == still_present
    assert result.stats.reapplied == len(still_present) and result.stats.newly_compressed == 0
    assert all(result.messages[i] is compacted[i] for i in (0, 1))


def test_a_lost_ledger_means_one_fresh_batch_never_an_error() -> None:
    messages = agent_session(10)
    budget = tokens(messages) // 2
    fresh = pinch(messages, EMPTY_LEDGER, budget=budget, cache=cache_state(
        now=100.0, last_seen=None, last_provider=None, provider="p", lifetime_seconds=300.0, requests=0
    ))
    assert fresh.stats.reason == "over budget; cache cold (new session)"
    assert fresh.stats.newly_compressed > 0 and fresh.stats.final_tokens <= int(0.6 * budget)
    # the next request reapplies what that batch put in the new ledger
    assert pinch(messages, fresh.ledger, budget=budget, cache=WARM).messages == fresh.messages


def test_ledger_results_in_the_protected_turns_are_never_touched() -> None:
    ledger = pinch(agent_session(6), budget=1).ledger
    messages = agent_session(6)
    result = pinch_session(messages, ledger, budget_tokens=10**9, low_watermark=0.6, keep_last_turns=6, max_summarize_chars=MAX_CHARS, cache=WARM)
    assert result.messages is messages and result.stats.reapplied == 0


# --- elided results made placeholders, and the early batch on a cold cache ----------------------


@pytest.mark.parametrize("cache", [COLD, NO_CACHE], ids=["cold", "no cache"])
def test_a_batch_that_eliding_cannot_finish_turns_elided_results_into_placeholders_oldest_first(cache: CacheState) -> None:
    first = pinch(agent_session(6), budget=elided_all(agent_session(6)), low_watermark=1.0)
    assert placeholder_ids(first.messages) == [] and first.stats.elided == 5
    messages = agent_session(9)
    target = elided_all(messages) - 200  # eliding every old result leaves it ~200 tokens short (~85 per turned result)
    result = pinch(messages, first.ledger, budget=target, low_watermark=1.0, cache=cache)
    turned = placeholder_ids(result.messages)
    assert turned and turned == [f"call_{i}" for i in range(len(turned))], "oldest first, none skipped"
    assert result.stats.final_tokens <= target and len(turned) < 8, "it stops once the target is reached"
    stats = result.stats
    assert stats.compressed == stats.reapplied + stats.newly_compressed and stats.newly_compressed == 3 + len(turned)
    # the ledger now holds the placeholder: resent as it is, never elided (or whole) again
    assert result.ledger.compressed["call_0"][content_digest(messages[3]["content"])] == result.messages[3]["content"]
    later = pinch(agent_session(10), result.ledger, budget=10**9, cache=WARM)
    assert orjson.dumps(later.messages[: len(result.messages) - 2]) == orjson.dumps(result.messages[:-2])


def test_a_warm_batch_never_turns_elided_results_into_placeholders() -> None:
    first = pinch(agent_session(6), budget=elided_all(agent_session(6)), low_watermark=1.0)
    messages = agent_session(9)
    warm = CacheState(CacheVerdict.WARM, "warm", requests=PAYBACK_REQUESTS)
    result = pinch(messages, first.ledger, budget=1, cache=warm)
    assert placeholder_ids(result.messages) == [] and result.stats.reapplied == 5


def test_the_window_turns_elided_results_into_placeholders_whatever_the_cache() -> None:
    first = pinch(agent_session(6), budget=elided_all(agent_session(6)), low_watermark=1.0)
    messages = agent_session(9)
    window = WindowLimit("local-coder", "ollama", 32768, elided_all(messages) - 200)
    result = pinch(messages, first.ledger, budget=10**9, cache=WARM, windows=[window], low_watermark=1.0)
    assert placeholder_ids(result.messages)[:1] == ["call_0"] and result.stats.final_tokens <= window.prompt_limit


def test_a_list_of_parts_stays_elided() -> None:
    messages = agent_session(6)
    messages[3] = tool("call_0", [{"type": "text", "text": tool_output("parts", 4000)}])
    result = pinch(messages, budget=1)
    assert "[... pinch-router removed " in result.messages[3]["content"][0]["text"]
    assert result.messages[5]["content"].startswith("[pinch-router: old ")  # the strings were turned


@pytest.mark.parametrize(
    ("cache", "share_of_budget", "cold_batch_from", "batch"),
    [
        (COLD, 0.95, 0.9, True),
        (COLD, 0.85, 0.9, False),
        (COLD, 0.95, None, False),
        (COLD, 0.95, 1.0, False),
        (WARM, 0.95, 0.9, False),
        (NO_CACHE, 0.95, 0.9, False),
    ],
    ids=["cold, past the share", "cold, below it", "cold, no early batch", "cold, share 1", "warm", "no cache"],
)
def test_a_cold_cache_gets_an_early_batch_once_the_prompt_passes_cold_batch_from(
    cache: CacheState, share_of_budget: float, cold_batch_from: float | None, batch: bool
) -> None:
    messages = agent_session(12)
    budget = int(tokens(messages) / share_of_budget)
    result = pinch(messages, budget=budget, cache=cache, cold_batch_from=cold_batch_from)
    if batch:
        assert result.stats.reason == f"near budget; {cache.reason}" and result.stats.newly_compressed > 0
        assert result.stats.final_tokens <= int(0.6 * budget)
    else:
        assert result.messages is messages and result.stats.reason == "within budget"


def test_an_early_batch_counts_what_the_ledger_already_saves() -> None:
    first = pinch(agent_session(6), budget=elided_all(agent_session(6)), low_watermark=1.0)
    messages = agent_session(12)
    after_ledger = tokens(messages) - (tokens(agent_session(6)) - first.stats.final_tokens)
    # past 0.9 of the budget before the ledger, below it after: no early batch
    result = pinch(messages, first.ledger, budget=int(after_ledger / 0.85), cache=COLD, cold_batch_from=0.9)
    assert result.stats.reason == "within budget" and result.stats.reapplied == 5 and result.stats.newly_compressed == 0


# --- cache timing and the hard window -----------------------------------------------------------


def test_over_budget_with_a_warm_cache_the_rewrite_is_deferred_when_it_does_not_pay() -> None:
    messages = agent_session(12)
    result = pinch(messages, budget=tokens(messages) - 10, cache=WARM)
    assert result.messages is messages and result.stats.newly_compressed == 0
    assert result.stats.mode is PinchMode.DEFERRED
    assert result.stats.reason == "over budget; warm cache, rewrite does not pay"


def test_over_budget_with_a_warm_cache_a_rewrite_near_the_end_pays() -> None:
    # the only new candidate is the newest old result, and the turn after it is short: rewriting from it costs little
    messages = agent_session(4, chars=40_000)
    messages[-1] = tool("call_3", "1 passed")
    ledger = pinch(agent_session(3, chars=40_000), budget=1).ledger
    result = pinch(messages, ledger, budget=tokens(messages) // 10, cache=CacheState(CacheVerdict.WARM, "warm", requests=PAYBACK_REQUESTS))
    assert result.stats.newly_compressed == 1 and result.stats.reason == "over budget; warm cache, rewrite pays"


@pytest.mark.parametrize("cache", [WARM, COLD, NO_CACHE], ids=["warm", "cold", "no cache"])
def test_the_hard_window_always_wins_over_cache_timing(cache: CacheState) -> None:
    messages = agent_session(12)
    window = WindowLimit("local-coder", "ollama", 32768, tokens(messages) // 2)
    result = pinch(messages, budget=10**9, cache=cache, windows=[window])  # far under budget: only the window binds
    assert result.stats.final_tokens <= int(0.6 * window.prompt_limit)
    assert result.stats.reason == "over the 32768-token window of local-coder"


def test_compression_goes_toward_a_larger_window_when_the_preferred_one_cannot_be_fitted() -> None:
    messages = agent_session(6)
    compressible = pinch(messages, budget=1).stats.final_tokens  # every candidate compressed
    small = WindowLimit("small", "p", 1000, compressible - 1)
    large = WindowLimit("large", "p", 200_000, tokens(messages) - 1)
    result = pinch(messages, budget=10**9, windows=[small, large], low_watermark=1.0)
    assert result.stats.reason == "over the 1000-token window of small; toward the 200000-token window of large"
    assert compressed_ids(result.messages) == ["call_0"]  # just what the larger window needs
    nothing_fits = pinch(messages, budget=10**9, windows=[small, WindowLimit("also small", "p", 2000, compressible - 1)])
    assert nothing_fits.stats.final_tokens == compressible
    assert nothing_fits.stats.reason.endswith("; fits no window even with every old result compressed")


@pytest.mark.parametrize(
    ("last_seen", "last_provider", "lifetime", "verdict", "reason"),
    [
        (None, None, 300.0, CacheVerdict.COLD, "cache cold (new session)"),
        (1000.0 - 412, "p", 300.0, CacheVerdict.COLD, "cache cold (idle 412s > 300s)"),
        (1000.0 - 10, "other", 300.0, CacheVerdict.COLD, "cache cold (previous request went to other)"),
        (1000.0 - 300, "p", 300.0, CacheVerdict.WARM, "warm cache (idle 300s <= 300s)"),
        (1000.0 - 10, "p", 0.0, CacheVerdict.NONE, "provider caches nothing"),
    ],
)
def test_cache_state(last_seen: float | None, last_provider: str | None, lifetime: float, verdict: CacheVerdict, reason: str) -> None:
    state = cache_state(now=1000.0, last_seen=last_seen, last_provider=last_provider, provider="p", lifetime_seconds=lifetime, requests=4)
    assert (state.verdict, state.reason, state.requests) == (verdict, reason, 4)


@pytest.mark.parametrize(("api", "configured", "expected"), [("openai", None, 300.0), ("ollama", None, 300.0), ("openai", 3600.0, 3600.0), ("openai", 0.0, 0.0), ("future-api", None, 300.0)])
def test_cache_lifetime_is_the_configured_one_else_the_apis_default(api: str, configured: float | None, expected: float) -> None:
    assert cache_lifetime(api, configured) == expected


def test_a_warm_rewrite_pays_when_its_saving_over_the_payback_horizon_covers_it() -> None:
    # saved × 0.1 × (n + 1) >= rewritten × 1.15
    assert rewrite_pays(saved_tokens=4000, rewritten_tokens=600, expected_requests=1)  # 800 >= 690
    assert not rewrite_pays(saved_tokens=4000, rewritten_tokens=600, expected_requests=0)  # 400 < 690
    # a long history counts only up to the horizon: 100 × 0.1 × 6 = 60 >= 52 × 1.15, < 53 × 1.15
    assert PAYBACK_REQUESTS == 5
    assert rewrite_pays(100, 52, 10**6)
    assert not rewrite_pays(100, 53, 10**6)


# --- what is stored ------------------------------------------------------------------------------


def test_a_pinch_session_survives_its_codec() -> None:
    ledger = pinch(agent_session(6), budget=1).ledger
    session = PinchSession(ledger, 12.5, "openai", 7)
    assert PinchSession.decode(session.encode()) == session


def test_the_ledger_keeps_both_contents_of_a_reused_call_id_and_is_bounded() -> None:
    ledger = EMPTY_LEDGER.with_results([("call_1", content_digest("a"), None), ("call_1", content_digest("b"), None)])
    assert ledger.holds(tool("call_1", "a"), 3) and ledger.holds(tool("call_1", "b"), 9)
    assert not ledger.holds(tool("call_1", "c"), 3)
    big = EMPTY_LEDGER.with_results((f"call_{i}", "d", None) for i in range(MAX_LEDGER_RESULTS + 5))
    assert len(big.compressed) == MAX_LEDGER_RESULTS and "call_0" not in big.compressed


def test_placeholders_are_resent_as_stored_and_elided_results_recomputed_to_the_same_bytes() -> None:
    messages = agent_session(6)
    messages[5] = tool("call_1", "short output " * 20)  # becomes a placeholder
    first = pinch(messages, budget=elided_all(messages), low_watermark=1.0)  # eliding reaches the target: none turned
    stored = first.ledger.compressed["call_1"][content_digest(messages[5]["content"])]
    assert stored == first.messages[5]["content"] and stored.startswith("[pinch-router: old bash result omitted")
    assert first.ledger.compressed["call_0"][content_digest(messages[3]["content"])] is None  # elided
    again = pinch(messages, first.ledger, budget=10**9, cache=WARM)
    assert orjson.dumps(again.messages) == orjson.dumps(first.messages)
    assert again.stats.final_tokens == first.stats.final_tokens == tokens(again.messages)


def test_results_without_an_id_are_known_by_their_position() -> None:
    messages = agent_session(6)
    messages[5] = {"role": "tool", "content": tool_output("anonymous")}
    ledger = pinch(messages, budget=1).ledger
    assert "#5" in ledger.compressed
    assert pinch(messages, ledger, budget=10**9, cache=WARM).messages[5]["content"] != messages[5]["content"]


# --- the memo a resent conversation's next request reapplies the ledger from -----------------------


def _memo_turn(messages, ledger, memo=None, shared=0, *, max_chars=MAX_CHARS, cache=WARM):
    policy = PinchPolicy(10**9, KEEP, max_chars)  # no batch: the ledger alone
    return pinch_conversation(ChatConversation(messages), ledger, policy, cache, memo=memo, shared_units=shared)


def test_the_next_turn_of_a_resent_conversation_takes_the_ledgers_decisions_from_the_memo() -> None:
    first = agent_session(8)
    batch = pinch(first, budget=tokens(first) - 1)
    resent = _memo_turn(first, batch.ledger)
    assert resent.memo is not None and resent.stats.reapplied == batch.stats.newly_compressed
    # the next turn: the same message objects, one turn more
    nxt = first + agent_session(9)[len(first):]
    again = _memo_turn(nxt, batch.ledger, resent.memo, shared=len(first))
    assert again.rewrites == _memo_turn(nxt, batch.ledger).rewrites and again.stats == _memo_turn(nxt, batch.ledger).stats
    # taken, not made again: the elided results are the very texts the memo holds
    assert all(again.rewrites[p] is resent.rewrites[p] for p in resent.rewrites)
    # and the same turn once more: the same memo serves the next
    assert _memo_turn(nxt, batch.ledger, again.memo, shared=len(nxt)).memo is again.memo


@pytest.mark.parametrize("change", ["ledger", "max_chars", "not shared", "edited"])
def test_a_memo_made_otherwise_is_not_taken(change: str) -> None:
    first = agent_session(8)
    batch = pinch(first, budget=tokens(first) - 1)
    memo = _memo_turn(first, batch.ledger).memo
    messages, ledger, shared, max_chars = list(first), batch.ledger, len(first), MAX_CHARS
    if change == "ledger":
        ledger = pinch(first, budget=tokens(first) // 2).ledger
    elif change == "max_chars":
        max_chars = MAX_CHARS * 2
    elif change == "not shared":
        shared = 3  # only the opening is the earlier body's: its results are not
    else:  # a result the client edited: a body that shares only what comes before it
        messages[3] = tool("call_0", "cleared by the client")
        shared = 3
    taken = _memo_turn(messages, ledger, memo, shared, max_chars=max_chars)
    plain = _memo_turn(messages, ledger, max_chars=max_chars)
    assert taken.rewrites == plain.rewrites and taken.stats == plain.stats
    elided = [p for p, text in memo.rewrites.items() if "removed" in text]
    assert elided and taken.memo is not memo and not any(taken.rewrites.get(p) is memo.rewrites[p] for p in elided)
