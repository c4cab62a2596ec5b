"""The counters of the client keys' limits (issue #45): in this process, or on Redis for every worker and replica.

The arithmetic — windows, holds, charges, the verdict — is :mod:`router.core.limits`'; this module
keeps the counts. With ``state.backend: memory`` they are this process's (:class:`LimitCounters`;
each worker of ``serve --workers N`` its own). With ``state.backend: redis`` they are global: one
Lua script admits a request atomically (reads its key's counts, decides, counts it and records its
hold), another settles it; each key's counts are

* ``<namespace>:limits:v1:<name>:m:<minute>`` — a hash {requests, tokens}, kept two minutes;
* ``<namespace>:limits:v1:<name>:d:<day>`` and ``…:mo:<month>`` — nano-dollars charged, kept until the window ends;
* ``<namespace>:limits:v1:<name>:held`` — a sorted set of the holds of requests in flight
  (``<request id>|<tokens>|<nano-dollars>``), each scored by when it lapses: :data:`HOLD_SECONDS`
  after it was made, so a process that died mid-request holds nothing for longer.

Redis is reached through the session store's breaker (:meth:`ResilientStore.call`): each call bounded
by ``state.redis.timeout_ms``, and while Redis is down every call goes to this process's counters at
once — limits are per process until Redis answers again, and no request fails because of it. A hold
is given back where it was made; the charge goes where the counts are kept at the time.

A request's answer ends, it is settled without being waited for (a task on Redis): the client has
its answer; the next request of the same key sees the hold until the charge has replaced it, which
only errs on the side of the limit.

**Admitted ahead.** On Redis the settling script also admits the key's *next* request, as the
admission script would (same atomic check, same count), holding the request's estimate and a
quarter more (:data:`AHEAD_MARGIN`: an agent's prompt grows each turn). That next request, when it
comes to this process in the same UTC minute and its own estimate fits in that hold, starts without
a round trip to Redis: one script call a request, and none waited for. A request admitted ahead is a
hold like any other (a ``…|ahead`` member of the sorted set), so every other process's admissions
count it: the budget is never overshot by more than before. Unused, it is given back at the end of
its minute (or when the next request does not fit, or at shutdown), its request uncounted when its
minute is still the current one; a process that died leaves it to lapse like any hold. What
``pinch-router keys`` shows as held by requests in flight leaves them out.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from redis.asyncio import Redis

from router.core.limits import (
    IN_FLIGHT_RETRY_SECONDS,
    LIMIT_NAMES,
    NOTHING,
    Amount,
    KeyLimits,
    LimitCounters,
    Refused,
    Spent,
    Windows,
    verdict,
    windows_at,
)
from router.state.session_store import ResilientStore

log = logging.getLogger("pinch_router.limits")

HOLD_SECONDS = 900  # a hold on Redis lapses this long after it was made (a process that died holds nothing longer)
MINUTE_KEY_MS = 120_000
WINDOW_MARGIN_MS = 3_600_000  # a day's or a month's count is kept this long past its end (clocks differ a little)
SETTLE_WAIT_SECONDS = 2.0  # at shutdown, how long the charges still on their way to Redis are waited for
# A request admitted ahead holds its predecessor's estimate and this much more: the next turn of an
# agent's session sends a slightly longer prompt, and has to fit in the hold to start without Redis.
AHEAD_MARGIN = 1.25
AHEAD_SUFFIX = "|ahead"  # the end of a request admitted ahead's member in the sorted set of holds

# The counts of one key and the holds that have not lapsed (KEYS: the minute's hash, the day's and
# the month's counts, the sorted set of holds); with ``apply``, admit the request when each ceiling
# is above its charges and holds (the comparison of router.core.limits.verdict): record its hold,
# and count it when ``count``. Returns {admitted, requests, tokens, usd_day, usd_month, held_tokens,
# held_usd, and of these what requests admitted ahead hold: their count in this minute (a member
# ending in ``|ahead@<minute>``), tokens, nano-dollars}.
_ADMIT_FUNCTION = """
local function admit(now, lapses, hold, apply, count, ceilings, minute_ms, hold_ms)
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  local counted_now = '|ahead@' .. string.match(KEYS[1], ':m:(%d+)$')
  local held_tokens, held_usd, ahead_tokens, ahead_usd, ahead_requests = 0, 0, 0, 0, 0
  for _, held in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
    local figures, ahead = string.match(held, '^(.*)(|ahead@?%d*)$')
    local tokens, usd = string.match(figures or held, '|(%d+)|(%d+)$')
    tokens, usd = tonumber(tokens) or 0, tonumber(usd) or 0
    held_tokens, held_usd = held_tokens + tokens, held_usd + usd
    if ahead then
      ahead_tokens, ahead_usd = ahead_tokens + tokens, ahead_usd + usd
      if ahead == counted_now then ahead_requests = ahead_requests + 1 end
    end
  end
  local minute = redis.call('HMGET', KEYS[1], 'requests', 'tokens')
  local requests, tokens = tonumber(minute[1]) or 0, tonumber(minute[2]) or 0
  local day, month = tonumber(redis.call('GET', KEYS[2])) or 0, tonumber(redis.call('GET', KEYS[3])) or 0
  local figures = {{requests, 0}, {tokens, held_tokens}, {day, held_usd}, {month, held_usd}}
  local admitted = 1
  for i = 1, 4 do
    local ceiling = tonumber(ceilings[i])
    if ceiling and figures[i][1] + figures[i][2] >= ceiling then admitted = 0 end
  end
  if apply and admitted == 1 then
    if count then
      redis.call('HINCRBY', KEYS[1], 'requests', 1)
      redis.call('PEXPIRE', KEYS[1], minute_ms)
    end
    if hold ~= '' then
      redis.call('ZADD', KEYS[4], lapses, hold)
      redis.call('PEXPIRE', KEYS[4], hold_ms)
    end
  end
  return {admitted, requests, tokens, day, month, held_tokens, held_usd, ahead_requests, ahead_tokens, ahead_usd}
end
"""

# ARGV: now, when the hold lapses, the hold ('' for none), '1' to admit ('0': only read), the four
# ceilings ('' for none), the minute's and the holds' expiry (ms); first, ARGV[11] (not '') is the
# hold of a request admitted ahead that this one did not fit in: dropped, and uncounted when ARGV[12]
# is '-1'. An admitted request is counted.
ADMIT = _ADMIT_FUNCTION + """
if ARGV[11] ~= '' then redis.call('ZREM', KEYS[4], ARGV[11]) end
if ARGV[12] == '-1' then redis.call('HINCRBY', KEYS[1], 'requests', -1) end
return admit(ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1', true, {ARGV[5], ARGV[6], ARGV[7], ARGV[8]}, ARGV[9], ARGV[10])
"""

# A request's answer ended: drop its hold (ARGV[1], '' when it held nothing here), count it (ARGV[2]:
# 1 when it was not counted at admission, -1 to uncount a request admitted ahead and never used),
# charge its tokens (ARGV[3]) and nano-dollars (ARGV[4]); expiries ARGV[5..7]. Then, with ARGV[8] a
# hold, admit the key's next request ahead: ARGV[9] now, ARGV[10] when it lapses, ARGV[11] '1' to
# count it, ARGV[12..15] the ceilings, ARGV[16] the holds' expiry. Returns whether it was admitted.
SETTLE = _ADMIT_FUNCTION + """
if ARGV[1] ~= '' then redis.call('ZREM', KEYS[4], ARGV[1]) end
if ARGV[2] ~= '0' then redis.call('HINCRBY', KEYS[1], 'requests', ARGV[2]) end
if ARGV[3] ~= '0' then redis.call('HINCRBY', KEYS[1], 'tokens', ARGV[3]) end
if ARGV[2] ~= '0' or ARGV[3] ~= '0' then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
if ARGV[4] ~= '0' then
  redis.call('INCRBY', KEYS[2], ARGV[4])
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
  redis.call('INCRBY', KEYS[3], ARGV[4])
  redis.call('PEXPIRE', KEYS[3], ARGV[7])
end
if ARGV[8] == '' then return 0 end
return admit(ARGV[9], ARGV[10], ARGV[8], true, ARGV[11] == '1', {ARGV[12], ARGV[13], ARGV[14], ARGV[15]}, ARGV[5], ARGV[16])[1]
"""


@dataclass(frozen=True, slots=True)
class Hold:
    """An admitted request: its key, what it holds, where (``on_redis``), under which member, and
    whether it was counted as a request when admitted (a key with limits) or is when it ends.
    ``ahead``: admitted ahead of it, by the settling of the key's previous request on Redis (counted
    in the minute ``minute``, with ``counted``); ``asked``: then, the request's own estimate."""

    name: str
    amount: Amount
    member: str
    on_redis: bool = False
    counted: bool = False
    ahead: bool = False
    minute: int = -1
    asked: Amount | None = None

    @property
    def entry(self) -> str:
        """The hold as the sorted set on Redis keeps it: the member, and what it holds, which the
        scripts add up; a request admitted ahead ends in :data:`AHEAD_SUFFIX`, and ``@<minute>`` when
        it was counted (what ``keys`` leaves out of the minute's requests until it is taken)."""
        ahead = (AHEAD_SUFFIX + (f"@{self.minute}" if self.counted else "")) if self.ahead else ""
        return f"{self.member}|{self.amount.tokens}|{self.amount.nano_usd}{ahead}"


@dataclass(frozen=True, slots=True)
class AheadAsk:
    """What the settling of a request on Redis asks for its key's next request: this hold, on these limits."""

    hold: Hold
    limits: KeyLimits


class RedisLimits:
    """The counts on Redis, one script call each; errors and timeouts are the caller's to handle."""

    def __init__(self, client: Redis, namespace: str) -> None:
        self.namespace = namespace
        self._admit = client.register_script(ADMIT)
        self._settle = client.register_script(SETTLE)

    def _keys(self, name: str, windows: Windows) -> list[str]:
        prefix = f"{self.namespace}:limits:v1:{name}"
        return [f"{prefix}:m:{windows.minute}", f"{prefix}:d:{windows.day}", f"{prefix}:mo:{windows.month}", f"{prefix}:held"]

    async def admit(self, name: str, limits: KeyLimits | None, hold: Hold | None, now: float, unused: Hold | None = None, uncount: int = 0) -> tuple[bool, Spent]:
        """Admit ``hold`` (with ``limits``) or read (None): whether it was admitted, and the counts it
        was judged on — read, what requests in flight hold, those admitted ahead left out. First drop
        ``unused``, a request admitted ahead that this one did not take (``uncount`` -1: uncount it)."""
        windows = windows_at(now)
        args = [_ms(now), _ms(now + HOLD_SECONDS), hold.entry if hold is not None else "", "1" if limits is not None else "0", *_ceilings(limits), MINUTE_KEY_MS, HOLD_SECONDS * 1000]
        args += [unused.entry if unused is not None else "", uncount]
        admitted, *figures, ahead_requests, ahead_tokens, ahead_usd = (int(f) for f in await self._admit(keys=self._keys(name, windows), args=args))
        spent = Spent(*figures)
        if limits is None:
            spent = dataclasses.replace(
                spent, requests=spent.requests - ahead_requests, held_tokens=spent.held_tokens - ahead_tokens, held_usd=spent.held_usd - ahead_usd
            )
        return bool(admitted), spent

    async def settle(self, name: str, hold: Hold | None, charged: Amount, count_request: int, now: float, ahead: AheadAsk | None = None) -> bool:
        """Drop ``hold`` (None: it holds nothing here), count the request (``count_request``: 1, or -1
        to uncount one admitted ahead and never used), charge ``charged``; then admit ``ahead``'s hold
        ahead of the key's next request. Whether it was admitted."""
        windows = windows_at(now)
        day_ms, month_ms = (math.ceil(left * 1000) + WINDOW_MARGIN_MS for left in (windows.day_left, windows.month_left))
        args: list[str | int] = [hold.entry if hold is not None else "", count_request, charged.tokens, charged.nano_usd, MINUTE_KEY_MS, day_ms, month_ms]
        if ahead is not None:
            args += [ahead.hold.entry, _ms(now), _ms(now + HOLD_SECONDS), "1" if ahead.hold.counted else "0", *_ceilings(ahead.limits), HOLD_SECONDS * 1000]
        else:
            args.append("")
        return bool(await self._settle(keys=self._keys(name, windows), args=args))


@dataclass(slots=True)
class _Ahead:
    """A request admitted ahead on Redis for a key, in this process: its hold (and the minute it was
    admitted in), and the timer that gives it back at that minute's end."""

    hold: Hold
    expiry: asyncio.TimerHandle


class KeyLimiter:
    """Admits a key's requests against its limits and settles them when their answers end.

    ``limits``: every configured key's by its name (only those are counted: the counts are bounded by
    the config). ``redis`` with ``store``: the counts on Redis, reached through ``store``'s breaker,
    this process's as fallback. ``on_charged(name, amount)`` and ``on_refused(name, limit)`` tell the
    metrics.
    """

    def __init__(
        self,
        limits: Mapping[str, KeyLimits],
        *,
        redis: RedisLimits | None = None,
        store: ResilientStore | None = None,
        clock: Callable[[], float] = time.time,
        on_charged: Callable[[str, Amount], None] = lambda name, amount: None,
        on_refused: Callable[[str, str], None] = lambda name, limit: None,
    ) -> None:
        self.limits = dict(limits)
        self.local = LimitCounters()
        self.redis, self.store = (redis, store) if redis is not None and store is not None else (None, None)
        self.clock = clock
        self.on_charged, self.on_refused = on_charged, on_refused
        self._settling: set[asyncio.Task[None]] = set()
        self._ahead: dict[str, _Ahead] = {}  # by key name: its next request, admitted ahead on Redis
        self._asking_ahead: dict[str, asyncio.Task[None]] = {}  # by key name: the settling that asks for it

    @property
    def shared(self) -> bool:
        """Whether the counts are Redis's (while it answers), not this process's."""
        return self.store is not None and self.store.up

    async def reserve(self, name: str, request_id: str, hold: Amount) -> Hold | Refused:
        """Admit a request of the key ``name`` holding ``hold``, or the limit it is over. A key without
        limits is admitted without a word to any counter (it is counted when its answer ends); on
        Redis, a request that fits in the one admitted ahead for its key takes it, without a round trip."""
        limits = self.limits.get(name)
        if limits is None or not limits.limited:
            return Hold(name, NOTHING, request_id)
        now = self.clock()
        if self.redis is None or self.store is None:
            result = self._reserve_here(name, limits, hold, request_id, now)
        else:
            taken, unused = await self._take_ahead(name, hold, now)
            if taken is not None:
                return taken
            redis, admitted = self.redis, Hold(name, hold, request_id, on_redis=True, counted=True)
            unused_hold, uncount = (unused.hold, self._uncount(unused, now)) if unused is not None else (None, 0)

            async def remote() -> Hold | Refused:
                accepted, spent = await redis.admit(name, limits, admitted, now, unused_hold, uncount)
                if accepted:
                    return admitted
                return verdict(limits, spent, windows_at(now)) or Refused(LIMIT_NAMES[0], 0, 0, 0, IN_FLIGHT_RETRY_SECONDS)

            async def here() -> Hold | Refused:
                return self._reserve_here(name, limits, hold, request_id, now)

            result = await self.store.call(remote, here)
        if isinstance(result, Refused):
            self.on_refused(name, result.limit)
        return result

    def _reserve_here(self, name: str, limits: KeyLimits, hold: Amount, request_id: str, now: float) -> Hold | Refused:
        refused = self.local.reserve(name, limits, hold, now)
        return refused if refused is not None else Hold(name, hold, request_id, counted=True)

    async def _take_ahead(self, name: str, asked: Amount, now: float) -> tuple[Hold | None, _Ahead | None]:
        """The request admitted ahead for ``name`` when ``asked`` fits in it, in the minute it was
        counted in: (its hold, None); else (None, the one not taken, to give back with the request's own
        admission — before it, or its own process's count could refuse it). A settling still asking for
        one is waited for (it is on its way: sooner than a round trip of our own)."""
        asking = self._asking_ahead.get(name)
        if asking is not None and self.store is not None:
            await asyncio.wait({asking}, timeout=self.store.timeout)  # not cancelled if this request is
        ahead = self._ahead.pop(name, None)
        if ahead is None:
            return None, None
        ahead.expiry.cancel()
        held = ahead.hold.amount
        if ahead.hold.minute == windows_at(now).minute and asked.tokens <= held.tokens and asked.nano_usd <= held.nano_usd and self.shared:
            return dataclasses.replace(ahead.hold, asked=asked), None
        return None, ahead

    @staticmethod
    def _uncount(ahead: _Ahead, now: float) -> int:
        """-1 when a request admitted ahead and given back was counted in the minute that is still current."""
        return -1 if ahead.hold.counted and windows_at(now).minute == ahead.hold.minute else 0

    def settle(self, hold: Hold, charged: Amount) -> None:
        """The request's answer ended (or it was left): give back its hold and charge ``charged``.
        Never waited for; never fails. On Redis, the same call admits the key's next request ahead."""
        name = hold.name
        limits = self.limits.get(name)
        if limits is None:
            return
        self.on_charged(name, charged)
        now = self.clock()
        count = int(not hold.counted)
        if not hold.on_redis and hold.amount != NOTHING:
            self.local.settle(name, hold.amount, NOTHING, now)  # held here: given back here
        if self.redis is None or self.store is None:
            self.local.settle(name, NOTHING, charged, now, count_request=bool(count))
            return
        redis, store, held = self.redis, self.store, hold if hold.on_redis and hold.amount != NOTHING else None
        minute = windows_at(now).minute
        ask = self._ahead_ask(name, limits, hold, minute)

        async def remote() -> None:
            if await redis.settle(name, held, charged, count, now, ask) and ask is not None:
                self._keep_ahead(ask.hold, now)

        async def here() -> None:
            self.local.settle(name, NOTHING, charged, now, count_request=bool(count))

        task = self._in_background(store.call(remote, here))
        if ask is not None:
            self._asking_ahead[name] = task
            task.add_done_callback(lambda _: self._asking_ahead.pop(name, None))

    def _ahead_ask(self, name: str, limits: KeyLimits, hold: Hold, minute: int) -> AheadAsk | None:
        """What to admit ahead of the key's next request when ``hold``'s is settled: its estimate and a
        margin, on the key's limits; None when the key has one already (or one on its way), none on
        Redis, or nothing to hold."""
        asked = hold.asked if hold.asked is not None else hold.amount
        if not limits.limited or not self.shared or asked == NOTHING or name in self._ahead or name in self._asking_ahead:
            return None
        amount = Amount(math.ceil(asked.tokens * AHEAD_MARGIN), math.ceil(asked.nano_usd * AHEAD_MARGIN))
        # counted as a request now when the key has a requests_per_minute to hold, else when it ends
        counted = limits.requests_per_minute is not None
        return AheadAsk(Hold(name, amount, secrets.token_hex(8), on_redis=True, counted=counted, ahead=True, minute=minute), limits)

    def _keep_ahead(self, hold: Hold, now: float) -> None:
        """Keep a request admitted ahead until its minute ends (one a key has already: give it back)."""
        expiry = asyncio.get_running_loop().call_later(windows_at(now).minute_left, self._expire, hold.name)
        ahead = _Ahead(hold, expiry)
        if hold.name in self._ahead:
            self._give_back(ahead)
            return
        self._ahead[hold.name] = ahead

    def _expire(self, name: str) -> None:
        ahead = self._ahead.pop(name, None)
        if ahead is not None:
            self._give_back(ahead)

    def _give_back(self, ahead: _Ahead) -> None:
        """Drop a request admitted ahead and never used: its hold, and its count while its minute lasts."""
        ahead.expiry.cancel()
        if self.redis is None or self.store is None:
            return
        now, redis, hold = self.clock(), self.redis, ahead.hold
        uncount = self._uncount(ahead, now)

        async def here() -> None:  # Redis does not answer: the hold lapses there on its own
            return None

        self._in_background(self.store.call(lambda: redis.settle(hold.name, hold, NOTHING, uncount, now), here))

    def _in_background(self, call: Awaitable[object]) -> asyncio.Task[None]:
        async def run() -> None:
            await call

        task = asyncio.get_running_loop().create_task(run(), name="limits-settle")
        self._settling.add(task)
        task.add_done_callback(self._settled)
        return task

    def _settled(self, task: asyncio.Task[None]) -> None:
        self._settling.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            log.warning("limits_settle_failed", extra={"detail": f"{type(error).__name__}: {error}"[:300]})

    async def spent(self, name: str) -> Spent:
        """What the key ``name`` was charged in the current windows, and what its requests in flight hold."""
        now = self.clock()
        if self.redis is None or self.store is None:
            return self.local.spent(name, now)
        redis = self.redis

        async def remote() -> Spent:
            return (await redis.admit(name, None, None, now))[1]

        async def here() -> Spent:
            return self.local.spent(name, now)

        return await self.store.call(remote, here)

    async def settled(self) -> None:
        """Wait (bounded) for the charges still on their way to Redis: in tests."""
        if self._settling:
            await asyncio.wait(list(self._settling), timeout=SETTLE_WAIT_SECONDS)

    async def close(self) -> None:
        """At shutdown: give back the requests admitted ahead, and wait (bounded) for the last charges."""
        if self._asking_ahead:
            await asyncio.wait(list(self._asking_ahead.values()), timeout=SETTLE_WAIT_SECONDS)
        for name in list(self._ahead):
            self._expire(name)
        await self.settled()


def _ceilings(limits: KeyLimits | None) -> list[str]:
    """The four ceilings as the scripts take them ('' for none)."""
    return ["" if c is None else str(c) for c in (limits.ceilings() if limits is not None else (None,) * 4)]


def _ms(seconds: float) -> int:
    return int(seconds * 1000)
