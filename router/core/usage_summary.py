"""The dashboard's figures, summed from decision rows and their prices (:mod:`router.core.pricing`). Pure.

Three views, each a JSON-ready dict or list: the :func:`overview` of a window (totals, dollars, the
model mix, classification sources, errors, and the same per time bucket for the charts), the
:func:`session_summaries` of the sessions active in it, and one session's :func:`session_turns`.
Rows are the decision log's (dicts with its column names) in arrival order; rows before ``since``
may be given too — they price the first requests of the window (a session's cache was warm or not)
and are counted nowhere. A row's attempts are ``attempt_count`` where the reader counted them in
SQL, else the length of its ``attempts``. Nothing here reads content: the rows hold none.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from router.core.pricing import RowCost

CLIENT_CLOSED = 499  # the client left before the answer ended (router.observe.decision_record)
DOLLAR_DIGITS = 9  # dollars are rounded to nano-dollars in what is returned


def overview(rows: Sequence[Mapping[str, Any]], costs: Sequence[RowCost], since: float, until: float, bucket_seconds: float) -> dict[str, Any]:
    """The window ``[since, until)``: totals, the model mix, classification sources, error codes, and a
    timeline of ``bucket_seconds`` buckets from ``since`` (each total per bucket)."""
    buckets = max(1, math.ceil((until - since) / bucket_seconds))
    series = {name: [0.0] * buckets for name in ("requests", "errors", "tokens_in", "tokens_out", "cached_tokens", "spent", "unpinched", "reference")}
    totals = _Totals()
    models: dict[str, _Totals] = {}
    sources: Counter[str] = Counter()
    error_codes: Counter[str] = Counter()
    for row, cost in zip(rows, costs, strict=True):
        ts = row["ts"]
        if not since <= ts < until:
            continue
        totals.add(row, cost)
        models.setdefault(row.get("model") or "none", _Totals()).add(row, cost)
        if row.get("source"):
            sources[row["source"]] += 1
        if _is_error(row):
            error_codes[row.get("error_code") or f"http_{row['status']}"] += 1
        i = int((ts - since) // bucket_seconds)
        series["requests"][i] += 1
        series["errors"][i] += _is_error(row)
        series["tokens_in"][i] += row.get("prompt_tokens") or 0
        series["tokens_out"][i] += row.get("completion_tokens") or 0
        series["cached_tokens"][i] += row.get("cached_tokens") or 0
        series["spent"][i] += cost.cost or 0.0
        series["unpinched"][i] += cost.unpinched if cost.unpinched is not None else 0.0
        series["reference"][i] += cost.reference if cost.reference is not None else (cost.cost or 0.0)
    for name in ("spent", "unpinched", "reference"):
        series[name] = [round(v, DOLLAR_DIGITS) for v in series[name]]
    for name in ("requests", "errors", "tokens_in", "tokens_out", "cached_tokens"):
        series[name] = [int(v) for v in series[name]]
    return {
        "since": since,
        "until": until,
        "bucket_seconds": bucket_seconds,
        **totals.as_json(),
        "models": sorted(({"model": name, **t.as_json(brief=True)} for name, t in models.items()), key=lambda m: (-m["requests"], m["model"])),
        "sources": dict(sorted(sources.items(), key=lambda item: (-item[1], item[0]))),
        "error_codes": dict(sorted(error_codes.items(), key=lambda item: (-item[1], item[0]))),
        "timeline": {"t": [since + i * bucket_seconds for i in range(buckets)], **series},
    }


def session_summaries(rows: Sequence[Mapping[str, Any]], costs: Sequence[RowCost], since: float, limit: int | None = None) -> list[dict[str, Any]]:
    """Each session with rows from ``since`` on, its latest first (the ``limit`` latest when given):
    its key, client key name, client API, first and last request, and its totals over those rows."""
    sessions: dict[str, _Totals] = {}
    for row, cost in zip(rows, costs, strict=True):
        session = row.get("session")
        if session is None or row["ts"] < since:
            continue
        summary = sessions.get(session)
        if summary is None:
            summary = sessions[session] = _Totals()
            summary.first = row
        summary.add(row, cost)
        summary.last = row
    latest = sorted(sessions.items(), key=lambda item: -item[1].last_ts)
    if limit is not None:
        latest = latest[:limit]
    return [
        {
            "session": session,
            "client": t.first.get("client"),
            "wire": t.first.get("wire_in"),
            "first_seen": t.first["ts"],
            "last_seen": t.last_ts,
            "models": [model for model, _ in t.model_counts.most_common()],
            **t.as_json(brief=True),
        }
        for session, t in latest
    ]


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
                "attempts": _attempts(row),
                "cost": _dollars(cost.cost),
                "unpinched": _dollars(cost.unpinched),
                "reference": _dollars(cost.reference),
                "reference_model": cost.reference_model,
                "spent_so_far": round(spent, DOLLAR_DIGITS),
                "unpinched_so_far": round(unpinched, DOLLAR_DIGITS),
            }
        )
    return turns


class _Totals:
    """Running totals over rows (a window's, a model's, a session's)."""

    __slots__ = (
        "requests", "errors", "client_closed", "fallbacks", "tokens_in", "tokens_out", "cached_tokens", "cache_reported_prompt",
        "pinch_tokens_saved", "spent", "unpinched", "reference", "referenced_spent", "routing_priced", "unpriced", "model_counts",
        "first", "last",
    )  # fmt: skip

    def __init__(self) -> None:
        self.requests = self.errors = self.client_closed = self.fallbacks = 0
        self.tokens_in = self.tokens_out = self.cached_tokens = self.cache_reported_prompt = self.pinch_tokens_saved = 0
        self.spent = self.unpinched = self.reference = self.referenced_spent = 0.0
        self.routing_priced = self.unpriced = 0
        self.model_counts: Counter[str] = Counter()
        self.first: Mapping[str, Any] = {}
        self.last: Mapping[str, Any] = {}

    @property
    def last_ts(self) -> float:
        return self.last["ts"]

    def add(self, row: Mapping[str, Any], cost: RowCost) -> None:
        self.requests += 1
        self.errors += _is_error(row)
        self.client_closed += row["status"] == CLIENT_CLOSED
        self.fallbacks += _attempts(row) > 1
        prompt = row.get("prompt_tokens")
        self.tokens_in += prompt or 0
        self.tokens_out += row.get("completion_tokens") or 0
        cached = row.get("cached_tokens")
        if cached is not None and prompt is not None:
            self.cached_tokens += cached
            self.cache_reported_prompt += prompt
        before, after = row.get("tokens_before"), row.get("tokens_after")
        if before is not None and after is not None:
            self.pinch_tokens_saved += before - after  # net, as x-router-pinch-saved: the retrieve tool pinch adds counts against
        if row.get("model"):
            self.model_counts[row["model"]] += 1
        if cost.cost is None:
            self.unpriced += row.get("model") is not None  # answered, but no usage or no price known
            return
        self.spent += cost.cost
        self.unpinched += cost.unpinched if cost.unpinched is not None else cost.cost
        if cost.reference is not None:
            self.reference += cost.reference
            self.referenced_spent += cost.cost
            self.routing_priced += 1

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


def _is_error(row: Mapping[str, Any]) -> bool:
    return row["status"] >= 400 and row["status"] != CLIENT_CLOSED


def _attempts(row: Mapping[str, Any]) -> int:
    count = row.get("attempt_count")
    if count is not None:
        return count
    return len(row.get("attempts") or ())


def _dollars(value: float | None) -> float | None:
    return None if value is None else round(value, DOLLAR_DIGITS)
