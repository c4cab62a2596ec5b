"""The per-session classification store (ARCHITECTURE §7). Pure: time is passed in.

Only a category and a tier are stored per session key — capabilities and
token counts change turn to turn and are always measured fresh. An entry
older than ``staleness_seconds`` is a miss; it stays until the next ``put``
for that key overwrites it (or LRU eviction drops it) and a read never renews
it, so a session is reclassified at least once per staleness window even
while it is busy. The store holds at most ``max_entries`` sessions, evicting
the least recently used (read or written) first. Entries live in the
``classification`` space of a :class:`~router.core.session_state.SessionState`.

Side requests: agents send title, summary and commit-message requests with the
session's id but without tools (opencode's title request comes first). So an
entry remembers whether its request offered tools, and only serves requests
that match: a request without tools in a session whose classified turns offered
tools is a side request (:func:`is_side_request`), classified on its own and
never stored over the session's entry; a request with tools ignores an entry
written by a tool-less one (it was a title request) and replaces it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import orjson

from router.core.session_state import MemorySessionState, SessionState, Space


@dataclass(frozen=True, slots=True)
class CachedClassification:
    category: str
    tier: int
    stored_at: float  # the caller's clock (monotonic seconds) at the put
    tools_offered: bool = False  # the classified request offered tools (an agent's working turn)

    def serves(self, offers_tools: bool) -> bool:
        """Whether this entry is the classification of a request that does (or does not) offer tools."""
        return self.tools_offered == offers_tools

    def encode(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def decode(cls, data: bytes) -> CachedClassification:
        return cls(**orjson.loads(data))


def is_side_request(entry: CachedClassification | None, offers_tools: bool) -> bool:
    """A request without tools in a session whose classified turns offered tools: a title, a summary, a commit message."""
    return entry is not None and entry.tools_offered and not offers_tools


def classification_space(max_entries: int, ttl_seconds: float = math.inf) -> Space[CachedClassification]:
    """Where the classifications live in a session state."""
    return Space("classification", 2, ttl_seconds, max_entries, CachedClassification.encode, CachedClassification.decode)


def fresh(entry: CachedClassification | None, now: float, staleness_seconds: float) -> CachedClassification | None:
    """The entry when it is younger than ``staleness_seconds``, else None (a miss)."""
    if entry is None or now - entry.stored_at > staleness_seconds:
        return None
    return entry


class SessionCache:
    """The classifications, kept in a :class:`SessionState` (its own in-memory one unless given)."""

    def __init__(self, max_entries: int, state: SessionState | None = None, ttl_seconds: float = math.inf) -> None:
        if max_entries <= 0:
            raise ValueError("max_entries must be positive")
        self.max_entries = max_entries
        self._state = state if state is not None else MemorySessionState()
        # ttl only frees memory (and a shared store's keys): staleness is decided by each get
        self.space = classification_space(max_entries, ttl_seconds)

    def __len__(self) -> int:
        """Sessions held (the in-memory store counts them; a shared store does not say)."""
        if not isinstance(self._state, MemorySessionState):
            raise TypeError("only an in-memory session state counts its entries")
        return self._state.size(self.space)

    def get(self, key: str, now: float, staleness_seconds: float) -> CachedClassification | None:
        """The fresh entry for ``key``, or None when absent or older than ``staleness_seconds``."""
        return fresh(self._state.get(self.space, key, now), now, staleness_seconds)

    def put(self, key: str, category: str, tier: int, now: float, *, tools_offered: bool = False) -> None:
        """Store (or overwrite) ``key``'s classification as of ``now``; evict beyond ``max_entries``."""
        self._state.put(self.space, key, CachedClassification(category, tier, now, tools_offered), now)
