"""Structured logs: JSON lines with extras, written off the event loop, never blocking it."""

from __future__ import annotations

import io
import logging
import queue
import threading
import time

import orjson

from router.logs import (
    DroppingQueueHandler,
    JsonFormatter,
    LineWriter,
    configure_logging,
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
    handler = DroppingQueueHandler(queue.Queue(2))
    handler.setFormatter(JsonFormatter())
    for i in range(5):
        handler.handle(logging.makeLogRecord({"msg": f"line {i}", "levelno": logging.INFO, "levelname": "INFO"}))
    assert handler.queue.qsize() == 2
    assert handler.dropped == 3


def test_the_writer_writes_every_queued_line_in_order_and_stop_writes_out_the_rest_at_once():
    stream = io.StringIO()
    lines: queue.Queue[str | None] = queue.Queue()
    # A batch window far beyond the suite's timeout: stop must not wait it out.
    writer = LineWriter(lines, stream, batch_seconds=3600)
    writer.start()
    for i in range(100):
        lines.put(f"line {i}")
    writer.stop()
    assert stream.getvalue().splitlines() == [f"line {i}" for i in range(100)]


def test_only_the_formatted_line_is_queued_and_the_record_is_left_as_it_was():
    handler = DroppingQueueHandler(queue.Queue())
    handler.setFormatter(JsonFormatter())
    record = logging.makeLogRecord({"msg": "request %s", "args": ("req_1",), "levelno": logging.INFO, "levelname": "INFO"})
    handler.handle(record)
    assert orjson.loads(handler.queue.get_nowait())["event"] == "request req_1"
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
    writer = LineWriter(queue.Queue(10), stream, batch_seconds=0.01)
    writer.start()
    writer.say("pinch-router: stopping; draining 0 streams")
    started = time.monotonic()
    try:
        assert writer.stop(timeout=0.2) is False
        assert time.monotonic() - started < 1.0
    finally:
        stream.released.set()
    deadline = time.monotonic() + 2
    while "draining" not in stream.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert stream.getvalue() == "pinch-router: stopping; draining 0 streams\n"  # the plain line, as said


def test_stop_reports_success_when_everything_was_written():
    stream = io.StringIO()
    writer = LineWriter(queue.Queue(10), stream, batch_seconds=0.01)
    writer.start()
    writer.say("hello")
    assert writer.stop(timeout=2) is True
    assert stream.getvalue() == "hello\n"
