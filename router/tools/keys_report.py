"""``pinch-router keys``: a running proxy's client keys by name and role, with their usage against
their limits in the current windows (``GET /v1/keys``; docs/keys.md).

The figures are the proxy's: on Redis (``state.backend: redis``) every worker's and replica's; with
the memory backend, those of the process that answered. A ``user`` key sees its own row, an
``admin`` key every one.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, TextIO

# The columns after the name and role: a limit's title, its name in the answer, how a figure is shown.
COLUMNS = (
    ("requests/min", "requests_per_minute", lambda v: f"{v:,.0f}"),
    ("tokens/min", "tokens_per_minute", lambda v: f"{v:,.0f}"),
    ("USD today", "usd_per_day", lambda v: f"{v:,.4f}"),
    ("USD this month", "usd_per_month", lambda v: f"{v:,.4f}"),
)
COUNTS = {"redis": "Redis (every worker and replica)", "process": "the process that answered (memory backend, or Redis unreachable)"}


class KeysError(Exception):
    """The proxy could not be asked, or refused: the message says why."""


def fetch_keys(url: str, api_key: str | None, timeout: float = 10.0) -> dict[str, Any]:
    """``GET <url>/v1/keys`` with ``api_key`` as a Bearer token; its JSON."""
    request = urllib.request.Request(url.rstrip("/") + "/v1/keys", headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310 (the user's proxy URL)
            return json.loads(answer.read())
    except urllib.error.HTTPError as error:
        try:
            message = json.loads(error.read())["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = error.reason
        raise KeysError(f"{url} answered {error.code}: {message}") from None
    except (urllib.error.URLError, OSError) as error:
        reason = error.reason if isinstance(error, urllib.error.URLError) else error
        raise KeysError(f"cannot reach the proxy at {url} ({reason}); is it running? (--url)") from None


def render_keys(answer: dict[str, Any]) -> str:
    """The keys as a table: each limit's column shows what was used, and ``/ limit`` where there is one."""
    if not answer.get("data"):
        return "no client keys are configured (server.api_keys): nothing to list, nothing is limited"
    header = ["key", "role", *(title for title, _, _ in COLUMNS), "in flight"]
    rows = [header]
    for key in answer.get("data", []):
        cells = [key["name"], key["role"]]
        for _, name, shown in COLUMNS:
            used, limit = key["used"][name], key["limits"][name]
            cells.append(shown(used) if limit is None else f"{shown(used)} / {shown(limit)}")
        held = key["held"]
        cells.append(f"{held['tokens']:,} tokens, {held['usd']:,.4f} USD" if held["tokens"] or held["usd"] else "-")
        rows.append(cells)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.append(f"counts: {COUNTS.get(answer.get('counts', ''), answer.get('counts', '?'))}; windows in UTC")
    return "\n".join(lines)


def run_keys(url: str, api_key: str | None, as_json: bool, out: TextIO, err: TextIO) -> int:
    """Print the keys (or the answer as JSON); 1 when the proxy could not be asked or refused."""
    try:
        answer = fetch_keys(url, api_key)
    except KeysError as error:
        print(f"pinch-router: {error}", file=err)
        return 1
    print(json.dumps(answer, indent=2) if as_json else render_keys(answer), file=out)
    return 0
