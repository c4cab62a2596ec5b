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
the functions above it (:func:`decision_cells`,
:func:`summary_line`, :func:`parse_decisions`) are pure and work on the
plain JSON rows; the detail popup is :func:`router.tools.decision_text.decision_detail`,
the renderer ``explain`` shares; :class:`TopApp` only wires them to widgets.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
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

from router.tools.decision_text import Row, decision_detail, format_dollars, format_ms, format_tokens, pinch_saved

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


def format_time(ts: float | None, tz: tzinfo | None = None) -> str:
    """``HH:MM:SS`` of an epoch timestamp, in ``tz`` (None: the local zone)."""
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, tz).strftime("%H:%M:%S")


def short_session(session: str | None) -> str:
    return session[:8] if session else "-"


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


@dataclass(frozen=True, slots=True)
class WindowDollars:
    """The dashboard's dollars over the last hour (``GET /ui/api/overview?window=hour``)."""

    spent: float
    saved_by_pinch: float
    saved_by_routing: float | None  # None: no reference priced


def dollars_text(dollars: WindowDollars) -> str:
    routing = f", {format_dollars(dollars.saved_by_routing)} by routing" if dollars.saved_by_routing is not None else ""
    return f"last hour {format_dollars(dollars.spent)} spent, saved {format_dollars(dollars.saved_by_pinch)} by pinch{routing}"


def summary_line(rows: Sequence[Row], dollars: WindowDollars | None = None) -> str:
    """One line over the rows shown: volume, errors, pinch savings, latency and overhead; then the last
    hour's dollars as the proxy's dashboard counts them, when it has them."""
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
    if dollars is not None:
        parts.append(dollars_text(dollars))
    return " · ".join(parts)


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


def parse_dollars(status: int, body: bytes) -> WindowDollars | None:
    """The dollars of an overview answer; None for anything else (the dashboard off, an older proxy,
    no model priced): ``top`` then shows tokens only."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if status != 200 or not isinstance(payload, dict):
        return None
    spent, pinch, routing = payload.get("spent"), payload.get("saved_by_pinch"), payload.get("saved_by_routing")
    if not isinstance(spent, (int, float)) or not isinstance(pinch, (int, float)) or not isinstance(routing, (int, float, type(None))):
        return None
    if not spent and not pinch and routing is None:
        return None  # nothing priced
    return WindowDollars(float(spent), float(pinch), None if routing is None else float(routing))


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

    async def fetch_dollars(self) -> WindowDollars | None:
        """The last hour's dollars from the proxy's dashboard; None when it has none to give."""
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=self.timeout)
        try:
            async with self._http.get(f"{self.url}/ui/api/overview", params={"window": "hour"}, headers=self.headers) as resp:
                return parse_dollars(resp.status, await resp.read())
        except (TimeoutError, aiohttp.ClientError):
            return None

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
        self.dollars: WindowDollars | None = None  # the last hour's, from the dashboard (fetched with the rows)
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
            self.dollars = await self.feed.fetch_dollars()
            self._show(rows)
            self._set_status(f"{self.feed.url} · {len(rows)} rows · updated {format_time(datetime.now().timestamp(), self.tz)}")

    def _set_status(self, text: str, error: bool = False) -> None:
        status = self.query_one("#status", Static)
        status.update(Text(text))
        status.set_class(error, "error")

    def _show(self, rows: list[Row]) -> None:
        shown = tuple((str(r.get("request_id")), r.get("outcome")) for r in rows)
        self.query_one("#summary", Static).update(Text(summary_line(rows, self.dollars)))
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
