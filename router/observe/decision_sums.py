"""The dashboard's sums over a window of the decision log, in SQL, for a log of any size.

:mod:`router.core.usage_summary` sums rows one by one, priced by :func:`router.core.pricing.price_rows`:
the spec, tested with plain data, and what one session's page uses. A week of a team's requests is
100,000 rows and more; read and priced in Python they took seconds. Here one query per view does the
same in SQLite and sums into the very groups the core assembles its answer from
(:class:`~router.core.usage_summary.Group`, :class:`~router.core.usage_summary.SessionGroup`).
``tests/unit/observe/test_decision_sums.py`` holds the two equal on generated logs.

What makes it fast (``bench/bench_dashboard.py``: ~0.8 s of CPU a view at 100,000 rows before, a
fraction now):

* **Token counts are summed, not dollars.** A price is linear in the tokens it prices
  (:meth:`~router.core.pricing.ModelPrice.dollars`), so the query sums each row's tokens by the part
  they are priced as — fresh, read from the cache, written to it, answer; sent, and unpinched — per
  group and answering model, and Python prices each group's sums once. The rows' counts stay
  integers to the end (more exact than summing a float a row), and SQLite evaluates a few integer
  expressions a row instead of a tree of dollar expressions that its flattening of the steps repeated.
* **A row's previous one is looked up only where its price depends on it**: a rewrite by pinch on a
  provider that reports cache figures (was the cache warm?), and a row without cache figures compared
  with a reference (what would its cache have served?) — by a seek in the session index, in arrival
  order (``ts``, then ``rowid``). A window function (``LAG``) over every row of the window carried
  every column the sums read through its partition buffer and cost more than all the rest.
* The query reads the window's rows only: a previous row before the window is found in the index
  whatever its age (it counts only within a cache lifetime, as in the spec).
* The overview of a day or a week reads its rows' figures summed by half-hour as they were written
  (:mod:`router.observe.half_hour_sums`, from :func:`row_figures`; a :data:`LINKED` row's from
  :func:`row_steps` with its previous row), and sums here only the rows of its first and open
  half-hours (and the linked rows of a half-hour whose stored classes the prices' lifetimes split).

The prices go in as ``VALUES`` tables: one row per priced model (its cache lifetime), and one per
requested model name found in the window with the reference it is compared with
(:meth:`~router.core.pricing.Prices.reference_for`, decided in Python: names match by prefix),
numbered so that each group is priced at exactly its reference's price.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from router.core.pricing import ModelPrice, Prices
from router.core.usage_summary import CLIENT_CLOSED, Group, SessionGroup, Sums, bucket_of

# Per group: the counts of requests and tokens (Sums' first nine fields, in order), then the token
# counts its dollars are priced from (priced_sums). A group's rows were all answered by one model and
# compared with one reference: the figures of a group without a price or a reference are not read, so
# none of them asks whether its row is priced (a row without a prompt figure sums to NULL: skipped).
# Most rows: cache figures reported, pinch rewrote nothing (no previous row looked up), the cached part
# within the prompt, and what pinch removed not more than it: the unpinched prompt's cached part is the
# cached part plus what pinch removed (cu = c + removed), its rest what was not cached (x = p - c), of
# which the written part is what was written (x * w / (p - c) = w, at most p - c).
_PLAIN = "(prev_ts IS NULL AND c > 0 AND c <= p AND c + COALESCE(removed, 0) >= 0)"
FIGURES = (
    "1",  # requests
    f"status >= 400 AND status != {CLIENT_CLOSED}",
    f"status = {CLIENT_CLOSED}",
    "COALESCE(attempt_count, 0) > 1",
    "COALESCE(p, 0)",
    "COALESCE(o, 0)",
    "CASE WHEN p IS NOT NULL THEN c0 ELSE 0 END",  # the cached part: read from the cache, for the cost too
    "CASE WHEN c IS NOT NULL AND p IS NOT NULL THEN p ELSE 0 END",
    "COALESCE(removed, 0)",
    "p IS NOT NULL",  # priced, where the model is
    "MAX(p - c0 - w, 0)",
    "CASE WHEN p IS NOT NULL THEN w END",
    "o * (p IS NOT NULL)",
    # unpinched: the rest, the cached part, and of the rest the request's share written (x * w / (p - c), at
    # most x); a plain row's (see _PLAIN) written out, without the general expressions (dear: cu is in x)
    f"CASE WHEN {_PLAIN} THEN p - c ELSE x END",
    f"CASE WHEN {_PLAIN} THEN c + COALESCE(removed, 0) ELSE cu END",
    f"CASE WHEN {_PLAIN} THEN MIN(w, p - c) WHEN w > 0 AND c IS NOT NULL AND p - c > 0 THEN (CASE WHEN w < p - c THEN x * w / (p - c) ELSE x END) ELSE 0 END",
    # the reference's: what the provider reported (the cost's figures), or what rc says where it reported none
    "CASE WHEN c IS NULL THEN MAX(p - rc - rw, 0) ELSE MAX(p - c - w, 0) END",
    "CASE WHEN p IS NULL THEN NULL WHEN c IS NULL THEN rc ELSE c END",
    "CASE WHEN p IS NULL THEN NULL WHEN c IS NULL THEN rw ELSE w END",
)
ERROR = f"CASE WHEN status >= 400 AND status != {CLIENT_CLOSED} THEN COALESCE(error_code, 'http_' || status) END"  # a group's error
_SUMS = ",\n    ".join(f"TOTAL({figure})" for figure in FIGURES)
_COUNTS = 9
_SUM_COUNT = len(FIGURES)
# The prompt of the rows without cache figures, as is and at least 0: a row without a previous one has
# rc = 0, so its reference's figures are these where the reference prices writes (rw = p) and where
# it does not (rw = 0) — what the stored sums, priced without a reference, need to be priced with one.
UNREPORTED = ("CASE WHEN c IS NULL THEN p END", "CASE WHEN c IS NULL THEN MAX(p, 0) END")


# A row's columns as the figures name them (``{r}``: the row's name in the query)
_ROW = """{r}.ts AS ts, {r}.status AS status, {r}.error_code AS error_code, {r}.session AS session, {r}.client AS client,
        {r}.requested_model AS requested_model, {r}.model AS model, {r}.source AS source, {r}.wire_in AS wire_in,
        {r}.prompt_tokens AS p, {r}.completion_tokens AS o, {r}.cached_tokens AS c, COALESCE({r}.cache_write_tokens, 0) AS w,
        COALESCE({r}.cached_tokens, 0) AS c0, {r}.tokens_before - {r}.tokens_after AS removed,
        {r}.prompt_tokens + COALESCE({r}.tokens_before - {r}.tokens_after, 0) AS u,
        json_array_length({r}.attempts) AS attempt_count,
        COALESCE({r}.pinch_newly_compressed, 0) + COALESCE({r}.pinch_restored, 0) > 0 AS rewrote"""
# The columns computed from those and the previous row's, in three steps (each names the one before)
_CACHED = """CASE WHEN c IS NULL THEN 0
             WHEN prev_ts IS NOT NULL AND rewrote AND prev_model = model AND ts - prev_ts <= life THEN MIN(u, MAX(c, COALESCE(prev_u, 0)))
             WHEN c > 0 THEN MAX(MIN(u, c + COALESCE(removed, 0)), 0)
             ELSE 0 END AS cu,
        CASE WHEN prev_ts IS NOT NULL AND ts - prev_ts <= rlife THEN MIN(p, COALESCE(prev_p, 0)) ELSE 0 END AS rc"""
# The previous row's columns the figures read (``{q}``: its name in the query)
_PREVIOUS = """{q}.ts AS prev_ts, {q}.model AS prev_model, {q}.prompt_tokens AS prev_p,
        {q}.prompt_tokens + COALESCE({q}.tokens_before - {q}.tokens_after, 0) AS prev_u, {q}.client AS prev_client"""
_NO_PREVIOUS = "NULL AS prev_ts, NULL AS prev_model, NULL AS prev_p, NULL AS prev_u, NULL AS prev_client"
_REFERENCE_WRITTEN = "CASE WHEN rwrites THEN p - rc ELSE 0 END AS rw"
_REST = "MAX(u - cu, 0) AS x"
# Whether a row's figures depend on its session's previous row (its price does, where the model is
# priced): a rewrite by pinch on a provider that reports cache figures (was the cache warm?), or a row
# without cache figures (what would the reference's cache have served?). ``{r}``: the row's name.
LINKED = (
    "{r}.session IS NOT NULL AND {r}.prompt_tokens IS NOT NULL"
    " AND ({r}.cached_tokens IS NULL OR COALESCE({r}.pinch_newly_compressed, 0) + COALESCE({r}.pinch_restored, 0) > 0)"
)


def row_figures(row: str, source: str = "") -> str:
    """A ``SELECT`` of the row named ``row`` (``NEW`` or ``OLD`` in a trigger; or each row of ``source``,
    a ``FROM`` clause naming it): its ``ts``, ``client``, ``requested_model``, ``model``, ``source``,
    ``error`` (:data:`ERROR`), then :data:`FIGURES` and :data:`UNREPORTED` as ``f0``, ``f1``, ... (0 for
    NULL), priced as a row without a previous one and without a reference: what
    :mod:`router.observe.half_hour_sums` stores of a row that is not :data:`LINKED`."""
    figures = ", ".join(f"COALESCE({figure}, 0) AS f{i}" for i, figure in enumerate((*FIGURES, *UNREPORTED)))
    return f"SELECT ts, client, requested_model, model, source, {ERROR} AS error, {figures} FROM ({row_steps(row, source)})"


def row_steps(row: str, source: str = "", previous: str | None = None) -> str:
    """A ``SELECT`` of the row named ``row`` in ``source`` (as :func:`row_figures`) with every column
    :data:`FIGURES` and :data:`UNREPORTED` name, priced as a row without a previous one and without a
    reference; with ``previous`` (the previous row's name in ``source``), as the read-time query prices
    a linked row whose previous row is beyond every lifetime (far), and with the columns
    :func:`near_figure` reads: the same row priced with its previous row within every lifetime (near)."""
    before = _NO_PREVIOUS if previous is None else _PREVIOUS.format(q=previous)
    lifetimes = "NULL AS life, NULL AS rlife, NULL AS rwrites"
    if previous is not None:
        lifetimes += ", 1e999 AS life_n, 1e999 AS rlife_n, 0 AS rwrites_n, 1 AS rwrites_w"
    alone = f"SELECT {_ROW.format(r=row)}, {before}, {lifetimes} {source}"
    steps = f"SELECT *, {_REST} FROM (SELECT *, {_REFERENCE_WRITTEN} FROM (SELECT *, {_CACHED} FROM ({alone})))"
    if previous is None:
        return steps
    cached, written = _renamed(_CACHED, _NEAR), _renamed(_REFERENCE_WRITTEN, _NEAR)
    return f"SELECT *, {_renamed(_REST, _NEAR)} FROM (SELECT *, {written}, {_renamed(_REFERENCE_WRITTEN, _NEAR_WRITES)} FROM (SELECT *, {cached} FROM ({steps})))"


# The columns of a row priced near (row_steps): every lifetime infinite, a reference not pricing writes
# (_n), or pricing them (rw_w: all else as _n)
_NEAR = {name: f"{name}_n" for name in ("cu", "rc", "rw", "x", "life", "rlife", "rwrites")}
_NEAR_WRITES = _NEAR | {"rw": "rw_w", "rwrites": "rwrites_w"}


def _renamed(sql: str, names: dict[str, str]) -> str:
    return re.sub(r"\b(" + "|".join(names) + r")\b", lambda name: names[name.group(1)], sql)


def near_figure(i: int, writes: bool = False) -> str:
    """:data:`FIGURES`' ``i``-th of a row of :func:`row_steps` with a previous row, priced near (where
    the reference prices cache writes, when ``writes``)."""
    return _renamed(FIGURES[i], _NEAR_WRITES if writes else _NEAR)


def _priced_rows(client: str | None, models: int, requested: int, linked: bool = False) -> str:
    """The common table expressions ending in ``priced_rows``: the window's rows (the :data:`LINKED`
    ones only, when ``linked``), each with the token counts its dollars are priced from (``cu``, ``x``:
    the unpinched prompt's cached part and the rest; ``rc``: the reference's cached part where the
    provider reported none)."""
    scope = "AND d.client = :client" if client is not None else ""
    if linked:  # written as the partial index decisions_linked is, for SQLite to read it
        scope += f" AND {LINKED.format(r='d')}"
    previous_scope = "AND e.client = :client" if client is not None else ""
    # the prices' few names as CASE expressions, not joins: a join scanned its VALUES table for every row
    priced = f"d.model IN ({', '.join(f':m{i}' for i in range(models))})"
    life = _case("d.model", [(f":m{i}", f":m{i}_life") for i in range(models)])
    requested_model = "COALESCE(d.requested_model, '')"
    rid = _case(requested_model, [(f":r{i}", str(i)) for i in range(requested)])
    rlife = _case(requested_model, [(f":r{i}", f":r{i}_life") for i in range(requested)])
    rwrites = _case(requested_model, [(f":r{i}", f":r{i}_writes") for i in range(requested)])
    return f"""
window_rows AS (
    SELECT {_ROW.format(r="d")},
        {_PREVIOUS.format(q="before")},
        {life} AS life, {rid} AS rid, {rlife} AS rlife, {rwrites} AS rwrites
    FROM decisions d
    -- the session's previous row, for the rows whose price depends on it only
    LEFT JOIN decisions before ON before.rowid = CASE
        WHEN {priced} AND {LINKED.format(r="d")}
        THEN (
            SELECT e.rowid FROM decisions e INDEXED BY decisions_session
            WHERE e.session = d.session AND e.ts <= d.ts AND (e.ts < d.ts OR e.rowid < d.rowid) {previous_scope}
            ORDER BY e.ts DESC, e.rowid DESC LIMIT 1) END
    WHERE d.ts >= :since AND d.ts < :until {scope}
),
cached AS (SELECT *, {_CACHED} FROM window_rows),
reference_cached AS (SELECT *, {_REFERENCE_WRITTEN} FROM cached),
priced_rows AS (SELECT *, {_REST} FROM reference_cached)
"""


def _case(subject: str, whens: list[tuple[str, str]]) -> str:
    """``CASE subject WHEN a THEN b ... END`` (NULL without any)."""
    return f"CASE {subject} {' '.join(f'WHEN {a} THEN {b}' for a, b in whens)} END" if whens else "NULL"


def _parameters(prices: Prices, requested: Iterable[str | None], since: float, until: float, client: str | None) -> tuple[dict[str, Any], int, list[tuple[str, ModelPrice]]]:
    parameters: dict[str, Any] = {"since": since, "until": until, "client": client}
    models = list(prices.models.items())
    for i, (name, price) in enumerate(models):
        parameters |= {f"m{i}": name, f"m{i}_life": price.cache_lifetime_seconds}
    compared = []
    for name in dict.fromkeys(n or "" for n in requested):
        reference = prices.reference_for(name or None)
        if reference is not None:
            compared.append((name, reference))
    for i, (name, (ref, price)) in enumerate(compared):
        parameters |= {f"r{i}": name, f"r{i}_ref": ref, f"r{i}_life": price.cache_lifetime_seconds, f"r{i}_writes": price.cache_write is not None}
    return parameters, len(models), [reference for _, reference in compared]


def _requested_models(conn: sqlite3.Connection, since: float, until: float, client: str | None, linked: bool) -> list[str | None]:
    scope, args = ("AND client = ?", (since, until, client)) if client is not None else ("", (since, until))
    if linked:
        scope += f" AND {LINKED.format(r='decisions')}"
    return [row[0] for row in conn.execute(f"SELECT DISTINCT requested_model FROM decisions WHERE ts >= ? AND ts < ? {scope}", args)]


def _query(conn: sqlite3.Connection, prices: Prices, since: float, until: float, client: str | None, select: str, linked: bool = False) -> list[tuple[Any, ...]]:
    """``select`` over the window's priced rows (the :data:`LINKED` ones only, when ``linked``): its
    columns the reference's number, the answering model, any others, then ``_SUMS``; each result row
    as the model, the others and its priced :class:`Sums`."""
    requested = _requested_models(conn, since, until, client, linked)
    parameters, models, references = _parameters(prices, requested, since, until, client)
    rows = conn.execute(f"WITH {_priced_rows(client, models, len(references), linked).strip()} {select}", parameters).fetchall()
    priced = []
    for rid, model, *others in rows:
        price = prices.models.get(model) if model is not None else None
        reference = None if rid is None else references[rid]
        others, values = others[: -_SUM_COUNT], others[-_SUM_COUNT:]
        priced.append((model, *others, priced_sums(values, model, price, reference)))
    return priced


def priced_sums(values: tuple[Any, ...], model: str | None, price: ModelPrice | None, reference: tuple[str, ModelPrice] | None) -> Sums:
    """A group's :class:`Sums` from its counts and token sums: all its rows answered by ``model`` (at
    ``price``; None: unpriced) and compared with one reference (its name and price; None: none)."""
    sums = Sums(*(int(v) for v in values[:_COUNTS]))
    priced, fresh, written, out, unpinched_rest, unpinched_cached, unpinched_written, ref_fresh, ref_cached, ref_written = (int(v) for v in values[_COUNTS:])
    if price is None:  # a model the config does not price: each of its answers is unpriced
        sums.unpriced = sums.requests if model is not None else 0
        return sums
    sums.unpriced = sums.requests - priced
    if not priced:
        return sums
    sums.spent = price.dollars(fresh, sums.cached_tokens, written, out)
    # the unpinched prompt: its cached part, and the rest, of which the request's share was written
    sums.unpinched = price.dollars(unpinched_rest - unpinched_written, unpinched_cached, unpinched_written, out)
    if reference is not None:
        if reference[0] == model:  # the model asked for answered: routing changed nothing
            sums.reference = sums.spent
        else:
            sums.reference = reference[1].dollars(ref_fresh, ref_cached, ref_written, out)
        sums.referenced_spent, sums.routing_priced = sums.spent, priced
    return sums


def overview_groups(conn: sqlite3.Connection, prices: Prices, since: float, until: float, bucket_seconds: float, client: str | None = None) -> list[Group]:
    """The groups of :func:`router.core.usage_summary.overview` for ``[since, until)`` (the client key
    named ``client``'s rows only, when given); a group may come in parts (one per reference compared with)."""
    first = bucket_of(since, bucket_seconds)
    return [replace(group, bucket=group.bucket - first) for group in clock_bucket_groups(conn, prices, since, until, bucket_seconds, client)]


def clock_bucket_groups(
    conn: sqlite3.Connection, prices: Prices, since: float, until: float, bucket_seconds: float, client: str | None = None, linked: bool = False
) -> list[Group]:
    """:func:`overview_groups`, each group's bucket the clock's (:func:`~router.core.usage_summary.bucket_of`),
    not counted from the window's first; of the :data:`LINKED` rows only when ``linked`` (the others'
    sums are stored: :mod:`router.observe.half_hour_sums`)."""
    rows = _query(conn, prices, since, until, client, f"""
        SELECT rid, model, CAST(ts / {float(bucket_seconds)!r} AS INTEGER), source, {ERROR}, {_SUMS}
        FROM priced_rows GROUP BY 3, 1, 2, 4, 5""", linked)  # fmt: skip
    return [Group(bucket, model, source, error, sums) for model, bucket, source, error, sums in rows]


def session_groups(conn: sqlite3.Connection, prices: Prices, since: float, until: float, client: str | None = None, limit: int | None = None) -> list[SessionGroup]:
    """The groups of :func:`router.core.usage_summary.session_summaries` for ``[since, until)``, of its
    ``limit`` latest sessions only when given (latest request first, then by key, as the list is
    sorted); a group may come in parts, as in :func:`overview_groups`."""
    chosen = ""
    if limit is not None:  # a list shows the latest sessions: the others' rows are not priced at all
        scope = "AND client = :client" if client is not None else ""
        chosen = f"""AND session IN (
            SELECT session FROM decisions WHERE ts >= :since AND ts < :until AND session IS NOT NULL {scope}
            GROUP BY session ORDER BY MAX(ts) DESC, session LIMIT {int(limit)})"""
    rows = _query(conn, prices, since, until, client, f"""
        SELECT rid, model, session, wire_in, MIN(client), MIN(ts), MAX(ts), {_SUMS}
        FROM priced_rows WHERE session IS NOT NULL {chosen} GROUP BY 3, 1, 2, 4""")  # fmt: skip
    return [SessionGroup(session, owner, wire, model, first, last, sums) for model, session, wire, owner, first, last, sums in rows]
