"""Tier escalation after failed outcomes (pure; time is passed in).

When a session reports ``failures`` failed outcomes within ``window_seconds``,
its later requests move up one tier until the window has passed since the
last failure that kept it escalated. Escalation never steps down inside the
window, and it is one tier, not one per failure: a session that keeps failing
stays one tier up for longer, it does not climb to the top.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Escalation:
    from_tier: int
    to_tier: int
    failures: int

    def reason(self) -> str:
        return f"escalated from tier {self.from_tier} to {self.to_tier} after {self.failures} failed outcomes"


class EscalationTracker:
    def __init__(self, failures: int, window_seconds: float, max_sessions: int = 10_000) -> None:
        self.failures = failures
        self.window = window_seconds
        self.max_sessions = max_sessions
        self._failed: OrderedDict[str, deque[float]] = OrderedDict()
        self._until: dict[str, float] = {}

    def record_outcome(self, session: str, success: bool, now: float) -> None:
        if success:
            return
        times = self._failed.setdefault(session, deque())
        self._failed.move_to_end(session)
        times.append(now)
        while times and times[0] <= now - self.window:
            times.popleft()
        if len(times) >= self.failures:
            self._until[session] = now + self.window
        while len(self._failed) > self.max_sessions:
            old, _ = self._failed.popitem(last=False)
            self._until.pop(old, None)

    def escalate(self, session: str | None, tier: int, tiers: Sequence[int], now: float) -> Escalation | None:
        """The escalation for a request of ``session`` at ``tier``, or None."""
        if session is None or self._until.get(session, 0.0) <= now:
            return None
        higher = sorted(t for t in tiers if t > tier)
        if not higher:
            return None
        return Escalation(tier, higher[0], len(self._failed.get(session, ())))
