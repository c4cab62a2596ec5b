"""What ``pinch-router mock-upstream --record DIR`` writes: each request it receives, secrets redacted.

One JSON file per request, numbered in arrival order
(``0001-POST-v1-messages.json``), holding the method, path, query, headers and
body, so a user sees exactly what their agent sends. Credentials never reach
the file: the values of ``Authorization``, ``x-api-key`` and the other
credential headers are replaced (an auth scheme such as ``Bearer`` is kept, so
the file still tells which way the key was sent), cookies are dropped to a
marker. The body is kept as sent: it is the point of the recording.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

REDACTED = "[redacted]"
CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie", "set-cookie", "openai-api-key"}
)
# Anything else whose name says it carries a credential (x-auth-token, x-client-secret, …).
_CREDENTIAL_NAME = re.compile(r"(^|[-_])(auth|token|secret|password|api[-_]?key)([-_]|$)", re.IGNORECASE)
_SCHEME = re.compile(r"^(Bearer|Basic|Token)\s+", re.IGNORECASE)


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers with every credential value replaced, names and order kept."""
    redacted = {}
    for key, value in headers.items():
        name = str(key)  # aiohttp's header names are a str subclass, which JSON encoders refuse as keys
        if name.lower() in CREDENTIAL_HEADERS or _CREDENTIAL_NAME.search(name):
            scheme = _SCHEME.match(value)
            redacted[name] = f"{scheme.group(1)} {REDACTED}" if scheme else REDACTED
        else:
            redacted[name] = value
    return redacted


def request_record(method: str, path: str, query: Mapping[str, str], headers: Mapping[str, str], raw: bytes) -> dict[str, Any]:
    """One received request as plain data: the body parsed when it is JSON, else kept as text."""
    record: dict[str, Any] = {"method": method, "path": path, "query": dict(query), "headers": redact_headers(headers)}
    if raw:
        try:
            record["body"] = orjson.loads(raw)
        except orjson.JSONDecodeError:
            record["body_text"] = raw.decode("utf-8", "replace")
    return record


def record_file_name(number: int, method: str, path: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", path).strip("-") or "root"
    return f"{number:04d}-{method}-{slug}.json"
