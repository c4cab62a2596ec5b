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
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping
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

# The counts of one key and the holds that have not lapsed; with ARGV[4] = "1", admit the request
# when each ceiling is above its charges and holds (the comparison of router.core.limits.verdict):
# count it and record its hold. Returns {admitted, requests, tokens, usd_day, usd_month, held_tokens, held_usd}.
ADMIT = """
local now, lapses, hold, apply = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
local held_tokens, held_usd = 0, 0
for _, held in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  local tokens, usd = string.match(held, '|(%d+)|(%d+)$')
  held_tokens = held_tokens + (tonumber(tokens) or 0)
  held_usd = held_usd + (tonumber(usd) or 0)
end
local minute = redis.call('HMGET', KEYS[1], 'requests', 'tokens')
local requests, tokens = tonumber(minute[1]) or 0, tonumber(minute[2]) or 0
local day, month = tonumber(redis.call('GET', KEYS[2])) or 0, tonumber(redis.call('GET', KEYS[3])) or 0
local figures = {{requests, 0}, {tokens, held_tokens}, {day, held_usd}, {month, held_usd}}
local admitted = 1
for i = 1, 4 do
  local ceiling = tonumber(ARGV[4 + i])
  if ceiling and figures[i][1] + figures[i][2] >= ceiling then admitted = 0 end
end
if apply and admitted == 1 then
  redis.call('HINCRBY', KEYS[1], 'requests', 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[9])
  if hold ~= '' then
    redis.call('ZADD', KEYS[4], lapses, hold)
    redis.call('PEXPIRE', KEYS[4], ARGV[10])
  end
end
return {admitted, requests, tokens, day, month, held_tokens, held_usd}
"""

# A request's answer ended: drop its hold (ARGV[1], '' when it held nothing here), count it when it
# was not counted at admission (ARGV[2]), charge its tokens (ARGV[3]) and nano-dollars (ARGV[4]).
SETTLE = """
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
return 1
"""


@dataclass(frozen=True, slots=True)
class Hold:
    """An admitted request: its key, what it holds, where (``on_redis``), under which member, and
    whether it was counted as a request when admitted (a key with limits) or is when it ends."""

    name: str
    amount: Amount
    member: str
    on_redis: bool = False
    counted: bool = False


class RedisLimits:
    """The counts on Redis, one script call each; errors and timeouts are the caller's to handle."""

    def __init__(self, client: Redis, namespace: str) -> None:
        self.namespace = namespace
        self._admit = client.register_script(ADMIT)
        self._settle = client.register_script(SETTLE)

    def _keys(self, name: str, windows: Windows) -> list[str]:
        prefix = f"{self.namespace}:limits:v1:{name}"
        return [f"{prefix}:m:{windows.minute}", f"{prefix}:d:{windows.day}", f"{prefix}:mo:{windows.month}", f"{prefix}:held"]

    async def admit(self, name: str, limits: KeyLimits | None, hold: Amount, member: str, now: float) -> tuple[bool, Spent]:
        """Admit (with ``limits``) or read (None): whether it was admitted, and the counts it was judged on."""
        windows = windows_at(now)
        ceilings = ["" if c is None else str(c) for c in (limits.ceilings() if limits is not None else (None,) * 4)]
        held = _member(member, hold) if hold != NOTHING else ""
        args = [_ms(now), _ms(now + HOLD_SECONDS), held, "1" if limits is not None else "0", *ceilings, MINUTE_KEY_MS, HOLD_SECONDS * 1000]
        admitted, *figures = await self._admit(keys=self._keys(name, windows), args=args)
        return bool(admitted), Spent(*(int(f) for f in figures))

    async def settle(self, name: str, hold: Hold | None, charged: Amount, count_request: bool, now: float) -> None:
        """Drop ``hold`` (None: it holds nothing here), count the request when ``count_request``, charge ``charged``."""
        windows = windows_at(now)
        day_ms, month_ms = (math.ceil(left * 1000) + WINDOW_MARGIN_MS for left in (windows.day_left, windows.month_left))
        member = _member(hold.member, hold.amount) if hold is not None else ""
        args = [member, int(count_request), charged.tokens, charged.nano_usd, MINUTE_KEY_MS, day_ms, month_ms]
        await self._settle(keys=self._keys(name, windows), args=args)


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

    @property
    def shared(self) -> bool:
        """Whether the counts are Redis's (while it answers), not this process's."""
        return self.store is not None and self.store.up

    async def reserve(self, name: str, request_id: str, hold: Amount) -> Hold | Refused:
        """Admit a request of the key ``name`` holding ``hold``, or the limit it is over. A key without
        limits is admitted without a word to any counter (it is counted when its answer ends)."""
        limits = self.limits.get(name)
        if limits is None or not limits.limited:
            return Hold(name, NOTHING, request_id)
        now = self.clock()
        if self.redis is None or self.store is None:
            result = self._reserve_here(name, limits, hold, request_id, now)
        else:
            redis = self.redis

            async def remote() -> Hold | Refused:
                admitted, spent = await redis.admit(name, limits, hold, request_id, now)
                if admitted:
                    return Hold(name, hold, request_id, on_redis=True, counted=True)
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

    def settle(self, hold: Hold, charged: Amount) -> None:
        """The request's answer ended (or it was left): give back its hold and charge ``charged``.
        Never waited for; never fails."""
        name = hold.name
        if name not in self.limits:
            return
        self.on_charged(name, charged)
        now = self.clock()
        count = not hold.counted
        if not hold.on_redis and hold.amount != NOTHING:
            self.local.settle(name, hold.amount, NOTHING, now)  # held here: given back here
        if self.redis is None or self.store is None:
            self.local.settle(name, NOTHING, charged, now, count_request=count)
            return
        redis, store, held = self.redis, self.store, hold if hold.on_redis and hold.amount != NOTHING else None

        async def here() -> None:
            self.local.settle(name, NOTHING, charged, now, count_request=count)

        task = asyncio.get_running_loop().create_task(store.call(lambda: redis.settle(name, held, charged, count, now), here), name="limits-settle")
        self._settling.add(task)
        task.add_done_callback(self._settled)

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
            return (await redis.admit(name, None, NOTHING, "", now))[1]

        async def here() -> Spent:
            return self.local.spent(name, now)

        return await self.store.call(remote, here)

    async def settled(self) -> None:
        """Wait (bounded) for the charges still on their way to Redis: at shutdown, and in tests."""
        if self._settling:
            await asyncio.wait(list(self._settling), timeout=SETTLE_WAIT_SECONDS)


def _member(request_id: str, hold: Amount) -> str:
    """A hold as the sorted set keeps it: the request's id and what it holds, which the script adds up."""
    return f"{request_id}|{hold.tokens}|{hold.nano_usd}"


def _ms(seconds: float) -> int:
    return int(seconds * 1000)
