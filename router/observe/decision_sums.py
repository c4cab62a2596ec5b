"""The dashboard's sums over a window of the decision log, in SQL, for a log of any size.

:mod:`router.core.usage_summary` sums rows one by one, priced by :func:`router.core.pricing.price_rows`:
the spec, tested with plain data, and what one session's page uses. A week of a team's requests is
100,000 rows and more; read and priced in Python they took seconds. Here one query per view does the
same in SQLite: each row priced as :func:`~router.core.pricing.price_rows` prices it — the session's
previous request found by a window function (``LAG`` over the session's rows in arrival order, read
in the order of the session index: no sort) — and summed into the very groups the core assembles its answer from
(:class:`~router.core.usage_summary.Group`, :class:`~router.core.usage_summary.SessionGroup`).
``tests/unit/observe/test_decision_sums.py`` holds the two equal on generated logs.

The prices go in as ``VALUES`` tables: one row per priced model (its cache prices resolved: unset is
the input price), and one per requested model name found in the window with what it is compared with
(:meth:`~router.core.pricing.Prices.reference_for`, decided in Python: names match by prefix).
Integers stay integers to the last step (a written share is divided as integers, as the core does),
dollars are summed as floats (``TOTAL``), so the two sums differ in their last bits at most.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from router.core.pricing import PER_MTOK, ModelPrice, Prices
from router.core.usage_summary import CLIENT_CLOSED, Group, SessionGroup, Sums

_SUMS = f"""
    COUNT(*),
    TOTAL(status >= 400 AND status != {CLIENT_CLOSED}),
    TOTAL(status = {CLIENT_CLOSED}),
    TOTAL(COALESCE(attempt_count, 0) > 1),
    TOTAL(COALESCE(p, 0)),
    TOTAL(COALESCE(o, 0)),
    TOTAL(CASE WHEN c IS NOT NULL AND p IS NOT NULL THEN c ELSE 0 END),
    TOTAL(CASE WHEN c IS NOT NULL AND p IS NOT NULL THEN p ELSE 0 END),
    TOTAL(COALESCE(removed, 0)),
    TOTAL(cost IS NULL AND model IS NOT NULL),
    TOTAL(cost),
    TOTAL(COALESCE(unpinched, cost)),
    TOTAL(reference),
    TOTAL(CASE WHEN reference IS NOT NULL THEN cost END),
    TOTAL(reference IS NOT NULL)
"""
_INTEGER_SUMS = 10  # the first ten of _SUMS are counts of requests or tokens


def _priced_rows(client: str | None, models: int, requested: int) -> str:
    """The common table expressions ending in ``priced_rows``: the window's rows (from ``:lookback``),
    each with its dollars — ``cost``, ``unpinched``, ``reference`` (NULL: unpriced, or no reference)."""
    model_values = ", ".join(f"(:m{i}, :m{i}_in, :m{i}_out, :m{i}_read, :m{i}_write, :m{i}_life)" for i in range(models)) or "(NULL, 0, 0, 0, 0, 0)"
    requested_values = (
        ", ".join(f"(:r{i}, :r{i}_ref, :r{i}_in, :r{i}_out, :r{i}_read, :r{i}_write, :r{i}_life, :r{i}_writes)" for i in range(requested))
        or "(NULL, NULL, 0, 0, 0, 0, 0, 0)"
    )
    scope = "AND d.client = :client" if client is not None else ""
    return f"""
prices(model, pin, pout, pread, pwrite, life) AS (VALUES {model_values}),
refs(requested, ref, rin, rout, rread, rwrite, rlife, rwrites) AS (VALUES {requested_values}),
lagged AS (
    -- a row's previous one: its session's previous row, in arrival order (read in the order of the
    -- session index, so the rows need no sort), whatever became of it, as price_rows takes it; only
    -- the row id and what the previous row says, so that the window function carries few columns
    SELECT d.rowid AS rid, LAG(d.ts) OVER previous AS prev_ts, LAG(d.model) OVER previous AS prev_model,
        LAG(d.prompt_tokens) OVER previous AS prev_p,
        LAG(d.prompt_tokens + COALESCE(d.tokens_before - d.tokens_after, 0)) OVER previous AS prev_u
    FROM decisions d INDEXED BY decisions_session
    WHERE d.ts >= :lookback AND d.ts < :until {scope}
    WINDOW previous AS (PARTITION BY d.session ORDER BY d.ts, d.rowid)
),
window_rows AS (
    SELECT d.ts, d.status, d.error_code, d.session, d.client, d.model, d.source, d.wire_in,
        d.prompt_tokens AS p, d.completion_tokens AS o, d.cached_tokens AS c, COALESCE(d.cache_write_tokens, 0) AS w,
        d.tokens_before - d.tokens_after AS removed, json_array_length(d.attempts) AS attempt_count,
        COALESCE(d.pinch_newly_compressed, 0) + COALESCE(d.pinch_restored, 0) > 0 AS rewrote,
        l.prev_ts, l.prev_model, l.prev_p, l.prev_u,
        prices.model IS NOT NULL AND d.prompt_tokens IS NOT NULL AS priced,
        prices.pin, prices.pout, prices.pread, prices.pwrite, prices.life,
        refs.ref, refs.rin, refs.rout, refs.rread, refs.rwrite, refs.rlife, refs.rwrites
    FROM lagged l
    JOIN decisions d ON d.rowid = l.rid
    LEFT JOIN prices ON prices.model = d.model
    LEFT JOIN refs ON refs.requested = COALESCE(d.requested_model, '')
),
steps AS (
    SELECT *, p + COALESCE(removed, 0) AS u,
        session IS NOT NULL AND prev_ts IS NOT NULL AS has_previous,
        COALESCE(c, 0) AS c0
    FROM window_rows
),
unpinched_cache AS (
    SELECT *,
        CASE WHEN NOT priced OR c IS NULL THEN 0
             WHEN rewrote AND has_previous AND prev_model = model AND ts - prev_ts <= life THEN MIN(u, MAX(c, COALESCE(prev_u, 0)))
             WHEN c > 0 THEN MAX(MIN(u, c + COALESCE(removed, 0)), 0)
             ELSE 0 END AS cu,
        CASE WHEN has_previous AND ts - prev_ts <= rlife THEN MIN(p, COALESCE(prev_p, 0)) ELSE 0 END AS rc
    FROM steps
),
unpinched_writes AS (
    SELECT *,
        CASE WHEN NOT priced OR c IS NULL OR p - c <= 0 THEN 0 ELSE MIN(MAX(u - cu, 0) * w / (p - c), MAX(u - cu, 0)) END AS wu
    FROM unpinched_cache
),
costed AS (
    SELECT *, CASE WHEN priced THEN (MAX(p - c0 - w, 0) * pin + c0 * pread + w * pwrite + COALESCE(o, 0) * pout) / {PER_MTOK}.0 END AS cost
    FROM unpinched_writes
),
priced_rows AS MATERIALIZED (  -- computed once: the sums read its figures several times
SELECT ts, status, error_code, session, client, model, source, wire_in, p, o, c, removed, attempt_count, cost,
    CASE WHEN priced THEN (MAX(u - cu - wu, 0) * pin + cu * pread + wu * pwrite + COALESCE(o, 0) * pout) / {PER_MTOK}.0 END AS unpinched,
    CASE WHEN NOT priced OR ref IS NULL THEN NULL
         WHEN ref = model THEN cost
         WHEN c IS NOT NULL THEN (MAX(p - c - w, 0) * rin + c * rread + w * rwrite + COALESCE(o, 0) * rout) / {PER_MTOK}.0
         ELSE (MAX(p - rc - (CASE WHEN rwrites THEN p - rc ELSE 0 END), 0) * rin + rc * rread
               + (CASE WHEN rwrites THEN p - rc ELSE 0 END) * rwrite + COALESCE(o, 0) * rout) / {PER_MTOK}.0 END AS reference
FROM costed
)
"""


def _parameters(prices: Prices, requested: Iterable[str | None], since: float, until: float, client: str | None) -> tuple[dict[str, Any], int, int]:
    parameters: dict[str, Any] = {"lookback": since - prices.longest_lifetime, "since": since, "until": until, "client": client}
    models = list(prices.models.items())
    for i, (name, price) in enumerate(models):
        parameters |= {f"m{i}": name, **{f"m{i}_{k}": v for k, v in _resolved(price).items()}}
    compared = []
    for name in dict.fromkeys(n or "" for n in requested):
        reference = prices.reference_for(name or None)
        if reference is not None:
            compared.append((name, reference))
    for i, (name, (ref, price)) in enumerate(compared):
        parameters |= {f"r{i}": name, f"r{i}_ref": ref, **{f"r{i}_{k}": v for k, v in _resolved(price).items()}, f"r{i}_writes": price.cache_write is not None}
    return parameters, len(models), len(compared)


def _resolved(price: ModelPrice) -> dict[str, float]:
    return {
        "in": price.input,
        "out": price.output,
        "read": price.input if price.cache_read is None else price.cache_read,
        "write": price.input if price.cache_write is None else price.cache_write,
        "life": price.cache_lifetime_seconds,
    }


def _requested_models(conn: sqlite3.Connection, lookback: float, until: float, client: str | None) -> list[str | None]:
    scope, args = ("AND client = ?", (lookback, until, client)) if client is not None else ("", (lookback, until))
    return [row[0] for row in conn.execute(f"SELECT DISTINCT requested_model FROM decisions WHERE ts >= ? AND ts < ? {scope}", args)]


def _query(conn: sqlite3.Connection, prices: Prices, since: float, until: float, client: str | None, select: str) -> list[tuple[Any, ...]]:
    requested = _requested_models(conn, since - prices.longest_lifetime, until, client)
    parameters, models, compared = _parameters(prices, requested, since, until, client)
    return conn.execute(f"WITH {_priced_rows(client, models, compared).strip()} {select}", parameters).fetchall()


def _sums(values: tuple[Any, ...]) -> Sums:
    counts = [int(v) for v in values[:_INTEGER_SUMS]]
    return Sums(*counts, *values[_INTEGER_SUMS:-1], int(values[-1]))


def overview_groups(conn: sqlite3.Connection, prices: Prices, since: float, until: float, bucket_seconds: float, client: str | None = None) -> list[Group]:
    """The groups of :func:`router.core.usage_summary.overview` for ``[since, until)`` (the client key
    named ``client``'s rows only, when given)."""
    rows = _query(conn, prices, since, until, client, f"""
        SELECT CAST((ts - :since) / {float(bucket_seconds)!r} AS INTEGER), model, source,
            CASE WHEN status >= 400 AND status != {CLIENT_CLOSED} THEN COALESCE(error_code, 'http_' || status) END,
            {_SUMS}
        FROM priced_rows WHERE ts >= :since GROUP BY 1, 2, 3, 4""")  # fmt: skip
    return [Group(bucket, model, source, error, _sums(values)) for bucket, model, source, error, *values in rows]


def session_groups(conn: sqlite3.Connection, prices: Prices, since: float, until: float, client: str | None = None) -> list[SessionGroup]:
    """The groups of :func:`router.core.usage_summary.session_summaries` for ``[since, until)``."""
    rows = _query(conn, prices, since, until, client, f"""
        SELECT session, MIN(client), wire_in, model, MIN(ts), MAX(ts), {_SUMS}
        FROM priced_rows WHERE ts >= :since AND session IS NOT NULL GROUP BY session, wire_in, model""")  # fmt: skip
    return [SessionGroup(session, owner, wire, model, first, last, _sums(values)) for session, owner, wire, model, first, last, *values in rows]
