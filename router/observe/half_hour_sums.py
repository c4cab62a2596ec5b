"""The overview's sums by half-hour, stored in the decision log's file and kept true by its triggers.

A week's overview sums ~100,000 rows at a busy team's rate: summed in SQL on every view
(:mod:`router.observe.decision_sums`) that was ~0.4 s of CPU (``bench/bench_dashboard.py``). But most
rows' figures are their own: only a :data:`~router.observe.decision_sums.LINKED` row (a rewrite by
pinch on a provider reporting cache figures, a row without cache figures) is priced with its
session's previous row. So the others' figures — token counts, not dollars: a price is linear in
them — are summed as they are written, by half-hour, client key, requested and answering model,
classification source and error (``decision_half_hours``), priced as rows without a reference; the
requested model's reference (which the prices decide) moves two sums when it prices cache writes,
which :data:`~router.observe.decision_sums.UNREPORTED` carries. A view then reads the window's stored
half-hours, the linked rows in them (a partial index holds them), and every row of its first and open
half-hours (:func:`overview_groups`): the same groups the query of the whole window gives.

**True by construction.** Triggers on ``decisions`` add an inserted row's figures, take a deleted
row's off, and both for an update of a column they read, in the writer's own transaction — whoever
writes (``serve --workers N``: one file, several writers; the ``sqlite3`` shell). An ``INSERT OR
REPLACE`` deletes the row it replaces, which fires the delete trigger only with ``recursive_triggers``
on: :func:`ensure` turns it on for the connection (a writer that does not would count a replaced row
twice; the decision log is the only writer that replaces). Nothing depends on the prices: a config
reloaded with other prices reads the same sums. A file of an older version is summed once when it is
opened (:func:`ensure`).

The sums of a row's figures change only with this module's and :data:`~router.observe.decision_sums.FIGURES`'
definitions: a change of either must store them under another table's name.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import replace

from router.core.pricing import Prices
from router.core.usage_summary import Group, bucket_of
from router.observe.decision_sums import FIGURES, LINKED, UNREPORTED, clock_bucket_groups, priced_sums, row_figures

HALF_HOUR = 1_800.0  # the stored buckets' seconds: a view's buckets must be whole numbers of them to be read from them
TABLE = "decision_half_hours"
_KEYS = ("client", "requested_model", "model", "source", "error")
_SUMS = tuple(f"f{i}" for i in range(len(FIGURES) + len(UNREPORTED)))
_REFERENCE_FRESH, _REFERENCE_WRITTEN = len(FIGURES) - 3, len(FIGURES) - 1  # the reference's fresh and written parts (its three come last)
# the columns the figures and the keys read: an update of another (a request's outcome) changes no sum
_READ = (
    "ts", "status", "error_code", "session", "client", "requested_model", "model", "source", "attempts", "prompt_tokens",
    "completion_tokens", "cached_tokens", "cache_write_tokens", "tokens_before", "tokens_after", "pinch_newly_compressed", "pinch_restored",
)  # fmt: skip


def _counted(row: str, sign: str) -> str:
    """The statement adding (``sign`` ``+``) or taking off (``-``) the figures of the row named ``row``
    (``NEW``, ``OLD``) to its half-hour's group, unless it is linked. A key that is NULL is stored as
    an empty blob (no name is one), for the group to be one row of the unique key. (Sums beyond 64
    bits, of figures clipped to them, turn to floats: ``+`` does that, where ``SUM`` would fail.)"""
    keys = ", ".join(f"IFNULL({key}, x'')" for key in _KEYS)
    return f"""
    INSERT INTO {TABLE} SELECT CAST(ts / {HALF_HOUR!r} AS INTEGER), {keys}, {", ".join(f"{sign}{s}" for s in _SUMS)}
        FROM ({row_figures(row)}) WHERE NOT ({LINKED.format(r=row)})
        ON CONFLICT DO UPDATE SET {", ".join(f"{s} = {s} + excluded.{s}" for s in _SUMS)};"""


_SCHEMA = f"""
CREATE TABLE {TABLE} (half_hour INTEGER NOT NULL, {", ".join(f"{key} NOT NULL" for key in _KEYS)}, {", ".join(f"{s} NOT NULL" for s in _SUMS)},
    UNIQUE (half_hour, {", ".join(_KEYS)}));
CREATE INDEX IF NOT EXISTS decisions_linked ON decisions (ts) WHERE {LINKED.format(r="decisions")};
CREATE TRIGGER {TABLE}_insert AFTER INSERT ON decisions BEGIN {_counted("NEW", "")} END;
CREATE TRIGGER {TABLE}_delete AFTER DELETE ON decisions BEGIN {_counted("OLD", "-")} END;
CREATE TRIGGER {TABLE}_update AFTER UPDATE OF {", ".join(_READ)} ON decisions BEGIN {_counted("OLD", "-")} {_counted("NEW", "")} END;
INSERT INTO {TABLE} SELECT CAST(ts / {HALF_HOUR!r} AS INTEGER), {", ".join(f"IFNULL({key}, x'')" for key in _KEYS)}, {", ".join(f"TOTAL({s})" for s in _SUMS)}
    FROM ({row_figures("d", f"FROM decisions d WHERE NOT ({LINKED.format(r='d')})")}) GROUP BY 1, 2, 3, 4, 5, 6;
"""


def ensure(conn: sqlite3.Connection) -> None:
    """Turn on ``recursive_triggers`` for ``conn``, and give the log's file its stored sums where it has
    none: the table, its triggers and the sums of the rows already written, in one transaction (the
    workers of ``serve --workers N`` open one file at once: the first makes them, the others find them).
    ``conn`` in autocommit mode; the columns the figures read present."""
    conn.execute("PRAGMA recursive_triggers = ON")
    made = "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?"
    if conn.execute(made, (f"{TABLE}_update",)).fetchone():
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        if not conn.execute(made, (f"{TABLE}_update",)).fetchone():
            conn.execute(f"DROP TABLE IF EXISTS {TABLE}")  # a table without its triggers (none of this version makes one) is not true
            for statement in _statements(_SCHEMA):
                conn.execute(statement)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _statements(script: str) -> list[str]:
    """``script``'s statements, a trigger whole (its body's statements end in ``;`` too)."""
    statements, pending = [], ""
    for part in script.split(";"):
        pending += part + ";"
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    return [s for s in statements if s != ";"]


def overview_groups(conn: sqlite3.Connection, prices: Prices, since: float, until: float, bucket_seconds: float, client: str | None = None) -> list[Group]:
    """What :func:`router.observe.decision_sums.overview_groups` answers: the half-hours wholly in the
    window read from the stored sums and its linked rows, where its buckets are whole numbers of
    half-hours; the rest (the first and the open half-hour; all of a window in smaller buckets) summed
    from the rows."""
    start, end = math.ceil(since / HALF_HOUR), int(until / HALF_HOUR)  # the half-hours wholly in the window
    if bucket_seconds % HALF_HOUR or start >= end:
        parts = [(since, until, False)]
    else:
        parts = [(since, start * HALF_HOUR, False), (start * HALF_HOUR, end * HALF_HOUR, True), (end * HALF_HOUR, until, False)]
    groups: list[Group] = []
    for begin, stop, linked in parts:
        if begin < stop:
            groups += clock_bucket_groups(conn, prices, begin, stop, bucket_seconds, client, linked)
        if linked:
            groups += _stored_groups(conn, prices, start, end, int(bucket_seconds // HALF_HOUR), client)
    first = bucket_of(since, bucket_seconds)
    return [replace(group, bucket=group.bucket - first) for group in groups]


def _stored_groups(conn: sqlite3.Connection, prices: Prices, start: int, end: int, per_bucket: int, client: str | None) -> list[Group]:
    """The stored sums of half-hours ``[start, end)`` (the client key named ``client``'s only, when given),
    as groups of the clock's buckets of ``per_bucket`` half-hours, priced with each requested model's reference."""
    scope, args = ("AND client = ?", (start, end, client)) if client is not None else ("", (start, end))
    rows = conn.execute(
        f"""SELECT {", ".join(f"NULLIF({key}, x'')" for key in ("requested_model", "model"))}, half_hour / {per_bucket},
            {", ".join(f"NULLIF({key}, x'')" for key in ("source", "error"))}, {", ".join(f"TOTAL({s})" for s in _SUMS)}
        FROM {TABLE} WHERE half_hour >= ? AND half_hour < ? {scope} GROUP BY 1, 2, 3, 4, 5 HAVING TOTAL(f0) > 0""",
        args,
    ).fetchall()
    groups = []
    for requested, model, bucket, source, error, *values in rows:
        reference = prices.reference_for(requested or None)
        unreported, unreported_positive = values[len(FIGURES) :]
        if reference is not None and reference[1].cache_write is not None:  # its rw is the prompt, not 0
            values[_REFERENCE_FRESH] -= unreported_positive
            values[_REFERENCE_WRITTEN] += unreported
        price = prices.models.get(model) if model is not None else None
        groups.append(Group(bucket, model, source, error, priced_sums(tuple(values[: len(FIGURES)]), model, price, reference)))
    return groups
