"""The web dashboard under ``/ui/`` (docs/dashboard.md): its pages, and the JSON it reads under ``/ui/api/``.

Served by the proxy itself, on its listener, read-only. The pages (HTML, CSS, JS modules and the
vendored chart library, all in the package: ``dashboard_ui/``) hold no data and need no key; every
figure comes from ``/ui/api/``, which takes the client keys as every other endpoint does
(``server.api_keys``: the page asks for one once and keeps it for the browser session, sent as
``Authorization: Bearer``, never in a URL) and shows a ``user`` key its own rows only, an ``admin`` key
everyone's (:func:`router.core.tenants.owner_scope`). Figures are summed from the decision log
(:mod:`router.core.usage_summary`) and priced with the serving config's prices
(:mod:`router.core.pricing`); nothing here reads content, and the log holds none.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from router.config import Config
from router.core.errors import invalid_request
from router.core.pricing import Prices, price_rows
from router.core.tenants import owner_scope
from router.core.usage_summary import overview_of_groups, session_turns, sessions_of_groups
from router.http.endpoints import BREAKERS_KEY, CURRENT_CONFIG_KEY, STATE_KEY
from router.http.errors import own_error
from router.http.guards import TENANT_KEY
from router.observe.decision_log import DecisionLog
from router.observe.prices import prices_of
from router.observe.recorder import RECORDER_KEY
from router.wire import adapters

UI_ROOT = "/ui/"
ASSETS = Path(__file__).with_name("dashboard_ui")
# The files of the pages, by their path under /ui/ ("" is the page itself): every one is in the package.
PAGE_FILES = {
    "": "index.html",
    "dashboard.js": "dashboard.js",
    "dashboard.css": "dashboard.css",
    "vendor/uPlot.iife.min.js": "vendor/uPlot.iife.min.js",
    "vendor/uPlot.min.css": "vendor/uPlot.min.css",
    "vendor/uPlot.LICENSE": "vendor/uPlot.LICENSE",
}
ACCESS_PATH = UI_ROOT + "api/access"  # whether the pages must ask for a key
# The paths that need no key (guards.client_auth lets them through): the pages and the access check carry no data.
OPEN_PATHS = frozenset({UI_ROOT.rstrip("/"), ACCESS_PATH, *(UI_ROOT + name for name in PAGE_FILES)})
CONTENT_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".LICENSE": "text/plain"}  # by suffix
# Everything from the proxy itself: no CDN, no font from elsewhere, no request the page did not make.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
# A window: how far back, and its charts' bucket.
WINDOWS = {"hour": (3_600, 120), "day": (86_400, 1_800), "week": (604_800, 14_400)}
MAX_SESSIONS = 500  # the latest sessions a list shows
MAX_TURNS = 5_000  # the latest requests a session's page shows


def add_dashboard(app: web.Application, clock: Callable[[], float] = time.time) -> None:
    """Route the pages and their JSON on ``app`` (the proxy's own, outside the chain)."""
    pages = {name: ((ASSETS / file).read_bytes(), CONTENT_TYPES[Path(file).suffix]) for name, file in PAGE_FILES.items()}

    def page(name: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        body, content_type = pages[name]

        async def serve(request: web.Request) -> web.StreamResponse:
            if not _enabled(request):
                return _disabled()
            return web.Response(body=body, content_type=content_type, headers=PAGE_HEADERS)

        return serve

    async def to_root(request: web.Request) -> web.StreamResponse:
        raise web.HTTPPermanentRedirect(UI_ROOT)

    app.router.add_get(UI_ROOT.rstrip("/"), to_root)
    for name in PAGE_FILES:
        app.router.add_get(UI_ROOT + name, page(name))
    app.router.add_get(ACCESS_PATH, access)
    for path, handler in (
        ("viewer", viewer),
        ("overview", _clocked(overview_api, clock)),
        ("sessions", _clocked(sessions_api, clock)),
        ("session", session_api),
        ("decision", decision_api),
        ("health", health_api),
    ):
        app.router.add_get(f"{UI_ROOT}api/{path}", handler)


def _clocked(handler: Callable[[web.Request, float], Awaitable[web.Response]], clock: Callable[[], float]) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def serve(request: web.Request) -> web.StreamResponse:
        return await handler(request, clock())

    return serve


def _json(payload: object) -> web.Response:
    return web.Response(body=orjson.dumps(payload), content_type="application/json", headers={"Cache-Control": "no-store"})


def _config(request: web.Request) -> Config:
    return request.app[CURRENT_CONFIG_KEY]()


def _enabled(request: web.Request) -> bool:
    return _config(request).dashboard.enabled


def _disabled() -> web.Response:
    return own_error(invalid_request("the dashboard is disabled (dashboard.enabled)", code="dashboard_disabled", status=404))


def _log(request: web.Request) -> DecisionLog | web.Response:
    if not _enabled(request):
        return _disabled()
    log = request.app[RECORDER_KEY].decision_log
    if log is None:
        return own_error(invalid_request("the dashboard reads the decision log, which is disabled (decision_log.enabled)", code="decision_log_disabled", status=404))
    return log


def _scope(request: web.Request) -> str | None:
    return owner_scope(request.get(TENANT_KEY))


def _window(request: web.Request) -> tuple[str, int, int] | web.Response:
    name = request.query.get("window", "day")
    if name not in WINDOWS:
        return own_error(invalid_request(f"'window' must be one of {', '.join(WINDOWS)}", param="window"))
    return (name, *WINDOWS[name])


def _wires() -> dict[str, str]:
    """Each client API by its wire name, as the pages name a session's agent."""
    return {name: adapter.api.title for name, adapter in adapters().items()}


async def access(request: web.Request) -> web.Response:
    """Whether the pages need a key (``server.api_keys`` is set): needs none itself, says nothing else."""
    if not _enabled(request):
        return _disabled()
    return _json({"keys": bool(_config(request).server.api_keys)})


async def viewer(request: web.Request) -> web.Response:
    """Who the key is (its name and role; none without keys) and what it sees."""
    if not _enabled(request):
        return _disabled()
    tenant = request.get(TENANT_KEY)
    config = _config(request)
    return _json(
        {
            "name": tenant.name if tenant else None,
            "role": tenant.role if tenant else None,
            "sees": "everyone" if _scope(request) is None else "own",
            "keys": bool(config.server.api_keys),
            "windows": list(WINDOWS),
            "reference_model": config.dashboard.reference_model,
        }
    )


def _window_of(request: web.Request, now: float) -> tuple[DecisionLog, str, float, int, Prices] | web.Response:
    """What a window's view reads: the log, the window asked for (its name, start and bucket), the prices."""
    log, window = _log(request), _window(request)
    if isinstance(log, web.Response):
        return log
    if isinstance(window, web.Response):
        return window
    name, seconds, bucket = window
    return log, name, now - seconds, bucket, prices_of(_config(request))


async def overview_api(request: web.Request, now: float) -> web.Response:
    """``?window=hour|day|week``: the window's totals, dollars, mix and timeline (:func:`overview_of_groups`),
    summed in SQL: the key's own requests only for a user key."""
    window = _window_of(request, now)
    if isinstance(window, web.Response):
        return window
    log, name, since, bucket, prices = window
    groups = await log.overview_groups(prices, since, now, bucket, _scope(request))
    return _json({"window": name, "reference_model": prices.reference_name, **overview_of_groups(groups, since, now, bucket)})


async def sessions_api(request: web.Request, now: float) -> web.Response:
    """``?window=``: the sessions with requests in the window, latest first (:func:`sessions_of_groups`)."""
    window = _window_of(request, now)
    if isinstance(window, web.Response):
        return window
    log, name, since, _, prices = window
    groups = await log.session_groups(prices, since, now, _scope(request), MAX_SESSIONS)
    return _json({"window": name, "since": since, "until": now, "wires": _wires(), "data": sessions_of_groups(groups, MAX_SESSIONS)})


async def session_api(request: web.Request) -> web.Response:
    """``?key=``: one session's requests in order with their dollars (:func:`session_turns`); a session
    the key may not see is answered as one that does not exist."""
    log = _log(request)
    if isinstance(log, web.Response):
        return log
    key = request.query.get("key", "").strip()
    if not key:
        return own_error(invalid_request("'key' must name a session (its key, as x-router-session gives it)", param="key"))
    rows = list(reversed(await log.recent(MAX_TURNS, (key,), _scope(request))))
    if not rows:
        return own_error(invalid_request("no session with that key is in the decision log", code="session_not_found", status=404))
    turns = session_turns(rows, price_rows(rows, prices_of(_config(request))))
    first = rows[0]
    return _json({"session": key, "client": first.get("client"), "wire": first.get("wire_in"), "wires": _wires(), "data": turns})


async def decision_api(request: web.Request) -> web.Response:
    """``?id=``: one decision row whole (its stage trace, candidates, rejections, attempts) and its
    dollars; another key's request is answered as one that does not exist."""
    log = _log(request)
    if isinstance(log, web.Response):
        return log
    request_id = request.query.get("id", "").strip()
    row = await log.one(request_id, _scope(request)) if request_id else None
    if row is None:
        return own_error(invalid_request("no request with that id is in the decision log", code="request_not_found", param="id", status=404))
    (cost,) = price_rows([row], prices_of(_config(request)))
    return _json({**row, "cost": cost.cost, "unpinched": cost.unpinched, "reference": cost.reference, "reference_model": cost.reference_model})


async def health_api(request: web.Request) -> web.Response:
    """The proxy's health as the pages show it: the state backend, each provider (down while its
    breaker skips it), the models and their prices, the classifier and the embedder, the decision log.
    Names from the config only: no URL, no key."""
    if not _enabled(request):
        return _disabled()
    config = _config(request)
    problem = request.app[STATE_KEY].problem()
    breakers = request.app.get(BREAKERS_KEY)
    now = time.monotonic()
    down = {d.provider: round(d.retry_at - now, 1) for d in breakers.down(now)} if breakers is not None else {}
    relevance = config.pinch.relevance
    log = request.app[RECORDER_KEY].decision_log
    return _json(
        {
            "status": "ok" if problem is None else "degraded",
            "problems": [] if problem is None else [problem],
            "state_backend": config.state.backend,
            "chain": list(config.middlewares),
            "providers": [
                {"name": name, "api": provider.api, "down": name in down, "retry_in_seconds": down.get(name)} for name, provider in config.providers.items()
            ],
            "models": [
                {"name": m.name, "provider": m.provider, "tiers": m.tiers, "context_window": m.context_window, "cost_per_mtok": m.cost_per_mtok.model_dump()}
                for m in config.models
            ],
            "classifier": {"in_chain": "classifier" in config.middlewares, "provider": config.classifier.provider, "model": config.classifier.model},
            "relevance": {"enabled": bool(config.pinch.enabled and relevance.enabled), "api": relevance.api, "model": relevance.model},
            "decision_log": None if log is None else {"written": log.written, "dropped": log.dropped, "lost": log.lost},
        }
    )
