"""session-fingerprint: who does this request belong to? (ARCHITECTURE §7)

An explicit client session header wins (``session.headers``, first match);
otherwise the key is a fingerprint of the opening (``ctx.view.opening``).
"""

from __future__ import annotations

from typing import ClassVar

from router.config import SessionSettings
from router.context import RequestContext, SessionKey
from router.core.fingerprint import (
    FingerprintCache,
    header_session_key,
    session_header,
)
from router.stage import FailMode, StageDeps, StageReport


class SessionFingerprint:
    name: ClassVar[str] = "session-fingerprint"
    requires: ClassVar[frozenset[str]] = frozenset({"view", "headers"})
    reads: ClassVar[frozenset[str]] = frozenset()
    provides: ClassVar[frozenset[str]] = frozenset({"session"})
    fail_mode: ClassVar[FailMode] = FailMode.OPEN

    def __init__(self, deps: StageDeps) -> None:
        self.settings: SessionSettings = deps.config.session
        self.timeout_seconds: float | None = 1.0
        self.fingerprints = FingerprintCache()  # a session resends its opening every turn: hash it once

    def carry_over(self, previous: SessionFingerprint) -> None:
        """On reload: the remembered hashes stay right whatever the config says."""
        self.fingerprints = previous.fingerprints

    async def run(self, ctx: RequestContext) -> StageReport:
        value = session_header(ctx.headers, self.settings.headers)
        if value is not None:
            ctx.session = SessionKey(header_session_key(value), "header")
        else:
            ctx.session = SessionKey(self.fingerprints.fingerprint_opening(ctx.view.opening), "fingerprint")
        return StageReport(detail=ctx.session.source)

    def fallback(self, ctx: RequestContext, reason: str) -> None:
        # Without a session key the request is still served; caches just miss.
        ctx.session = None
