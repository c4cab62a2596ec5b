"""Remembered requests: a served request's session and client key, for ``POST /v1/outcome`` to find
(a session-state value).

Kept in the session state (on Redis with ``state.backend: redis``), so an outcome may be reported
to any replica; older ids are looked up in the decision log. The client key's name is kept with
the session so that a user key reports outcomes of its own requests only (issue #45).
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
    """A served request's session key and the name of the client key it came with (None: it had
    none; no keys configured), for its outcome (a session-state value)."""

    session: str | None
    client: str | None = None

    def encode(self) -> bytes:
        return orjson.dumps([self.session, self.client])

    @classmethod
    def decode(cls, data: bytes) -> RecentRequest:
        session, client = orjson.loads(data)
        return cls(session, client)


# version 2: the client key's name beside the session (version 1's values, the session alone, read as a miss)
RECENT_REQUESTS = Space("request", 2, RECENT_SECONDS, RECENT_SESSIONS, RecentRequest.encode, RecentRequest.decode)


def remember_request(state: SessionStore, request_id: str, session: str | None, client: str | None, now: float) -> None:
    """Queue the request's id for ``POST /v1/outcome`` (on Redis: for every replica), not waited for.

    upstream-forward does it as the request goes upstream, and sends the request's
    writes with it; the recorder for a request that never got there.
    """
    state.put_later(RECENT_REQUESTS, request_id, RecentRequest(session, client), now)
