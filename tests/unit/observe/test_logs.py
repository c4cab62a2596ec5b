"""Structured logs: JSON lines with extras, written off the event loop, never blocking it."""

from __future__ import annotations

import io
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from router.core.redaction import Redactor
from router.observe.logs import (
    DroppingQueueHandler,
    JsonFormatter,
    Lines,
    LineWriter,
    configure_logging,
    log_event,
)


def test_a_line_is_json_with_the_extra_fields():
    stream = io.StringIO()
    listener = configure_logging("info", stream=stream)
    try:
        logging.getLogger("pinch_router.test").warning("relevance_unavailable", extra={"reason": "timeout", "request_id": "req_1"})
    finally:
        listener.stop()
        logging.getLogger().handlers[:] = []
    entry = orjson.loads(stream.getvalue().strip().splitlines()[-1])
    assert entry["event"] == "relevance_unavailable"
    assert entry["level"] == "warning" and entry["reason"] == "timeout" and entry["request_id"] == "req_1"


def test_exceptions_are_formatted_into_the_line():
    record = logging.makeLogRecord({"msg": "boom", "levelno": logging.ERROR, "levelname": "ERROR"})
    try:
        raise ValueError("bad")
    except ValueError:
        import sys

        record.exc_info = sys.exc_info()
    assert "ValueError: bad" in orjson.loads(JsonFormatter().format(record))["exception"]


def test_a_full_queue_drops_lines_instead_of_blocking():
    handler = DroppingQueueHandler(Lines(2))
    handler.setFormatter(JsonFormatter())
    for i in range(5):
        handler.handle(logging.makeLogRecord({"msg": f"line {i}", "levelno": logging.INFO, "levelname": "INFO"}))
    assert [orjson.loads(line)["event"] for line in handler.lines.take()] == ["line 0", "line 1"]
    assert handler.dropped == 3


def test_the_writer_writes_every_queued_line_in_order_and_stop_writes_out_the_rest_at_once():
    stream = io.StringIO()
    lines = Lines(1000)
    # A batch window far beyond the suite's timeout: stop must not wait it out.
    writer = LineWriter(lines, stream, batch_seconds=3600)
    writer.start()
    for i in range(100):
        lines.put(f"line {i}")
    writer.stop()
    assert stream.getvalue().splitlines() == [f"line {i}" for i in range(100)]


def test_lines_put_from_several_threads_while_the_writer_writes_are_all_written():
    stream = io.StringIO()
    lines = Lines(100_000)
    writer = LineWriter(lines, stream, batch_seconds=0.0005)  # many small batches: puts race the takes
    writer.start()

    def put(thread: int) -> None:
        for i in range(2000):
            lines.put(f"{thread} {i}")
            if i % 100 == 0:
                time.sleep(0.001)

    threads = [threading.Thread(target=put, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert writer.stop(timeout=10)
    written = stream.getvalue().splitlines()
    assert sorted(written) == sorted(f"{t} {i}" for t in range(4) for i in range(2000))
    for t in range(4):  # each thread's lines in the order it put them
        assert [line for line in written if line.startswith(f"{t} ")] == [f"{t} {i}" for i in range(2000)]


def test_only_the_formatted_line_is_queued_and_the_record_is_left_as_it_was():
    handler = DroppingQueueHandler(Lines(10))
    handler.setFormatter(JsonFormatter())
    record = logging.makeLogRecord({"msg": "request %s", "args": ("req_1",), "levelno": logging.INFO, "levelname": "INFO"})
    handler.handle(record)
    [line] = handler.lines.take()
    assert orjson.loads(line)["event"] == "request req_1"
    assert record.getMessage() == "request req_1"  # other handlers (e.g. pytest's caplog) still see the original


class BlockedStream(io.StringIO):
    """A stderr nobody reads: every write waits until released."""

    def __init__(self) -> None:
        super().__init__()
        self.released = threading.Event()

    def write(self, text: str) -> int:
        self.released.wait()
        return super().write(text)


def test_stop_gives_up_on_a_blocked_stream_instead_of_waiting_forever():
    stream = BlockedStream()
    writer = LineWriter(Lines(10), stream, batch_seconds=0.01)
    writer.start()
    writer.say("pinch-router: stopping; draining 0 streams")
    started = time.monotonic()
    try:
        assert writer.stop(timeout=0.2) is False
        assert time.monotonic() - started < 10  # not forever (a wide margin: two suites on two cores)
    finally:
        stream.released.set()
    deadline = time.monotonic() + 2
    while "draining" not in stream.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert stream.getvalue() == "pinch-router: stopping; draining 0 streams\n"  # the plain line, as said


def test_stop_reports_success_when_everything_was_written():
    stream = io.StringIO()
    writer = LineWriter(Lines(10), stream, batch_seconds=0.01)
    writer.start()
    writer.say("hello")
    assert writer.stop(timeout=2) is True
    assert stream.getvalue() == "hello\n"


SECRET = "sk-secret-0123456789"
REQUEST_FIELDS = {"request_id": "req_1", "status": 200, "error_code": f"bad {SECRET}", "tier": None, "stream": False, "duration_ms": 1.25}


def logged_lines(level: str, log: Callable[[logging.Logger], None]) -> tuple[list[dict[str, object]], int]:
    """The lines written when ``log`` logs through :func:`configure_logging`'s writer with the redaction
    filter on, and how many LogRecords were built for them."""
    stream = io.StringIO()
    writer = configure_logging(level, stream=stream)
    handler = logging.getLogger().handlers[0]
    handler.addFilter(Redactor([SECRET]).log_filter())
    built = 0
    make_record = logging.getLogRecordFactory()

    def counting(*args: Any, **kwargs: Any) -> logging.LogRecord:
        nonlocal built
        built += 1
        return make_record(*args, **kwargs)

    logging.setLogRecordFactory(counting)
    try:
        log(logging.getLogger("pinch_router.request"))
    finally:
        logging.setLogRecordFactory(make_record)
        writer.stop()
        logging.getLogger().handlers[:] = []
    return [orjson.loads(line) for line in stream.getvalue().splitlines()], built


def test_an_event_logged_straight_to_the_writer_is_the_line_logging_writes_and_builds_no_record():
    (direct,), built = logged_lines("info", lambda log: log_event(log, logging.INFO, "request", REQUEST_FIELDS))
    (through_logging,), _ = logged_lines("info", lambda log: log.info("request", extra=REQUEST_FIELDS))
    assert built == 0
    assert list(direct) == list(through_logging)  # the same fields in the same order
    assert {**direct, "ts": None} == {**through_logging, "ts": None}
    assert direct["error_code"] == "bad [redacted]" and direct["level"] == "info" and direct["logger"] == "pinch_router.request"
    assert direct["ts"].endswith("Z") and len(direct["ts"]) == len("2026-01-01T00:00:00.000Z")


def test_a_null_handler_on_the_way_does_not_stop_an_event_going_straight_to_the_writer():
    logging.getLogger("pinch_router").addHandler(null := logging.NullHandler())
    try:
        (line,), built = logged_lines("info", lambda log: log_event(log, logging.INFO, "request", REQUEST_FIELDS))
    finally:
        logging.getLogger("pinch_router").removeHandler(null)
    assert built == 0 and line["request_id"] == "req_1"


def test_an_event_below_the_level_is_neither_written_nor_built():
    lines, built = logged_lines("warning", lambda log: log_event(log, logging.INFO, "request", REQUEST_FIELDS))
    assert lines == [] and built == 0


def test_an_event_goes_through_logging_when_another_handler_would_see_it(caplog):
    caplog.set_level(logging.INFO)
    log_event(logging.getLogger("pinch_router.request"), logging.INFO, "request", REQUEST_FIELDS)
    [record] = [r for r in caplog.records if r.getMessage() == "request"]
    assert record.request_id == "req_1" and record.duration_ms == 1.25


@pytest.mark.parametrize("created", [1_700_000_000.0, 1_700_000_000.9995, 1_700_000_059.123456])
def test_the_timestamp_is_the_records_utc_second_and_millisecond(created):
    record = logging.makeLogRecord({"msg": "x", "levelno": logging.INFO, "levelname": "INFO", "created": created})
    record.msecs = int((created - int(created)) * 1000)
    expected = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(record.msecs):03d}Z"
    assert orjson.loads(JsonFormatter().format(record))["ts"] == expected
