"""Parsing the Retry-After header (seconds or an HTTP date). Pure."""

from __future__ import annotations

from email.utils import parsedate_to_datetime


def parse_retry_after(value: str | None, now_epoch: float) -> float | None:
    """Seconds to wait, or None when the header is absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - now_epoch
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)
