"""The decision log: one SQLite row per request, written off the request path.

Requests only ``submit`` to a bounded queue (never waiting); one writer task
drains it in batches and writes each batch in one transaction on a dedicated
database thread, so a slow disk never slows a request. A batch is written when
``batch_size`` rows are waiting or ``flush_interval`` seconds after its first
row, whichever comes first: one transaction per row would wake the database
thread on every request and, measured, cost each request about a millisecond. When the queue is full
a record is dropped and counted (``dropped``), because blocking the request
would be worse. ``close`` flushes the queue first: nothing submitted before
shutdown is lost. All database work runs on that one thread, on one
connection (WAL mode, so readers such as `sqlite3` on the file are not blocked).

One row never costs another its place. A value SQLite cannot hold (an integer
beyond 64 bits, such as a client's ``max_tokens`` of 2**63) is stored clipped,
in that row alone; and a batch whose transaction fails all the same is written
again row by row, so a row the database refuses is lost (logged as
``decision_log_rows_lost`` and counted in ``lost``) and the others are stored.

The table's columns are the record's fields (:data:`COLUMNS`) and the stages' declared columns
(``stage_columns``, from the stage registry), each added to a file that lacks it when it is opened.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import operator
import os
import sqlite3
import time
import typing
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from router.core.pricing import Prices
from router.core.usage_summary import Group, SessionGroup
from router.observe import decision_sums, half_hour_sums
from router.observe.decision_record import Decision
from router.state.remembered import RecentRequest

log = logging.getLogger("pinch_router.decision_log")

COLUMNS = (
    "request_id", "ts", "status", "duration_ms", "error_code", "session", "session_source", "client", "requested_model",
    "stream", "category", "tier", "source", "routed_tier", "escalation", "model", "provider", "candidates",
    "attempts", "rejected", "pinch_mode", "tokens_before", "tokens_after", "pinch_compressed", "relevance_status",
    "relevance_reason", "stages", "upstream_status", "first_byte_ms", "upstream_ms", "prompt_tokens",
    "completion_tokens", "total_tokens", "overhead_ms", "stream_error",
    "requested_max_tokens", "sent_max_tokens",
    "pinch_reapplied", "pinch_newly_compressed", "pinch_reason", "cached_tokens", "cache_write_tokens",
    "wire_in", "wire_out", "wire_dropped", "pinch_restored", "model_family", "classifier_reason",
    "resumed_elements", "providers_down", "pinch_first_sight_new", "pinch_first_sight_reapplied", "pinch_first_sight_saved",
    "retrieve_calls", "retrieve_tokens",
)  # fmt: skip
# What the dashboard sums over a window (router.core.usage_summary): no JSON column but the attempts' count.
SUMMARY_COLUMNS = (
    "request_id", "ts", "status", "error_code", "session", "client", "requested_model", "model", "source", "wire_in",
    "tokens_before", "tokens_after", "prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens",
    "pinch_newly_compressed", "pinch_restored",
)  # fmt: skip
_SUMMARY_NAMES = (*SUMMARY_COLUMNS, "attempt_count")
_SUMMARY_SELECT = ", ".join(SUMMARY_COLUMNS) + ", json_array_length(attempts)"
OPEN_RETRY_SECONDS = 10.0  # how long start-up waits out another process setting up the same file
JSON_COLUMNS = frozenset({"candidates", "attempts", "rejected", "stages", "providers_down"})
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS decisions (
    {", ".join(f"{c} {'TEXT PRIMARY KEY' if c == 'request_id' else ''}" for c in COLUMNS)},
    outcome TEXT,
    outcome_reason TEXT,
    outcome_ts REAL
);
CREATE INDEX IF NOT EXISTS decisions_ts ON decisions (ts);
CREATE INDEX IF NOT EXISTS decisions_session ON decisions (session, ts);
"""


@dataclass(frozen=True, slots=True)
class OutcomeUpdate:
    request_id: str
    success: bool
    reason: str | None
    ts: float


class DecisionLog:
    def __init__(
        self, path: str, queue_size: int = 10_000, batch_size: int = 256, flush_interval: float = 0.5, stage_columns: tuple[str, ...] = ()
    ) -> None:
        self.path = path
        self.columns = (*COLUMNS, *stage_columns)
        self.stage_columns = stage_columns
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self._write_now = asyncio.Event()
        self._flushing = 0
        self.queue: asyncio.Queue[Decision | OutcomeUpdate] = asyncio.Queue(queue_size)
        self.dropped = 0
        self.written = 0
        self.lost = 0  # rows the database refused, each alone (see _write)
        self._db = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decision-log")
        self._conn: sqlite3.Connection | None = None
        self._writer: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._on_db(self._open)
        self._writer = asyncio.create_task(self._write_forever(), name="decision-log-writer")

    def submit(self, item: Decision | OutcomeUpdate) -> bool:
        """Queue a record without waiting; False (and counted) when the queue is full."""
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            self.dropped += 1
            log.warning("decision_log_full", extra={"dropped": self.dropped})
            return False
        if self.queue.qsize() >= self.batch_size:
            self._write_now.set()
        return True

    async def flush(self) -> None:
        """Wait until everything submitted so far is on disk."""
        self._flushing += 1
        self._write_now.set()
        try:
            await self.queue.join()
        finally:
            self._flushing -= 1

    async def close(self) -> None:
        if self._writer is not None:
            await self.flush()
            self._writer.cancel()
            try:
                await self._writer
            except asyncio.CancelledError:
                pass
        await self._on_db(self._close)
        self._db.shutdown(wait=True)

    async def recent(self, limit: int, sessions: tuple[str, ...] = (), client: str | None = None) -> list[dict[str, Any]]:
        """The newest ``limit`` rows, of any of ``sessions`` when given, of the client key named
        ``client`` only when given (a user key's own: :func:`router.core.tenants.owner_scope`)."""
        await self.flush()
        return await self._on_db(self._select, limit, sessions, client)

    async def rows_since(self, since: float, client: str | None = None) -> list[dict[str, Any]]:
        """Every row from ``since`` on, oldest first, in the columns the dashboard sums
        (:data:`SUMMARY_COLUMNS`, ``attempts`` as ``attempt_count``); of the client key named ``client``
        only when given (:func:`router.core.tenants.owner_scope`)."""
        await self.flush()
        return await self._on_db(self._select_since, since, client)

    async def overview_groups(self, prices: Prices, since: float, until: float, bucket_seconds: float, client: str | None = None) -> list[Group]:
        """The window's sums for the dashboard's overview, priced and summed in SQL (:mod:`router.observe.decision_sums`),
        the half-hours wholly in it from the sums stored as rows are written (:mod:`router.observe.half_hour_sums`)."""
        await self.flush()
        return await self._on_db(self._summed, half_hour_sums.overview_groups, prices, since, until, bucket_seconds, client)

    async def session_groups(self, prices: Prices, since: float, until: float, client: str | None = None, limit: int | None = None) -> list[SessionGroup]:
        """The window's sums for the dashboard's sessions list, of its ``limit`` latest sessions when given
        (:mod:`router.observe.decision_sums`)."""
        await self.flush()
        return await self._on_db(self._summed, decision_sums.session_groups, prices, since, until, client, limit)

    async def one(self, request_id: str, client: str | None = None) -> dict[str, Any] | None:
        """The row of ``request_id``, if it is logged (and, when ``client`` is given, that key's)."""
        await self.flush()
        return await self._on_db(self._select_one, request_id, client)

    async def request_of(self, request_id: str) -> RecentRequest | None:
        """The logged request's session key and client key name; None when it is not logged."""
        await self.flush()
        return await self._on_db(self._lookup, request_id)

    async def _on_db(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._db, fn, *args)

    async def _write_forever(self) -> None:
        while True:
            batch = [await self.queue.get()]
            if not self._flushing and self.queue.qsize() + 1 < self.batch_size:
                try:  # let the batch fill, unless a flush or a full batch asks for it now
                    async with asyncio.timeout(self.flush_interval):
                        await self._write_now.wait()
                except TimeoutError:
                    pass
            self._write_now.clear()
            while len(batch) < self.batch_size and not self.queue.empty():
                batch.append(self.queue.get_nowait())
            try:
                failed: list[tuple[Decision | OutcomeUpdate, str]] = await self._on_db(self._write, batch)
                lost = sum(isinstance(item, Decision) for item, _ in failed)
                self.written += sum(isinstance(item, Decision) for item in batch) - lost
                if failed:
                    self.lost += lost
                    log.warning(
                        "decision_log_rows_lost",
                        extra={"request_ids": [item.request_id for item, _ in failed], "error": failed[0][1], "lost_total": self.lost},
                    )
            except Exception:  # a closed database must not kill the writer; the rows are reported lost
                self.lost += sum(isinstance(item, Decision) for item in batch)
                log.exception("decision_log_write_failed", extra={"rows": len(batch)})
            finally:
                for _ in batch:
                    self.queue.task_done()

    # --- on the database thread ---------------------------------------------------

    def _open(self) -> None:
        if self.path != ":memory:":
            open_owner_only(Path(self.path))
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        # The workers of `serve --workers N` open one file at the same moment. Switching a new
        # file to WAL and creating its schema take locks for which SQLite may answer "locked"
        # at once rather than wait (to avoid a deadlock), so the set-up is retried for a while.
        deadline = time.monotonic() + OPEN_RETRY_SECONDS
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.executescript(SCHEMA)
                self._add_missing_columns()
                # after the columns: a file of an older version gets ``client`` just before
                self._conn.execute("CREATE INDEX IF NOT EXISTS decisions_client ON decisions (client, ts)")
                half_hour_sums.ensure(self._conn)
                return
            except sqlite3.OperationalError as error:
                if not _is_contention(error) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)

    def _add_missing_columns(self) -> None:
        """A log file written by an older version lacks the newer columns: add them (old rows read NULL)."""
        assert self._conn is not None
        present = {row[1] for row in self._conn.execute("PRAGMA table_info(decisions)")}
        for column in self.columns:
            if column not in present:
                self._conn.execute(f"ALTER TABLE decisions ADD COLUMN {column}")

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _write(self, batch: list[Decision | OutcomeUpdate]) -> list[tuple[Decision | OutcomeUpdate, str]]:
        """Write ``batch`` in one transaction; if that fails, each item in its own, so that one row the
        database refuses costs only itself. Returns the items that failed alone, with their errors."""
        try:
            self._write_together(batch)
            return []
        except Exception:  # which row, and why, is found out one row at a time below
            pass
        failed = []
        for item in batch:
            try:
                self._write_together([item])
            except Exception as error:  # reported by the writer task; the rest are written
                failed.append((item, f"{type(error).__name__}: {error}"))
        return failed

    def _write_together(self, batch: list[Decision | OutcomeUpdate]) -> None:
        assert self._conn is not None
        rows = [_row(item, self.stage_columns) for item in batch if isinstance(item, Decision)]
        outcomes = [item for item in batch if isinstance(item, OutcomeUpdate)]
        with self._conn:  # one transaction per batch
            self._conn.execute("BEGIN")
            if rows:
                placeholders = ", ".join("?" for _ in self.columns)
                self._conn.executemany(f"INSERT OR REPLACE INTO decisions ({', '.join(self.columns)}) VALUES ({placeholders})", rows)
            for o in outcomes:
                self._conn.execute(
                    "UPDATE decisions SET outcome = ?, outcome_reason = ?, outcome_ts = ? WHERE request_id = ?",
                    ("success" if o.success else "failure", o.reason, o.ts, o.request_id),
                )

    def _select(self, limit: int, sessions: tuple[str, ...], client: str | None) -> list[dict[str, Any]]:
        assert self._conn is not None
        conditions, args = [], []
        if sessions:
            conditions.append(f"session IN ({', '.join('?' for _ in sessions)})")
            args += sessions
        if client is not None:
            conditions.append("client = ?")
            args.append(client)
        where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
        cursor = self._conn.execute(f"SELECT * FROM decisions {where} ORDER BY ts DESC, rowid DESC LIMIT ?", [*args, limit])
        names = [d[0] for d in cursor.description]
        return [_decode(dict(zip(names, row, strict=True))) for row in cursor.fetchall()]

    def _summed(self, query: Callable[..., Any], *args: Any) -> Any:
        assert self._conn is not None
        return query(self._conn, *args)

    def _select_since(self, since: float, client: str | None) -> list[dict[str, Any]]:
        assert self._conn is not None
        where, args = ("ts >= ? AND client = ?", (since, client)) if client is not None else ("ts >= ?", (since,))
        cursor = self._conn.execute(f"SELECT {_SUMMARY_SELECT} FROM decisions WHERE {where} ORDER BY ts, rowid", args)
        return [dict(zip(_SUMMARY_NAMES, row, strict=True)) for row in cursor.fetchall()]

    def _select_one(self, request_id: str, client: str | None) -> dict[str, Any] | None:
        assert self._conn is not None
        where, args = ("request_id = ? AND client = ?", (request_id, client)) if client is not None else ("request_id = ?", (request_id,))
        cursor = self._conn.execute(f"SELECT * FROM decisions WHERE {where}", args)
        row = cursor.fetchone()
        return None if row is None else _decode(dict(zip([d[0] for d in cursor.description], row, strict=True)))

    def _lookup(self, request_id: str) -> RecentRequest | None:
        assert self._conn is not None
        row = self._conn.execute("SELECT session, client FROM decisions WHERE request_id = ?", (request_id,)).fetchone()
        return None if row is None else RecentRequest(row[0], row[1])


def _is_contention(error: sqlite3.OperationalError) -> bool:
    """Another connection holds the lock (as opposed to a broken or read-only file)."""
    message = str(error)
    return "locked" in message or "busy" in message


def open_owner_only(path: Path) -> None:
    """Create ``path`` if missing with mode 0600, and take group/other access off it if present.

    SQLite creates the ``-wal`` and ``-shm`` files with the database's mode, so
    an owner-only database keeps its journal owner-only too; journals left by an
    older, more open database are narrowed as well.
    """
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            if file.stat().st_mode & 0o077:
                file.chmod(0o600)
        except FileNotFoundError:
            pass


def _row(decision: Decision, stage_columns: tuple[str, ...] = ()) -> list[Any]:
    """The row's values in COLUMNS order, then the ``stage_columns`` the decision carries (NULL where it has none).

    Read in one call (an attrgetter of every column), the nested ones then written
    by orjson, to the same JSON as ``dataclasses.asdict`` would give, without
    asdict's recursive deep copy: on the writer thread (which holds the GIL for
    it) that took ~30 % less than reading the columns one by one.
    """
    values = list(_COLUMN_VALUES(decision))
    for i in _INTEGER_AT:  # ~0.5 µs a row (on a 4.5 µs _row)
        value = values[i]
        if value is not None and not INT64_MIN <= value <= INT64_MAX:
            values[i] = min(max(value, INT64_MIN), INT64_MAX)
    for i in _JSON_AT:
        values[i] = orjson.dumps(values[i], default=_fields_of, option=orjson.OPT_PASSTHROUGH_DATACLASS).decode()
    if stage_columns:
        declared = dict(decision.stage_columns)
        values += [_clipped(declared.get(column)) for column in stage_columns]
    return values


def _clipped(value: Any) -> Any:
    """A stage's column value as SQLite holds it: an integer beyond 64 bits clipped, as the fields' are."""
    if isinstance(value, int) and not isinstance(value, bool) and not INT64_MIN <= value <= INT64_MAX:
        return min(max(value, INT64_MIN), INT64_MAX)
    return value


def _fields_of(value: object) -> dict[str, Any]:
    """A nested dataclass of a row (an attempt, a rejection, a stage record) as the dict orjson would write.

    orjson writes a slots dataclass itself only after looking for its ``__dict__``:
    an AttributeError raised, formatted and cleared for each of a row's ~8 nested
    records. A dict display of its fields, built once per class, writes the same
    JSON with ~21,000 instructions less a row (−14 % of a row's write, measured).
    """
    as_dict = _AS_DICT.get(type(value))
    if as_dict is None:
        if not dataclasses.is_dataclass(value) or isinstance(value, type):
            raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")
        as_dict = _AS_DICT[type(value)] = _dict_display(type(value))
    return as_dict(value)


def _dict_display(cls: type) -> Callable[[Any], dict[str, Any]]:
    """``lambda o: {"name": o.name, ...}`` for ``cls``'s fields (generated, as dataclasses writes ``__init__``);
    the fields orjson leaves out (a leading underscore) left out too."""
    names = [field.name for field in dataclasses.fields(cls) if not field.name.startswith("_")]
    return eval("lambda o: {" + ", ".join(f"{name!r}: o.{name}" for name in names) + "}")  # field names: identifiers


_AS_DICT: dict[type, Callable[[Any], dict[str, Any]]] = {}  # used on the database thread only
_COLUMN_VALUES = operator.attrgetter(*COLUMNS)
_JSON_AT = tuple(i for i, column in enumerate(COLUMNS) if column in JSON_COLUMNS)

# SQLite's integers are signed 64-bit, and sqlite3 raises OverflowError for any int beyond, failing
# the whole statement. The integer columns are not all the proxy's own figures: a client's max_tokens
# may be any JSON integer up to 2**64 - 1, a provider's usage counts as well. Such a value is stored
# clipped to the range (still a number, the nearest one the column holds; text would make some of
# the column's numbers strings to every query). Floats need nothing: SQLite stores infinity as a REAL and NaN as NULL.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_HINTS = typing.get_type_hints(Decision)
_INTEGER_AT = tuple(i for i, column in enumerate(COLUMNS) if _HINTS[column] in (int, int | None))

# sqlite3 binds an int, float or str as it is, but looks any other value up in its adapter
# registry first, and a miss (None, a bool: ~7 of a row's values) costs ~3,300 instructions of
# failed attribute lookups each. Registered, the lookup hits and binds the very same values
# (None as NULL, a bool as 0/1): ~24,000 instructions less a row. ``{}.get`` maps None to
# None without a Python frame.
sqlite3.register_adapter(type(None), {}.get)
sqlite3.register_adapter(bool, int)


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    for column in JSON_COLUMNS:
        if row.get(column) is not None:
            row[column] = orjson.loads(row[column])
    row["stream"] = bool(row["stream"])
    return row
