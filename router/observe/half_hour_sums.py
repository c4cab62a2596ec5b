"""The overview's sums by half-hour, stored in the decision log's file and kept true by its triggers.

A week's overview sums ~100,000 rows at a busy team's rate: summed in SQL on every view
(:mod:`router.observe.decision_sums`) that was ~0.4 s of CPU (``bench/bench_dashboard.py``). But most
rows' figures are their own: only a :data:`~router.observe.decision_sums.LINKED` row (a rewrite by
pinch on a provider reporting cache figures, a row without cache figures) is priced with its
session's previous row. So the others' figures — token counts, not dollars: a price is linear in
them — are summed as they are written, by half-hour, client key, requested and answering model,
classification source and error (``decision_half_hours``), priced as rows without a reference; the
requested model's reference (which the prices decide) moves two sums when it prices cache writes,
which :data:`~router.observe.decision_sums.UNREPORTED` carries. The linked rows' figures are stored
too (``decision_half_hour_links``), each priced with its previous row when written, both ways a
lifetime decides (far, and near: what near changes), by their gap's class (see :data:`LINKS`); a log
whose provider reports no cache figures (Ollama, many chat providers) is all linked rows. A view then
reads the window's stored half-hours, and every row of its first and open half-hours (and the linked
rows of a half-hour whose classes a lifetime of the prices falls within: :func:`overview_groups`):
the same groups the query of the whole window gives.

**True by construction.** Triggers on ``decisions`` add an inserted row's figures, take a deleted
row's off, and both for an update of a column they read, in the writer's own transaction — whoever
writes (``serve --workers N``: one file, several writers; the ``sqlite3`` shell). An ``INSERT OR
REPLACE`` deletes the row it replaces, which fires the delete trigger only with ``recursive_triggers``
on: :func:`ensure` turns it on for the connection (a writer that does not would count a replaced row
twice; the decision log is the only writer that replaces). Nothing depends on the prices: a config
reloaded with other prices reads the same sums. A linked row written before another of its session,
deleted or moved changes that one's previous row: the triggers price it again. A file of an older
version (without either table) is summed once when it is opened (:func:`ensure`).

The sums of a row's figures change only with this module's and :data:`~router.observe.decision_sums.FIGURES`'
definitions: a change of either must store them under another table's name.
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import replace
from typing import Any

from router.core.pricing import Prices
from router.core.usage_summary import Group, bucket_of
from router.observe.decision_sums import ERROR, FIGURES, LINKED, UNREPORTED, clock_bucket_groups, near_figure, priced_sums, row_figures, row_steps

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


# The linked rows' sums (LINKS). A linked row's figures depend on its session's previous row (found
# as the read-time query finds it: by ts, then rowid) and, where one is, on a cache lifetime the prices
# decide: a rewrite on a provider reporting cache figures, answered by the previous row's model, reads
# a warm cache within the answering model's lifetime (kind 1); a row without cache figures is compared
# with a reference whose cache served the previous prompt within the reference's lifetime (kind 2, and
# its figures depend on whether the reference prices cache writes too); other rows have none (kind 0).
# So each is stored priced far (beyond every lifetime) with what near (within every lifetime) changes
# of that — and what a reference pricing writes changes of it beyond what it does far — by half-hour,
# key, kind and class of the gap to the previous row, each class with its gaps' least and greatest: a
# view takes each class near where its greatest gap is within the lifetime its prices give, far where
# its least is beyond, and sums from the rows the half-hours where a lifetime falls within a class's
# gaps (none where lifetimes are among the classes' bounds). A row written before another of its
# session, deleted or moved changes that one's previous row: the triggers price it again.
# A view of one client key's rows prices a row with its key's previous row: a half-hour holding a row
# whose previous one is another key's (``crossed``; none the proxy writes: a session is one key's)
# is summed from the rows for such a view.
LINKS = "decision_half_hour_links"
_GAP_BOUNDS = (0, 1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600, 900, 1200, 1800, 2700, 3600, 5400, 7200, 10800, 14400, 21600, 43200, 86400)  # fmt: skip
_LINK_KEYS = (*_KEYS, "kind", "class")
_NEAR_FIGURES = tuple(range(len(FIGURES) - 6, len(FIGURES)))  # the figures a previous row within a lifetime changes: the unpinched and the reference's
# per class: the figures as far (+ unreported), what near changes of them (d0...), and what a reference
# pricing writes changes of those of a near row beyond what it does of a far one (the last two)
_DELTAS = tuple(f"d{i}" for i in range(len(_NEAR_FIGURES) + 2))
_KIND = "CASE WHEN prev_ts IS NULL THEN 0 WHEN c IS NULL THEN 2 WHEN rewrote AND prev_model = model THEN 1 ELSE 0 END"


def _class_of(low: int, high: int) -> str:
    """The class of ``gap`` among classes ``low`` to ``high``: the first whose bound it is within
    (:data:`_GAP_BOUNDS`; the last: beyond them all), found in a few comparisons (halving)."""
    if low == high:
        return str(low)
    middle = (low + high) // 2
    return f"CASE WHEN gap <= {_GAP_BOUNDS[middle]} THEN {_class_of(low, middle)} ELSE {_class_of(middle + 1, high)} END"


_CLASS = f"CASE WHEN kind = 0 THEN -1 ELSE {_class_of(0, len(_GAP_BOUNDS))} END"
_LINK_MORE = f"ts - prev_ts AS gap, {_KIND} AS kind, prev_ts IS NOT NULL AND prev_client IS NOT client AS crossed"


def _link_figures(row: str, previous: str, source: str) -> str:
    """A ``SELECT`` of the linked rows named ``row`` in ``source`` (its ``FROM`` and ``WHERE``), each
    priced with the row named ``previous``: its half-hour, keys, kind and class, its figures priced far
    (as ``f0``, ...), what near changes of them (``d0``, ...), whether its previous row is another
    key's (``crossed``) and its gap (of a kind 1 or 2 only). The unreported parts (the far figures'
    adjustment where the reference prices writes) are a far row's: near, what such a reference
    changes beyond them is the last two deltas."""
    far = [f"COALESCE({figure}, 0)" for figure in (*FIGURES, *UNREPORTED)]
    unreported, unreported_positive = far[len(FIGURES) :]
    deltas = [f"COALESCE({near_figure(i)}, 0) - {far[i]}" for i in _NEAR_FIGURES]
    deltas += [
        f"COALESCE({near_figure(_REFERENCE_FRESH, writes=True)}, 0) + {unreported_positive} - COALESCE({near_figure(_REFERENCE_FRESH)}, 0)",
        f"COALESCE({near_figure(_REFERENCE_WRITTEN, writes=True)}, 0) - {unreported} - COALESCE({near_figure(_REFERENCE_WRITTEN)}, 0)",
    ]
    # Near changes the unpinched figures of a row with cache figures only (cu is 0 without them), and
    # the reference's of a row without (with them, they are the provider's): the others are 0, not evaluated.
    unpinched = len(_NEAR_FIGURES) - 3  # the first of _NEAR_FIGURES' (the reference's three are last)
    deltas = [f"CASE WHEN c IS {'NOT ' if i < unpinched else ''}NULL THEN {delta} ELSE 0 END" for i, delta in enumerate(deltas)]
    keys = ", ".join(f"IFNULL({key}, x'') AS {key}" for key in _KEYS)
    figures = f"""SELECT ts, {", ".join(_KEYS[:-1])}, {ERROR} AS error, {", ".join(f"{f} AS f{i}" for i, f in enumerate(far))},
            {", ".join(f"{d} AS {name}" for d, name in zip(deltas, _DELTAS, strict=True))}, {_LINK_MORE}
        FROM ({row_steps(row, source, previous)})"""
    return f"""SELECT CAST(ts / {HALF_HOUR!r} AS INTEGER) AS half_hour, {keys}, kind, {_CLASS} AS class, {", ".join(_SUMS)},
            {", ".join(_DELTAS)}, crossed, CASE WHEN kind > 0 THEN gap END AS gap
        FROM ({figures})"""


def _neighbour(row: str, after: bool, exclude: str = "") -> str:
    """The rowid of the row before (after, when ``after``) the position of ``row`` (``NEW``, ``OLD``)
    in its session, as the read-time query finds a previous row; ``exclude``: a rowid passed over."""
    if after:
        where, order = f"e.ts >= {row}.ts AND (e.ts > {row}.ts OR e.rowid > {row}.rowid)", "e.ts, e.rowid"
    else:
        where, order = f"e.ts <= {row}.ts AND (e.ts < {row}.ts OR e.rowid < {row}.rowid)", "e.ts DESC, e.rowid DESC"
    skip = f"AND e.rowid != {exclude}" if exclude else ""
    return f"(SELECT e.rowid FROM decisions e INDEXED BY decisions_session WHERE e.session = {row}.session AND {where} {skip} ORDER BY {order} LIMIT 1)"


def _linked(sign: str, row: str, previous: str) -> str:
    """The statement adding (``sign`` ``+``) or taking off (``-``) the figures of the linked row ``row``
    (``NEW``, ``OLD``, or the row of a rowid: :func:`_neighbour`) priced with the previous row
    ``previous`` (the same), to its class's row of :data:`LINKS`. (A class's least and greatest gaps
    are not narrowed when a row leaves it: wider, they still bound its gaps.)"""
    name, source = (row, "FROM (SELECT 1)") if row in ("NEW", "OLD") else ("x", "FROM decisions x")
    before, join = (previous, "") if previous in ("NEW", "OLD") else ("q", f"LEFT JOIN decisions q ON q.rowid = {previous}")
    where = LINKED.format(r=name) + ("" if name != "x" else f" AND x.rowid = {row}")
    sums = (*_SUMS, *_DELTAS, "crossed")
    return f"""
    INSERT INTO {LINKS} SELECT half_hour, {", ".join(_LINK_KEYS)}, {", ".join(f"{sign}{s}" for s in sums)}, gap, gap
        FROM ({_link_figures(name, before, f"{source} {join} WHERE {where}")}) WHERE true
        ON CONFLICT DO UPDATE SET {", ".join(f"{s} = {s} + excluded.{s}" for s in sums)},
            least_gap = MIN(least_gap, excluded.least_gap), greatest_gap = MAX(greatest_gap, excluded.greatest_gap);"""


def _link_triggers() -> dict[str, str]:
    """The triggers keeping :data:`LINKS` true, by name: for a row written (``NEW``) or gone (``OLD``; an
    update is both, the old row's found passing over the new one), its own figures priced with its
    previous row (when it is linked), and its session's next row's priced with it instead of with that
    previous row or the other way round (when that one is linked). Each a trigger of its own, run only
    when its ``WHEN`` holds: most rows are written last in their session, many are not linked."""
    triggers = {}
    for name, event, row, sign, exclude in (
        ("insert", "INSERT", "NEW", "+", ""),
        ("delete", "DELETE", "OLD", "-", ""),
        ("update_old", f"UPDATE OF {', '.join(_READ)}", "OLD", "-", "NEW.rowid"),
        ("update_new", f"UPDATE OF {', '.join(_READ)}", "NEW", "+", ""),
    ):
        previous, following = _neighbour(row, False, exclude), _neighbour(row, True, exclude)
        undo = "-" if sign == "+" else "+"
        head = f"CREATE TRIGGER {LINKS}_{{}} AFTER {event} ON decisions WHEN"
        triggers[f"{LINKS}_{name}"] = f"{head.format(name)} {LINKED.format(r=row)} BEGIN {_linked(sign, row, previous)} END"
        next_linked = f"EXISTS (SELECT 1 FROM decisions x WHERE x.rowid = {following} AND {LINKED.format(r='x')})"
        body = _linked(undo, following, previous) + _linked(sign, following, row)
        triggers[f"{LINKS}_{name}_next"] = f"{head.format(name + '_next')} {next_linked} BEGIN {body} END"
    return triggers


_LINK_TRIGGERS = _link_triggers()
_LINK_SCHEMA = f"""
CREATE TABLE {LINKS} (half_hour INTEGER NOT NULL, {", ".join(f"{key} NOT NULL" for key in _LINK_KEYS)}, {", ".join(f"{s} NOT NULL" for s in (*_SUMS, *_DELTAS))},
    crossed NOT NULL, least_gap, greatest_gap, UNIQUE (half_hour, {", ".join(_LINK_KEYS)}));
{";".join(_LINK_TRIGGERS.values())};
INSERT INTO {LINKS} SELECT half_hour, {", ".join(_LINK_KEYS)}, {", ".join(f"TOTAL({s})" for s in (*_SUMS, *_DELTAS, "crossed"))}, MIN(gap), MAX(gap)
    FROM ({_link_figures("d", "q", f"FROM decisions d LEFT JOIN decisions q ON q.rowid = {_neighbour('d', False)} WHERE {LINKED.format(r='d')}")})
    GROUP BY half_hour, {", ".join(_LINK_KEYS)};
"""
# the triggers of each table of sums, the one made last first (a file holding it holds them all)
_TRIGGERS = {TABLE: [f"{TABLE}_{event}" for event in ("update", "insert", "delete")], LINKS: list(reversed(_LINK_TRIGGERS))}


def ensure(conn: sqlite3.Connection) -> None:
    """Turn on ``recursive_triggers`` for ``conn``, and give the log's file its stored sums where it has
    none: the tables (:data:`TABLE`, :data:`LINKS`: a file of the version before has the first only),
    their triggers and the sums of the rows already written, in one transaction each (the workers of
    ``serve --workers N`` open one file at once: the first makes them, the others find them).
    ``conn`` in autocommit mode; the columns the figures read present."""
    conn.execute("PRAGMA recursive_triggers = ON")
    for table, schema in ((TABLE, _SCHEMA), (LINKS, _LINK_SCHEMA)):
        made = "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?"
        last, *others = _TRIGGERS[table]
        if conn.execute(made, (last,)).fetchone():
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            if not conn.execute(made, (last,)).fetchone():
                conn.execute(f"DROP TABLE IF EXISTS {table}")  # a table without its triggers (none of this version makes one) is not true
                for trigger in others:
                    conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
                for statement in _statements(schema):
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
    window read from the stored sums, where its buckets are whole numbers of half-hours; the rest (the
    first and the open half-hour; all of a window in smaller buckets; the linked rows of a half-hour
    the stored ones do not price at these prices: :func:`_stored_groups`) summed from the rows."""
    start, end = math.ceil(since / HALF_HOUR), int(until / HALF_HOUR)  # the half-hours wholly in the window
    groups: list[Group] = []
    if bucket_seconds % HALF_HOUR or start >= end:
        parts = [(since, until, False)]
    else:
        groups, unpriced = _stored_groups(conn, prices, start, end, int(bucket_seconds // HALF_HOUR), client)
        parts = [(since, start * HALF_HOUR, False), (end * HALF_HOUR, until, False)]
        parts += [(first * HALF_HOUR, (last + 1) * HALF_HOUR, True) for first, last in unpriced]
    for begin, stop, linked in parts:
        if begin < stop:
            groups += clock_bucket_groups(conn, prices, begin, stop, bucket_seconds, client, linked)
    first = bucket_of(since, bucket_seconds)
    return [replace(group, bucket=group.bucket - first) for group in groups]


def _stored_groups(conn: sqlite3.Connection, prices: Prices, start: int, end: int, per_bucket: int, client: str | None) -> tuple[list[Group], list[tuple[int, int]]]:
    """The stored sums of half-hours ``[start, end)`` (the client key named ``client``'s only, when given),
    as groups of the clock's buckets of ``per_bucket`` half-hours, priced with each requested model's
    reference; and the runs of half-hours (first, last) whose linked rows are not in them: those where
    a cache lifetime falls within a class's gaps (and, for one key's view, a row's previous row is
    another key's), to be summed from the rows."""
    scope, args = ("AND client = :client", {"start": start, "end": end, "client": client}) if client is not None else ("", {"start": start, "end": end})
    span = f"half_hour >= :start AND half_hour < :end {scope}"
    lifetime, parameters = _lifetimes(conn, prices, span, args)
    crossed = "OR crossed != 0" if client is not None else ""
    unpriced = [hh for (hh,) in conn.execute(
        f"SELECT DISTINCT half_hour FROM {LINKS} WHERE {span} AND ((kind > 0 AND least_gap <= {lifetime} AND greatest_gap > {lifetime}) {crossed})", parameters
    )]  # fmt: skip
    sums: dict[tuple[Any, ...], list[float]] = {}
    keys = f"""{", ".join(f"NULLIF({key}, x'')" for key in ("requested_model", "model"))}, half_hour / {per_bucket}, {", ".join(f"NULLIF({key}, x'')" for key in ("source", "error"))}"""
    for row in conn.execute(f"SELECT {keys}, {', '.join(f'TOTAL({s})' for s in _SUMS)} FROM {TABLE} WHERE {span} GROUP BY 1, 2, 3, 4, 5", args):
        sums[row[:5]] = list(row[5:])
    # a class's figures: far, or near where its greatest gap is within its lifetime (as a key of the groups: it is evaluated once a row)
    linked = conn.execute(
        f"""SELECT {keys}, kind > 0 AND greatest_gap <= {lifetime}, {", ".join(f"TOTAL({s})" for s in (*_SUMS, *_DELTAS))}
        FROM {LINKS} WHERE {span} AND half_hour NOT IN (SELECT value FROM json_each(:unpriced)) GROUP BY 1, 2, 3, 4, 5, 6""",
        parameters | {"unpriced": json.dumps(unpriced)},
    )  # fmt: skip
    for row in linked:
        key, near, figures, deltas = row[:5], row[5], list(row[6 : 6 + len(_SUMS)]), row[6 + len(_SUMS) :]
        if near:
            for i, delta in zip(_NEAR_FIGURES, deltas[: len(_NEAR_FIGURES)], strict=True):
                figures[i] += delta
            reference = prices.reference_for(key[0] or None)
            if reference is not None and reference[1].cache_write is not None:
                figures[_REFERENCE_FRESH] += deltas[-2]
                figures[_REFERENCE_WRITTEN] += deltas[-1]
        if key in sums:
            figures = [a + b for a, b in zip(sums[key], figures, strict=True)]
        sums[key] = figures
    groups = []
    for (requested_name, model, bucket, source, error), values in sums.items():
        if values[0] <= 0:  # no request left (its rows deleted)
            continue
        reference = prices.reference_for(requested_name or None)
        unreported, unreported_positive = values[len(FIGURES) :]
        if reference is not None and reference[1].cache_write is not None:  # its rw is the prompt, not 0
            values[_REFERENCE_FRESH] -= unreported_positive
            values[_REFERENCE_WRITTEN] += unreported
        price = prices.models.get(model) if model is not None else None
        groups.append(Group(bucket, model, source, error, priced_sums(tuple(values[: len(FIGURES)]), model, price, reference)))
    return groups, _runs(unpriced)


def _lifetimes(conn: sqlite3.Connection, prices: Prices, span: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The lifetime a class of :data:`LINKS` (the rows ``span`` names, with ``args``) compares its gaps
    with, as an SQL expression and its parameters (``args`` among them): the answering model's (kind 1),
    the reference's of its requested model (2); NULL where either is not priced (its figures are not read)."""
    names = conn.execute(f"SELECT DISTINCT model, requested_model FROM {LINKS} WHERE {span}", args).fetchall()
    parameters, lives, references = dict(args), [], []
    for i, model in enumerate(dict.fromkeys(m for m, _ in names)):
        price = prices.models.get(model) if isinstance(model, str) else None
        parameters |= {f"m{i}": model, f"m{i}_life": None if price is None else price.cache_lifetime_seconds}
        lives.append(f"WHEN :m{i} THEN :m{i}_life")
    for i, name in enumerate(dict.fromkeys(r for _, r in names)):
        reference = prices.reference_for(name if isinstance(name, str) and name else None)
        parameters |= {f"r{i}": name, f"r{i}_life": None if reference is None else reference[1].cache_lifetime_seconds}
        references.append(f"WHEN :r{i} THEN :r{i}_life")
    lifetime = f"""CASE kind WHEN 1 THEN CASE model {" ".join(lives) or "WHEN NULL THEN NULL"} END
        WHEN 2 THEN CASE requested_model {" ".join(references) or "WHEN NULL THEN NULL"} END END"""
    return lifetime, parameters


def _runs(half_hours: list[int]) -> list[tuple[int, int]]:
    """``half_hours`` as runs of consecutive ones: (first, last) each."""
    runs: list[tuple[int, int]] = []
    for hh in sorted(half_hours):
        if runs and runs[-1][1] == hh - 1:
            runs[-1] = (runs[-1][0], hh)
        else:
            runs.append((hh, hh))
    return runs
