"""The dashboard's sums in SQL (router/observe/decision_sums.py) equal the core's, row by row in Python
(router/core/pricing.py, router/core/usage_summary.py), on generated decision logs: every case the
pricing tells apart — cache figures or none, rewrites in warm and cold sessions, model switches,
sessions interleaved or missing, unpriced answers, errors and fallbacks, every kind of reference."""

from __future__ import annotations

import dataclasses
import math
import random
import sqlite3
from typing import Any

import pytest

from router.core.pricing import ModelPrice, Prices, price_rows
from router.core.results import Attempt
from router.core.usage_summary import overview, overview_of_groups, session_summaries, sessions_of_groups
from router.observe import decision_sums, half_hour_sums
from router.observe.decision_log import DecisionLog
from router.observe.decision_record import Decision

NOW = 1_800_000_000.0
HOUR = 3_600.0
PRICES = Prices(
    {
        "sonnet": ModelPrice(3.0, 15.0, 0.3, 3.75, cache_lifetime_seconds=300),
        "haiku": ModelPrice(1.0, 5.0, cache_lifetime_seconds=600),
        "local": ModelPrice(cache_lifetime_seconds=0),
    },
    {"claude-opus-4": ModelPrice(15.0, 75.0, 1.5, 18.75), "claude-opus-4-5": ModelPrice(5.0, 25.0, 0.5, 6.25), "gpt-5": ModelPrice(1.25, 10.0, 0.125)},
    "claude-opus-4-5",
    ModelPrice(5.0, 25.0, 0.5, 6.25),
)
REQUESTED = ["auto", None, "", "sonnet", "haiku", "claude-opus-4-5-20251101", "claude-opus-4-1", "gpt-5", "gemini-2.5-pro"]


def generated(seed: int, count: int = 600) -> list[Decision]:
    rng = random.Random(seed)
    sessions = [f"s{i:02d}" for i in range(12)] + [None]
    prompts: dict[str | None, int] = {}
    ts = NOW - 1.5 * HOUR
    rows = []
    for i in range(count):
        ts += rng.choice([0.0, 1.0, 5.0, 10.0, 20.0, 60.0]) * rng.random()  # ~1.7 hours in all, sessions idle now and then
        session = rng.choice(sessions)
        prompt = prompts[session] = prompts.get(session, 1_000) + rng.randint(-500, 3_000)
        status = rng.choice([200] * 12 + [400, 429, 499, 502])
        answered = status in (200, 499) or (status == 502 and rng.random() < 0.3)
        model = rng.choice(["sonnet", "haiku", "local", "retired"]) if answered else None
        reported = answered and rng.random() < 0.9
        cached = rng.choice([None, 0, prompt // 2, prompt - 10, prompt]) if reported else None
        before = rng.choice([None, prompt, prompt + rng.randint(0, 20_000), prompt - rng.randint(0, 300)])
        rows.append(
            Decision(
                request_id=f"req_{seed}_{i}", ts=ts, status=status, duration_ms=1.0,
                error_code=rng.choice([None, "upstream_failed", "no_capable_model"]) if status >= 400 else None,
                # a session is one key's: its key's name is part of the session key
                session=session, client=["alice", "bob", None][sessions.index(session) % 3], requested_model=rng.choice(REQUESTED),
                source=rng.choice([None, "classifier", "cached", "fallback", "override"]), model=model,
                attempts=tuple(Attempt("sonnet", "p", 200) for _ in range(rng.choice([0, 1, 1, 2, 3]))),
                tokens_before=before, tokens_after=prompt if before is not None else None,
                pinch_newly_compressed=rng.choice([None, 0, 0, 3]), pinch_restored=rng.choice([None, 0, 0, 1]),
                prompt_tokens=prompt if reported else None, completion_tokens=rng.choice([None, rng.randint(0, 900)]) if reported else None,
                cached_tokens=cached, cache_write_tokens=rng.choice([None, 0, rng.randint(0, max(0, prompt - (cached or 0)))]) if cached is not None else None,
                wire_in=rng.choice(["openai-chat", "anthropic-messages"]),
            )  # fmt: skip
        )
    return rows


def close(a: Any, b: Any) -> None:
    """Equal, floats to the nano-dollar (the two sum in another order)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            close(a[key], b[key])
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            close(x, y)
    elif isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, abs=2e-9)
    else:
        assert a == b


@pytest.fixture
async def log():
    decisions = DecisionLog(":memory:")
    await decisions.start()
    yield decisions
    await decisions.close()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("client", [None, "alice"])
async def test_the_sql_sums_equal_the_cores_row_by_row(log, seed, client):
    for row in generated(seed):
        log.submit(row)
    since, until, bucket = NOW - HOUR, NOW, 120
    rows = await log.rows_since(since - PRICES.longest_lifetime, client)
    rows = [r for r in rows if r["ts"] < until]
    costs = price_rows(rows, PRICES)
    assert sum(c.cost is not None for c in costs) > 80 and sum(c.pinch_saved != 0 for c in costs) > 20

    expected = overview(rows, costs, since, until, bucket)
    got = overview_of_groups(await log.overview_groups(PRICES, since, until, bucket, client), since, until, bucket)
    close(got, expected)
    assert expected["saved_by_routing"] and expected["saved_by_pinch"] and expected["errors"] and expected["fallbacks"]

    close(sessions_of_groups(await log.session_groups(PRICES, since, until, client)), session_summaries(rows, costs, since))
    # the latest sessions only (what a list shows): the others' rows are not summed, the latest are the same
    close(sessions_of_groups(await log.session_groups(PRICES, since, until, client, limit=4), 4), session_summaries(rows, costs, since, 4))


async def test_an_empty_log_and_no_prices(log):
    empty = Prices({})
    got = overview_of_groups(await log.overview_groups(empty, NOW - HOUR, NOW, 600), NOW - HOUR, NOW, 600)
    close(got, overview([], [], NOW - HOUR, NOW, 600))
    for row in generated(9, 50):
        log.submit(row)
    rows = [r for r in await log.rows_since(NOW - 2 * HOUR) if r["ts"] < NOW]
    close(
        overview_of_groups(await log.overview_groups(empty, NOW - 2 * HOUR, NOW, 600), NOW - 2 * HOUR, NOW, 600),
        overview(rows, price_rows(rows, empty), NOW - 2 * HOUR, NOW, 600),
    )
    assert sessions_of_groups(await log.session_groups(empty, NOW - 2 * HOUR, NOW, "nobody")) == []


async def overview_now(log: DecisionLog, since: float, until: float, bucket: float, client: str | None = None, prices: Prices = PRICES) -> tuple[dict[str, Any], dict[str, Any]]:
    """The overview as the log answers it (the half-hours wholly in the window from the stored sums) and as the core sums it."""
    rows = [r for r in await log.rows_since(since - prices.longest_lifetime, client) if r["ts"] < until]
    got = overview_of_groups(await log.overview_groups(prices, since, until, bucket, client), since, until, bucket)
    return got, overview(rows, price_rows(rows, prices), since, until, bucket)


@pytest.fixture
async def file_log(tmp_path):
    decisions = DecisionLog(str(tmp_path / "decisions.sqlite3"))
    await decisions.start()
    yield decisions
    await decisions.close()


# a window that starts and ends within half-hours, over three whole ones (the log's rows: ~2.8 hours from NOW - 1.5 h)
SINCE, UNTIL = NOW - HOUR - 50, NOW + HOUR - 70


def stored_half_hours(path: str, since: float, until: float) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT COUNT(DISTINCT half_hour) FROM decision_half_hours WHERE half_hour * 1800 >= ? AND (half_hour + 1) * 1800 <= ?", (since, until)).fetchone()[0]


@pytest.mark.parametrize("bucket", [1_800, 3_600])
@pytest.mark.parametrize("client", [None, "alice"])
async def test_the_stored_half_hours_answer_as_the_rows_after_every_kind_of_write(file_log, client, bucket, tmp_path):
    log = file_log
    rows = generated(5, 1_200)
    for row in rows:
        log.submit(row)
    first, expected = await overview_now(log, SINCE, UNTIL, bucket, client)
    close(first, expected)
    assert stored_half_hours(log.path, SINCE, UNTIL) == 3
    copies = iter(range(10))

    async def links_true() -> None:
        """The linked rows' sums kept by the triggers are those summed once from the rows as they are now."""
        await log.flush()
        assert stored_links(log.path) == links_summed_once(log.path, str(tmp_path / f"copy-{next(copies)}.sqlite3"))

    await links_true()

    # a request logged late, in a half-hour that is over: its session's next request's price may change too
    late = next(r for r in rows if r.client == (client or "alice") and SINCE + 1_800 < r.ts < UNTIL - 1_800 and r.session and r.cached_tokens)
    log.submit(dataclasses.replace(late, request_id="late", ts=late.ts - 1.0, prompt_tokens=(late.prompt_tokens or 0) + 7_000, completion_tokens=333))
    got, expected = await overview_now(log, SINCE, UNTIL, bucket, client)
    assert got["requests"] == first["requests"] + 1
    close(got, expected)
    await links_true()

    # the row written again (INSERT OR REPLACE of its request id) with other figures
    log.submit(dataclasses.replace(late, request_id="late", ts=late.ts - 1.0, prompt_tokens=1, completion_tokens=1, cached_tokens=0))
    replaced, expected = await overview_now(log, SINCE, UNTIL, bucket, client)
    assert replaced["tokens_out"] == got["tokens_out"] - 333 + 1
    close(replaced, expected)
    await links_true()
    # ... and moved to the open half-hour: the half-hour it leaves changes too
    log.submit(dataclasses.replace(late, request_id="late", ts=UNTIL - 1.0, completion_tokens=1))
    moved, expected = await overview_now(log, SINCE, UNTIL, bucket, client)
    assert moved["timeline"]["requests"] != replaced["timeline"]["requests"]
    close(moved, expected)
    await links_true()

    # another writer of the file (the sqlite3 shell, another worker) updates rows and deletes some
    await log.flush()
    with sqlite3.connect(log.path) as other:
        other.execute("UPDATE decisions SET completion_tokens = completion_tokens + 1000, cached_tokens = 0 WHERE rowid % 7 = 0")
        other.execute("UPDATE decisions SET outcome = 'success' WHERE rowid % 5 = 0")  # a column no sum reads
        other.execute("DELETE FROM decisions WHERE rowid % 11 = 0")
    changed, expected = await overview_now(log, SINCE, UNTIL, bucket, client)
    assert changed["requests"] < moved["requests"] and changed["tokens_out"] > moved["tokens_out"]
    close(changed, expected)
    await links_true()

    # other prices: the stored sums are token counts, priced when read
    cheaper = Prices({name: ModelPrice(0.5, 0.5) for name in PRICES.models}, {"gpt-5": ModelPrice(2.0, 2.0, 0.2)}, "sonnet", PRICES.models["sonnet"])
    priced, expected = await overview_now(log, SINCE, UNTIL, bucket, client, cheaper)
    assert priced["spent"] != changed["spent"]
    close(priced, expected)


@pytest.mark.parametrize("version", ["without stored sums", "without the linked rows' sums"])
async def test_a_log_file_without_stored_sums_gets_them_when_opened(tmp_path, version):
    path = str(tmp_path / "decisions.sqlite3")
    log = DecisionLog(path)
    await log.start()
    for row in generated(6, 1_200):
        log.submit(row)
    # figures SQLite holds clipped to 64 bits, an hour before the window: their sums overflow integers
    huge = Decision(request_id="huge", ts=SINCE - HOUR, status=200, duration_ms=1.0, model="sonnet", prompt_tokens=2**64, completion_tokens=2**64, cached_tokens=2**63)
    log.submit(huge)
    log.submit(dataclasses.replace(huge, request_id="huge-2"))
    await log.close()
    summed_as_written = stored_links(path)
    assert summed_as_written
    with sqlite3.connect(path) as conn:  # as an older version left it
        for (trigger,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'decision_half_hour_links%'").fetchall():
            conn.execute(f"DROP TRIGGER {trigger}")
        conn.execute(f"DROP TABLE {half_hour_sums.LINKS}")
        if version == "without stored sums":
            for trigger in ("insert", "delete", "update"):
                conn.execute(f"DROP TRIGGER decision_half_hours_{trigger}")
            conn.execute("DROP TABLE decision_half_hours")
            conn.execute("DROP INDEX decisions_linked")

    log = DecisionLog(path)
    await log.start()
    try:
        assert stored_half_hours(path, SINCE, UNTIL) == 3
        assert stored_links(path) == summed_as_written
        for client in (None, "bob"):
            got, expected = await overview_now(log, SINCE, UNTIL, 3_600, client)
            close(got, expected)
        wider = SINCE - 2 * HOUR

        async def with_huge() -> dict[str, Any]:
            return overview_of_groups(await log.overview_groups(PRICES, wider, UNTIL, 3_600), wider, UNTIL, 3_600)

        before = await with_huge()
        assert before["tokens_out"] > 2 * 2**63 * 0.99
        log.submit(dataclasses.replace(huge, request_id="huge-3"))  # and its triggers add to them
        after = await with_huge()
        assert after["requests"] == before["requests"] + 1 and after["tokens_out"] > 3 * 2**63 * 0.99
    finally:
        await log.close()


def vm_steps(conn: sqlite3.Connection, view: Any) -> int:
    """The hundreds of SQLite's virtual machine steps ``view()`` takes on ``conn``."""
    counted = [0]

    def count() -> int:
        counted[0] += 1
        return 0

    conn.set_progress_handler(count, 100)
    try:
        view()
    finally:
        conn.set_progress_handler(None, 100)
    return counted[0]


async def test_the_overview_reads_the_stored_sums_not_the_rows(log):
    """The work of a view over whole half-hours is a fraction of summing its rows (SQLite's steps, counted)."""
    rng = random.Random(7)
    for row in generated(7, 3_000):  # a team's day: mostly rows priced without their previous one (cache figures, no rewrite), a few kinds
        row = dataclasses.replace(row, requested_model=rng.choice(["auto", "gpt-5"]), source="cached")
        if rng.random() < 0.9 and row.prompt_tokens is not None:
            row = dataclasses.replace(row, cached_tokens=row.prompt_tokens // 2, pinch_newly_compressed=0, pinch_restored=0)
        log.submit(row)
    await log.flush()
    conn = log._conn
    assert conn is not None

    since, until = NOW - 1.5 * HOUR - 1, NOW + 5 * HOUR
    stored = await log._on_db(vm_steps, conn, lambda: half_hour_sums.overview_groups(conn, PRICES, since, until, 1_800))
    summed = await log._on_db(vm_steps, conn, lambda: decision_sums.overview_groups(conn, PRICES, since, until, 1_800))
    assert stored * 4 < summed, (stored, summed)
    got = await log._on_db(half_hour_sums.overview_groups, conn, PRICES, since, until, 1_800)
    close(overview_of_groups(got, since, until, 1_800), overview_of_groups(await log._on_db(decision_sums.overview_groups, conn, PRICES, since, until, 1_800), since, until, 1_800))


def linked_log_rows(seed: int, count: int) -> list[Decision]:
    """A log most of whose rows are priced with their session's previous one: no cache figures reported
    (Ollama, many chat providers) or a rewrite by pinch, mixed with ordinary rows."""
    rng = random.Random(seed)
    rows = []
    for row in generated(seed, count):
        if row.prompt_tokens is not None and rng.random() < 0.6:
            row = dataclasses.replace(row, cached_tokens=None, cache_write_tokens=None)
        elif row.cached_tokens is not None and rng.random() < 0.5:
            row = dataclasses.replace(row, pinch_newly_compressed=3)
        rows.append(row)
    return rows


def linked_share(conn: sqlite3.Connection, since: float, until: float) -> float:
    """The share of the rows in ``[since, until)`` that are linked."""
    window = "WHERE ts >= ? AND ts < ?"
    linked = conn.execute(f"SELECT COUNT(*) FROM decisions {window} AND {decision_sums.LINKED.format(r='decisions')}", (since, until)).fetchone()[0]
    return linked / conn.execute(f"SELECT COUNT(*) FROM decisions {window}", (since, until)).fetchone()[0]


async def test_linked_rows_are_stored_as_written_and_read_as_the_rows_price_them(log):
    """Rows priced with their session's previous row are summed as they are written, priced at read time
    exactly as the rows would be: the view over whole half-hours does not sum them from the rows."""
    rng = random.Random(8)
    for row in linked_log_rows(8, 3_000):  # a team's day: a few kinds
        log.submit(dataclasses.replace(row, requested_model=rng.choice(["auto", "gpt-5"]), source="cached"))
    await log.flush()
    conn = log._conn
    assert conn is not None
    since, until = NOW - 1.5 * HOUR - 1, NOW + 5 * HOUR
    assert linked_share(conn, since, until) > 0.5

    for client in (None, "alice"):
        for bucket in (1_800, 3_600):
            got, expected = await overview_now(log, since, until, bucket, client)
            close(got, expected)
            assert got["spent"] and got["saved_by_routing"] and got["saved_by_pinch"]
        # the lifetimes of these prices are bounds of the stored classes: no half-hour is summed from its rows
        _, from_rows = await log._on_db(half_hour_sums._stored_groups, conn, PRICES, math.ceil(since / 1_800), int(until / 1_800), 1, client)
        assert from_rows == []

    stored = await log._on_db(vm_steps, conn, lambda: half_hour_sums.overview_groups(conn, PRICES, since, until, 1_800))
    summed = await log._on_db(vm_steps, conn, lambda: decision_sums.overview_groups(conn, PRICES, since, until, 1_800))
    assert stored * 2 < summed, (stored, summed)

    # a window of whole half-hours reads no row of the log: the linked ones' figures are stored too
    read: set[str] = set()

    def reads(action: int, table: str | None, *_: Any) -> int:
        if action == sqlite3.SQLITE_READ and table:
            read.add(table)
        return sqlite3.SQLITE_OK

    def whole() -> list[Any]:
        conn.set_authorizer(reads)
        try:
            return half_hour_sums.overview_groups(conn, PRICES, 1_800 * math.floor(since / 1_800), 1_800 * math.ceil(until / 1_800), 1_800)
        finally:
            conn.set_authorizer(None)

    assert await log._on_db(whole)
    assert "decisions" not in read and half_hour_sums.LINKS in read


def lifetimes(prices: Prices, seconds: float) -> Prices:
    """``prices`` with every cache lifetime ``seconds``."""
    return Prices(
        {name: dataclasses.replace(price, cache_lifetime_seconds=seconds) for name, price in prices.models.items()},
        {name: dataclasses.replace(price, cache_lifetime_seconds=seconds) for name, price in prices.requested.items()},
        prices.reference_name,
        None if prices.reference is None else dataclasses.replace(prices.reference, cache_lifetime_seconds=seconds),
    )


@pytest.mark.parametrize("client", [None, "alice"])
async def test_a_lifetime_within_a_class_of_gaps_sums_those_half_hours_from_the_rows(log, client):
    rng = random.Random(9)
    for row in linked_log_rows(9, 2_000):  # a few kinds: a class holds several gaps
        log.submit(dataclasses.replace(row, requested_model=rng.choice(["auto", "gpt-5"]), source="cached"))
    await log.flush()
    since, until = NOW - 1.5 * HOUR - 1, NOW + 5 * HOUR
    odd = lifetimes(PRICES, 150)  # within the class of gaps (120, 180]
    _, from_rows = await log._on_db(half_hour_sums._stored_groups, log._conn, odd, math.ceil(since / 1_800), int(until / 1_800), 1, client)
    assert from_rows
    for prices in (odd, lifetimes(PRICES, 0.5), lifetimes(PRICES, 10_000_000)):
        got, expected = await overview_now(log, since, until, 3_600, client, prices)
        close(got, expected)


async def test_a_session_of_two_keys_is_priced_with_the_keys_own_previous_rows(log):
    """A view of one key prices a row with that key's previous row; the others', with the previous row."""
    rows = [dataclasses.replace(row, client=["alice", "bob"][i % 2]) if row.session == "s00" else row for i, row in enumerate(linked_log_rows(10, 2_000))]
    for row in rows:
        log.submit(row)
    await log.flush()
    since, until = NOW - 1.5 * HOUR - 1, NOW + 5 * HOUR
    for client in (None, "alice", "bob"):
        got, expected = await overview_now(log, since, until, 1_800, client)
        close(got, expected)
    start, end = math.ceil(since / 1_800), int(until / 1_800)
    assert (await log._on_db(half_hour_sums._stored_groups, log._conn, PRICES, start, end, 1, "bob"))[1]
    assert not (await log._on_db(half_hour_sums._stored_groups, log._conn, PRICES, start, end, 1, None))[1]


def stored_links(path: str) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """The stored sums of the linked rows (the gaps' bounds aside: they only widen), classes summing to nothing left out."""
    with sqlite3.connect(path) as conn:
        keys = "half_hour, client, requested_model, model, source, error, kind, class"
        columns = [c[1] for c in conn.execute(f"PRAGMA table_info({half_hour_sums.LINKS})")][len(keys.split(", ")) :]
        sums = [c for c in columns if c not in ("least_gap", "greatest_gap")]
        rows = conn.execute(f"SELECT {keys}, {', '.join(sums)} FROM {half_hour_sums.LINKS}").fetchall()
    return {row[:8]: row[8:] for row in rows if any(row[8:])}


def links_summed_once(path: str, copy: str) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """The linked rows' sums of a copy of the log's file without them, summed when it is opened."""
    with sqlite3.connect(path) as source, sqlite3.connect(copy) as target:
        source.backup(target)
        for (trigger,) in target.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'decision_half_hour_links%'").fetchall():
            target.execute(f"DROP TRIGGER {trigger}")
        target.execute(f"DROP TABLE {half_hour_sums.LINKS}")
    with sqlite3.connect(copy, isolation_level=None) as conn:
        half_hour_sums.ensure(conn)
    return stored_links(copy)
