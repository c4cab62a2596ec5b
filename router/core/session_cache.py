"""The per-session classification: the stored value, its space and its staleness rule (ARCHITECTURE §7). Pure.

Only a category and a tier are stored per session key — capabilities and
token counts change turn to turn and are always measured fresh. An entry
older than ``staleness_seconds`` is a miss (:func:`fresh`); it stays until the
next put for that key overwrites it (or its time to live, or LRU eviction, drops
it) and a read never renews it, so a session is reclassified at least once per
staleness window even while it is busy. Entries live in the ``classification``
space (:func:`classification_space`) of the session state, which holds at most
``max_entries`` sessions in process, evicting the least recently used first;
the classification-cache stage reads and writes them.

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
from dataclasses import asdict

import orjson

from router.core.frozen import frozen
from router.core.session_state import Space


@frozen
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
