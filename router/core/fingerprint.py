"""Session keys (ARCHITECTURE §7). Pure.

A key is either derived from an explicit client header or fingerprinted from
the opening of the conversation: the leading system/developer messages and the
first user message. Those never change during an agent session, while later
messages do, so the fingerprint is stable turn to turn and differs between
sessions with different tasks. Only message *text* is hashed: markers such as
``cache_control`` that clients move between turns do not change the key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from router.core.messages import Message, content_text

KEY_HEX_CHARS = 24


def _digest(kind: bytes, parts: list[str]) -> str:
    h = hashlib.sha256(kind)
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()[:KEY_HEX_CHARS]


def session_fingerprint(messages: list[Message]) -> str:
    parts: list[str] = []
    index = 0
    while index < len(messages) and messages[index].get("role") in ("system", "developer"):
        parts += ["system", content_text(messages[index].get("content"))]
        index += 1
    first_user = next((m for m in messages if m.get("role") == "user"), None)
    if first_user is not None:
        parts += ["user", content_text(first_user.get("content"))]
    return _digest(b"fingerprint\0", parts)


def header_session_key(value: str) -> str:
    return _digest(b"header\0", [value])


def session_header(headers: Mapping[str, str], names: list[str]) -> str | None:
    """The first non-empty configured session header, if the client sent one."""
    for name in names:
        value = headers.get(name)
        if value and value.strip():
            return value.strip()
    return None
