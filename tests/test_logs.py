"""Structured logs: JSON lines with extras, written off the event loop, never blocking it."""

from __future__ import annotations

import io
import logging
import queue

import orjson

from router.logs import DroppingQueueHandler, JsonFormatter, configure_logging


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
