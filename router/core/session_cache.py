"""The per-session classification store (ARCHITECTURE §7). Pure: time is passed in.

Only a category and a tier are stored per session key — capabilities and
token counts change turn to turn and are always measured fresh. An entry
older than ``staleness_seconds`` is a miss; it stays until the next ``put``
for that key overwrites it (or LRU eviction drops it) and a read never renews
it, so a session is reclassified at least once per staleness window even
while it is busy. The store holds at most ``max_entries`` sessions, evicting
the least recently used (read or written) first.

Side requests: agents send title, summary and commit-message requests with the
session's id but without tools (opencode's title request comes first). So an
entry remembers whether its request offered tools, and only serves requests
that match: a request without tools in a session whose classified turns offered
tools is a side request (:func:`is_side_request`), classified on its own and
never stored over the session's entry; a request with tools ignores an entry
written by a tool-less one (it was a title request) and replaces it.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CachedClassification:
    category: str
    tier: int
    stored_at: float  # the caller's clock (monotonic seconds) at the put
    tools_offered: bool = False  # the classified request offered tools (an agent's working turn)

    def serves(self, offers_tools: bool) -> bool:
        """Whether this entry is the classification of a request that does (or does not) offer tools."""
        return self.tools_offered == offers_tools


def is_side_request(entry: CachedClassification | None, offers_tools: bool) -> bool:
    """A request without tools in a session whose classified turns offered tools: a title, a summary, a commit message."""
    return entry is not None and entry.tools_offered and not offers_tools


class SessionCache:
    def __init__(self, max_entries: int) -> None:
        if max_entries <= 0:
            raise ValueError("max_entries must be positive")
        self.max_entries = max_entries
        self._entries: OrderedDict[str, CachedClassification] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str, now: float, staleness_seconds: float) -> CachedClassification | None:
        """The fresh entry for ``key``, or None when absent or older than ``staleness_seconds``."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        if now - entry.stored_at > staleness_seconds:
            return None
        return entry

    def put(self, key: str, category: str, tier: int, now: float, *, tools_offered: bool = False) -> None:
        """Store (or overwrite) ``key``'s classification as of ``now``; evict beyond ``max_entries``."""
        self._entries[key] = CachedClassification(category, tier, now, tools_offered)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
