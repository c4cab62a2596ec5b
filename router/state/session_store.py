"""The session state the stages await: in this process, or on Redis, shared by workers and replicas.

:class:`SessionStore` is the I/O edge of :mod:`router.core.session_state`: the
same contract (spaces, versions, a time to live, misses are never errors),
awaited, plus the two operations a shared store needs:

* ``get_many`` reads several keys in one round trip (a pipeline);
* ``put_if_absent`` stores a value only when none is there and returns the value
  that *is* there — the first classification of a session wins on every replica.

``put_later`` writes without waiting for the answer (a session's pinch ledger,
the request ids ``POST /v1/outcome`` resolves, shared embeddings): in this
process at once; on Redis it is queued, and ``flush_later`` — called as a
request goes upstream (upstream-forward) and when it ends (the recorder) — sends
everything queued in one send, not waited for: the writes a session's next turn
depends on are on their way before the client can have the answer. One flush is
in flight at a time; what is queued meanwhile goes in the next, so a request
costs Redis one round trip for its writes at most, and under load many requests
share one. A write lost to a Redis
failure costs a cache miss on the next turn, never an error; the first
classification of a session is not such a write (``put_if_absent``, awaited).

A request's reads are one round trip too: session-fingerprint reads every key
its stages registered (``get_many``, see :mod:`router.core.session_state`), and
:func:`read_session` serves the stages from that snapshot.

:class:`LocalStore` wraps the in-process :class:`MemorySessionState`; an await of
it never suspends, so the memory backend costs a coroutine call per access.

:class:`ResilientStore` is what ``state.backend: redis`` serves from. Redis
trouble never fails a request: every call is bounded by ``state.redis.timeout_ms``;
the first failure opens a circuit breaker, and from then on every call goes to the
in-process store (counted by ``pinch_router_state_backend_fallback_total``, logged
once as ``state_backend_unavailable``, ``/healthz`` says ``degraded``) while a
background task pings Redis every ``state.redis.retry_seconds``; the first answer
closes the breaker. Redis absent at start-up is the same: serving starts in
fallback. What was written to the fallback meanwhile stays in this process: after
recovery Redis is the truth again (a session may be classified once more, or its
ledger restart — a miss, never an error).

Keys are ``<namespace>:<space>:v<version>:<key>``: a new schema version never
reads an old value, and a Redis shared with other programs is never touched
outside the namespace. A space's ``max_entries`` bounds the in-process store only;
Redis is bounded by the time to live (and its own ``maxmemory`` policy).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

from redis.asyncio import Redis
from redis.asyncio.retry import Retry  # the asyncio client's own: with the sync one redis-py 8 warns at every start
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from router.config import RedisSettings
from router.core.session_state import UNREAD, MemorySessionState, Read, SessionSnapshot, Space

log = logging.getLogger("pinch_router.state")

V = TypeVar("V")
T = TypeVar("T")
Write = tuple[Space[Any], str, Any, float]  # a space, a key, the value, when it was written
MAX_QUEUED_WRITES = 10_000  # while one flush is in flight; past it the oldest queued writes are dropped (misses)


class SessionStore(Protocol):
    # True when other processes read what this one writes (Redis): worth a round trip for what
    # a process-local cache lacks. False for the in-process store.
    shared: bool

    async def get(self, space: Space[V], key: str, now: float) -> V | None: ...

    async def get_many(self, reads: Sequence[Read], now: float) -> list[Any]: ...

    async def put(self, space: Space[V], key: str, value: V, now: float) -> None: ...

    async def put_if_absent(self, space: Space[V], key: str, value: V, now: float) -> V: ...

    def put_later(self, space: Space[V], key: str, value: V, now: float) -> None: ...

    def flush_later(self) -> None:
        """Send what ``put_later`` queued, not waited for (as a request goes upstream, and when it ends)."""
        ...

    def problem(self) -> str | None:
        """None when the backend serves; otherwise why the proxy is degraded."""
        ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...


class LocalStore:
    """The in-process store (``state.backend: memory``, and the fallback of Redis)."""

    shared = False

    def __init__(self, memory: MemorySessionState | None = None) -> None:
        self.memory = memory if memory is not None else MemorySessionState()

    async def get(self, space: Space[V], key: str, now: float) -> V | None:
        return self.memory.get(space, key, now)

    async def get_many(self, reads: Sequence[Read], now: float) -> list[Any]:
        return [self.memory.get(space, key, now) for space, key in reads]

    async def put(self, space: Space[V], key: str, value: V, now: float) -> None:
        self.memory.put(space, key, value, now)

    async def put_if_absent(self, space: Space[V], key: str, value: V, now: float) -> V:
        stored = self.memory.get(space, key, now)
        if stored is not None:
            return stored
        self.memory.put(space, key, value, now)
        return value

    def put_later(self, space: Space[V], key: str, value: V, now: float) -> None:
        self.memory.put(space, key, value, now)

    def flush_later(self) -> None:
        pass  # put_later has written already

    def problem(self) -> str | None:
        return None

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass


class RedisStore:
    """The spaces on Redis, one round trip per call; errors and timeouts are the caller's to handle."""

    def __init__(self, client: Redis, namespace: str) -> None:
        self.client = client
        self.namespace = namespace

    def _key(self, space: Space[Any], key: str) -> str:
        return f"{self.namespace}:{space.name}:v{space.version}:{key}"

    @staticmethod
    def _ttl_ms(space: Space[Any]) -> int | None:
        return None if math.isinf(space.ttl_seconds) else max(1, int(space.ttl_seconds * 1000))

    @staticmethod
    def _decode(space: Space[V], data: bytes | None) -> V | None:
        if data is None:
            return None
        try:
            return space.decode(data)
        except Exception:  # a value this version cannot read (written by hand, or a bug): a miss
            log.warning("state_value_unreadable", extra={"space": space.name})
            return None

    async def get(self, space: Space[V], key: str, now: float) -> V | None:
        return self._decode(space, await self.client.get(self._key(space, key)))

    async def get_many(self, reads: Sequence[Read], now: float) -> list[Any]:
        if not reads:
            return []
        values = await self.client.mget([self._key(space, key) for space, key in reads])
        return [self._decode(space, data) for (space, _), data in zip(reads, values, strict=True)]

    async def put(self, space: Space[V], key: str, value: V, now: float) -> None:
        await self.client.set(self._key(space, key), space.encode(value), px=self._ttl_ms(space))

    async def put_many(self, writes: Sequence[Write]) -> None:
        """Every write in one round trip: the SETs packed into one send, their replies read in order.

        What a non-transactional pipeline does, without its bookkeeping (measured ~50 µs
        less per call on loopback); each write stands alone.
        """
        commands = []
        for space, key, value, _ in writes:
            ttl = self._ttl_ms(space)
            commands.append(("SET", self._key(space, key), space.encode(value), *(() if ttl is None else ("PX", ttl))))
        pool = self.client.connection_pool
        connection = await pool.get_connection()
        try:
            await connection.send_packed_command(connection.pack_commands(commands))
            for _ in commands:
                await connection.read_response()  # raises a command's error
        except BaseException:
            await connection.disconnect()  # replies may be left unread on it: never reuse it
            raise
        finally:
            await pool.release(connection)

    async def put_if_absent(self, space: Space[V], key: str, value: V, now: float) -> V:
        name = self._key(space, key)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.set(name, space.encode(value), px=self._ttl_ms(space), nx=True)
            pipe.get(name)
            _, stored = await pipe.execute()
        decoded = self._decode(space, stored)
        return value if decoded is None else decoded

    async def ping(self) -> None:
        await self.client.ping()

    async def drop_connections(self) -> None:
        """Close every pooled connection: after an outage they lead to the old server, or nowhere."""
        await self.client.connection_pool.disconnect(inuse_connections=True)


class ResilientStore:
    """Redis while it answers within the timeout, the in-process store otherwise (see the module doc)."""

    shared = True

    def __init__(
        self,
        redis: RedisStore,
        local: LocalStore,
        *,
        timeout_seconds: float,
        retry_seconds: float,
        where: str,
        on_fallback: Callable[[], None] = lambda: None,
        on_state: Callable[[bool], None] = lambda up: None,
    ) -> None:
        self.redis = redis
        self.local = local
        self.timeout = timeout_seconds
        self.retry_seconds = retry_seconds
        self.where = where  # the URL without its password, for messages
        self.on_fallback = on_fallback
        self.on_state = on_state
        self.up = False  # until start() reached Redis
        self.why = "not connected yet"
        self._probe: asyncio.Task[None] | None = None
        self._queued: list[Write] = []
        self._flush: asyncio.Task[None] | None = None
        self._flush_again = False  # a flush was asked for while one was in flight: send what is queued next

    async def _call(self, remote: Callable[[], Awaitable[T]], local: Callable[[], Awaitable[T]]) -> T:
        if self.up:
            try:
                async with asyncio.timeout(self.timeout):
                    return await remote()
            except (RedisError, OSError, TimeoutError) as error:
                self._trip(error)
        self.on_fallback()
        return await local()

    async def call(self, remote: Callable[[], Awaitable[T]], local: Callable[[], Awaitable[T]]) -> T:
        """``remote`` on Redis under this store's timeout and breaker, else ``local``: how another
        user of the same Redis (the keys' limits, :mod:`router.state.limiter`) reaches it."""
        return await self._call(remote, local)

    async def get(self, space: Space[V], key: str, now: float) -> V | None:
        return await self._call(lambda: self.redis.get(space, key, now), lambda: self.local.get(space, key, now))

    async def get_many(self, reads: Sequence[Read], now: float) -> list[Any]:
        return await self._call(lambda: self.redis.get_many(reads, now), lambda: self.local.get_many(reads, now))

    async def put(self, space: Space[V], key: str, value: V, now: float) -> None:
        await self._call(lambda: self.redis.put(space, key, value, now), lambda: self.local.put(space, key, value, now))

    async def put_if_absent(self, space: Space[V], key: str, value: V, now: float) -> V:
        return await self._call(
            lambda: self.redis.put_if_absent(space, key, value, now), lambda: self.local.put_if_absent(space, key, value, now)
        )

    def put_later(self, space: Space[V], key: str, value: V, now: float) -> None:
        if not self.up:
            self.on_fallback()
            self.local.memory.put(space, key, value, now)
            return
        self._queued.append((space, key, value, now))
        if len(self._queued) > MAX_QUEUED_WRITES:
            del self._queued[: len(self._queued) - MAX_QUEUED_WRITES]

    def flush_later(self) -> None:
        if not self._queued:
            return
        if self._flush is None or self._flush.done():
            self._flush = asyncio.get_running_loop().create_task(self._send_queued(), name="state-backend-writes")
        else:
            self._flush_again = True

    async def _send_queued(self) -> None:
        """One pipeline for what is queued, again while requests ended meanwhile; a batch Redis does
        not take goes to the fallback. Writes queued by requests still running wait for their own flush."""
        while True:
            batch, self._queued, self._flush_again = self._queued, [], False
            await self._call(lambda: self.redis.put_many(batch), lambda: self._put_local(batch))
            if not (self._flush_again and self._queued):
                return

    async def _put_local(self, batch: Sequence[Write]) -> None:
        for space, key, value, now in batch:
            self.local.memory.put(space, key, value, now)

    def problem(self) -> str | None:
        if self.up:
            return None
        return f"state backend redis at {self.where} unavailable ({self.why}); serving from this process's memory"

    def _trip(self, error: BaseException) -> None:
        if not self.up:
            return
        self.up = False
        self.why = _describe(error)
        self.on_state(False)
        log.warning(
            "state_backend_unavailable",
            extra={"detail": f"{self.problem()}; retrying every {self.retry_seconds:g} s", "backend": "redis"},
        )
        self._start_probe()

    def _start_probe(self) -> None:
        if self._probe is None or self._probe.done():
            self._probe = asyncio.get_running_loop().create_task(self._reconnect(), name="state-backend-probe")

    async def _reconnect(self) -> None:
        while not self.up:
            await asyncio.sleep(self.retry_seconds)
            with contextlib.suppress(RedisError, OSError):
                await self.redis.drop_connections()
            if await self.ping():
                self.up = True
                self.on_state(True)
                log.info("state_backend_recovered", extra={"backend": "redis", "detail": f"redis at {self.where} answers again"})

    async def ping(self) -> bool:
        """Whether Redis answers within the timeout (``why`` says why not); the breaker is not touched."""
        try:
            async with asyncio.timeout(self.timeout):
                await self.redis.ping()
            return True
        except (RedisError, OSError, TimeoutError) as error:
            self.why = _describe(error)
            return False

    async def start(self) -> None:
        """Reach Redis once; when it cannot be reached, serve in fallback and keep trying."""
        if await self.ping():
            self.up = True
            self.on_state(True)
            return
        self.on_state(False)
        log.warning("state_backend_unavailable", extra={"detail": f"{self.problem()}; retrying every {self.retry_seconds:g} s", "backend": "redis"})
        self._start_probe()

    async def close(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            await asyncio.gather(self._probe, return_exceptions=True)
        self.flush_later()
        if self._flush is not None:
            await asyncio.wait([self._flush], timeout=self.timeout)
        await self.redis.client.aclose()


async def read_session(store: SessionStore, known: SessionSnapshot | None, reads: Sequence[Read], now: float) -> list[Any]:
    """The values of ``reads``: those the request's snapshot holds from it, the others in one round trip (none when it holds all)."""
    values = [UNREAD] * len(reads) if known is None else [known.value(space, key) for space, key in reads]
    unread = [i for i, value in enumerate(values) if value is UNREAD]
    if unread:
        for i, value in zip(unread, await store.get_many([reads[i] for i in unread], now), strict=True):
            values[i] = value
    return values


def _describe(error: BaseException) -> str:
    if isinstance(error, TimeoutError):
        return "no answer within the timeout"
    return f"{type(error).__name__}: {error}"[:300]


def without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def redis_store(settings: RedisSettings, on_fallback: Callable[[], None], on_state: Callable[[bool], None]) -> ResilientStore:
    """The store of ``state.backend: redis``: a client with no retries of its own (the breaker decides)."""
    timeout = settings.timeout_ms / 1000
    client = Redis.from_url(
        settings.url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
        retry_on_timeout=False,
        health_check_interval=0,
    )
    return ResilientStore(
        RedisStore(client, settings.namespace),
        LocalStore(),
        timeout_seconds=timeout,
        retry_seconds=settings.retry_seconds,
        where=without_password(settings.url),
        on_fallback=on_fallback,
        on_state=on_state,
    )
