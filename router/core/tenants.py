"""Client keys as tenants (issue #45): who a request authenticated as, and what it may see. Pure.

Each key in ``server.api_keys`` is a tenant: a name and a role, never the key itself. A key
given as a plain string is a ``user`` named after a digest of it (:func:`plain_key_name`); one
given as an object names itself. The name is what the proxy keeps: it scopes the tenant's
sessions (:func:`router.core.fingerprint.client_session_key`), it is written in each decision
row (``client``) and, among the configured names only, labels the per-client metrics.

A ``user`` key sees and acts on its own decisions, outcomes and sessions only; an ``admin`` key
sees everyone's. Without keys there is no tenant (None): one user, who sees everything, as before.
Limits per key (requests, tokens) are to come (issue #45): they belong on :class:`Tenant`.
"""

from __future__ import annotations

from typing import Literal

from router.core.fingerprint import client_key_id
from router.core.frozen import frozen

Role = Literal["user", "admin"]
USER: Role = "user"
ADMIN: Role = "admin"
PLAIN_KEY_PREFIX = "key-"


@frozen
class Tenant:
    """A configured client key as the proxy knows it once a request matched it: its name and role."""

    name: str
    role: Role = USER

    @property
    def sees_all(self) -> bool:
        return self.role == ADMIN


def plain_key_name(api_key: str) -> str:
    """The name of a key listed as a plain string: ``key-`` and six hex digits of a digest of the key
    (:func:`client_key_id`), enough to tell a team's keys apart and too few to say anything of the key."""
    return PLAIN_KEY_PREFIX + client_key_id(api_key)[:6]


def owner_scope(tenant: Tenant | None) -> str | None:
    """Whose decisions, outcomes and sessions ``tenant`` sees: its own name (a user key), or None —
    everyone's (an admin key, or no keys configured)."""
    return None if tenant is None or tenant.sees_all else tenant.name


def may_see(tenant: Tenant | None, owner: str | None) -> bool:
    """Whether ``tenant`` may see (and act on) what the client named ``owner`` did (None: no key)."""
    scope = owner_scope(tenant)
    return scope is None or scope == owner
