"""Where a client sends its API key, as each wire format declares it (``WireAdapter.api_key``). Pure.

Every path takes ``Authorization: Bearer <key>`` (the OpenAI formats know no other way). A format
adds the header its own clients send the key in (Anthropic's ``x-api-key``, Gemini's
``x-goog-api-key``), taken on every path, and may add a URL query parameter (Gemini's ``?key=``),
taken on that format's own paths only: a key in a URL lands in access logs, proxies' logs and
shell histories, so no path whose clients do not need it takes one (not ``/metrics``, not
``/v1/decisions``, not another format's endpoint).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass


def _nowhere(path: str) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class KeySource:
    """Where a format's clients send their key besides ``Authorization: Bearer``."""

    header: str | None = None  # taken on every path
    query: str | None = None  # a URL query parameter, taken where ``query_paths(path)`` holds only
    query_paths: Callable[[str], bool] = _nowhere


BEARER_ONLY = KeySource()


def offered_key(sources: tuple[KeySource, ...], headers: Mapping[str, str], query: Mapping[str, str], path: str) -> str | None:
    """The key a request offers other than as a bearer token: in a format's header (the first of
    ``sources`` that has one present), else in a format's query parameter on a path that takes it;
    None when it offers none."""
    for source in sources:
        if source.header is not None and source.header in headers:
            return headers[source.header]
    for source in sources:
        if source.query is not None and source.query in query and source.query_paths(path):
            return query[source.query]
    return None


def refused_query_key(sources: tuple[KeySource, ...], query: Mapping[str, str], path: str) -> str | None:
    """The query parameter of a key sent in the URL of a path that does not take it there, or None."""
    return next((s.query for s in sources if s.query is not None and s.query in query and not s.query_paths(path)), None)
