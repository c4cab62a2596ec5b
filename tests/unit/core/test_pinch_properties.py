"""Property-based: the invariants of ARCHITECTURE §5 hold on generated agent transcripts."""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, replace
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from router.core.cache_timing import CacheState, CacheVerdict
from router.core.pinch import MIN_SUMMARIZE_CHARS, compress_tool_result, is_compressed
from router.core.pinch_ledger import EMPTY_LEDGER, PinchPolicy, WindowLimit, pinch_conversation
from router.core.results import PinchMode, PinchStats
from router.core.tokens import DEFAULT_ESTIMATOR
from router.wire.openai_chat.pinch import pinch_session, prune_context, tool_name_for
from router.wire.openai_chat.view import (
    ChatConversation,
    protected_from,
    trim_candidates,
)
from tests.support.factories import assistant, image_part, system, tool, user

WORDS = ["ok", "error:", "def parse(", "    return x", "PASSED", "FAILED test_parser.py::test_x", "ünïcode ✓", "\t{}", ""]
# Around the placeholder's length, the smallest max_summarize_chars and the usual ones.
SIZES = [0, 1, 20, 50, 60, 100, 239, 240, 241, 500, 2000, 3000, 3001, 20_000]


def log(size: int, seed: int, newlines: bool) -> str:
    """Deterministic tool output of exactly ``size`` characters."""
    if not newlines:
        return ((WORDS[seed % len(WORDS)] or "x") * size)[:size]
    out, length, i = [], 0, seed
    while length < size:
        out.append(f"{WORDS[i % len(WORDS)]} {i}")
        length += len(out[-1]) + 1
        i += 7
    return "\n".join(out)[:size]


tool_text = st.builds(log, st.sampled_from(SIZES), st.integers(0, 100), st.booleans())
line = st.sampled_from(WORDS)


def text_part(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": text, **extra}


tool_content = st.one_of(
    tool_text,
    st.lists(
        st.one_of(
            tool_text.map(text_part),
            tool_text.map(lambda t: text_part(t, cache_control={"type": "ephemeral"})),
            st.just(image_part()),
            st.just({"type": "future_part", "blob": "z" * 50}),
        ),
        max_size=4,
    ),
    st.none(),
)
extra_keys = st.dictionaries(st.sampled_from(["name", "cache_control", "x_vendor"]), st.sampled_from(["v", {"type": "ephemeral"}]), max_size=2)


# The strategies the composites draw from are made once: one made inside a draw is made and validated
# again for every example (hypothesis checks a new strategy's graph on its first draw).
REPLIES, TOOL_NAMES = st.none() | line, st.sampled_from(["bash", "view", "grep"])
PERCENTS = st.sampled_from([0, 50, 80, 90, 95, 98, 99, 100, 110]) | st.integers(0, 110)
SESSION_PERCENTS = st.sampled_from([0, 30, 60, 90, 100, 120]) | st.integers(0, 120)
VERDICTS, WINDOWS, SEEDS = st.sampled_from(list(CacheVerdict)), st.none() | SESSION_PERCENTS, st.none() | st.integers(0, 99)
WATERMARKS, COLD_BATCHES, NO_CACHE_WATERMARKS = st.sampled_from([0.3, 0.6, 1.0]), st.none() | st.sampled_from([0.5, 0.9, 1.0]), st.sampled_from([0.6, 1.0])


@st.composite
def transcripts(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages = [system("You are a coding agent."), user(draw(line))]
    for turn in range(draw(st.integers(0, 8))):
        ids = [f"call_{turn}_{j}" for j in range(draw(st.integers(0, 3)))]
        messages.append(assistant(draw(REPLIES), [(i, draw(TOOL_NAMES), "{}") for i in ids]))
        for call_id in ids:
            messages.append(tool(call_id, draw(tool_content), **draw(extra_keys)))
        if draw(st.integers(0, 4)) == 0:
            messages.append(user(draw(tool_text)))
    if draw(st.booleans()):
        messages.append(assistant(draw(tool_text)))
    return messages


@dataclass(frozen=True)
class Case:
    messages: list[dict[str, Any]]
    budget: int
    keep: int
    max_chars: int
    order: list[int] | None


@st.composite
def cases(draw: st.DrawFn, relevance: bool | None = None) -> Case:
    messages = draw(transcripts())
    keep = draw(st.integers(1, 5))
    total = DEFAULT_ESTIMATOR.prompt_tokens(messages)
    # percent of the total: from nothing fits, through just over (relevance stops early), to everything fits
    percent = draw(PERCENTS)
    budget = total * percent // 100
    use_order = draw(st.booleans()) if relevance is None else relevance
    order = draw(st.permutations(range(len(trim_candidates(messages, keep))))) if use_order else None
    return Case(messages, budget, keep, draw(st.integers(MIN_SUMMARIZE_CHARS, 3000)), order)


def run(case: Case, messages: list[dict[str, Any]] | None = None, order: Any = "same") -> tuple[list[dict[str, Any]], PinchStats]:
    return prune_context(
        case.messages if messages is None else messages,
        case.budget,
        case.keep,
        case.max_chars,
        case.order if order == "same" else order,
    )


def candidate_compressions(case: Case) -> dict[int, dict[str, Any]]:
    """What compressing each candidate alone gives (absent: it would not save tokens)."""
    out = {}
    for index in trim_candidates(case.messages, case.keep):
        compressed = compress_tool_result(case.messages[index], tool_name_for(case.messages, index), case.max_chars)
        if compressed is not None:
            out[index] = compressed.message
    return out


@settings(max_examples=100, deadline=None)
@given(cases())
def test_structure_is_preserved_and_only_old_tool_results_change(case: Case):
    before = orjson.dumps(case.messages)
    sent, _ = run(case)
    assert orjson.dumps(case.messages) == before, "the input was mutated"
    assert len(sent) == len(case.messages)
    candidates = set(trim_candidates(case.messages, case.keep))
    for index, (old, new) in enumerate(zip(case.messages, sent, strict=True)):
        assert new["role"] == old["role"]
        assert list(new) == list(old), "keys added, removed or reordered"
        assert all(new[k] == old[k] for k in old if k != "content")
        if new is old:
            continue
        assert index in candidates and index < protected_from(case.messages, case.keep)
        assert new.get("tool_call_id") == old.get("tool_call_id")
        assert DEFAULT_ESTIMATOR.message_tokens(new) < DEFAULT_ESTIMATOR.message_tokens(old)
        if isinstance(old["content"], list):
            assert len(new["content"]) == len(old["content"])
            for old_part, new_part in zip(old["content"], new["content"], strict=True):
                assert list(new_part) == list(old_part)
                assert old_part.get("type") == "text" or new_part is old_part
                assert len(orjson.dumps(new_part)) <= len(orjson.dumps(old_part))
        else:
            assert isinstance(new["content"], str) and len(new["content"]) < len(old["content"])


@settings(max_examples=100, deadline=None)
@given(cases())
def test_user_system_and_assistant_messages_are_byte_identical(case: Case):
    sent, _ = run(case)
    for old, new in zip(case.messages, sent, strict=True):
        if old["role"] != "tool":
            assert new is old and orjson.dumps(new) == orjson.dumps(old)


@settings(max_examples=100, deadline=None)
@given(cases())
def test_every_tool_result_still_answers_its_call(case: Case):
    sent, _ = run(case)
    open_calls: set[str] = set()
    for old, new in zip(case.messages, sent, strict=True):
        for call in new.get("tool_calls") or []:
            open_calls.add(call["id"])
        if new["role"] == "tool":
            assert new["tool_call_id"] == old["tool_call_id"] and new["tool_call_id"] in open_calls


@settings(max_examples=100, deadline=None)
@given(cases())
def test_stats_are_exact(case: Case):
    sent, stats = run(case)
    assert stats.original_tokens == DEFAULT_ESTIMATOR.prompt_tokens(case.messages)
    assert stats.final_tokens == DEFAULT_ESTIMATOR.prompt_tokens(sent)
    rewritten = sum(1 for old, new in zip(case.messages, sent, strict=True) if old is not new)
    assert stats.compressed == stats.elided + stats.placeholders == rewritten
    # pinch reports each compression by the result's position and how: the rewritten messages, exactly
    rewritten_results = [p for p, r in enumerate(ChatConversation(case.messages).tool_results()) if sent[r.unit] is not case.messages[r.unit]]
    assert [p for p, _ in stats.compressions] == rewritten_results
    assert sum(kind == "elided" for _, kind in stats.compressions) == stats.elided
    if stats.original_tokens <= case.budget:
        assert sent is case.messages and stats.mode is PinchMode.WITHIN_BUDGET
    else:
        assert stats.mode is (PinchMode.UNIFORM if case.order is None else PinchMode.RELEVANCE)


@settings(max_examples=100, deadline=None)
@given(cases())
def test_pruning_again_changes_nothing(case: Case):
    once, _ = run(case)
    order = None if case.order is None else list(range(len(trim_candidates(once, case.keep))))
    twice, stats = run(case, messages=once, order=order)
    assert twice is once
    assert stats.compressed == 0


@settings(max_examples=100, deadline=None)
@given(cases(relevance=False))
def test_uniform_mode_compresses_every_candidate_that_can_shrink(case: Case):
    sent, stats = run(case)
    if stats.mode is PinchMode.WITHIN_BUDGET:
        return
    expected = candidate_compressions(case)
    assert {i for i, (a, b) in enumerate(zip(case.messages, sent, strict=True)) if a is not b} == set(expected)
    assert all(sent[i] == message for i, message in expected.items())


@settings(max_examples=100, deadline=None)
@given(cases(relevance=True))
def test_relevance_mode_compresses_a_prefix_of_the_order_and_stops_once_the_deficit_is_covered(case: Case):
    sent, stats = run(case)
    if stats.mode is PinchMode.WITHIN_BUDGET:
        return
    assert case.order is not None
    uniform_sent, uniform = run(case, order=None)
    expected = candidate_compressions(case)
    candidates = trim_candidates(case.messages, case.keep)
    compressed = [candidates[p] for p in case.order if sent[candidates[p]] is not case.messages[candidates[p]]]
    # never more than uniform, each compressed exactly as uniform would
    assert set(compressed) <= set(expected)
    assert all(sent[i] == uniform_sent[i] for i in compressed)
    assert stats.final_tokens >= uniform.final_tokens
    # a prefix of the order (skipping what cannot shrink) ...
    walked = [candidates[p] for p in case.order if candidates[p] in expected][: len(compressed)]
    assert compressed == walked
    # ... that stops as soon as the deficit is covered, and goes all the way when it never is
    deficit = stats.original_tokens - case.budget
    if compressed:
        last = compressed[-1]
        saved_before_last = stats.saved_tokens - (DEFAULT_ESTIMATOR.message_tokens(case.messages[last]) - DEFAULT_ESTIMATOR.message_tokens(sent[last]))
        assert saved_before_last < deficit
    if stats.saved_tokens < deficit:
        assert set(compressed) == set(expected)


# --- the session ledger: every invariant on every turn of a generated session --------------------


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[list[dict[str, Any]]], list[tuple[CacheVerdict, int, int | None, int | None]], int, int, float, float | None, float]:
    """A transcript replayed turn by turn (each request is the transcript up to a turn), and per turn
    a cache verdict, a budget (percent of that request), maybe a hard window (percent) and maybe
    the seed of a relevance order. From some turn on, the client may have edited (its own
    compaction) or dropped an old tool result. Then keep_last_turns, max_summarize_chars, the
    low watermark, cold_batch_from and no_cache_watermark, for the whole session."""
    messages = draw(transcripts())
    ends = [i for i, m in enumerate(messages) if m["role"] == "assistant"] + [len(messages)]
    requests = [messages[:end] for end in ends if end > 0]
    results = [i for i, m in enumerate(messages) if m["role"] == "tool"]
    if results and draw(st.booleans()):
        edited, since, drop = draw(st.sampled_from(results)), draw(st.integers(0, len(requests) - 1)), draw(st.booleans())
        for turn in range(since, len(requests)):
            request = list(requests[turn])
            if edited < len(request):
                replacement = user("[earlier output cleared]") if drop else tool(request[edited]["tool_call_id"], "[cleared by the client]")
                request[edited] = replacement
            requests[turn] = request
    turns = [(draw(VERDICTS), draw(SESSION_PERCENTS), draw(WINDOWS), draw(SEEDS)) for _ in requests]
    keep, max_chars, watermark = draw(st.integers(1, 3)), draw(st.integers(MIN_SUMMARIZE_CHARS, 3000)), draw(WATERMARKS)
    cold_batch_from, no_cache_watermark = draw(COLD_BATCHES), draw(NO_CACHE_WATERMARKS)
    return requests, turns, keep, max_chars, watermark, cold_batch_from, no_cache_watermark, draw(st.booleans())


def turn_limits(messages: list[dict[str, Any]], keep: int, seed: int | None, window_percent: int | None) -> tuple[list[int] | None, int, list[WindowLimit]]:
    """A turn's relevance order (shuffled by ``seed``; None: none), its prompt's tokens, and its hard window."""
    order = None
    if seed is not None:
        order = list(range(len(trim_candidates(messages, keep))))
        random.Random(seed).shuffle(order)
    total = DEFAULT_ESTIMATOR.prompt_tokens(messages)
    return order, total, [] if window_percent is None else [WindowLimit("m", "p", 10**6, total * window_percent // 100)]


def most_compressed(messages: list[dict[str, Any]], keep: int, max_chars: int) -> list[dict[str, Any]]:
    """Every candidate as far as pinch can take it: a string result as a placeholder when that saves
    more than eliding it, a list of parts elided (what the ledger can resend)."""
    out = list(messages)
    for index in trim_candidates(messages, keep):
        def name(index: int = index) -> str:
            return tool_name_for(messages, index)
        options = [compress_tool_result(messages[index], name, max_chars)]
        if type(messages[index]["content"]) is str:
            options.append(compress_tool_result(messages[index], name, sys.maxsize))
        best = max((o for o in options if o is not None), key=lambda o: o.tokens_saved, default=None)  # the first of equals: elided
        if best is not None:
            out[index] = best.message
    return out


@settings(max_examples=150, deadline=None)
@given(sessions())
def test_every_pinch_invariant_holds_on_every_turn_of_a_session_with_a_ledger(session) -> None:
    requests, turns, keep, max_chars, watermark, cold_batch_from, no_cache_watermark, restore = session
    ledger = EMPTY_LEDGER
    sent_before: dict[str, tuple[bytes, bytes]] = {}  # tool_call_id -> (its content, the compressed bytes sent for it)
    for messages, (verdict, budget_percent, window_percent, seed) in zip(requests, turns, strict=True):
        before = orjson.dumps(messages)
        order, total, windows = turn_limits(messages, keep, seed, window_percent)
        result = pinch_session(
            messages,
            ledger,
            budget_tokens=total * budget_percent // 100,
            low_watermark=watermark,
            keep_last_turns=keep,
            max_summarize_chars=max_chars,
            cache=CacheState(verdict, str(verdict), requests=3),
            windows=windows,
            relevance_order=order,
            cold_batch_from=cold_batch_from,
            no_cache_watermark=no_cache_watermark,
            restore=restore,
        )
        sent, stats = result.messages, result.stats
        over_window = bool(windows) and total > windows[0].prompt_limit
        assert orjson.dumps(messages) == before, "the input was mutated"
        assert len(sent) == len(messages), "a message was added or removed"
        candidates = set(trim_candidates(messages, keep))
        open_calls: set[str] = set()
        returned = 0
        for index, (old, new) in enumerate(zip(messages, sent, strict=True)):
            assert list(new) == list(old) and all(new[k] == old[k] for k in old if k != "content")
            for call in new.get("tool_calls") or []:
                open_calls.add(call["id"])
            if old["role"] != "tool":
                assert new is old, "a non-tool message changed"
                continue
            assert new["tool_call_id"] in open_calls, "a result lost its call"
            if new is not old:
                assert index in candidates
            previous = sent_before.get(new["tool_call_id"])
            if previous is not None and index in candidates and previous[0] == orjson.dumps(old["content"]):
                if restore and order is not None and verdict is CacheVerdict.COLD:
                    # a cold moment with a relevance order plans the ledger afresh (restore on): the result may come back
                    if new is old:
                        del sent_before[new["tool_call_id"]]
                        returned += 1
                    continue
                if orjson.dumps(new) != previous[1]:
                    # the one change allowed: an elided string result made a placeholder, off a warm cache or by the window
                    assert is_compressed(orjson.loads(previous[1])["content"]) and _elided(orjson.loads(previous[1])), "a ledger result came back"
                    assert verdict is not CacheVerdict.WARM or over_window, "a ledger result was rewritten on a warm cache"
                    assert type(old["content"]) is str and new["content"].startswith("[pinch-router: old "), "not resent byte for byte"
        for index in candidates:
            if sent[index] is not messages[index]:
                sent_before[messages[index]["tool_call_id"]] = (orjson.dumps(messages[index]["content"]), orjson.dumps(sent[index]))
        assert stats.final_tokens == DEFAULT_ESTIMATOR.prompt_tokens(sent)
        assert stats.compressed == sum(1 for a, b in zip(messages, sent, strict=True) if a is not b)
        assert stats.compressed == stats.reapplied + stats.newly_compressed
        assert stats.restored == returned, "restored results miscounted"
        assert len(stats.compressions) == stats.compressed and sum(k == "elided" for _, k in stats.compressions) == stats.elided
        if windows and stats.final_tokens > windows[0].prompt_limit:
            assert sent == most_compressed(messages, keep, max_chars), "over the hard window while something could still be compressed"
        ledger = result.ledger


def _elided(message: dict[str, Any]) -> bool:
    return "[... pinch-router removed " in orjson.dumps(message["content"]).decode()


def _shared_units(messages: list[dict[str, Any]], before: list[dict[str, Any]] | None) -> int:
    """How many leading messages are the very objects of the request before (a resent body's)."""
    if before is None:
        return 0
    shared = 0
    for mine, theirs in zip(messages, before):
        if mine is not theirs:
            break
        shared += 1
    return shared


@settings(max_examples=150, deadline=None)
@given(sessions(), st.lists(st.booleans(), max_size=12))
def test_a_request_given_the_memo_of_the_one_it_resumed_decides_exactly_as_without_it(session, repeats) -> None:
    """The ledger memo (LedgerMemo) and the unit memo (UnitMemo) carried from each request to the next, which shares its first
    messages (the same objects), against the same session pinched without it: every answer the same.
    Some requests are sent twice, as an agent retrying, so that the memo covers all of them."""
    requests, turns, keep, max_chars, watermark, cold_batch_from, no_cache_watermark, restore = session
    policy = PinchPolicy(0, keep, max_chars, watermark, cold_batch_from, no_cache_watermark, restore=restore)
    plain_ledger = memo_ledger = EMPTY_LEDGER
    memo, units, before = None, None, None
    schedule = [(request, turn) for i, (request, turn) in enumerate(zip(requests, turns)) for _ in range(1 + (i < len(repeats) and repeats[i]))]
    for messages, (verdict, budget_percent, window_percent, seed) in schedule:
        order, total, windows = turn_limits(messages, keep, seed, window_percent)
        options = dict(windows=windows, relevance_order=order)
        turn_policy = replace(policy, budget_tokens=total * budget_percent // 100)
        cache = CacheState(verdict, str(verdict), requests=3)
        plain = pinch_conversation(ChatConversation(messages), plain_ledger, turn_policy, cache, **options)
        shared = _shared_units(messages, before)
        with_memo = pinch_conversation(
            ChatConversation(messages), memo_ledger, turn_policy, cache, memo=memo, shared_units=shared, unit_memo=units, **options
        )
        assert with_memo.rewrites == plain.rewrites and list(with_memo.rewrites) == list(plain.rewrites)
        assert with_memo.stats == plain.stats
        assert with_memo.ledger.compressed == plain.ledger.compressed
        assert with_memo.first_changed == plain.first_changed
        plain_ledger, memo_ledger, memo, units, before = plain.ledger, with_memo.ledger, with_memo.memo, with_memo.units, messages
