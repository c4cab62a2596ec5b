"""A circuit breaker per provider: skip a provider that just gave no answer at all. Pure.

A provider that accepted the connection and never answered cost every request the full first-byte
timeout, once for each model behind it (issue #42). Its breaker:

* **closed** — nothing is known against it; every request may try it.
* **open** — it gave no answer (:meth:`ProviderBreakers.failed`): until ``open_seconds`` have
  passed, every request skips it at once (:meth:`ProviderBreakers.admit` says why and until when).
* **half-open** — the window has passed: the next request is let through as the *probe*, and the
  others keep skipping it while the probe is out (at most ``probe_seconds``, so a probe that never
  reports cannot hold the provider down for good). The provider answering anything — any status
  line — closes the breaker (:meth:`ProviderBreakers.answered`); no answer again opens it for
  another window. A probe that ended without either (cancelled, a broken connection) hands its turn
  to the next request (:meth:`ProviderBreakers.abandoned`).

Every call takes ``now`` (monotonic seconds) from the caller. One instance serves a process (the
app keeps it across config reloads); the window is the caller's setting at each failure, so a
reloaded ``upstream.breaker.open_seconds`` applies from the next one.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from router.core.frozen import frozen


class BreakerState(enum.StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class Pass(enum.Enum):
    """A request may try the provider: nothing is known against it, or it is the one probe."""

    CLOSED = "closed"
    PROBE = "probe"


@frozen
class Down:
    """Why a request skips ``provider``: it gave no answer (``reason``); it is tried again at ``retry_at``."""

    provider: str
    reason: str
    since: float  # when it failed
    retry_at: float  # the end of the window, or of the probe another request is making
    probing: bool = False  # the window has passed and another request is trying it now

    def retry_in(self, now: float) -> int:
        """Whole seconds until a request tries the provider again (at least 1: for a Retry-After)."""
        return max(1, math.ceil(self.retry_at - now))

    def text(self, now: float) -> str:
        """For people: ``provider p is marked down (no answer …, 3s ago); tried again in 27s``."""
        then = f"another request is trying it now, tried again in {self.retry_in(now)}s at the latest" if self.probing else f"tried again in {self.retry_in(now)}s"
        return f"provider {self.provider} is marked down ({self.reason}, {now - self.since:.0f}s ago); {then}"


@dataclass(slots=True)
class _Open:
    reason: str
    since: float
    until: float
    probe_until: float | None = None  # a request is trying it until it reports, or until then


class ProviderBreakers:
    """The breaker of every provider of one process (an absent provider's is closed)."""

    def __init__(self) -> None:
        self._open: dict[str, _Open] = {}

    def admit(self, provider: str, now: float, probe_seconds: float) -> Pass | Down:
        """May a request try ``provider`` now? ``Pass.PROBE``: yes, as the one request trying it
        after its window (it must then report: ``answered``, ``failed`` or ``abandoned``)."""
        entry = self._open.get(provider)
        if entry is None:
            return Pass.CLOSED
        skip = _skipped(provider, entry, now)
        if skip is not None:
            return skip
        entry.probe_until = now + probe_seconds
        return Pass.PROBE

    def failed(self, provider: str, now: float, open_seconds: float, reason: str) -> bool:
        """``provider`` gave no answer: open its breaker for ``open_seconds`` (0: leave it closed).
        True when this opened it (it was closed or half-open), False when it was open already."""
        if open_seconds <= 0:
            return False
        entry = self._open.get(provider)
        opened = entry is None or now >= entry.until
        self._open[provider] = _Open(reason, now, now + open_seconds)
        return opened

    def answered(self, provider: str) -> bool:
        """``provider`` answered: close its breaker. True when it was not closed."""
        return self._open.pop(provider, None) is not None

    def abandoned(self, provider: str) -> None:
        """The probe of ``provider`` ended without an outcome: the next request may try it."""
        entry = self._open.get(provider)
        if entry is not None:
            entry.probe_until = None

    def state(self, provider: str, now: float) -> BreakerState:
        entry = self._open.get(provider)
        if entry is None:
            return BreakerState.CLOSED
        return BreakerState.OPEN if now < entry.until else BreakerState.HALF_OPEN

    def down(self, now: float) -> list[Down]:
        """The providers requests skip now, by name: open, or half-open with a probe out."""
        return [skip for provider in sorted(self._open) if (skip := _skipped(provider, self._open[provider], now)) is not None]


def _skipped(provider: str, entry: _Open, now: float) -> Down | None:
    """Why a request skips the provider of ``entry`` now; None when one may try it."""
    if now < entry.until:
        return Down(provider, entry.reason, entry.since, entry.until)
    if entry.probe_until is not None and now < entry.probe_until:
        return Down(provider, entry.reason, entry.since, entry.probe_until, probing=True)
    return None
