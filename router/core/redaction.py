"""What may leave the process of text the proxy did not write itself. Pure.

* :class:`Redactor` — the one pass that removes every configured secret
  (provider keys, the embeddings key, client keys) from text on its way out:
  client error bodies, decision rows (so ``/v1/decisions``) and the request
  log line. Sources are kept clean too (dependency failures are described
  without what the dependency sent, :mod:`router.clients.dependency_http`); this pass
  is the guarantee that holds whatever a source did.
* :meth:`Redactor.log_filter` — the same pass over every log record (its
  message, arguments, extra fields and traceback), for the handlers that write
  the log.
* :func:`clip` — client input quoted back (an unknown model name, a header
  value) is cut to a few dozen characters: a 30 MB model name is not answered
  with a 30 MB error, nor stored whole; :func:`quoted` is how a validation
  message quotes a value of any type.
* :func:`header_value` — text from a client or a provider that goes into an HTTP
  header (a dropped tool's name in ``x-router-dropped``, a provider's
  ``Content-Type``, a client's ``anthropic-beta`` forwarded): printable ASCII
  only, bounded. A control character in a header is refused by the HTTP
  writer, which then drops the connection — after the upstream was called.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import traceback
from collections.abc import Iterable
from typing import Any, TypeVar

REDACTED = "[redacted]"
# Shorter "secrets" (a test key like "k") would shred ordinary text; no real key is this short.
MIN_SECRET_CHARS = 6
MAX_ECHO_CHARS = 120

T = TypeVar("T")


def clip(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """``text``, or its head and how long it really was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


def quoted(value: Any, limit: int = 40) -> str:
    """A client's value as an error message quotes it: a string clipped (:func:`clip`) and quoted
    with its control characters escaped, a number or a constant as written (clipped), an array or
    an object by its kind — never the whole of what the client sent."""
    if isinstance(value, str):
        return repr(clip(value, limit))
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if value is None or isinstance(value, (bool, int, float)):
        return clip(repr(value), limit)
    return "a number"  # the only other JSON value: one kept as the client wrote it (an orjson.Fragment)


MAX_HEADER_CHARS = 1000
# what an HTTP header value may carry as is: printable ASCII (RFC 9110 field-vchar and SP)
_HEADER_UNSAFE = re.compile(r"[^\x20-\x7e]")


def header_value(text: str, limit: int = MAX_HEADER_CHARS) -> str:
    """``text`` fit for an HTTP header: every character outside printable ASCII written as its
    escape (``a\\x0ab``, ``\\xe9``), cut to ``limit`` characters and then saying how long it was (as
    :func:`clip`, in ASCII). The usual value is returned as it is, after one check."""
    if _fits_header(text, limit):
        return text
    escaped = _HEADER_UNSAFE.sub(_escape, text[:limit])
    if len(text) <= limit and len(escaped) <= limit:
        return escaped
    return f"{escaped[:limit]}... ({len(text):,} characters)"


def header_values(headers: dict[str, str], limit: int = MAX_HEADER_CHARS) -> dict[str, str]:
    """``headers`` with every value :func:`header_value` makes of it. The usual head (all its values
    printable ASCII, together within ``limit``) is returned as it is, after one check of them all
    instead of one a value."""
    if _fits_header("".join(headers.values()), limit):
        return headers
    return {name: header_value(value, limit) for name, value in headers.items()}


def _fits_header(text: str, limit: int) -> bool:
    """``text`` goes in a header as it is: printable ASCII, within ``limit`` characters."""
    return len(text) <= limit and text.isascii() and text.isprintable()


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


class Redactor:
    """Replaces each secret with ``[redacted]`` in text, bytes and the text fields of records."""

    def __init__(self, secrets: Iterable[str | None]) -> None:
        self.secrets = tuple(sorted({s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True))
        self._encoded = tuple(s.encode() for s in self.secrets)

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def text(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def bytes(self, data: bytes) -> bytes:
        for secret in self._encoded:
            if secret in data:
                data = data.replace(secret, REDACTED.encode())
        return data

    def any_in(self, texts: Iterable[str | None]) -> bool:
        """Whether any secret occurs in any of ``texts`` (one joined search: ~2 µs for a request's texts)."""
        if not self.secrets:
            return False
        joined = "\n".join(t for t in texts if t)
        return any(secret in joined for secret in self.secrets)

    def record(self, record: T) -> T:
        """A frozen dataclass with every string in it redacted, nested records and tuples included (~100 µs)."""
        return self._value(record) if self.secrets else record

    def _value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, tuple):
            return tuple(self._value(v) for v in value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            changes = {f.name: self._value(getattr(value, f.name)) for f in dataclasses.fields(value) if isinstance(getattr(value, f.name), (str, tuple)) or dataclasses.is_dataclass(getattr(value, f.name))}
            return dataclasses.replace(value, **changes)
        return value

    def log_filter(self) -> logging.Filter:
        return RedactingFilter(self)


# Attributes every LogRecord has; the others came from `extra=`.
_RECORD_ATTRS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class RedactingFilter(logging.Filter):
    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def redact_event(self, event: str, fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """What ``filter`` makes of a record of ``event`` with ``extra=fields``, for lines logged without a record."""
        if not self.redactor.any_in([event, *(value for value in fields.values() if isinstance(value, str))]):
            return event, fields  # the usual case, found with one search instead of a copy
        text = self.redactor.text
        return text(event), {key: text(value) if isinstance(value, str) else value for key, value in fields.items()}

    def filter(self, record: logging.LogRecord) -> bool:
        text = self.redactor.text
        if isinstance(record.msg, str):
            record.msg = text(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(text(a) if isinstance(a, str) else a for a in record.args)
        for key, value in list(vars(record).items()):
            if key not in _RECORD_ATTRS and isinstance(value, str):
                setattr(record, key, text(value))
        if record.exc_info:
            # a traceback may quote a dependency's error text; it leaves only redacted
            record.exception = text("".join(traceback.format_exception(*record.exc_info)).rstrip())
            record.exc_info, record.exc_text = None, None
        return True
