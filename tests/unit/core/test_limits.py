"""Limits per client key (issue #45), the pure core: windows, the estimate a request holds, what an
answer is charged, the verdict and its Retry-After, and the in-process counters."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from router.config import ConfigError, parse_config
from router.core.limits import (
    IN_FLIGHT_RETRY_SECONDS,
    NANO_USD,
    NO_LIMITS,
    Amount,
    KeyLimits,
    LimitCounters,
    Offer,
    nano_usd,
    Refused,
    Spent,
    answer_charge,
    charge,
    estimate,
    verdict,
    windows_at,
)
from router.core.pricing import ModelPrice
from router.core.results import UpstreamResult, Usage
from tests.support.config import model_entry


def at(text: str) -> float:
    """A moment in UTC, from ``2025-03-31T23:59:30``."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


NOON = at("2025-03-14T12:00:00")


def test_windows_are_the_utc_minute_day_and_calendar_month_with_the_seconds_left_in_each():
    late = windows_at(at("2025-03-31T23:59:30"))
    assert (late.minute_left, late.day_left, late.month_left) == (30, 30, 30)
    after = windows_at(at("2025-04-01T00:00:00"))
    assert (after.minute, after.day, after.month) == (late.minute + 1, late.day + 1, late.month + 1)
    assert after.month_left == 30 * 86_400  # April
    december = windows_at(at("2025-12-31T12:00:00"))
    assert december.month_left == 12 * 3600 and windows_at(at("2026-01-01T00:00:00")).month == december.month + 1


def test_the_month_is_the_calendars_every_day_of_two_centuries():
    wrong = []
    for day in range(200 * 366):
        now = day * 86_400 + 43_210.5
        moment = datetime.fromtimestamp(now, UTC)
        following = datetime(moment.year + (moment.month == 12), moment.month % 12 + 1, 1, tzinfo=UTC)
        windows = windows_at(now)
        if (windows.month, windows.month_left) != (moment.year * 12 + moment.month - 1, following.timestamp() - now):
            wrong.append(moment.date())
    assert wrong == []


def test_a_price_is_the_dashboards_counted_in_nano_dollars_rounded_up():
    price = ModelPrice(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
    assert nano_usd(price, 1_000_000, 0) == 3 * NANO_USD
    assert nano_usd(price, 1000, 100) == (3000 + 1500) * 1000  # $0.0045
    assert nano_usd(price, 1000, 0, cached=800, written=100) == round((100 * 3 + 800 * 0.3 + 100 * 3.75) * 1000)
    assert nano_usd(ModelPrice(1.0, 2.0), 50, 50) == 150_000  # not 150,001: floating point's last bits are not a charge
    assert nano_usd(ModelPrice(0.1, 0), 1, 0) == 100  # a tenth of a micro-dollar is still counted
    assert nano_usd(ModelPrice(), 10**6, 10**6) == 0


def test_the_hold_is_the_prompt_and_the_largest_output_limit_at_the_dearest_candidate_and_cache_price():
    cheap, dear = Offer(4000, ModelPrice(0.1, 0.4)), Offer(1000, ModelPrice(3, 15, cache_write=3.75))
    held = estimate(2000, [cheap, dear])
    assert held.tokens == 2000 + 4000
    assert held.nano_usd == nano_usd(dear.price, 2000, 1000, written=2000)  # the whole prompt written to the cache
    assert estimate(100, []) == Amount(100, 0)


PRICE = ModelPrice(1.0, 2.0, cache_read=0.1, cache_write=1.25)


@pytest.mark.parametrize(
    ("reported", "ended", "tokens", "nano"),
    [
        (Usage(900, 50, 950), True, 950, nano_usd(PRICE, 900, 50)),  # what the upstream reported
        (Usage(900, 50, 950, cached_tokens=600, cache_write_tokens=200), True, 950, nano_usd(PRICE, 900, 50, 600, 200)),
        (Usage(900, 50, 950), False, 900 + 1000, nano_usd(PRICE, 900, 1000)),  # the answer did not end: the output limit
        (Usage(900, None, None), True, 900 + 1000, nano_usd(PRICE, 900, 1000)),
        (None, True, 1200 + 1000, nano_usd(PRICE, 1200, 1000, written=1200)),  # nothing reported: the estimate, at its dearest
    ],
)
def test_an_answer_is_charged_what_its_upstream_reported_and_the_estimate_for_the_rest(reported, ended, tokens, nano):
    assert charge(Offer(1000, PRICE), 1200, reported, ended) == Amount(tokens, nano)


def answered(status: int | None = 200, usage: Usage | None = None, model: str | None = "main") -> UpstreamResult:
    return UpstreamResult(model=model, status=status, usage=usage)


@pytest.mark.parametrize(
    ("result", "ended", "charged_tokens"),
    [
        (None, False, 0),  # no attempt at all
        (answered(model=None, status=None), False, 0),  # no model began to answer
        (answered(status=429), True, 0),  # the provider's refusal, relayed
        (answered(usage=Usage(900, 50, 950)), True, 950),
        (answered(usage=Usage(900, 50, 950)), False, 900 + 1000),  # the client left: the output so far says nothing
        (answered(usage=None), True, 1200 + 1000),
    ],
)
def test_a_request_is_charged_only_once_a_model_began_to_answer_it(result, ended, charged_tokens):
    assert answer_charge(result, {"main": Offer(1000, ModelPrice())}, 1200, ended).tokens == charged_tokens


def test_a_request_is_admitted_while_charges_and_holds_stay_below_the_limit():
    limits = KeyLimits(tokens_per_minute=1000)
    windows = windows_at(NOON + 20)
    assert verdict(limits, Spent(tokens=600, held_tokens=399), windows) is None
    refused = verdict(limits, Spent(tokens=600, held_tokens=400), windows)
    assert refused == Refused("tokens_per_minute", 1000, 600, 400, IN_FLIGHT_RETRY_SECONDS)  # requests in flight hold the rest
    assert verdict(limits, Spent(tokens=1000), windows) == Refused("tokens_per_minute", 1000, 1000, 0, 40)  # spent: until the minute ends
    assert verdict(NO_LIMITS, Spent(10**9, 10**9, 10**18, 10**18), windows) is None


def test_with_several_limits_reached_the_verdict_is_the_one_that_lasts_longest():
    limits = KeyLimits(requests_per_minute=2, usd_per_day=1.0)
    spent = Spent(requests=2, usd_day=NANO_USD)
    refused = verdict(limits, spent, windows_at(at("2025-03-14T22:00:00")))
    assert refused is not None and refused.limit == "usd_per_day" and refused.retry_after == 2 * 3600


def test_the_message_names_the_key_and_the_limit_and_never_more_than_it_needs():
    refused = Refused("usd_per_day", 5 * NANO_USD, 5 * NANO_USD + 20_000_000, 300_000_000, 3600)
    assert refused.message("alice") == "key 'alice' is over its limit usd_per_day (5.00 USD): 5.02 USD used today (UTC), 0.30 USD held by requests in flight; retry in 3600 s"
    assert Refused("requests_per_minute", 10, 10, 0, 7).message("ci") == "key 'ci' is over its limit requests_per_minute (10 requests): 10 requests used this minute; retry in 7 s"


def test_concurrent_reservations_against_a_budget_for_ten_admit_ten():
    counters = LimitCounters()
    hold = Amount(tokens=500, nano_usd=0)
    admitted = [counters.reserve("alice", KeyLimits(tokens_per_minute=5000), hold, NOON) is None for _ in range(50)]
    assert admitted.count(True) == 10 and admitted[:10] == [True] * 10


def test_settling_gives_back_the_hold_and_charges_what_was_used_in_the_window_it_ends_in():
    counters, limits = LimitCounters(), KeyLimits(tokens_per_minute=1000, usd_per_day=1.0)
    hold = Amount(800, NANO_USD // 2)
    assert counters.reserve("alice", limits, hold, NOON) is None
    assert counters.spent("alice", NOON) == Spent(requests=1, held_tokens=800, held_usd=NANO_USD // 2)
    counters.settle("alice", hold, Amount(300, NANO_USD // 10), NOON + 70)  # ended in the next minute
    assert counters.spent("alice", NOON + 70) == Spent(requests=0, tokens=300, usd_day=NANO_USD // 10, usd_month=NANO_USD // 10)
    assert counters.spent("bob", NOON) == Spent()  # each key its own


def test_a_key_without_limits_is_counted_when_its_answer_ends():
    counters = LimitCounters()
    counters.settle("ci", Amount(), Amount(120, 5), NOON, count_request=True)
    assert counters.spent("ci", NOON) == Spent(requests=1, tokens=120, usd_day=5, usd_month=5)


def test_a_release_of_a_hold_made_elsewhere_never_takes_back_more_than_is_held_here():
    counters = LimitCounters()
    counters.reserve("alice", KeyLimits(tokens_per_minute=10), Amount(5, 5), NOON)
    counters.settle("alice", Amount(50, 50), Amount(), NOON)
    assert counters.spent("alice", NOON).held_tokens == 0


def test_a_day_and_a_month_start_from_nothing():
    counters = LimitCounters()
    counters.settle("alice", Amount(), Amount(10, 7), at("2025-03-31T23:59:59"))
    assert counters.spent("alice", at("2025-04-01T00:00:01")) == Spent()


def config_with_limits(limits: object):
    raw = {
        "middlewares": ["capability-gate", "upstream-forward"],
        "providers": {"mock": {"base_url": "http://127.0.0.1:9/v1"}},
        "models": [model_entry("main")],
        "server": {"api_keys": ["plain-key-123", {"name": "alice", "key": "k-alice", "limits": limits}]},
    }
    return parse_config(raw, {})


def test_a_key_objects_limits_load_and_a_plain_key_has_none():
    config = config_with_limits({"requests_per_minute": 30, "tokens_per_minute": 200_000, "usd_per_day": 5, "usd_per_month": 50.5})
    limits = config.server.key_limits()
    assert limits["alice"] == KeyLimits(30, 200_000, 5.0, 50.5)
    assert [name for name, l in limits.items() if not l.limited] == [next(iter(limits))]  # the plain key


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"requests_per_minute": 0}, "server.api_keys[1].limits.requests_per_minute: Input should be greater than 0"),
        ({"usd_per_day": -1}, "server.api_keys[1].limits.usd_per_day: Input should be greater than 0"),
        ({"tokens_per_hour": 5}, "server.api_keys[1].limits.tokens_per_hour: Extra inputs are not permitted"),
        ({"tokens_per_minute": 1.5}, "server.api_keys[1].limits.tokens_per_minute: Input should be a valid integer"),
    ],
)
def test_a_limit_that_cannot_be_is_refused_at_load_naming_it(limits, message):
    with pytest.raises(ConfigError) as info:
        config_with_limits(limits)
    assert message in str(info.value)
