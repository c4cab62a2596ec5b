"""classification-cache: classify a session once, not every turn (ARCHITECTURE §7).

Read: a fresh entry for ``ctx[SESSION]`` sets ``ctx[CACHED_CLASSIFICATION]``
(source ``cached``, no context estimate: ``required_context_tokens=None``, so
the gate then uses the measured size alone), which the classifier stage then
routes on instead of asking its model (the classifier is ``ctx[CLASSIFICATION]``'s
one writer). A miss — absent, or older than ``session_cache.staleness_minutes``
— leaves the slot empty.

Write: in the :meth:`ClassificationCache.after` hook, which the adapter calls
once the rest of the chain has returned, i.e. when the turn finishes. Only a
classification whose source is ``classifier`` is stored (never ``fallback``,
``override`` or ``cached``, so a hit never renews an entry), and only category
and tier. It is stored whether or not the upstream then succeeded: what the
work *is* does not depend on who served it. Agent turns are sequential, so the
next turn of the session finds it. The first classification of a session is
stored only if absent (``put_if_absent``): two concurrent first turns — on two
replicas sharing Redis, say — both classify, the first write wins and every
later turn, on any replica, uses that one. Only an entry written by a tool-less
request (a title request) is then overwritten by a request with tools.

Side requests (see :mod:`router.core.session_cache`): an entry serves only
requests that, like the one it classified, do or do not offer tools; a
tool-less request of a session whose entry offered tools is classified on its
own and never written over that entry.

Skipped when ``session_cache.enabled`` is false or the request has no session
key. Time comes from the ``clock`` it is built with (monotonic seconds; tests inject one). The
store is the application's session state (the ``state`` it is built with, one per process, or
Redis), bounded by ``session_cache.max_entries`` (LRU, in-process store); an
entry expires from it after the staleness window. Keys carry a digest of the
categories and tiers, so after a reload that changes them old entries are misses.
The read comes with session-fingerprint's one read of the session
(``ctx[SESSION_STATE]``; a read of its own without it); the write after a
classifier call is one round trip (two when a title request's entry is replaced).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import ClassVar

from router.config import Catalogue, SessionCacheSettings
from router.core.results import CLASSIFICATION, Classification, ClassificationSource, Outcome, SESSION, Slot
from router.contract.context import RequestContext
from router.core.session_cache import CachedClassification, classification_space, fresh, is_side_request
from router.core.session_state import SessionReads
from router.state.session_store import SessionStore, read_session
from router.contract.stage import FailMode, StageReport
from middlewares.session_fingerprint import SESSION_STATE

# The session's stored classification, for the classifier to route on (None: a miss).
CACHED_CLASSIFICATION: Slot[Classification] = Slot("cached_classification", Classification)


class ClassificationCache:
    name: ClassVar[str] = "classification-cache"
    section: ClassVar[str] = "session_cache"
    requires: ClassVar[frozenset[str]] = frozenset({SESSION.name})
    reads: ClassVar[frozenset[str]] = frozenset({SESSION_STATE.name})
    provides: ClassVar[frozenset[str]] = frozenset({CACHED_CLASSIFICATION.name})
    fail_mode: ClassVar[FailMode] = FailMode.OPEN

    def __init__(
        self, *, settings: SessionCacheSettings, catalogue: Catalogue, state: SessionStore, clock: Callable[[], float], session_reads: SessionReads
    ) -> None:
        self.settings = settings
        self.timeout_seconds: float | None = 1.0
        self.state = state
        self.space = classification_space(self.settings.max_entries, self.settings.staleness_minutes * 60)
        self.clock = clock
        self._staleness_seconds = self.settings.staleness_minutes * 60
        # What a stored classification means: after a reload that changes it, old entries are not read.
        vocabulary = repr((tuple(catalogue.routing.categories), tuple(catalogue.routing.tiers)))
        self._vocabulary = hashlib.sha256(vocabulary.encode()).hexdigest()[:8]
        if self.settings.enabled:
            session_reads.add(self.space, self._key)

    def _key(self, session: str) -> str:
        return f"{self._vocabulary}:{session}"

    async def _entry(self, ctx: RequestContext, session: str, now: float) -> CachedClassification | None:
        [entry] = await read_session(self.state, ctx[SESSION_STATE], [(self.space, self._key(session))], now)
        return fresh(entry, now, self._staleness_seconds)

    async def run(self, ctx: RequestContext) -> StageReport:
        if not self.settings.enabled:
            return StageReport(Outcome.SKIPPED, "disabled")
        session = ctx[SESSION]
        if session is None:
            return StageReport(Outcome.SKIPPED, "no session key")
        entry = await self._entry(ctx, session.key, self.clock())
        if entry is None:
            return StageReport(detail="miss")
        offers = ctx.view.offers_tools
        if is_side_request(entry, offers):
            return StageReport(detail="side request (no tools): classified on its own")
        if not entry.serves(offers):
            return StageReport(detail="miss (the entry is a tool-less request's)")
        ctx[CACHED_CLASSIFICATION] = Classification(entry.category, entry.tier, ClassificationSource.CACHED, None)
        return StageReport(detail="hit")

    def fallback(self, ctx: RequestContext, reason: str) -> None:
        pass  # a failed lookup is a miss: the classifier decides

    async def after(self, ctx: RequestContext) -> None:
        classification, session = ctx[CLASSIFICATION], ctx[SESSION]
        if (
            self.settings.enabled
            and session is not None
            and classification is not None
            and classification.source is ClassificationSource.CLASSIFIER
        ):
            now, offers, key = self.clock(), ctx.view.offers_tools, self._key(session.key)
            ours = CachedClassification(classification.task_category, classification.task_tier, now, offers)
            stored = await self.state.put_if_absent(self.space, key, ours, now)
            if stored == ours:
                return
            if fresh(stored, now, self._staleness_seconds) is not None and (is_side_request(stored, offers) or stored.serves(offers)):
                return  # the session's classification stands: a title request never decides it; a concurrent first turn won
            await self.state.put(self.space, key, ours, now)  # a stale entry, or a title request's, gives way
