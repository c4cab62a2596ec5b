"""Structured logs: one JSON object per line, with the record's extra fields.

Records are formatted where they are logged but written by a background
thread: a slow or blocked stderr (a full pipe, a stalled terminal) must never
stall the event loop. The queue between them is bounded; when it is full a
line is dropped and counted rather than waited for. The writer wakes for a
batch of lines, not for each one (see :class:`LineWriter`).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import deque
from typing import TextIO

import orjson

from router.core.redaction import RedactingFilter

# Attributes every LogRecord has; anything else was passed through `extra=`.
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = {key: value for key, value in vars(record).items() if key not in _STANDARD and not key.startswith("_")}
        exception = self.formatException(record.exc_info) if record.exc_info else None
        return json_line(record.created, record.levelname, record.name, record.getMessage(), fields, exception)


def json_line(created: float, levelname: str, logger: str, event: str, fields: dict[str, object], exception: str | None = None) -> str:
    """One log line: when, level, logger and event, then the event's fields (and a traceback)."""
    entry: dict[str, object] = {"ts": _timestamp(created), "level": levelname.lower(), "logger": logger, "event": event}
    entry.update(fields)
    if exception is not None:
        entry["exception"] = exception
    return orjson.dumps(entry, default=str).decode()


_second: tuple[int, str] = (-1, "")  # the last second formatted: most lines share it with the one before


def _timestamp(created: float) -> str:
    global _second
    second = int(created)
    if _second[0] != second:
        _second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{_second[1]}.{int((created - second) * 1000):03d}Z"  # milliseconds as LogRecord.msecs counts them


def log_event(logger: logging.Logger, level: int, event: str, fields: dict[str, object]) -> None:
    """``logger.log(level, event, extra=fields)``: the same line, without a LogRecord when only the JSON
    writer of :func:`configure_logging` would see it.

    A request's log line spent ~10 µs of the loop's time in logging (the record, its caller
    lookup, the handler's lock and filters, formatting from the record's attributes); formatted
    straight from ``fields`` it costs a fifth of that. Whenever anything else would see the record
    (a handler on the logger or the root, such as pytest's caplog, a logger filter, a
    handler filter other than the redaction), it is logged the ordinary way.
    """
    if not logger.isEnabledFor(level):
        return
    handler = _sole_json_handler(logger, level)
    if handler is None:
        logger.log(level, event, extra=fields)
        return
    for redaction in handler.filters:  # only redaction filters, checked by _sole_json_handler
        event, fields = redaction.redact_event(event, fields)  # type: ignore[union-attr]
    handler.put_line(json_line(time.time(), logging.getLevelName(level), logger.name, event, fields))


def _sole_json_handler(logger: logging.Logger, level: int) -> DroppingQueueHandler | None:
    """The JSON queue handler, when it is the one handler a record of ``logger`` at ``level`` reaches."""
    root = logging.root
    if len(root.handlers) != 1 or logger.filters:
        return None
    handler = root.handlers[0]
    if type(handler) is not DroppingQueueHandler or type(handler.formatter) is not JsonFormatter or level < handler.level:
        return None
    if not all(isinstance(f, RedactingFilter) for f in handler.filters):
        return None
    node: logging.Logger | None = logger
    while node is not None and node is not root:
        if not node.propagate or any(type(h) is not logging.NullHandler for h in node.handlers):
            return None  # a NullHandler writes nothing: `explain` puts one on pinch_router
        node = node.parent
    return handler


class Lines:
    """The bounded queue of formatted lines between the loggers and the writer thread.

    A line is appended to a deque (atomic, no lock), and only the first line after
    the writer last took its batch sets the writer's wake-up: a ``queue.Queue``
    takes a lock and notifies a condition for every line put and every line got,
    ~1.4 µs a line, half of it on the event loop.
    """

    def __init__(self, max_lines: int) -> None:
        self.max_lines = max_lines
        self._lines: deque[str | None] = deque()
        self.waiting = threading.Event()  # set: there may be lines to take

    def __len__(self) -> int:
        return len(self._lines)

    def put(self, line: str) -> bool:
        """Queue ``line`` without waiting; False when the queue is full."""
        if len(self._lines) >= self.max_lines:
            return False
        self._lines.append(line)
        if not self.waiting.is_set():
            self.waiting.set()
        return True

    def end(self) -> None:
        """Queue the end of the lines (beyond the bound: it must get through)."""
        self._lines.append(None)
        self.waiting.set()

    def take(self) -> list[str | None]:
        """Everything queued, in order."""
        # Cleared before taking: a line put after this either is taken now or sets it again.
        self.waiting.clear()
        batch = []
        try:
            while True:
                batch.append(self._lines.popleft())
        except IndexError:
            return batch


class DroppingQueueHandler(logging.Handler):
    """Queues each record as its formatted line, without waiting: a full queue drops (and counts) it.

    Only the line is queued: a ``QueueHandler`` copies the whole record
    (``copy.copy``, the costliest step of a request's log line) so that it can
    clear the record's arguments for the handlers after it; a line needs neither.
    """

    def __init__(self, lines: Lines) -> None:
        super().__init__()
        self.lines = lines
        self.dropped = 0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:  # logging's rule: a handler reports its own failure (handleError), never raises
            self.handleError(record)
            return
        self.put_line(line)

    def put_line(self, line: str) -> None:
        if not self.lines.put(line):
            self.dropped += 1


class LineWriter:
    """Writes the queued lines to a stream on its own thread, a batch at a time.

    Woken by the first line, it waits ``batch_seconds`` for more, then writes
    everything queued with one write and one flush. Woken for every line, as a
    QueueListener is, the thread cost the event loop a GIL hand-over on every
    request; now a line reaches the stream at most ``batch_seconds`` after it
    was logged. ``stop`` writes out everything still queued.
    """

    def __init__(self, lines: Lines, stream: TextIO, batch_seconds: float = 0.1) -> None:
        self.lines = lines
        self.stream = stream
        self.batch_seconds = batch_seconds
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._write_forever, name="log-writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def say(self, text: str) -> None:
        """Queue one plain line for the person at the terminal (``draining 3 streams ...``), never waiting."""
        self.lines.put(text)

    def stop(self, timeout: float | None = None) -> bool:
        """Write out what is queued and end the thread.

        False when that did not finish within ``timeout``: the stream is blocked
        (a pipe nobody reads), and the caller must not wait for it any longer.
        """
        self._stopping.set()
        self.lines.end()  # wakes the writer even when nothing is queued
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _write_forever(self) -> None:
        done = False
        while not done:
            self.lines.waiting.wait()
            self._stopping.wait(self.batch_seconds)  # let the batch fill (returns at once when stopping)
            batch = self.lines.take()
            done = None in batch
            text = "".join(f"{line}\n" for line in batch if line is not None)
            try:
                self.stream.write(text)
                self.stream.flush()
            except (OSError, ValueError):  # the stream is gone or closed: there is nowhere left to tell
                pass


def configure_logging(level: str = "info", stream: TextIO | None = None, max_queued: int = 10_000) -> LineWriter:
    """Log JSON lines to ``stream`` (stderr) through a writer thread; stop the returned writer to flush."""
    lines = Lines(max_queued)
    handler = DroppingQueueHandler(lines)
    handler.setFormatter(JsonFormatter())  # the line leaves the loop already formatted
    writer = LineWriter(lines, stream or sys.stderr)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    writer.start()
    return writer
