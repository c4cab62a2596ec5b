"""Session state: small per-session values with a time to live, bounded (ARCHITECTURE §7). Pure.

One interface backs everything the proxy remembers about a session between
its requests — the classification cache and the pinch ledger today — so a
shared store (Redis, issue #18) can replace the in-memory one without the
stages noticing. The contract a store keeps:

* A value lives in a :class:`Space` (a name, a schema version, a time to live,
  a bound and a codec) under a key, the session key. Spaces never see each
  other's keys.
* ``get(space, key, now)`` is the value, or None when it is absent, expired
  (``now >= stored + ttl``) or was stored under another ``space.version``.
  A read never extends the time to live: only a ``put`` does.
* ``put(space, key, value, now)`` stores or overwrites it for ``space.ttl_seconds``.
* Each space holds at most ``space.max_entries`` keys; beyond that the least
  recently used (read or written) goes first. An evicted or expired value is a
  miss, never an error: every user of this store must work from a miss.
* Time is the caller's clock (monotonic seconds), passed in; nothing here reads one.
* Values are immutable, and ``space.encode`` / ``space.decode`` turn them into
  bytes and back, so a store outside the process can keep them. The in-memory
  store keeps the objects themselves and never pays for the codec.
* A stage reads a key once and writes it at most once per request: one round
  trip each way to a remote store.
* The keys a request's stages will read of its session are known once its
  session is: each stage registers them in :class:`SessionReads` when it is
  built, session-fingerprint reads them all at once (one round trip), and the
  stages take their values from that :class:`SessionSnapshot`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from router.core.frozen import frozen

V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Space(Generic[V]):
    """One kind of session value: its namespace, schema version, lifetime, bound and codec."""

    name: str
    version: int
    ttl_seconds: float
    max_entries: int
    encode: Callable[[V], bytes]
    decode: Callable[[bytes], V]

    def __post_init__(self) -> None:
        if not self.name or self.ttl_seconds <= 0 or self.max_entries <= 0:
            raise ValueError(f"a space needs a name, ttl_seconds > 0 and max_entries > 0; got {self}")


Read = tuple[Space[Any], str]  # a space and a key in it


class _Unread:
    """The answer for a key the snapshot did not read (unlike None: read, and absent)."""

    def __repr__(self) -> str:
        return "UNREAD"


UNREAD: Any = _Unread()


@frozen
class SessionSnapshot:
    """What the store held for one session's keys when its request began.

    ``value(space, key)`` is the value read (None: absent or expired), or
    :data:`UNREAD` when that key was not part of the read (the stage reads it itself).
    """

    values: Mapping[tuple[str, int, str], Any] = field(default_factory=dict)

    @staticmethod
    def of(reads: Sequence[Read], values: Sequence[Any]) -> SessionSnapshot:
        return SessionSnapshot({(space.name, space.version, key): value for (space, key), value in zip(reads, values, strict=True)})

    def value(self, space: Space[V], key: str) -> V | None:
        found: V | None = self.values.get((space.name, space.version, key), UNREAD)
        return found


class SessionReads:
    """The session keys a chain's stages read on every request of a session, registered as they are built.

    ``add(space, key_of)``: the stage reads ``key_of(session)`` in ``space`` (one key
    per space: stages that read the same space register the same key);
    ``of(session)`` is every registered read for one session, each once.
    """

    def __init__(self) -> None:
        self._reads: dict[tuple[str, int], tuple[Space[Any], Callable[[str], str]]] = {}

    def add(self, space: Space[Any], key_of: Callable[[str], str] = str) -> None:
        self._reads[(space.name, space.version)] = (space, key_of)

    def of(self, session: str) -> list[Read]:
        return [(space, key_of(session)) for space, key_of in self._reads.values()]


class SessionState(Protocol):
    """Per-session values by :class:`Space` and key (see the module doc for the contract)."""

    def get(self, space: Space[V], key: str, now: float) -> V | None: ...

    def put(self, space: Space[V], key: str, value: V, now: float) -> None: ...


@frozen
class _Stored:
    expires_at: float
    version: int
    value: Any


class MemorySessionState:
    """The in-process store: one LRU per space. Not thread-safe; it lives in one event loop."""

    def __init__(self) -> None:
        self._spaces: dict[str, OrderedDict[str, _Stored]] = {}

    def size(self, space: Space[Any]) -> int:
        """Keys held in ``space``, expired ones not yet dropped included."""
        return len(self._spaces.get(space.name, ()))

    def get(self, space: Space[V], key: str, now: float) -> V | None:
        entries = self._spaces.get(space.name)
        stored = entries.get(key) if entries is not None else None
        if stored is None:
            return None
        if now >= stored.expires_at or stored.version != space.version:
            del entries[key]  # type: ignore[union-attr]
            return None
        entries.move_to_end(key)  # type: ignore[union-attr]
        value: V = stored.value
        return value

    def put(self, space: Space[V], key: str, value: V, now: float) -> None:
        entries = self._spaces.setdefault(space.name, OrderedDict())
        entries[key] = _Stored(now + space.ttl_seconds, space.version, value)
        entries.move_to_end(key)
        while len(entries) > space.max_entries:
            entries.popitem(last=False)
