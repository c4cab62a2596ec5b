"""Limits per client key (issue #45): the windows, the reserve-then-charge arithmetic, the verdict. Pure.

A key object in ``server.api_keys`` may carry limits (docs/keys.md): requests and tokens per minute,
dollars per day and per month, priced from the models' ``cost_per_mtok`` as the dashboard prices a
row (:mod:`router.core.pricing`: the prompt's cached and written parts at their own prices). Every counter is an
integer (Redis adds integers atomically): requests, tokens, and dollars in nano-dollars.

**Windows** are fixed and in UTC: the minute, the day, the calendar month. A window's counts start
at 0 when it starts; a request's usage counts in the windows current when its answer ends.

**Reserve, then charge.** A request is admitted while what its key was charged in a window plus
what its requests in flight hold stays *below* the limit. Admitted, it holds its estimate (the
prompt's tokens plus the output limit sent, priced at the dearest candidate it may be sent to) and,
for ``requests_per_minute``, counts at once. When its answer ends the hold is dropped and what the
upstream reported is charged (the estimate for what it did not report). Each admitted request is
counted before the next is looked at, so concurrent requests overshoot a limit by one request's
estimate at most: against a budget that allows ten, fifty at once get ten or eleven served.

**The verdict** of a refused request names the limit and says when to retry: when the window's
charges alone reach the limit, when that window ends; when requests in flight hold the rest, in a
few seconds (:data:`IN_FLIGHT_RETRY_SECONDS`), as their answers end and give back what they did
not use. With several limits reached, the one that lasts longest.

:class:`LimitCounters` keeps the counts in one process (``state.backend: memory``, and the fallback
of Redis); :mod:`router.state.limiter` keeps the same counts on Redis for every worker and replica.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from router.core.errors import ApiError
from router.core.frozen import frozen
from router.core.pricing import ModelPrice
from router.core.results import UpstreamResult, Usage

NANO_USD = 1_000_000_000  # nano-dollars in a dollar: dollars are counted in whole nano-dollars
LIMIT_NAMES = ("requests_per_minute", "tokens_per_minute", "usd_per_day", "usd_per_month")
# A request refused because requests in flight hold the rest of a budget: their answers end soon
# and give back what they did not use.
IN_FLIGHT_RETRY_SECONDS = 5
MINUTE, DAY = 60, 86_400
# A wait longer than this outlasts a client's own retries: the answer tells it not to (x-should-retry).
LONGEST_RETRIED_SECONDS = 60


@frozen
class KeyLimits:
    """The limits of one client key (``server.api_keys[].limits``); None: no such limit."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    usd_per_day: float | None = None
    usd_per_month: float | None = None

    @property
    def limited(self) -> bool:
        return any(limit is not None for limit in self.ceilings())

    def ceilings(self) -> tuple[int | None, int | None, int | None, int | None]:
        """The four limits as the counters count (dollars in nano-dollars), in :data:`LIMIT_NAMES`' order."""
        return (self.requests_per_minute, self.tokens_per_minute, _nano(self.usd_per_day), _nano(self.usd_per_month))


NO_LIMITS = KeyLimits()


def nano_usd(price: ModelPrice, prompt: int, completion: int, cached: int = 0, written: int = 0) -> int:
    """What tokens cost at ``price`` (a model's ``cost_per_mtok``, as the dashboard prices a row:
    :class:`~router.core.pricing.ModelPrice`), in whole nano-dollars, rounded up — but for the last
    bits of floating point (0.00015 dollars is 150,000.00000000003 nano-dollars)."""
    return math.ceil(price.cost(prompt, cached, written, completion) * NANO_USD - 1e-6)


def dearest_prompt(price: ModelPrice, prompt: int, completion: int) -> int:
    """The most ``prompt`` and ``completion`` tokens may cost at ``price``, whatever the provider's cache
    does with the prompt (all of it read, written, or neither)."""
    return max(nano_usd(price, prompt, completion, cached, written) for cached, written in ((0, 0), (prompt, 0), (0, prompt)))


@frozen
class Amount:
    """Tokens and their price (nano-dollars): what a request holds, or is charged."""

    tokens: int = 0
    nano_usd: int = 0


NOTHING = Amount()


@frozen
class Offer:
    """Where a request may go: a candidate's output limit and price (its first, most likely, and the others)."""

    output_tokens: int
    price: ModelPrice


def estimate(prompt_tokens: int, offers: Iterable[Offer]) -> Amount:
    """What a request holds while it runs: its prompt and the largest output limit it may be sent, in
    tokens; the dearest of its candidates' prices for them (and of their cache prices), in nano-dollars."""
    offers = tuple(offers)
    output = max((o.output_tokens for o in offers), default=0)
    cost = max((dearest_prompt(o.price, prompt_tokens, o.output_tokens) for o in offers), default=0)
    return Amount(prompt_tokens + output, cost)


def charge(offer: Offer, prompt_tokens: int, reported: Usage | None, ended: bool) -> Amount:
    """What an answer from ``offer`` costs: the figures the upstream ``reported`` (the prompt's cached
    and written parts at their prices); for one it did not, the estimate — the prompt as measured, at
    the dearest of its prices, and the whole output limit. The output of an answer that did not end
    (``ended`` false: the client left, the stream broke) is always the estimate: its count so far
    says nothing of what the provider bills."""
    completion = reported.completion_tokens if reported is not None and ended else None
    if completion is None:
        completion = offer.output_tokens
    if reported is None or reported.prompt_tokens is None:
        return Amount(prompt_tokens + completion, dearest_prompt(offer.price, prompt_tokens, completion))
    prompt = reported.prompt_tokens
    return Amount(prompt + completion, nano_usd(offer.price, prompt, completion, reported.cached_tokens or 0, reported.cache_write_tokens or 0))


def answer_charge(result: UpstreamResult | None, offers: Mapping[str, Offer], prompt_tokens: int, ended: bool) -> Amount:
    """What a request is charged (its upstream's ``result``; ``offers`` by model; ``ended``: the answer
    reached its client whole): nothing unless a model began to answer it; else :func:`charge`."""
    if result is None or result.model is None or result.status is None or result.status >= 400 or result.model not in offers:
        return NOTHING
    return charge(offers[result.model], prompt_tokens, result.usage, ended)


@frozen
class Windows:
    """The windows ``now`` falls in (their ids) and the seconds until each ends."""

    minute: int
    day: int
    month: int  # year * 12 + month - 1
    minute_left: float
    day_left: float
    month_left: float


def windows_at(now: float) -> Windows:
    """The UTC minute, day and calendar month of ``now`` (seconds since the epoch)."""
    day = int(now // DAY)
    year, month = _year_and_month(day)
    following = (year + 1, 1) if month == 12 else (year, month + 1)
    return Windows(
        minute=int(now // MINUTE),
        day=day,
        month=year * 12 + month - 1,
        minute_left=MINUTE - now % MINUTE,
        day_left=DAY - now % DAY,
        month_left=_first_day(*following) * DAY - now,
    )


# The proleptic Gregorian calendar in days since 1970-01-01, without a clock or a time library
# (Howard Hinnant's civil_from_days and days_from_civil).
def _year_and_month(days: int) -> tuple[int, int]:
    shifted = days + 719_468
    era = shifted // 146_097
    of_era = shifted - era * 146_097
    year_of_era = (of_era - of_era // 1460 + of_era // 36_524 - of_era // 146_096) // 365
    of_year = of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted_month = (5 * of_year + 2) // 153  # March is 0
    month = shifted_month + 3 if shifted_month < 10 else shifted_month - 9
    return year_of_era + era * 400 + (month <= 2), month


def _first_day(year: int, month: int) -> int:
    """The days since 1970-01-01 of the first of ``month``."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5
    return era * 146_097 + year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + of_year - 719_468


@frozen
class Spent:
    """What a key was charged in the windows of a moment, and what its requests in flight hold."""

    requests: int = 0  # this minute
    tokens: int = 0  # this minute
    usd_day: int = 0  # nano-dollars, today
    usd_month: int = 0  # nano-dollars, this month
    held_tokens: int = 0
    held_usd: int = 0

    def against(self) -> tuple[tuple[int, int], ...]:
        """(charged, held) for each limit, in :data:`LIMIT_NAMES`' order."""
        return ((self.requests, 0), (self.tokens, self.held_tokens), (self.usd_day, self.held_usd), (self.usd_month, self.held_usd))


@frozen
class Refused:
    """A request over one of its key's limits: which, its ceiling, the window's charges and holds, and
    the whole seconds after which to retry."""

    limit: str
    ceiling: int
    charged: int
    held: int
    retry_after: int

    def message(self, key_name: str) -> str:
        """What the client is told: the key's name and the limit, never the key."""
        window = {"requests_per_minute": "this minute", "tokens_per_minute": "this minute", "usd_per_day": "today (UTC)", "usd_per_month": "this month (UTC)"}[self.limit]
        held = f", {_shown(self.limit, self.held)} held by requests in flight" if self.held else ""
        return (
            f"key {key_name!r} is over its limit {self.limit} ({_shown(self.limit, self.ceiling)}): "
            f"{_shown(self.limit, self.charged)} used {window}{held}; retry in {self.retry_after} s"
        )

    def error(self, key_name: str) -> tuple[ApiError, dict[str, str]]:
        """The 429 the client gets (in its own format), and its headers: ``Retry-After``, and, for a wait
        its SDK's retries would not outlast (a day's budget), ``x-should-retry: false``, which the
        OpenAI and Anthropic SDKs honour instead of retrying at once into the same refusal."""
        headers = {"Retry-After": str(self.retry_after)}
        if self.retry_after > LONGEST_RETRIED_SECONDS:
            headers["x-should-retry"] = "false"
        return ApiError(429, self.message(key_name), "rate_limit_error", "key_limit_exceeded"), headers


def verdict(limits: KeyLimits, spent: Spent, windows: Windows) -> Refused | None:
    """None when a request may start now; else the limit it is over (with several, the longest to wait)."""
    refused: Refused | None = None
    lefts = (windows.minute_left, windows.minute_left, windows.day_left, windows.month_left)
    for name, ceiling, (charged, held), left in zip(LIMIT_NAMES, limits.ceilings(), spent.against(), lefts, strict=True):
        if ceiling is None or charged + held < ceiling:
            continue
        wait = left if charged >= ceiling else min(left, IN_FLIGHT_RETRY_SECONDS)
        seconds = max(1, math.ceil(wait))
        if refused is None or seconds > refused.retry_after:
            refused = Refused(name, ceiling, charged, held, seconds)
    return refused


def usage_report(limits: KeyLimits, spent: Spent) -> dict[str, dict[str, float | None]]:
    """A key's limits (None: none), what it used in each of their windows, and what its requests in
    flight hold — as ``GET /v1/keys`` and ``pinch-router keys`` show them (dollars as dollars)."""
    configured = (limits.requests_per_minute, limits.tokens_per_minute, limits.usd_per_day, limits.usd_per_month)
    used = (spent.requests, spent.tokens, spent.usd_day / NANO_USD, spent.usd_month / NANO_USD)
    return {
        "limits": dict(zip(LIMIT_NAMES, configured, strict=True)),
        "used": dict(zip(LIMIT_NAMES, used, strict=True)),
        "held": {"tokens": spent.held_tokens, "usd": spent.held_usd / NANO_USD},
    }


@dataclass(slots=True)
class _KeyCounts:
    minute: int = -1
    requests: int = 0
    tokens: int = 0
    day: int = -1
    usd_day: int = 0
    month: int = -1
    usd_month: int = 0
    held_tokens: int = 0
    held_usd: int = 0

    def roll(self, windows: Windows) -> None:
        """Start the windows that began since the last count."""
        if self.minute != windows.minute:
            self.minute, self.requests, self.tokens = windows.minute, 0, 0
        if self.day != windows.day:
            self.day, self.usd_day = windows.day, 0
        if self.month != windows.month:
            self.month, self.usd_month = windows.month, 0


class LimitCounters:
    """The counts of every key in one process. Bounded: the caller counts configured keys only."""

    def __init__(self) -> None:
        self._keys: dict[str, _KeyCounts] = {}

    def _counts(self, name: str, now: float) -> tuple[_KeyCounts, Windows]:
        counts = self._keys.get(name)
        if counts is None:
            counts = self._keys[name] = _KeyCounts()
        windows = windows_at(now)
        counts.roll(windows)
        return counts, windows

    def spent(self, name: str, now: float) -> Spent:
        counts, _ = self._counts(name, now)
        return Spent(counts.requests, counts.tokens, counts.usd_day, counts.usd_month, counts.held_tokens, counts.held_usd)

    def reserve(self, name: str, limits: KeyLimits, hold: Amount, now: float) -> Refused | None:
        """Admit a request (it counts, and holds ``hold``) or say which limit it is over."""
        counts, windows = self._counts(name, now)
        spent = Spent(counts.requests, counts.tokens, counts.usd_day, counts.usd_month, counts.held_tokens, counts.held_usd)
        refused = verdict(limits, spent, windows)
        if refused is None:
            counts.requests += 1
            counts.held_tokens += hold.tokens
            counts.held_usd += hold.nano_usd
        return refused

    def settle(self, name: str, release: Amount, charged: Amount, now: float, *, count_request: bool = False) -> None:
        """A request's answer ended: drop what it held here (``release``; nothing when it held
        elsewhere), charge ``charged``, and count it when it was not counted at its start."""
        counts, _ = self._counts(name, now)
        counts.held_tokens = max(0, counts.held_tokens - release.tokens)
        counts.held_usd = max(0, counts.held_usd - release.nano_usd)
        counts.tokens += charged.tokens
        counts.usd_day += charged.nano_usd
        counts.usd_month += charged.nano_usd
        counts.requests += count_request


def _nano(usd: float | None) -> int | None:
    return None if usd is None else math.ceil(usd * NANO_USD)


def _shown(limit: str, value: int) -> str:
    if limit.startswith("usd_"):
        return f"{value / NANO_USD:.2f} USD" if value >= NANO_USD // 100 or value == 0 else f"{value / NANO_USD:.6f} USD"
    return f"{value} {'requests' if limit == 'requests_per_minute' else 'tokens'}"
