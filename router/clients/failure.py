"""How an upstream attempt fails: :class:`AttemptFailure`, and which statuses are the provider's failing."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

# Statuses that say "this provider cannot serve it now", so another candidate may:
# auth or missing model at that provider, timeouts, rate limits and overload.
FAILOVER_STATUSES = frozenset({401, 403, 404, 408, 409, 425, 429, 500, 502, 503, 504, 529})


def relayable(status: int) -> bool:
    """Whether an upstream status may reach the client: 200, or a 4xx that is the client's own.

    Everything else — a redirect (never followed), 204 and other 2xx a chat
    answer never has, 1xx, 5xx and non-standard codes like 599 — is that
    provider failing, and fails over like a 5xx.
    """
    return status == 200 or (400 <= status < 500 and status not in FAILOVER_STATUSES)


@dataclass(frozen=True, slots=True)
class AttemptFailure(Exception):
    """One candidate failed before its first byte reached the client."""

    kind: str  # connect | timeout | status | read
    message: str
    status: int | None = None
    retry_after: float | None = None
    body: bytes = b""
    # The provider gave no answer at all: its connection refused or not made in time, or no first byte
    # in time. Not a connection that broke once made (a pooled keep-alive connection the provider
    # closed as the request went out fails so, and says nothing of the provider).
    down: bool = False

    def __str__(self) -> str:
        return self.message


def error_text(body: bytes) -> str:
    """The message of an upstream error body, OpenAI-shaped or not, kept short: for the client's eyes only
    (the decision log and the log get :func:`router.clients.dependency_http.error_summary`)."""
    text = body.decode("utf-8", "replace")
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text[:300].strip() or "(empty body)"
    if isinstance(obj, dict):
        error = obj.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"][:300]
        if isinstance(error, str):
            return error[:300]
    return text[:300]
