"""The pinch-prune stage: through the running proxy, and its trace outcomes on a context."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from middlewares.pinch_prune import PinchPrune
from router.config import ConfigError, load_config
from router.contract.stage import run_stage
from router.core.cache_timing import CacheState, CacheVerdict
from router.core.content import Message
from router.core.pinch import MIN_SUMMARIZE_CHARS, is_compressed
from router.core.pinch_ledger import EMPTY_LEDGER
from router.core.results import (
    CLASSIFICATION,
    PINCH,
    RELEVANCE,
    REWRITES,
    SESSION,
    Classification,
    ClassificationSource,
    Outcome,
    PinchMode,
    Relevance,
    RelevanceStatus,
    SessionKey,
)
from router.core.tokens import DEFAULT_ESTIMATOR, TokenEstimator
from router.wire.openai_chat.pinch import pinch_session, prune_context
from router.wire.openai_chat.view import trim_candidates
from tests.support.classifier_fakes import FakeClock
from tests.support.config import make_config, model_entry
from tests.support.factories import (
    agent_session,
    assistant,
    make_ctx,
    sent_messages,
    system,
    tool,
    user,
)
from tests.support.stages import build_stage

URL = "/v1/chat/completions"
CHAIN = ["session-fingerprint", "pinch-prune", "capability-gate", "upstream-forward"]
KEEP, MAX_CHARS = 1, 400
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


def session(results: int = 4, chars: int = 4000) -> list[Message]:
    return agent_session(results, chars)


def tokens(messages: list[Message], tools: Any = None) -> int:
    return DEFAULT_ESTIMATOR.prompt_tokens(messages, tools)


def pinch_config(url: str, chain: list[str] = CHAIN, context_window: int = 1_000_000, **pinch: Any):
    # first sight off unless a test turns it on: it would fold agent_session's repeated lines first
    settings = {"enabled": True, "budget_tokens": 1000, "keep_last_turns": KEEP, "max_summarize_chars": MAX_CHARS, "first_sight": {"enabled": False}, **pinch}
    return make_config(url, middlewares=chain, pinch=settings, models=[model_entry("main", context_window=context_window)])


# --- through the proxy -------------------------------------------------------------------------


async def test_an_over_budget_session_goes_upstream_pinched_and_the_header_says_what_it_saved(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(pinch_config(url))
    messages = session()
    body = {"model": "auto", "messages": messages, "tools": TOOLS, "temperature": 0.2, "vendor_option": {"keep": True}}
    response = await client.post(URL, json=body)
    assert response.status == 200
    sent = mock.received[-1].body
    # a new session's first request: one batch to the low watermark, as the ledger core makes it
    fresh = pinch_session(
        messages, EMPTY_LEDGER, budget_tokens=1000, low_watermark=0.6, keep_last_turns=KEEP, max_summarize_chars=MAX_CHARS,
        cache=CacheState(CacheVerdict.COLD, "cache cold (new session)"), tools=TOOLS,
    )
    expected, stats = fresh.messages, fresh.stats
    assert sent["messages"] == expected and sent["messages"] != messages
    assert {k: v for k, v in sent.items() if k not in ("messages", "model")} == {k: v for k, v in body.items() if k not in ("messages", "model")}
    saved = int(response.headers["x-router-pinch-saved"])
    assert saved == stats.saved_tokens > 0
    assert tokens(sent["messages"], sent["tools"]) == tokens(messages, TOOLS) - saved


async def test_a_session_within_budget_goes_upstream_as_sent(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(pinch_config(url, budget_tokens=1_000_000))
    messages = session()
    response = await client.post(URL, json={"model": "auto", "messages": messages})
    assert response.status == 200
    assert mock.received[-1].body["messages"] == messages
    assert response.headers["x-router-pinch-saved"] == "0"


async def test_disabled_pinch_forwards_the_messages_untouched_and_sends_no_pinch_header(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(pinch_config(url, enabled=False))
    messages = session()
    response = await client.post(URL, json={"model": "auto", "messages": messages})
    assert response.status == 200
    assert mock.received[-1].body["messages"] == messages
    assert "x-router-pinch-saved" not in response.headers


async def test_a_streamed_answer_carries_the_pinch_header_too(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(pinch_config(url))
    messages = session()
    response = await client.post(URL, json={"model": "auto", "messages": messages, "stream": True})
    assert response.status == 200
    await response.read()
    assert int(response.headers["x-router-pinch-saved"]) == tokens(messages) - tokens(mock.received[-1].body["messages"]) > 0


async def test_the_gate_measures_the_pinched_prompt(proxy, mock_upstream):
    # 20 old 4000-character results (~20k tokens) do not fit an 8k window; pinched they do
    mock, url = mock_upstream
    messages = session(results=20)
    unpinched = await proxy(pinch_config(url, chain=["session-fingerprint", "capability-gate", "upstream-forward"], context_window=8_000))
    refused = await unpinched.post(URL, json={"model": "auto", "messages": messages})
    assert refused.status == 400 and (await refused.json())["error"]["code"] == "no_capable_model"
    pinched = await proxy(pinch_config(url, context_window=8_000, budget_tokens=6_000))
    served = await pinched.post(URL, json={"model": "auto", "messages": messages})
    assert served.status == 200
    assert tokens(mock.received[-1].body["messages"]) <= 6_000


# --- the stage's outcomes ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokenEstimator(TokenEstimator):
    def message_sizes(self, messages: list[dict[str, Any]]) -> list[int]:
        raise RuntimeError("estimator broke")


def stage(http: aiohttp.ClientSession, estimator: TokenEstimator = DEFAULT_ESTIMATOR, **pinch: Any) -> PinchPrune:
    return build_stage(PinchPrune, pinch_config("http://127.0.0.1:9/v1", **pinch), http=http, estimator=estimator)


async def test_disabled_is_recorded_as_skipped(http):
    ctx = make_ctx({"model": "auto", "messages": session()})
    record = await run_stage(stage(http, enabled=False), ctx)
    assert record.outcome is Outcome.SKIPPED
    assert sent_messages(ctx) is ctx.body["messages"] and ctx[REWRITES] is None and ctx[PINCH] is None


async def test_any_error_forwards_the_original_messages_and_is_recorded(http):
    ctx = make_ctx({"model": "auto", "messages": session()})
    ctx[REWRITES] = {0: "whatever"}  # whatever was there, the fallback restores the original
    record = await run_stage(stage(http, BrokenEstimator()), ctx)
    assert record.outcome is Outcome.ERROR and "estimator broke" in record.detail
    assert sent_messages(ctx) is ctx.body["messages"] and ctx[REWRITES] is None and ctx[PINCH] is None
    assert ctx.response is None  # fail open: the request goes on


async def test_the_prompt_is_measured_once_per_request(http):
    # pinch-relevance measures first (to know whether to rank); pinch-prune reuses that count
    ctx = make_ctx({"model": "auto", "messages": session(), "tools": TOOLS})
    measured = ctx.measured_prompt(DEFAULT_ESTIMATOR)
    assert ctx.measured_prompt(BrokenEstimator()) is measured
    record = await run_stage(stage(http, BrokenEstimator()), ctx)
    assert record.outcome is Outcome.OK
    assert ctx[PINCH] is not None and ctx[PINCH].original_tokens == measured.tokens == tokens(ctx.body["messages"], TOOLS)


async def test_ok_writes_send_messages_and_exact_stats_with_the_tool_schemas(http):
    messages = session()
    ctx = make_ctx({"model": "auto", "messages": messages, "tools": TOOLS})
    record = await run_stage(stage(http), ctx)
    assert record.outcome is Outcome.OK and "uniform" in record.detail
    assert ctx[PINCH] is not None and ctx[PINCH].mode is PinchMode.UNIFORM
    assert ctx[PINCH].original_tokens == tokens(messages, TOOLS)
    assert ctx[PINCH].final_tokens == tokens(sent_messages(ctx), TOOLS)
    assert ctx.body["messages"] is messages and messages == session()


async def test_a_relevance_order_prunes_least_relevant_first(http):
    messages = session()
    budget = tokens(messages) - 100  # one compression is enough
    ctx = make_ctx({"model": "auto", "messages": messages})
    ctx[RELEVANCE] = Relevance(RelevanceStatus.OK, order=(2, 0, 1))
    await run_stage(stage(http, budget_tokens=budget), ctx)
    assert ctx[PINCH] is not None and ctx[PINCH].mode is PinchMode.RELEVANCE and ctx[PINCH].compressed == 1
    candidates = trim_candidates(messages, KEEP)
    assert [i for i in candidates if sent_messages(ctx)[i] is not messages[i]] == [candidates[2]]


@pytest.mark.parametrize("status", [RelevanceStatus.SKIPPED, RelevanceStatus.UNAVAILABLE])
async def test_without_a_relevance_order_pinch_is_uniform(http, status: RelevanceStatus):
    ctx = make_ctx({"model": "auto", "messages": session()})
    ctx[RELEVANCE] = Relevance(status, order=None, reason="embeddings down")
    await run_stage(stage(http), ctx)
    assert ctx[PINCH] is not None and ctx[PINCH].mode is PinchMode.UNIFORM and ctx[PINCH].compressed == 3


async def test_an_order_that_does_not_fit_the_candidates_falls_back_to_uniform(http):
    ctx = make_ctx({"model": "auto", "messages": session()})
    ctx[RELEVANCE] = Relevance(RelevanceStatus.OK, order=(0, 1))  # three candidates
    record = await run_stage(stage(http), ctx)
    assert record.outcome is Outcome.FALLBACK and "uniform instead" in record.detail
    assert ctx[PINCH] is not None and ctx[PINCH].mode is PinchMode.UNIFORM and ctx[PINCH].compressed == 3


# --- configuration -----------------------------------------------------------------------------


def test_pinch_is_off_unless_configured():
    assert make_config().pinch.enabled is False


def test_max_summarize_chars_must_hold_head_marker_and_tail():
    with pytest.raises(ConfigError, match="pinch.max_summarize_chars"):
        pinch_config("http://127.0.0.1:9/v1", max_summarize_chars=MIN_SUMMARIZE_CHARS - 1)
    assert pinch_config("http://127.0.0.1:9/v1", max_summarize_chars=MIN_SUMMARIZE_CHARS).pinch.max_summarize_chars == MIN_SUMMARIZE_CHARS


@pytest.mark.parametrize("key", ["budget_tokens", "keep_last_turns"])
def test_budget_and_turns_must_be_positive(key: str):
    with pytest.raises(ConfigError, match=f"pinch.{key}"):
        pinch_config("http://127.0.0.1:9/v1", **{key: 0})


def test_the_shipped_config_enables_pinch_before_the_gate():
    config = load_config(Path(__file__).resolve().parents[2] / "config.yaml", environ={})
    assert config.pinch.enabled
    chain = config.middlewares
    assert chain.index("pinch-prune") < chain.index("capability-gate")


# --- the session ledger through the proxy, timed by an injected clock ------------------------------


def compressed_ids(messages: list[Message]) -> list[str]:
    return [m["tool_call_id"] for m in messages if m.get("role") == "tool" and is_compressed(m["content"])]


async def test_a_session_resends_its_compressed_results_byte_for_byte_and_batches_again_once_the_cache_is_cold(proxy, mock_upstream):
    mock, url = mock_upstream
    clock = FakeClock()
    client = await proxy(pinch_config(url, budget_tokens=4000), clock=clock)
    first = await client.post(URL, json={"model": "auto", "messages": session(6)})
    assert first.status == 200
    sent_first = mock.received[-1].body["messages"]
    batch = compressed_ids(sent_first)
    assert batch == [f"call_{i}" for i in range(len(batch))] and tokens(sent_first) <= 0.6 * 4000  # one batch, oldest first

    clock.advance(10)  # later turns, cache warm: the ledger only, no rewrite
    await client.post(URL, json={"model": "auto", "messages": session(10)})
    sent_second = mock.received[-1].body["messages"]
    assert tokens(sent_second) > 4000  # over budget, but a rewrite would not pay
    assert orjson.dumps(sent_second[: len(sent_first)]) == orjson.dumps(sent_first)

    clock.advance(400)  # idle beyond the provider's 300 s: the cache is cold anyway
    await client.post(URL, json={"model": "auto", "messages": session(11)})
    sent_third = mock.received[-1].body["messages"]
    assert tokens(sent_third) <= 0.6 * 4000
    assert compressed_ids(sent_third)[: len(batch)] == batch and len(compressed_ids(sent_third)) > len(batch)


@pytest.mark.parametrize(
    ("advance", "ledger", "detail"),
    [
        (10, True, "deferred: {} → {} tokens, {} compressed ({} from the ledger, 0 new); over budget; warm cache, rewrite does not pay"),
        (400, True, "cache cold (idle 400s > 300s)"),
        (10, False, "pruned afresh (pinch.ledger is false)"),
    ],
)
async def test_the_trace_says_why_new_results_were_or_were_not_compressed(http, advance, ledger, detail):
    clock = FakeClock()
    prune = build_stage(PinchPrune, pinch_config("http://127.0.0.1:9/v1", budget_tokens=4000, ledger=ledger), http=http, estimator=DEFAULT_ESTIMATOR, clock=clock)
    first = make_ctx({"model": "auto", "messages": session(6)})
    first[SESSION] = SessionKey("s1", "header")
    record = await run_stage(prune, first)
    assert ("over budget; cache cold (new session)" in record.detail) is ledger
    clock.advance(advance)
    second = make_ctx({"model": "auto", "messages": session(10)})
    second[SESSION] = SessionKey("s1", "header")
    record = await run_stage(prune, second)
    assert first[PINCH] is not None and second[PINCH] is not None
    batch = first[PINCH].newly_compressed
    assert detail.format(second[PINCH].original_tokens, second[PINCH].final_tokens, batch, batch) in record.detail
    assert second[PINCH].reason in record.detail


# --- the hard window: the preferred model's, then larger ones, then the gate's 400 ----------------


def windows_config(url: str, small_window: int, large_window: int):
    models = [model_entry("small", context_window=small_window, quality=0.9), model_entry("large", context_window=large_window, quality=0.1)]
    settings = {"enabled": True, "budget_tokens": 1_000_000, "keep_last_turns": KEEP, "max_summarize_chars": MAX_CHARS, "first_sight": {"enabled": False}}
    return make_config(url, middlewares=CHAIN, pinch=settings, models=models)


async def test_a_session_over_its_models_window_is_compressed_to_stay_on_that_model(proxy, mock_upstream):
    mock, url = mock_upstream
    messages = session(results=20)  # ~20k tokens: the large model would take it as it is
    client = await proxy(windows_config(url, small_window=16_000, large_window=128_000))
    response = await client.post(URL, json={"model": "auto", "messages": messages})
    assert response.status == 200 and response.headers["x-router-model"] == "small"
    sent = mock.received[-1].body["messages"]
    assert tokens(sent) + 1024 <= 16_000  # routing.min_output_tokens left for the answer


async def test_when_the_preferred_window_cannot_be_fitted_pinch_compresses_toward_the_largest_capable_one(proxy, mock_upstream):
    mock, url = mock_upstream
    messages = session(results=20)
    everything, _ = prune_context(messages, 0, KEEP, sys.maxsize)  # every old result a placeholder: the most pinch can do
    client = await proxy(windows_config(url, small_window=tokens(everything) + 1024 - 1, large_window=12_000))
    response = await client.post(URL, json={"model": "auto", "messages": messages})
    assert response.status == 200 and response.headers["x-router-model"] == "large"
    assert tokens(mock.received[-1].body["messages"]) + 1024 <= 12_000


async def test_only_when_even_the_fully_pinched_prompt_fits_no_window_does_the_gate_answer_400_naming_the_gap(proxy, mock_upstream):
    mock, url = mock_upstream
    messages = session(results=20)
    everything, _ = prune_context(messages, 0, KEEP, sys.maxsize)  # every old result a placeholder: the most pinch can do
    client = await proxy(windows_config(url, small_window=1_500, large_window=tokens(everything) - 1))
    response = await client.post(URL, json={"model": "auto", "messages": messages})
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["code"] == "no_capable_model"
    # the gap is the fully compressed prompt, plus routing.min_output_tokens for the answer, against each window
    assert f"context window {tokens(everything) - 1} is smaller than the {tokens(everything) + 1024} tokens needed" in error["message"]
    assert mock.received == []


async def test_a_ledger_evicted_from_the_session_state_means_one_fresh_batch_not_an_error(http):
    clock = FakeClock()
    config = pinch_config("http://127.0.0.1:9/v1", budget_tokens=4000, ledger_max_sessions=1)
    prune = build_stage(PinchPrune, config, http=http, estimator=DEFAULT_ESTIMATOR, clock=clock)

    async def turn(session_key: str, results: int):
        ctx = make_ctx({"model": "auto", "messages": session(results)})
        ctx[SESSION] = SessionKey(session_key, "header")
        record = await run_stage(prune, ctx)
        clock.advance(10)
        assert record.outcome is Outcome.OK and ctx[PINCH] is not None
        return ctx[PINCH]

    first = await turn("a", 6)
    assert first.newly_compressed > 0
    assert (await turn("a", 10)).reapplied == first.newly_compressed  # kept: a's ledger is there
    await turn("b", 6)  # the one slot now holds b: a's ledger is gone
    again = await turn("a", 10)
    assert again.reapplied == 0 and again.newly_compressed > 0
    assert again.reason == "over budget; cache cold (new session)"


async def test_the_windows_to_fit_are_worked_out_once_per_kind_of_request_and_tier(http, monkeypatch):
    import middlewares.pinch_prune as module

    worked_out = []
    real = module.pinch_windows
    monkeypatch.setattr(module, "pinch_windows", lambda *args: worked_out.append(args[2]) or real(*args))
    prune = stage(http)

    async def turn(results: int, tier: int) -> None:
        ctx = make_ctx({"model": "auto", "messages": session(results)})
        ctx[SESSION] = SessionKey("s", "header")
        ctx[CLASSIFICATION] = Classification("coding_general", tier, ClassificationSource.CLASSIFIER)
        assert (await run_stage(prune, ctx)).outcome is Outcome.OK and ctx[PINCH] is not None

    for results in (4, 5, 6):  # a session's turns: the prompt grows, its kind and tier stay
        await turn(results, 2)
    assert worked_out == [2]
    await turn(7, 3)  # escalated or reclassified: another tier, other windows
    assert worked_out == [2, 3]


def opencodes_title_request() -> dict[str, Any]:
    """The title request opencode 1.18.33 sent first in its session (tests/data/agents): no tools, no results."""
    from tests.support.agent_captures import captured

    title = captured("opencode")[0]
    assert not title.offers_tools and not any(m.get("role") == "tool" for m in title.body["messages"])
    return title.body


@pytest.mark.parametrize(
    ("title_at", "loop_at", "reason"),
    [
        (0.0, 1.0, "over budget; cache cold (new session)"),  # the title came first: the loop's cache is still cold
        (200.0, 400.0, "over budget; cache cold (idle 400s > 300s)"),  # a title mid-session does not keep the loop's cache alive
    ],
)
async def test_a_side_request_neither_warms_nor_cools_the_sessions_cache(http, title_at, loop_at, reason):
    clock = FakeClock()
    prune = build_stage(PinchPrune, pinch_config("http://127.0.0.1:9/v1", budget_tokens=4000), http=http, estimator=DEFAULT_ESTIMATOR, clock=clock)
    requests = [(title_at, opencodes_title_request()), (loop_at, {"model": "auto", "messages": session(10), "tools": TOOLS})]
    if title_at > 0:  # the loop's own first request, at 0
        requests.insert(0, (0.0, {"model": "auto", "messages": session(6), "tools": TOOLS}))
    start = clock()
    for at, body in requests:
        clock.advance(start + at - clock())
        ctx = make_ctx(body)
        ctx[SESSION] = SessionKey("opencode", "header")
        record = await run_stage(prune, ctx)
    assert ctx[PINCH] is not None and ctx[PINCH].reason == reason, record.detail
    assert ctx[PINCH].newly_compressed > 0  # so the batch is made while it costs nothing


async def test_pinch_fits_the_window_of_the_model_a_family_hint_routes_to(proxy, mock_upstream):
    """Pinch reads a requested name as the gate does: a top-tier family name is fitted to the top model's
    window, not to the small model's the classified (here the fallback) tier would prefer."""
    mock, url = mock_upstream
    messages = session(results=4, chars=4000)
    prompt = tokens(messages, TOOLS)
    # the small window holds the session only once its old results are compressed; the big one as it is
    models = [model_entry("small", tiers=[1], context_window=1024 + prompt * 3 // 5), model_entry("big", tiers=[3], context_window=prompt * 4)]
    settings = {"enabled": True, "budget_tokens": prompt * 8, "keep_last_turns": KEEP, "max_summarize_chars": MAX_CHARS, "first_sight": {"enabled": False}}
    routing = {"fallback_tier": 1, "model_families": {"claude-*opus*": 3}}
    client = await proxy(make_config(url, middlewares=CHAIN, pinch=settings, models=models, routing=routing))
    hinted = await client.post(URL, json={"model": "claude-opus-5-5", "messages": messages, "tools": TOOLS})
    assert hinted.headers["x-router-model"] == "big" and hinted.headers["x-router-pinch-saved"] == "0"
    assert mock.received[-1].body["messages"] == messages  # it fits the top model's window as it is
    other = [{**m, "content": f"{m['content']} (another session)"} if m["role"] == "user" else m for m in messages]  # a fresh session: a cold cache
    routed = await client.post(URL, json={"model": "auto", "messages": other, "tools": TOOLS})
    assert int(routed.headers["x-router-pinch-saved"]) > 0  # tier 1 prefers the small window: compressed to stay there
