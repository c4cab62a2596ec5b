"""Dollars from decision rows (router/core/pricing.py): what a request cost, what it would have cost
unpinched, and on the model the client asked for — with plain rows, no proxy."""

from __future__ import annotations

from typing import Any

import pytest

from router.core.pricing import UNPRICED, ModelPrice, Prices, RowCost, price_rows

# Anthropic-like prices: cache reads at a tenth, writes at 1.25x the input price.
SONNET = ModelPrice(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
LOCAL = ModelPrice()  # a local model: every price 0
OPUS = ModelPrice(input=15.0, output=75.0, cache_read=1.5, cache_write=18.75)
PRICES = Prices({"sonnet": SONNET, "local": LOCAL})


def row(ts: float = 0.0, **fields: Any) -> dict[str, Any]:
    """A decision row of session s1 answered by sonnet, with ``fields`` over the defaults."""
    return {"ts": ts, "session": "s1", "model": "sonnet", "requested_model": "auto", "status": 200, "prompt_tokens": 10_000, "completion_tokens": 500} | fields


def dollars(prompt: int = 0, cached: int = 0, written: int = 0, completion: int = 0, price: ModelPrice = SONNET) -> float:
    """The bill written out: uncached prompt, cache reads, cache writes, answer."""
    read = price.input if price.cache_read is None else price.cache_read
    write = price.input if price.cache_write is None else price.cache_write
    return ((prompt - cached - written) * price.input + cached * read + written * write + completion * price.output) / 1e6


def test_a_request_costs_its_uncached_prompt_cache_reads_writes_and_answer_at_their_prices():
    (cost,) = price_rows([row(cached_tokens=6_000, cache_write_tokens=3_000)], PRICES)
    assert cost.cost == pytest.approx(dollars(10_000, 6_000, 3_000, 500))
    assert cost.cost == pytest.approx((1_000 * 3 + 6_000 * 0.3 + 3_000 * 3.75 + 500 * 15) / 1e6)


def test_unset_cache_prices_are_the_input_price():
    plain = Prices({"sonnet": ModelPrice(input=3.0, output=15.0)})
    (cost,) = price_rows([row(cached_tokens=6_000, cache_write_tokens=3_000)], plain)
    assert cost.cost == pytest.approx((10_000 * 3 + 500 * 15) / 1e6)


@pytest.mark.parametrize(
    "fields",
    [
        {"model": None, "status": 502, "prompt_tokens": None, "completion_tokens": None},  # no model answered
        {"prompt_tokens": None},  # answered, but its usage never came
        {"model": "retired"},  # a model the config no longer has
    ],
)
def test_a_row_without_a_reported_prompt_or_a_known_price_is_unpriced(fields):
    assert price_rows([row(**fields)], PRICES) == [UNPRICED]


def test_a_local_model_costs_nothing():
    (cost,) = price_rows([row(model="local", tokens_before=20_000, tokens_after=10_000)], PRICES)
    assert (cost.cost, cost.unpinched, cost.pinch_saved) == (0.0, 0.0, 0.0)


def test_without_pinch_the_unpinched_cost_is_the_bill_to_the_last_digit():
    """Cache reads and writes on every turn of a warm session, pinch never removing anything."""
    rows = [
        row(0, cached_tokens=0, cache_write_tokens=10_000, tokens_before=10_000, tokens_after=10_000),
        row(30, prompt_tokens=12_345, cached_tokens=10_000, cache_write_tokens=2_345, tokens_before=12_300, tokens_after=12_300, pinch_newly_compressed=0),
        row(60, prompt_tokens=15_001, cached_tokens=12_288, cache_write_tokens=2_000, tokens_before=15_000, tokens_after=15_000),
        row(90, prompt_tokens=16_000, tokens_before=None, tokens_after=None),  # no cache accounting, pinch not in the chain
    ]
    for cost in price_rows(rows, PRICES):
        assert cost.unpinched == cost.cost
        assert cost.pinch_saved == 0.0


def test_without_cache_accounting_pinch_saves_what_it_removed_at_the_input_price():
    (cost,) = price_rows([row(tokens_before=30_000, tokens_after=10_000)], PRICES)
    assert cost.unpinched == pytest.approx(dollars(30_000, completion=500))
    assert cost.pinch_saved == pytest.approx(20_000 * 3.0 / 1e6)


def test_what_pinch_removed_from_a_cached_prefix_would_have_been_read_from_the_cache():
    """No rewrite this turn: the ledger resent its compressed results; unpinched, the originals were
    in the prefix the cache served."""
    (cost,) = price_rows([row(cached_tokens=8_000, cache_write_tokens=2_000, tokens_before=30_000, tokens_after=10_000, pinch_newly_compressed=0)], PRICES)
    assert cost.cost == pytest.approx(dollars(10_000, 8_000, 2_000, 500))
    assert cost.unpinched == pytest.approx(dollars(30_000, 28_000, 2_000, 500))
    assert cost.pinch_saved == pytest.approx(20_000 * 0.3 / 1e6)


def test_a_rewrite_in_a_warm_session_is_weighed_against_the_whole_previous_prompt_from_the_cache():
    """Pinch compressed new results while the cache was warm: the prompt after the first of them was
    written again. Unpinched, the provider would have read all of the previous request from its cache."""
    rows = [
        row(0, prompt_tokens=40_000, cached_tokens=0, cache_write_tokens=40_000, tokens_before=40_000, tokens_after=40_000),
        row(60, prompt_tokens=20_000, cached_tokens=5_000, cache_write_tokens=15_000, tokens_before=42_000, tokens_after=20_000, pinch_newly_compressed=12),
    ]
    first, rewrite = price_rows(rows, PRICES)
    assert first.pinch_saved == 0.0
    assert rewrite.cost == pytest.approx(dollars(20_000, 5_000, 15_000, 500))
    # unpinched: 42,000 tokens, the previous 40,000 read from the cache, the 2,000 new written (the turn's own share)
    assert rewrite.unpinched == pytest.approx(dollars(42_000, 40_000, 2_000, 500))
    assert rewrite.pinch_saved < 0  # this turn the rewrite cost more than it saved; later turns pay it back


def test_a_rewrite_after_the_cache_went_cold_is_not_charged_to_pinch():
    rows = [
        row(0, prompt_tokens=40_000, cached_tokens=0, cache_write_tokens=40_000),
        row(1_000, prompt_tokens=20_000, cached_tokens=0, cache_write_tokens=20_000, tokens_before=42_000, tokens_after=20_000, pinch_newly_compressed=12),
    ]
    _, rewrite = price_rows(rows, PRICES)
    assert rewrite.unpinched == pytest.approx(dollars(42_000, 0, 42_000, 500))
    assert rewrite.pinch_saved == pytest.approx(22_000 * 3.75 / 1e6)


@pytest.mark.parametrize("later", [{"ts": 60, "model": "local"}, {"ts": 60, "session": "s2"}], ids=["another model", "another session"])
def test_a_cache_is_warm_for_the_same_model_and_session_only(later):
    rows = [
        row(0, prompt_tokens=40_000, cached_tokens=0, cache_write_tokens=40_000),
        row(**{"prompt_tokens": 20_000, "cached_tokens": 0, "cache_write_tokens": 20_000, "tokens_before": 42_000, "tokens_after": 20_000, "pinch_newly_compressed": 3, **later}),
    ]
    _, rewrite = price_rows(rows, Prices({"sonnet": SONNET, "local": SONNET}))
    assert rewrite.unpinched == pytest.approx(dollars(42_000, 0, 42_000, 500))


def test_an_error_in_between_leaves_the_cache_cold_for_the_counterfactual():
    """A request's previous one is its session's previous row, whatever became of it (as the SQL sums take it)."""
    rows = [
        row(0, prompt_tokens=40_000, cached_tokens=0, cache_write_tokens=40_000),
        row(30, model=None, status=502, prompt_tokens=None, completion_tokens=None),
        row(60, prompt_tokens=20_000, cached_tokens=0, cache_write_tokens=20_000, tokens_before=42_000, tokens_after=20_000, pinch_newly_compressed=1),
    ]
    *_, rewrite = price_rows(rows, PRICES)
    assert rewrite.unpinched == pytest.approx(dollars(42_000, 0, 42_000, 500))


def test_interleaved_sessions_each_keep_their_own_previous_request():
    rows = [
        row(0, session="a", prompt_tokens=40_000, cached_tokens=0, cache_write_tokens=40_000),
        row(10, session="b", prompt_tokens=5_000, cached_tokens=0, cache_write_tokens=5_000),
        row(20, session="a", prompt_tokens=20_000, cached_tokens=0, cache_write_tokens=20_000, tokens_before=42_000, tokens_after=20_000, pinch_newly_compressed=1),
    ]
    *_, rewrite = price_rows(rows, PRICES)
    assert rewrite.unpinched == pytest.approx(dollars(42_000, 40_000, 2_000, 500))


# ---- routing's reference ----------------------------------------------------------------------------------


def test_a_request_pinning_a_catalogue_model_is_compared_with_that_model():
    prices = Prices({"sonnet": SONNET, "local": LOCAL})
    (cost,) = price_rows([row(model="local", requested_model="sonnet", cached_tokens=0, cache_write_tokens=0)], prices)
    assert (cost.reference_model, cost.reference) == ("sonnet", pytest.approx(dollars(10_000, completion=500)))
    assert cost.routing_saved == pytest.approx(dollars(10_000, completion=500))


@pytest.mark.parametrize(
    "requested, expected",
    [
        ("claude-opus-4-5", "claude-opus-4-5"),  # a name priced exactly
        ("claude-opus-4-5-20251101", "claude-opus-4-5"),  # the longest priced name it starts with
        ("claude-opus-4-1", "claude-opus-4"),
        ("auto", "sonnet"),  # an alias: the reference model
        (None, "sonnet"),
    ],
)
def test_a_request_is_compared_with_the_model_asked_for_where_priced_else_the_reference_model(requested, expected):
    prices = Prices({"sonnet": SONNET, "local": LOCAL}, {"claude-opus-4": OPUS, "claude-opus-4-5": ModelPrice(5.0, 25.0, 0.5, 6.25)}, "sonnet", SONNET)
    (cost,) = price_rows([row(model="local", requested_model=requested)], prices)
    assert cost.reference_model == expected


def test_a_request_answered_by_the_model_it_asked_for_saved_nothing_by_routing():
    (cost,) = price_rows([row(requested_model="sonnet", tokens_before=20_000, tokens_after=10_000)], PRICES)
    assert (cost.reference_model, cost.reference, cost.routing_saved) == ("sonnet", cost.cost, 0.0)


def test_without_a_reference_routing_is_not_measured():
    (cost,) = price_rows([row(requested_model="gpt-5")], PRICES)
    assert (cost.reference, cost.reference_model, cost.routing_saved) == (None, None, None)


def test_the_reference_reads_and_writes_the_same_cache_tokens_where_the_provider_reported_them():
    prices = Prices({"local": LOCAL}, reference_name="opus", reference=OPUS)
    (cost,) = price_rows([row(model="local", cached_tokens=6_000, cache_write_tokens=3_000)], prices)
    assert cost.reference == pytest.approx(dollars(10_000, 6_000, 3_000, 500, OPUS))
    assert cost.routing_saved == cost.reference


def test_without_cache_figures_the_reference_is_assumed_to_cache_the_sessions_previous_prompt_while_warm():
    prices = Prices({"local": LOCAL}, reference_name="opus", reference=OPUS)
    rows = [row(0, model="local", prompt_tokens=10_000), row(60, model="local", prompt_tokens=12_000), row(1_000, model="local", prompt_tokens=13_000)]
    first, warm, cold = price_rows(rows, prices)
    assert first.reference == pytest.approx(dollars(10_000, 0, 10_000, 500, OPUS))  # all written: opus prices writes
    assert warm.reference == pytest.approx(dollars(12_000, 10_000, 2_000, 500, OPUS))
    assert cold.reference == pytest.approx(dollars(13_000, 0, 13_000, 500, OPUS))


def test_a_row_cost_says_its_savings():
    assert RowCost(1.0, 1.5, 3.0, "opus").pinch_saved == 0.5
    assert RowCost(1.0, 1.5, 3.0, "opus").routing_saved == 2.0
    assert (UNPRICED.pinch_saved, UNPRICED.routing_saved) == (0.0, None)


def test_the_longest_cache_lifetime_bounds_how_far_back_a_window_reads():
    prices = Prices({"a": ModelPrice(cache_lifetime_seconds=300)}, {"b": ModelPrice(cache_lifetime_seconds=3_600)})
    assert prices.longest_lifetime == 3_600
