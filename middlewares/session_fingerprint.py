"""session-fingerprint: who does this request belong to? (ARCHITECTURE §7)

An explicit client session header wins (``session.headers``, first match);
otherwise the key is a fingerprint of the opening (``ctx.view.opening``). With
``server.api_keys`` set, the id of the client's key is part of either
(``ctx.client_id``): two users never share a session.

Once the key is known, the session's values that the chain's later stages read
(registered in the ``session_reads`` of its generation as they were built: classification,
pinch ledger, escalation) are read from the session state in one round trip
(one ``get_many``: an ``MGET`` on Redis) into ``ctx[SESSION_STATE]``; the stages take them
from there instead of each asking the store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from router.config import SessionSettings
from router.contract.context import RequestContext
from router.core.fingerprint import (
    FingerprintCache,
    client_session_key,
    header_session_key,
    session_header,
)
from router.core.session_state import SessionReads, SessionSnapshot
from router.state.session_store import SessionStore
from router.contract.stage import FailMode, StageReport
from router.core.results import SESSION, SessionKey, Slot

# The session's stored values the later stages read, read in one round trip (None: not read).
SESSION_STATE: Slot[SessionSnapshot] = Slot("session_state", SessionSnapshot)


class SessionFingerprint:
    name: ClassVar[str] = "session-fingerprint"
    section: ClassVar[str] = "session"
    requires: ClassVar[frozenset[str]] = frozenset({"view", "headers", "client_id"})
    reads: ClassVar[frozenset[str]] = frozenset()
    provides: ClassVar[frozenset[str]] = frozenset({SESSION.name, SESSION_STATE.name})
    fail_mode: ClassVar[FailMode] = FailMode.OPEN

    def __init__(self, *, settings: SessionSettings, state: SessionStore, session_reads: SessionReads, clock: Callable[[], float]) -> None:
        self.settings = settings
        # Its one await is the read of the session's state, which the store bounds itself
        # (state.redis.timeout_ms, up to 5 s): a shorter stage timeout would cut the read before
        # the store's own timeout opened the circuit breaker, on every request.
        self.timeout_seconds: float | None = None
        self.fingerprints = FingerprintCache()  # a session resends its opening every turn: hash it once
        self.state, self.reads, self.clock = state, session_reads, clock

    def carry_over(self, previous: SessionFingerprint) -> None:
        """On reload: the remembered hashes stay right whatever the config says."""
        self.fingerprints = previous.fingerprints

    async def run(self, ctx: RequestContext) -> StageReport:
        value = session_header(ctx.headers, self.settings.headers)
        client = ctx.client_id  # the authenticated client's key id: its sessions are its own
        if value is not None:
            session = SessionKey(header_session_key(value, client), "header")
        elif ctx.view.body_session is not None:  # Claude Code's metadata.user_id: the same id as its header
            session = SessionKey(header_session_key(ctx.view.body_session, client), "metadata")
        else:
            session = SessionKey(client_session_key(self.fingerprints.fingerprint_opening(ctx.view.opening), client), "fingerprint")
        ctx[SESSION] = session
        reads = self.reads.of(session.key)
        if reads:
            ctx[SESSION_STATE] = SessionSnapshot.of(reads, await self.state.get_many(reads, self.clock()))
        return StageReport(detail=session.source)

    def fallback(self, ctx: RequestContext, reason: str) -> None:
        # Without a session key the request is still served; caches just miss. A key found before
        # the read of its state failed stays: each stage then reads what it needs itself.
        ctx[SESSION_STATE] = None
