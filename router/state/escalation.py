"""Escalation kept in the session store: an outcome reported to any worker or replica counts on all.

The rule is :class:`router.core.escalation.EscalationRecord`'s; this is where the
records live (the ``escalation`` space, one per session, living for the window
after its last failure). Recording an outcome reads and rewrites the session's
record: two failures of one session reported at the same instant to two replicas
may count as one (the next one counts again) — escalation is a hint, not a quota.
"""

from __future__ import annotations

from collections.abc import Sequence

from router.core.escalation import Escalation, EscalationRecord
from router.core.session_state import SessionSnapshot, Space
from router.state.session_store import SessionStore, read_session

MAX_SESSIONS = 10_000  # the in-process store's bound


class SessionEscalation:
    def __init__(self, store: SessionStore, failures: int, window_seconds: float, max_sessions: int = MAX_SESSIONS) -> None:
        self.store = store
        self.failures = failures
        self.window = window_seconds
        self.space = Space("escalation", 1, window_seconds, max_sessions, EscalationRecord.encode, EscalationRecord.decode)

    async def record_outcome(self, session: str, success: bool, now: float) -> None:
        if success:
            return
        record = await self.store.get(self.space, session, now) or EscalationRecord()
        await self.store.put(self.space, session, record.after_failure(now, self.failures, self.window), now)

    async def escalate(
        self, session: str | None, tier: int, tiers: Sequence[int], now: float, known: SessionSnapshot | None = None
    ) -> Escalation | None:
        """The escalation for a request of ``session`` at ``tier``, or None (from ``known``, the request's
        read of its session, or one read of its own)."""
        if session is None:
            return None
        [record] = await read_session(self.store, known, [(self.space, session)], now)
        return self.of(record, tier, tiers, now)

    @staticmethod
    def of(record: EscalationRecord | None, tier: int, tiers: Sequence[int], now: float) -> Escalation | None:
        """The escalation a record read with other keys gives (see pinch-prune's pipelined read)."""
        return record.escalation(tier, tiers, now) if record is not None else None
