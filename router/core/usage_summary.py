"""The dashboard's figures, summed from decision rows and their prices (:mod:`router.core.pricing`). Pure.

Three views, each a JSON-ready dict or list: the :func:`overview` of a window (totals, dollars, the
model mix, classification sources, errors, and the same per time bucket for the charts), the
:func:`session_summaries` of the sessions active in it, and one session's :func:`session_turns`.
Rows are the decision log's (dicts with its column names) in arrival order; rows before ``since``
may be given too — they price the first requests of the window (a session's cache was warm or not)
and are counted nowhere. A row's attempts are ``attempt_count`` where the reader counted them in
SQL, else the length of its ``attempts``. Nothing here reads content: the rows hold none.

The overview and the sessions list are assembled from :class:`Group` and :class:`SessionGroup` sums
(:func:`overview_of_groups`, :func:`sessions_of_groups`): the functions here sum rows into them one
by one; the decision log sums a large window into the very same groups in SQL
(:mod:`router.observe.decision_sums`), and a test holds the two equal.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from router.core.frozen import frozen
from router.core.pricing import RowCost

CLIENT_CLOSED = 499  # the client left before the answer ended (router.observe.decision_record)
DOLLAR_DIGITS = 9  # dollars are rounded to nano-dollars in what is returned
SERIES = ("requests", "errors", "tokens_in", "tokens_out", "cached_tokens", "spent", "unpinched", "reference")


@dataclass(slots=True)
class Sums:
    """What some rows add up to (a window's, a bucket's, a model's, a session's)."""

    requests: int = 0
    errors: int = 0  # answered 4xx/5xx, a client that left (499) aside
    client_closed: int = 0
    fallbacks: int = 0  # tried more than one candidate
    tokens_in: int = 0
    tokens_out: int = 0
    cached_tokens: int = 0  # of the answers that reported cache figures
    cache_reported_prompt: int = 0  # their prompt tokens
    pinch_tokens_saved: int = 0  # net, as x-router-pinch-saved: the retrieve tool pinch adds counts against
    unpriced: int = 0  # answered, but no usage or no price known
    spent: float = 0.0
    unpinched: float = 0.0  # priced rows only; equal to spent where pinch changed nothing
    reference: float = 0.0  # the rows that have a reference only
    referenced_spent: float = 0.0  # what those rows cost
    routing_priced: int = 0  # rows that have a reference

    def add(self, other: Sums) -> None:
        for name in _SUM_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_json(self, brief: bool = False) -> dict[str, Any]:
        # routing's saving over the requests that have a reference (the others are not compared)
        routing = round(self.reference - self.referenced_spent, DOLLAR_DIGITS) if self.routing_priced else None
        figures: dict[str, Any] = {
            "requests": self.requests,
            "errors": self.errors,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "pinch_tokens_saved": self.pinch_tokens_saved,
            "spent": round(self.spent, DOLLAR_DIGITS),
            "saved_by_pinch": round(self.unpinched - self.spent, DOLLAR_DIGITS),
            "saved_by_routing": routing,
        }
        if brief:
            return figures
        return {
            **figures,
            "client_closed": self.client_closed,
            "fallbacks": self.fallbacks,
            "cached_tokens": self.cached_tokens,
            "cache_share": self.cached_tokens / self.cache_reported_prompt if self.cache_reported_prompt else None,
            "unpinched": round(self.unpinched, DOLLAR_DIGITS),
            "reference": round(self.reference, DOLLAR_DIGITS) if self.routing_priced else None,
            "routing_priced_requests": self.routing_priced,
            "unpriced_requests": self.unpriced,
        }


_SUM_FIELDS = tuple(f.name for f in fields(Sums))


def row_sums(row: Mapping[str, Any], cost: RowCost) -> Sums:
    """What one row adds."""
    prompt, cached = row.get("prompt_tokens"), row.get("cached_tokens")
    before, after = row.get("tokens_before"), row.get("tokens_after")
    reported = cached is not None and prompt is not None
    sums = Sums(
        requests=1,
        errors=int(is_error(row)),
        client_closed=int(row["status"] == CLIENT_CLOSED),
        fallbacks=int(attempts(row) > 1),
        tokens_in=prompt or 0,
        tokens_out=row.get("completion_tokens") or 0,
        cached_tokens=cached if reported else 0,
        cache_reported_prompt=prompt if reported else 0,
        pinch_tokens_saved=before - after if before is not None and after is not None else 0,
    )
    if cost.cost is None:
        sums.unpriced = int(row.get("model") is not None)
        return sums
    sums.spent = cost.cost
    sums.unpinched = cost.unpinched if cost.unpinched is not None else cost.cost
    if cost.reference is not None:
        sums.reference, sums.referenced_spent, sums.routing_priced = cost.reference, cost.cost, 1
    return sums


def bucket_of(ts: float, bucket_seconds: float) -> int:
    """The clock's bucket ``ts`` falls in: buckets are aligned to the epoch (a 4-hour bucket starts at 0:00,
    4:00, ... UTC), so that a bucket past is the same bucket on every refresh (its sums can be kept). The
    division truncated, as SQLite's ``CAST(ts / b AS INTEGER)`` does it (times are positive)."""
    return int(ts / bucket_seconds)


@frozen
class Group:
    """The sums of a window's rows of one time bucket (counted from the window's first, the one ``since``
    falls in), answering model, classification source and error (``error``: the code of an error answer,
    ``http_<status>`` without one; None: no error)."""

    bucket: int
    model: str | None
    source: str | None
    error: str | None
    sums: Sums


def error_key(row: Mapping[str, Any]) -> str | None:
    return (row.get("error_code") or f"http_{row['status']}") if is_error(row) else None


def overview(rows: Sequence[Mapping[str, Any]], costs: Sequence[RowCost], since: float, until: float, bucket_seconds: float) -> dict[str, Any]:
    """The window ``[since, until)``: totals, the model mix, classification sources, error codes, and a
    timeline of the clock's ``bucket_seconds`` buckets (:func:`bucket_of`) from the one ``since`` falls
    in (each total per bucket; the first and the last hold the window's part of them only)."""
    groups: dict[tuple[int, str | None, str | None, str | None], Sums] = {}
    first = bucket_of(since, bucket_seconds)
    for row, cost in zip(rows, costs, strict=True):
        ts = row["ts"]
        if not since <= ts < until:
            continue
        key = (bucket_of(ts, bucket_seconds) - first, row.get("model"), row.get("source"), error_key(row))
        sums = groups.get(key)
        if sums is None:
            sums = groups[key] = Sums()
        sums.add(row_sums(row, cost))
    return overview_of_groups((Group(*key, sums) for key, sums in groups.items()), since, until, bucket_seconds)


def overview_of_groups(groups: Iterable[Group], since: float, until: float, bucket_seconds: float) -> dict[str, Any]:
    """:func:`overview`'s answer from its groups' sums."""
    first = bucket_of(since, bucket_seconds)
    buckets = max(1, math.ceil(until / bucket_seconds) - first)
    series: dict[str, list[float]] = {name: [0] * buckets for name in SERIES}
    totals = Sums()
    models: dict[str, Sums] = {}
    sources: dict[str, int] = {}
    error_codes: dict[str, int] = {}
    for group in groups:
        s = group.sums
        totals.add(s)
        models.setdefault(group.model or "none", Sums()).add(s)
        if group.source:
            sources[group.source] = sources.get(group.source, 0) + s.requests
        if group.error is not None:
            error_codes[group.error] = error_codes.get(group.error, 0) + s.requests
        i = min(group.bucket, buckets - 1)
        for name, value in (
            ("requests", s.requests), ("errors", s.errors), ("tokens_in", s.tokens_in), ("tokens_out", s.tokens_out),
            ("cached_tokens", s.cached_tokens), ("spent", s.spent), ("unpinched", s.unpinched),
            # without routing: the reference where there is one, else what was spent
            ("reference", s.reference + s.spent - s.referenced_spent),
        ):  # fmt: skip
            series[name][i] += value
    for name in ("spent", "unpinched", "reference"):
        series[name] = [round(v, DOLLAR_DIGITS) for v in series[name]]
    return {
        "since": since,
        "until": until,
        "bucket_seconds": bucket_seconds,
        **totals.as_json(),
        "models": sorted(({"model": name, **t.as_json(brief=True)} for name, t in models.items()), key=lambda m: (-m["requests"], m["model"])),
        "sources": dict(sorted(sources.items(), key=lambda item: (-item[1], item[0]))),
        "error_codes": dict(sorted(error_codes.items(), key=lambda item: (-item[1], item[0]))),
        "timeline": {"t": [(first + i) * bucket_seconds for i in range(buckets)], **series},
    }


@frozen
class SessionGroup:
    """The sums of a session's rows in a window answered by one model (None: none answered) through one
    client API, with the first and last time among them."""

    session: str
    client: str | None
    wire: str | None
    model: str | None
    first_seen: float
    last_seen: float
    sums: Sums


def session_summaries(rows: Sequence[Mapping[str, Any]], costs: Sequence[RowCost], since: float, limit: int | None = None) -> list[dict[str, Any]]:
    """Each session with rows from ``since`` on, its latest first (the ``limit`` latest when given):
    its key, client key name, client API, first and last request, and its totals over those rows."""
    groups: dict[tuple[str, str | None, str | None], list[Any]] = {}
    for row, cost in zip(rows, costs, strict=True):
        session, ts = row.get("session"), row["ts"]
        if session is None or ts < since:
            continue
        key = (session, row.get("wire_in"), row.get("model"))
        group = groups.get(key)
        if group is None:
            group = groups[key] = [row.get("client"), ts, ts, Sums()]
        group[2] = ts
        group[3].add(row_sums(row, cost))
    return sessions_of_groups((SessionGroup(s, client, wire, model, first, last, sums) for (s, wire, model), (client, first, last, sums) in groups.items()), limit)


def sessions_of_groups(groups: Iterable[SessionGroup], limit: int | None = None) -> list[dict[str, Any]]:
    """:func:`session_summaries`' answer from its groups' sums: a session's API is its first request's, its
    models are ordered by their requests (then by when they first answered)."""
    sessions: dict[str, list[SessionGroup]] = {}
    for group in groups:
        sessions.setdefault(group.session, []).append(group)
    summaries = []
    for session, parts in sessions.items():
        first = min(parts, key=lambda g: g.first_seen)
        totals = Sums()
        models: dict[str, tuple[int, float]] = {}
        for part in parts:
            totals.add(part.sums)
            if part.model:
                count, seen = models.get(part.model, (0, part.first_seen))
                models[part.model] = (count + part.sums.requests, min(seen, part.first_seen))
        summaries.append(
            {
                "session": session,
                "client": first.client,
                "wire": first.wire,
                "first_seen": first.first_seen,
                "last_seen": max(part.last_seen for part in parts),
                "models": [m for m, _ in sorted(models.items(), key=lambda item: (-item[1][0], item[1][1]))],
                **totals.as_json(brief=True),
            }
        )
    summaries.sort(key=lambda s: (-s["last_seen"], s["session"]))  # ties (one clock tick) in a stable order
    return summaries if limit is None else summaries[:limit]


TURN_FIELDS = (
    "request_id", "ts", "status", "error_code", "requested_model", "model", "category", "tier", "routed_tier", "source",
    "tokens_before", "tokens_after", "prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens",
    "pinch_mode", "pinch_reapplied", "pinch_newly_compressed", "pinch_restored", "pinch_first_sight_new",
    "pinch_first_sight_saved", "retrieve_calls", "duration_ms", "overhead_ms", "first_byte_ms",
)  # fmt: skip


def session_turns(rows: Sequence[Mapping[str, Any]], costs: Sequence[RowCost]) -> list[dict[str, Any]]:
    """One session's requests in order, each with its figures, its dollars and the running totals of
    what was spent and what it would have cost unpinched (eval-pinch's cumulative cost chart)."""
    turns = []
    spent = unpinched = 0.0
    for row, cost in zip(rows, costs, strict=True):
        spent += cost.cost or 0.0
        unpinched += cost.unpinched if cost.unpinched is not None else (cost.cost or 0.0)
        turns.append(
            {
                **{name: row.get(name) for name in TURN_FIELDS},
                "attempts": attempts(row),
                "cost": _dollars(cost.cost),
                "unpinched": _dollars(cost.unpinched),
                "reference": _dollars(cost.reference),
                "reference_model": cost.reference_model,
                "spent_so_far": round(spent, DOLLAR_DIGITS),
                "unpinched_so_far": round(unpinched, DOLLAR_DIGITS),
            }
        )
    return turns


def is_error(row: Mapping[str, Any]) -> bool:
    return row["status"] >= 400 and row["status"] != CLIENT_CLOSED


def attempts(row: Mapping[str, Any]) -> int:
    count = row.get("attempt_count")
    if count is not None:
        return count
    return len(row.get("attempts") or ())


def _dollars(value: float | None) -> float | None:
    return None if value is None else round(value, DOLLAR_DIGITS)
