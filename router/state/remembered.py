"""Remembered requests: a served request's session, for ``POST /v1/outcome`` to find (a session-state value).

Kept in the session state (on Redis with ``state.backend: redis``), so an outcome may be reported
to any replica; older ids are looked up in the decision log.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from router.core.session_state import Space
from router.state.session_store import SessionStore

# Outcomes usually follow their request within seconds; older ids are looked up in the decision log.
RECENT_SESSIONS = 10_000
RECENT_SECONDS = 24 * 3600


@dataclass(frozen=True, slots=True)
class RecentRequest:
    """A served request's session key (None: it had none), for its outcome (a session-state value)."""

    session: str | None

    def encode(self) -> bytes:
        return orjson.dumps(self.session)

    @classmethod
    def decode(cls, data: bytes) -> RecentRequest:
        return cls(orjson.loads(data))


RECENT_REQUESTS = Space("request", 1, RECENT_SECONDS, RECENT_SESSIONS, RecentRequest.encode, RecentRequest.decode)


def remember_request(state: SessionStore, request_id: str, session: str | None, now: float) -> None:
    """Queue the request's id for ``POST /v1/outcome`` (on Redis: for every replica), not waited for.

    upstream-forward does it as the request goes upstream, and sends the request's
    writes with it; the recorder for a request that never got there.
    """
    state.put_later(RECENT_REQUESTS, request_id, RecentRequest(session), now)
