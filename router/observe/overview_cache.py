"""The overview's sums of the clock's buckets that are over, kept between refreshes.

The overview of a window is the sum of its time buckets' groups (:func:`router.core.usage_summary.overview_of_groups`).
Its buckets are the clock's (:func:`router.core.usage_summary.bucket_of`), so a bucket that is over is
the same bucket on the next refresh, and its sums change only when a row is written into it late (a
request logged after its bucket ended, a row of another process) or a row in it is replaced (``INSERT
OR REPLACE`` of a request id). So a refresh sums in SQL only the window's first bucket (its part in
the window), the open one, and the buckets not kept yet (:func:`router.observe.decision_sums.clock_bucket_groups`);
the others come from here. At 100,000 rows the week's overview is most of a second of CPU on the
first view, a few tens of milliseconds afterwards (``bench/bench_dashboard.py``).

**Kept only while true.** Before each use the log is asked what changed since the sums were kept,
whoever wrote it (``serve --workers N``: one file, several writers): the rows past the highest rowid
seen, by the earliest time among them — a row can change its own bucket's sums and, as the previous
request of its session (a warm cache, a reference's), the later buckets', never an earlier one's, so
the buckets ending after it are dropped — and the count of rows from the oldest kept bucket on (less
the longest cache lifetime: an earlier row may be a kept row's previous request): other than the rows
seen plus the new ones means rows were replaced or deleted, which ones is not known, and everything
is dropped.
Other prices (a config reloaded) drop everything too. An ``UPDATE`` of a column the sums read would
have to drop them as well: the only one the log does (a request's outcome) reads none.

Used on the decision log's database thread only (:class:`router.observe.decision_log.DecisionLog`):
no lock.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace

from router.core.pricing import Prices
from router.core.usage_summary import Group, bucket_of
from router.observe.decision_sums import clock_bucket_groups

MAX_KEPT = 20_000  # buckets kept (per bucket size and key scope): beyond it, all are dropped


class OverviewCache:
    """The groups of the buckets that are over, by (bucket seconds, client key scope, the clock's bucket)."""

    def __init__(self) -> None:
        self._kept: dict[tuple[float, str | None, int], list[Group]] = {}
        self._prices: Prices | None = None
        self._seen_rowid = 0  # the highest rowid when the log was last asked
        self._floor = 0.0  # rows are counted from this time on
        self._seen_rows = 0  # and their count then

    def overview_groups(self, conn: sqlite3.Connection, prices: Prices, since: float, until: float, bucket_seconds: float, client: str | None = None) -> list[Group]:
        """What :func:`router.observe.decision_sums.overview_groups` answers, the buckets that are over
        from what is kept (and kept the first time they are summed)."""
        first = bucket_of(since, bucket_seconds)
        entire = first if first * bucket_seconds >= since else first + 1  # the first bucket wholly in the window
        self._drop_changed(conn, prices, entire * bucket_seconds)
        over = bucket_of(until, bucket_seconds)  # the buckets before it have ended
        groups: list[Group] = []

        def summed(start: float, end: float) -> None:
            if start < end:
                groups.extend(clock_bucket_groups(conn, prices, start, end, bucket_seconds, client))

        if entire >= over:  # a window within one or two buckets: nothing to keep
            summed(since, until)
        else:
            summed(since, entire * bucket_seconds)
            missing = [k for k in range(entire, over) if (bucket_seconds, client, k) not in self._kept]
            for start, end in _runs(missing):  # the buckets not kept yet, a query per run of them
                fresh: dict[int, list[Group]] = {k: [] for k in range(start, end)}
                for group in clock_bucket_groups(conn, prices, start * bucket_seconds, end * bucket_seconds, bucket_seconds, client):
                    fresh.setdefault(group.bucket, []).append(group)
                if len(self._kept) + len(fresh) > MAX_KEPT:
                    self._kept.clear()
                self._kept.update(((bucket_seconds, client, k), parts) for k, parts in fresh.items())
            for k in range(entire, over):
                groups.extend(self._kept.get((bucket_seconds, client, k), ()))
            summed(over * bucket_seconds, until)
            for key in [key for key in self._kept if key[:2] == (bucket_seconds, client) and key[2] < entire]:
                del self._kept[key]  # out of the window for good
        return [replace(group, bucket=group.bucket - first) for group in groups]

    def _drop_changed(self, conn: sqlite3.Connection, prices: Prices, start: float) -> None:
        """Drop what the rows written or replaced since the last look, or other prices, made untrue;
        ``start``: the earliest time this call may keep a bucket from."""
        if prices != self._prices:
            self._kept.clear()
            self._prices = prices
        # rows are counted from the oldest kept bucket's start, less the longest cache lifetime (a row
        # before it may be a kept row's previous one): not the whole log, which only grows
        floor = min([start, *(k * seconds for seconds, _, k in self._kept)]) - prices.longest_lifetime
        old = self._floor if self._kept else floor
        top, counted, recounted = conn.execute(
            "SELECT (SELECT COALESCE(MAX(rowid), 0) FROM decisions), (SELECT COUNT(*) FROM decisions WHERE ts >= ?), "
            + ("(SELECT COUNT(*) FROM decisions WHERE ts >= ?)" if floor != old else "NULL"),
            (old, floor) if floor != old else (old,),
        ).fetchone()  # one statement: one snapshot of the log, whoever writes it
        if self._kept and (top, counted) != (self._seen_rowid, self._seen_rows):
            earliest, new = conn.execute("SELECT MIN(ts), TOTAL(ts >= ?) FROM decisions WHERE rowid > ?", (old, self._seen_rowid)).fetchone()
            if counted != self._seen_rows + new:  # rows replaced or deleted: which, is not known
                self._kept.clear()
            elif earliest is not None:  # a row changes its bucket and the later ones (it may be a previous request)
                for key in [key for key in self._kept if (key[2] + 1) * key[0] > earliest]:
                    del self._kept[key]
        self._seen_rowid, self._floor, self._seen_rows = top, floor, counted if recounted is None else recounted


def _runs(buckets: list[int]) -> list[tuple[int, int]]:
    """Consecutive buckets as ``[start, end)`` runs."""
    runs: list[tuple[int, int]] = []
    for k in buckets:
        if runs and runs[-1][1] == k:
            runs[-1] = (runs[-1][0], k + 1)
        else:
            runs.append((k, k + 1))
    return runs
