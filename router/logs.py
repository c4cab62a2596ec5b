"""Structured logs: one JSON object per line, with the record's extra fields.

Records are formatted where they are logged but written by a background
thread: a slow or blocked stderr (a full pipe, a stalled terminal) must never
stall the event loop. The queue between them is bounded; when it is full a
line is dropped and counted rather than waited for. The writer wakes for a
batch of lines, not for each one (see :class:`LineWriter`).
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
import time
from logging.handlers import QueueHandler
from typing import TextIO

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
    """Queues each record as its formatted line, without waiting: a full queue drops (and counts) it.

    Only the line is queued. QueueHandler's default ``prepare`` copies the whole
    record (``copy.copy``, the costliest step of a request's log line) so that it
    can clear the record's arguments for the handlers after it; a line needs neither.
    """

    def __init__(self, log_queue: queue.Queue[str | None]) -> None:
        super().__init__(log_queue)
        self.dropped = 0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:  # logging's rule: a handler reports its own failure (handleError), never raises
            self.handleError(record)
            return
        try:
            self.queue.put_nowait(line)
        except queue.Full:
            self.dropped += 1


class LineWriter:
    """Writes the queued lines to a stream on its own thread, a batch at a time.

    It waits for a line, then up to ``batch_seconds`` for more, and writes them
    all with one write and one flush. Woken for every line, as a QueueListener
    is, the thread cost the event loop a GIL hand-over on every request; now a
    line reaches the stream at most ``batch_seconds`` after it was logged.
    ``stop`` writes out everything still queued.
    """

    def __init__(self, lines: queue.Queue[str | None], stream: TextIO, batch_seconds: float = 0.1) -> None:
        self.lines = lines
        self.stream = stream
        self.batch_seconds = batch_seconds
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._write_forever, name="log-writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def say(self, text: str) -> None:
        """Queue one plain line for the person at the terminal (``draining 3 streams ...``), never waiting."""
        try:
            self.lines.put_nowait(text)
        except queue.Full:
            pass

    def stop(self, timeout: float | None = None) -> bool:
        """Write out what is queued and end the thread.

        False when that did not finish within ``timeout``: the stream is blocked
        (a pipe nobody reads), and the caller must not wait for it any longer.
        """
        self._stopping.set()
        try:
            self.lines.put(None, timeout=timeout)  # wakes the writer even when nothing is queued
        except queue.Full:
            return False
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _write_forever(self) -> None:
        done = False
        while not done:
            batch = [self.lines.get()]
            self._stopping.wait(self.batch_seconds)  # let the batch fill (returns at once when stopping)
            while True:
                try:
                    batch.append(self.lines.get_nowait())
                except queue.Empty:
                    break
            done = None in batch
            text = "".join(f"{line}\n" for line in batch if line is not None)
            try:
                self.stream.write(text)
                self.stream.flush()
            except (OSError, ValueError):  # the stream is gone or closed: there is nowhere left to tell
                pass


def configure_logging(level: str = "info", stream: TextIO | None = None, max_queued: int = 10_000) -> LineWriter:
    """Log JSON lines to ``stream`` (stderr) through a writer thread; stop the returned writer to flush."""
    log_queue: queue.Queue[str | None] = queue.Queue(max_queued)
    handler = DroppingQueueHandler(log_queue)
    handler.setFormatter(JsonFormatter())  # the line leaves the loop already formatted
    writer = LineWriter(log_queue, stream or sys.stderr)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    writer.start()
    return writer
