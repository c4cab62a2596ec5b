"""`pinch-router top`: follow a running proxy's decisions live in the terminal.

It polls ``GET /v1/decisions`` (newest first) every ``--interval`` seconds and
shows the rows in a table, newest at the top; Enter on a row opens its full
record (stage trace, pinch, relevance, attempts, rejected models), Escape
closes it. The cursor follows the newest row while it sits on the top row;
moved further down, it stays on the request it is on as new rows arrive.

An unreachable, restarting or misconfigured proxy (wrong key, decision log
off) is shown in the status line and retried on the next tick; the table
keeps the last rows it had. ``top`` only reads: it never changes the proxy.

Layers: :class:`DecisionFeed` is the HTTP client (one ``aiohttp.ClientSession``);
the functions above it (:func:`decision_cells`, :func:`decision_detail`,
:func:`summary_line`, :func:`parse_decisions`) are pure and work on the
plain JSON rows; :class:`TopApp` only wires them to widgets.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Sequence
from datetime import datetime, tzinfo
from typing import Any, ClassVar

import aiohttp
import orjson
from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Header, Static

from router.decision_record import wire_route

Row = dict[str, Any]

DEFAULT_URL = "http://127.0.0.1:8787"
DEFAULT_LIMIT = 200

# (column key, header) in display order; decision_cells returns cells in this order.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("time", "time"),
    ("session", "session"),
    ("class", "category/tier/source"),
    ("model", "model"),
    ("saved", "pinch saved"),
    ("status", "status"),
    ("latency", "latency"),
    ("overhead", "overhead"),
)
_KEYS = [key for key, _ in COLUMNS]
STATUS_COLUMN = _KEYS.index("status")
NUMERIC_COLUMNS = tuple(_KEYS.index(key) for key in ("saved", "latency", "overhead"))


# --- pure formatting ---------------------------------------------------------------


def format_ms(ms: float | None) -> str:
    if ms is None:
        return "-"
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    if ms >= 100:
        return f"{ms:.0f} ms"
    return f"{ms:.1f} ms"


def format_tokens(tokens: int | None) -> str:
    if tokens is None:
        return "-"
    size = abs(tokens)
    if size >= 1_000_000:
        return f"{tokens / 1_000_000:.1f}M"
    if size >= 10_000:
        return f"{tokens / 1000:.0f}k"
    if size >= 1000:
        return f"{tokens / 1000:.1f}k"
    return str(tokens)


def format_time(ts: float | None, tz: tzinfo | None = None) -> str:
    """``HH:MM:SS`` of an epoch timestamp, in ``tz`` (None: the local zone)."""
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, tz).strftime("%H:%M:%S")


def short_session(session: str | None) -> str:
    return session[:8] if session else "-"


def pinch_saved(row: Row) -> int | None:
    """Tokens pinch removed, or None when pinch did not run for this request."""
    before, after = row.get("tokens_before"), row.get("tokens_after")
    if before is None or after is None:
        return None
    return before - after


def classification_cell(row: Row) -> str:
    """``category/tier/source``; an escalated tier reads ``2→3``."""
    category, tier, routed = row.get("category"), row.get("tier"), row.get("routed_tier")
    if category is None and routed is None:
        return "-"
    tier_text = "-" if tier is None else str(tier)
    if routed is not None and routed != tier:
        tier_text = f"{tier_text}→{routed}"
    return f"{category or '-'}/{tier_text}/{row.get('source') or '-'}"


def status_cell(row: Row) -> str:
    """The HTTP status, with ✓ / ✗ once the client reported the outcome."""
    mark = {"success": " ✓", "failure": " ✗"}.get(row.get("outcome") or "", "")
    return f"{row.get('status', '-')}{mark}"


def status_style(row: Row) -> str:
    status = row.get("status")
    if not isinstance(status, int) or status >= 500 or row.get("stream_error"):
        return "bold red"
    if status >= 400:
        return "yellow"
    return "green"


def decision_cells(row: Row, tz: tzinfo | None = None) -> tuple[str, ...]:
    """One table row's cells, in :data:`COLUMNS` order."""
    return (
        format_time(row.get("ts"), tz),
        short_session(row.get("session")),
        classification_cell(row),
        row.get("model") or "-",
        format_tokens(pinch_saved(row)),
        status_cell(row),
        format_ms(row.get("duration_ms")),
        format_ms(row.get("overhead_ms")),
    )


def summary_line(rows: Sequence[Row]) -> str:
    """One line over the rows shown: volume, errors, pinch savings, latency and overhead."""
    if not rows:
        return "no decisions yet"
    errors = sum(1 for r in rows if not isinstance(r.get("status"), int) or r["status"] >= 400)
    saved = sum(max(pinch_saved(r) or 0, 0) for r in rows)
    parts = [f"{len(rows)} decisions", f"{errors} errors", f"pinch saved {format_tokens(saved)} tokens"]
    cache_rows = [r for r in rows if isinstance(r.get("cached_tokens"), int) and isinstance(r.get("prompt_tokens"), int)]
    prompt = sum(r["prompt_tokens"] for r in cache_rows)
    if prompt:
        parts.append(f"prompt cache {sum(r['cached_tokens'] for r in cache_rows) / prompt:.0%} of {format_tokens(prompt)} tokens")
    durations = [r["duration_ms"] for r in rows if isinstance(r.get("duration_ms"), (int, float))]
    overheads = [r["overhead_ms"] for r in rows if isinstance(r.get("overhead_ms"), (int, float))]
    if durations:
        parts.append(f"latency p50 {format_ms(statistics.median(durations))}")
    if overheads:
        parts.append(f"overhead p50 {format_ms(statistics.median(overheads))}")
    models: dict[str, int] = {}
    for r in rows:
        if r.get("model"):
            models[r["model"]] = models.get(r["model"], 0) + 1
    if models:
        top = sorted(models.items(), key=lambda item: (-item[1], item[0]))[:3]
        parts.append(" ".join(f"{name}×{count}" for name, count in top))
    return " · ".join(parts)


def _table(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Left-aligned columns, the last one free-form."""
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return [(indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1]).rstrip() for r in rows]


def _thousands(n: Any) -> str:
    return f"{n:,}" if isinstance(n, int) else "-"


def _cache_text(row: Row) -> str:
    """``; 1,536 from the prompt cache (77%), 160 written to it``, or '' when the upstream did not say."""
    cached, prompt, written = row.get("cached_tokens"), row.get("prompt_tokens"), row.get("cache_write_tokens")
    if not isinstance(cached, int):
        return ""
    share = f" ({cached / prompt:.0%})" if isinstance(prompt, int) and prompt else ""
    return f"; {cached:,} from the prompt cache{share}" + (f", {written:,} written to it" if isinstance(written, int) else "")


def decision_detail(row: Row, tz: tzinfo | None = None) -> str:
    """The full record of one decision as plain text (the detail popup's content).

    Decision fields first (one line each, rejected models and attempts one line
    per entry), the stage trace last: it is the longest part.
    """
    when = "-" if row.get("ts") is None else datetime.fromtimestamp(row["ts"], tz).strftime("%Y-%m-%d %H:%M:%S")
    status = f"{row.get('status')}" + (f" {row['error_code']}" if row.get("error_code") else "")
    lines = [f"{row.get('request_id')}   {when}   status {status}{'   stream' if row.get('stream') else ''}", ""]

    def field(name: str, value: str) -> None:
        lines.append(f"{name:<12}{value}")

    session = row.get("session")
    requested = row.get("requested_model") or "(none: routed)"
    field("session", (f"{session} ({row.get('session_source')})" if session else "-") + f"   requested model {requested}")
    if row.get("category") is not None or row.get("routed_tier") is not None:
        routed = row.get("routed_tier")
        escalation = f" ({row['escalation']})" if row.get("escalation") else ""
        field("class", f"{row.get('category')}, tier {row.get('tier')}, source {row.get('source')}; routed tier {routed}{escalation}")
    candidates = row.get("candidates") or []
    if row.get("model"):
        field("model", f"{row['model']} via {row.get('provider') or '-'}")
    elif row.get("attempts"):
        field("model", "(none answered)")
    if row.get("wire_in"):
        field("wire", wire_route(row["wire_in"], row.get("wire_out"), row.get("wire_dropped") or ""))
    if row.get("requested_max_tokens") is not None:
        sent = row.get("sent_max_tokens")
        field("max tokens", f"requested {row['requested_max_tokens']}, sent {sent if sent is not None else '-'}")
    if candidates:  # the gate's order: the first was chosen, the rest are its fallbacks
        field("candidates", " → ".join(candidates))
    rejected = row.get("rejected") or []
    for i, r in enumerate(rejected):
        field("rejected" if i == 0 else "", f"{r.get('model', '?')}: {'; '.join(r.get('reasons') or [])}")
    if not rejected:
        gate_ran = any(stage.get("stage") == "capability-gate" for stage in row.get("stages") or [])
        field("rejected", "(none)" if gate_ran else "(the gate did not run)")

    if row.get("pinch_mode") == "within_budget":
        field("pinch", f"within budget: {_thousands(row.get('tokens_before'))} tokens")
    elif row.get("pinch_mode") is not None:
        field(
            "pinch",
            f"{row['pinch_mode']}: {_thousands(row.get('tokens_before'))} → {_thousands(row.get('tokens_after'))} tokens, "
            f"saved {_thousands(pinch_saved(row))}, {row.get('pinch_compressed') or 0} compressed",
        )
    else:
        field("pinch", "not run")
    if row.get("pinch_mode") is not None and row.get("pinch_reapplied") is not None:
        reason = f" — {row['pinch_reason']}" if row.get("pinch_reason") else ""
        field("ledger", f"{row['pinch_reapplied']} reapplied, {row.get('pinch_newly_compressed') or 0} newly compressed{reason}")
    if row.get("relevance_status") is not None:
        reason = f" ({row['relevance_reason']})" if row.get("relevance_reason") else ""
        field("relevance", f"{row['relevance_status']}{reason}")

    for i, a in enumerate(row.get("attempts") or []):
        error = f": {a['error']}" if a.get("error") else ""
        field("attempts" if i == 0 else "", f"{i + 1}. {a.get('model', '?')} ({a.get('provider', '?')}) → {a.get('status') or 'no answer'}{error}")
    upstream = []
    if row.get("first_byte_ms") is not None:
        upstream.append(f"first byte {format_ms(row['first_byte_ms'])}")
    if row.get("upstream_ms") is not None:
        upstream.append(f"upstream {format_ms(row['upstream_ms'])}")
    upstream.append(f"total {format_ms(row.get('duration_ms'))}, {format_ms(row.get('overhead_ms'))} in the proxy")
    field("time", ", ".join(upstream))
    if row.get("total_tokens") is not None:
        field(
            "usage",
            f"{_thousands(row.get('prompt_tokens'))} prompt + {_thousands(row.get('completion_tokens'))} completion tokens"
            + _cache_text(row),
        )
    if row.get("stream_error"):
        field("stream error", row["stream_error"])
    if row.get("outcome"):
        field("outcome", row["outcome"] + (f" ({row['outcome_reason']})" if row.get("outcome_reason") else ""))

    stages = row.get("stages") or []
    lines += ["", "trace"]
    if stages:
        lines += _table(
            [("stage", "outcome", "ms", "detail")]
            + [(s.get("stage", "?"), s.get("outcome", "?"), f"{s.get('ms', 0):.2f}", s.get("detail") or "") for s in stages]
        )
    else:
        lines.append("  (no stage ran)")
    return "\n".join(lines)


# --- HTTP -------------------------------------------------------------------------


class FeedError(Exception):
    """Why no decisions could be read this time; fit for the status line."""


def parse_decisions(status: int, body: bytes) -> list[Row]:
    """The rows of a ``/v1/decisions`` answer, or FeedError saying what was wrong."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise FeedError(f"HTTP {status}: the answer is not JSON (is this a pinch-router?)") from None
    if status != 200:
        error = payload.get("error") if isinstance(payload, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        hint = " (pass --api-key or set PINCH_ROUTER_API_KEY)" if status == 401 else ""
        raise FeedError(f"HTTP {status}: {message or 'error'}{hint}")
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise FeedError("the answer has no list of decisions (is this a pinch-router?)")
    return data


class DecisionFeed:
    """Reads the most recent decisions from a proxy over one ``aiohttp.ClientSession``."""

    def __init__(self, url: str, api_key: str | None = None, limit: int = DEFAULT_LIMIT, timeout_seconds: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.limit = limit
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._http: aiohttp.ClientSession | None = None

    async def fetch(self) -> list[Row]:
        """Newest first; FeedError for anything short of a good answer."""
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=self.timeout)
        try:
            async with self._http.get(
                f"{self.url}/v1/decisions", params={"limit": str(self.limit)}, headers=self.headers
            ) as resp:
                body = await resp.read()
                status = resp.status
        except TimeoutError:
            raise FeedError(f"no answer from {self.url} within {self.timeout.total:g}s") from None
        except aiohttp.ClientConnectorError as exc:
            raise FeedError(f"cannot reach {self.url}: {exc.os_error.strerror or exc.os_error}") from None
        except aiohttp.ClientError as exc:
            raise FeedError(f"cannot read from {self.url}: {type(exc).__name__}: {exc}") from None
        return parse_decisions(status, body)

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None


# --- the terminal UI ----------------------------------------------------------------


class DecisionScreen(ModalScreen[None]):
    """The full record of one decision; Escape closes it."""

    BINDINGS: ClassVar = [Binding("escape", "dismiss", "close"), Binding("q", "dismiss", "close", show=False)]
    DEFAULT_CSS = """
    DecisionScreen { align: center middle; }
    DecisionScreen > VerticalScroll {
        width: 90%; height: 90%; border: thick $accent; background: $surface; padding: 0 1;
    }
    """

    def __init__(self, detail: str) -> None:
        super().__init__()
        self.detail = detail

    def compose(self) -> ComposeResult:
        text = Text(self.detail)
        text.highlight_regex(r"\b(fallback|timeout|error|unavailable|failure)\b", "bold yellow")
        text.highlight_regex(r"(?m)^(trace|[a-z][a-z ]*(?=  ))", "bold")
        with VerticalScroll():
            yield Static(text, id="detail")

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)


class DecisionTable(DataTable[str | Text]):
    """The decisions table; Enter (its select key) opens the row's detail."""

    BINDINGS: ClassVar = [Binding("enter", "select_cursor", "details")]


class TopApp(App[None]):
    """The live table of decisions; see the module docstring for the behaviour."""

    TITLE = "pinch-router top"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar = [Binding("q", "quit", "quit")]
    CSS = """
    #summary { height: 1; padding: 0 1; background: $boost; }
    #status { height: 1; padding: 0 1; }
    #status.error { background: $error 30%; }
    DataTable { height: 1fr; }
    """

    def __init__(self, feed: DecisionFeed, interval: float = 1.0, tz: tzinfo | None = None) -> None:
        super().__init__()
        self.feed = feed
        self.interval = interval
        self.tz = tz
        self.rows: dict[str, Row] = {}
        self.last_error: str | None = None
        self._shown: tuple[tuple[str, Any], ...] = ()
        self._poll_lock = asyncio.Lock()

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("connecting…", id="summary")
        yield DecisionTable(cursor_type="row", zebra_stripes=True)
        yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = self.feed.url
        table = self.query_one(DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)
        table.focus()
        self.follow()

    async def on_unmount(self) -> None:
        await self.feed.close()

    @work(exclusive=True, group="poll")
    async def follow(self) -> None:
        while True:
            await self.poll()
            await asyncio.sleep(self.interval)

    async def poll(self) -> None:
        """Fetch once and show the result (or why there is none). Never raises FeedError."""
        async with self._poll_lock:  # one fetch at a time, applied in order
            try:
                rows = await self.feed.fetch()
            except FeedError as exc:
                self.last_error = str(exc)
                self._set_status(f"⚠ {exc} — retrying every {self.interval:g}s", error=True)
                return
            self.last_error = None
            self._show(rows)
            self._set_status(f"{self.feed.url} · {len(rows)} rows · updated {format_time(datetime.now().timestamp(), self.tz)}")

    def _set_status(self, text: str, error: bool = False) -> None:
        status = self.query_one("#status", Static)
        status.update(Text(text))
        status.set_class(error, "error")

    def _show(self, rows: list[Row]) -> None:
        shown = tuple((str(r.get("request_id")), r.get("outcome")) for r in rows)
        self.query_one("#summary", Static).update(Text(summary_line(rows)))
        if shown == self._shown:
            return
        self._shown = shown
        table = self.query_one(DataTable)
        # On the top row the cursor follows new arrivals; elsewhere it stays on its request.
        keep = self._cursor_key() if table.cursor_row > 0 else None
        table.clear()
        self.rows = {}
        for row in rows:
            key = str(row.get("request_id"))
            if key in self.rows:
                continue
            self.rows[key] = row
            cells: list[str | Text] = list(decision_cells(row, self.tz))
            for column in NUMERIC_COLUMNS:
                cells[column] = Text(str(cells[column]), justify="right")
            cells[STATUS_COLUMN] = Text(str(cells[STATUS_COLUMN]), style=status_style(row))
            table.add_row(*cells, key=key)
        if keep in self.rows:
            table.move_cursor(row=table.get_row_index(keep))

    def _cursor_key(self) -> str | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        self._open(event.row_key.value)

    def _open(self, key: str | None) -> None:
        if key in self.rows and not isinstance(self.screen, DecisionScreen):
            self.push_screen(DecisionScreen(decision_detail(self.rows[key], self.tz)))


def run_top(url: str, api_key: str | None, interval: float, limit: int = DEFAULT_LIMIT) -> int:
    TopApp(DecisionFeed(url, api_key, limit), interval).run()
    return 0
