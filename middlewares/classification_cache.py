"""classification-cache: classify a session once, not every turn (ARCHITECTURE §7).

Read: a fresh entry for ``ctx.session`` sets ``ctx.cached_classification``
(source ``cached``, no context estimate: ``required_context_tokens=None``, so
the gate then uses the measured size alone), which the classifier stage then
routes on instead of asking its model (the classifier is ``ctx.classification``'s
one writer). A miss — absent, or older than ``session_cache.staleness_minutes``
— leaves the slot empty.

Write: in the :meth:`ClassificationCache.after` hook, which the adapter calls
once the rest of the chain has returned, i.e. when the turn finishes. Only a
classification whose source is ``classifier`` is stored (never ``fallback``,
``override`` or ``cached``, so a hit never renews an entry), and only category
and tier. It is stored whether or not the upstream then succeeded: what the
work *is* does not depend on who served it. Agent turns are sequential, so the
next turn of the session finds it; two truly concurrent first turns both
classify and the later write wins.

Side requests (see :mod:`router.core.session_cache`): an entry serves only
requests that, like the one it classified, do or do not offer tools; a
tool-less request of a session whose entry offered tools is classified on its
own and never written over that entry.

Skipped when ``session_cache.enabled`` is false or the request has no session
key. Time comes from ``deps.clock`` (monotonic seconds; tests inject one). The
store is the application's session state (``deps.state``), bounded by
``session_cache.max_entries`` (LRU); an entry expires from it after the staleness window.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from router.config import SessionCacheSettings
from router.context import Classification, ClassificationSource, Outcome, RequestContext
from router.core.session_cache import SessionCache, is_side_request
from router.stage import FailMode, StageDeps, StageReport


class ClassificationCache:
    name: ClassVar[str] = "classification-cache"
    requires: ClassVar[frozenset[str]] = frozenset({"session"})
    reads: ClassVar[frozenset[str]] = frozenset()
    provides: ClassVar[frozenset[str]] = frozenset({"cached_classification"})
    fail_mode: ClassVar[FailMode] = FailMode.OPEN

    def __init__(self, deps: StageDeps) -> None:
        self.settings: SessionCacheSettings = deps.config.session_cache
        self.timeout_seconds: float | None = 1.0
        self.store = SessionCache(self.settings.max_entries, deps.state, ttl_seconds=self.settings.staleness_minutes * 60)
        self.clock: Callable[[], float] = deps.clock
        self._staleness_seconds = self.settings.staleness_minutes * 60
        # What a stored classification means: after a reload that changes it, old entries are not carried over.
        self._vocabulary = (tuple(deps.config.routing.categories), tuple(deps.config.routing.tiers))

    def carry_over(self, previous: ClassificationCache) -> None:
        """On reload: keep the sessions' classifications while categories, tiers and the bound are unchanged."""
        if previous._vocabulary == self._vocabulary and previous.store.max_entries == self.store.max_entries:
            self.store = previous.store

    async def run(self, ctx: RequestContext) -> StageReport:
        if not self.settings.enabled:
            return StageReport(Outcome.SKIPPED, "disabled")
        if ctx.session is None:
            return StageReport(Outcome.SKIPPED, "no session key")
        entry = self.store.get(ctx.session.key, self.clock(), self._staleness_seconds)
        if entry is None:
            return StageReport(detail="miss")
        offers = ctx.view.offers_tools
        if is_side_request(entry, offers):
            return StageReport(detail="side request (no tools): classified on its own")
        if not entry.serves(offers):
            return StageReport(detail="miss (the entry is a tool-less request's)")
        ctx.cached_classification = Classification(entry.category, entry.tier, ClassificationSource.CACHED, None)
        return StageReport(detail="hit")

    def fallback(self, ctx: RequestContext, reason: str) -> None:
        pass  # a failed lookup is a miss: the classifier decides

    def after(self, ctx: RequestContext) -> None:
        classification = ctx.classification
        if (
            self.settings.enabled
            and ctx.session is not None
            and classification is not None
            and classification.source is ClassificationSource.CLASSIFIER
        ):
            now, offers = self.clock(), ctx.view.offers_tools
            if is_side_request(self.store.get(ctx.session.key, now, self._staleness_seconds), offers):
                return  # a title or summary request never decides the session's category
            self.store.put(ctx.session.key, classification.task_category, classification.task_tier, now, tools_offered=offers)
