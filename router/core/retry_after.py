"""Parsing the Retry-After header (seconds or an HTTP date). Pure."""

from __future__ import annotations

import math
from email.utils import parsedate_to_datetime

# A provider may ask for anything (``inf``, a date in the year 9999); no wait the
# proxy reports or honours is longer than a day.
MAX_RETRY_AFTER_SECONDS = 86_400.0


def parse_retry_after(value: str | None, now_epoch: float) -> float | None:
    """Seconds to wait, from 0 to a day, or None when the header is absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - now_epoch
    if math.isnan(seconds):
        return None
    return min(max(0.0, seconds), MAX_RETRY_AFTER_SECONDS)
