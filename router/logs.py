"""Structured logs: one JSON object per line, with the record's extra fields.

Records are formatted where they are logged but written by a background
thread: a slow or blocked stderr (a full pipe, a stalled terminal) must never
stall the event loop. The queue between them is bounded; when it is full a
line is dropped and counted rather than waited for.
"""

from __future__ import annotations

import logging
import queue
import sys
import time
from logging.handlers import QueueHandler, QueueListener

import orjson

# Attributes every LogRecord has; anything else was passed through `extra=`.
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


class DroppingQueueHandler(QueueHandler):
    """A QueueHandler that drops (and counts) records instead of blocking when its queue is full."""

    def __init__(self, log_queue: queue.Queue[logging.LogRecord]) -> None:
        super().__init__(log_queue)
        self.dropped = 0

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1


def configure_logging(level: str = "info", stream: object = None, max_queued: int = 10_000) -> QueueListener:
    """Log JSON lines to ``stream`` (stderr) through a writer thread; stop the returned listener to flush."""
    log_queue: queue.Queue[logging.LogRecord] = queue.Queue(max_queued)
    handler = DroppingQueueHandler(log_queue)
    handler.setFormatter(JsonFormatter())  # the record leaves the loop already formatted
    writer = logging.StreamHandler(stream or sys.stderr)  # type: ignore[arg-type]
    writer.setFormatter(logging.Formatter("%(message)s"))
    listener = QueueListener(log_queue, writer)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    listener.start()
    return listener
