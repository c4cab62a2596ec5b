"""Tier escalation after failed outcomes (pure; time is passed in).

When a session reports ``failures`` failed outcomes within ``window_seconds``,
its later requests move up one tier until the window has passed since the
last failure that kept it escalated. Escalation never steps down inside the
window, and it is one tier, not one per failure: a session that keeps failing
stays one tier up for longer, it does not climb to the top.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import orjson

MAX_FAILURES_KEPT = 100


@dataclass(frozen=True, slots=True)
class Escalation:
    from_tier: int
    to_tier: int
    failures: int

    def reason(self) -> str:
        return f"escalated from tier {self.from_tier} to {self.to_tier} after {self.failures} failed outcomes"


@dataclass(frozen=True, slots=True)
class EscalationRecord:
    """One session's recent failed outcomes (the caller's clock) and when its escalation ends (a session-state value)."""

    failed_at: tuple[float, ...] = ()
    until: float = 0.0

    def after_failure(self, now: float, failures: int, window_seconds: float) -> EscalationRecord:
        """This record once a failure at ``now`` is counted: failures older than the window drop out."""
        # bounded: a client that reports failures in a loop keeps the last ones only
        failed_at = (*(t for t in self.failed_at if t > now - window_seconds), now)[-MAX_FAILURES_KEPT:]
        until = now + window_seconds if len(failed_at) >= failures else self.until
        return EscalationRecord(failed_at, until)

    def escalation(self, tier: int, tiers: Sequence[int], now: float) -> Escalation | None:
        """The escalation of a request at ``tier`` at ``now``, or None."""
        if self.until <= now:
            return None
        higher = sorted(t for t in tiers if t > tier)
        if not higher:
            return None
        return Escalation(tier, higher[0], len(self.failed_at))

    def encode(self) -> bytes:
        return orjson.dumps([list(self.failed_at), self.until])

    @classmethod
    def decode(cls, data: bytes) -> EscalationRecord:
        failed_at, until = orjson.loads(data)
        return cls(tuple(float(t) for t in failed_at), float(until))
