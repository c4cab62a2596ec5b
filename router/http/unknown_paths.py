"""Paths the proxy does not serve: a 404 that says what it does serve, counted and logged.

Agents pointed at the proxy with the wrong base URL, or speaking an API the proxy
does not serve yet, otherwise get a bare "Not Found" and leave no trace. The
answer lists the supported endpoints and, for an API we know, names it. The
root (``GET``/``HEAD /``) answers 200, for health checks and people with a browser.
"""

from __future__ import annotations

import logging

import orjson
from aiohttp import web

from router.http.errors import error_for_request
from router.core.errors import invalid_request
from router.observe.metrics import Metrics
from router.contract.stage import Handler, Middleware
from router.wire import WireAdapter, adapters, path_format, request_format

log = logging.getLogger("pinch_router.app")

# What the proxy serves: each wire format's endpoints, as it lists them, then the proxy's own.
SUPPORTED_ENDPOINTS = (
    *(endpoint for adapter in adapters().values() for endpoint in adapter.api.listed),
    "GET /v1/models",
    "POST /v1/outcome",
    "GET /v1/decisions",
    "GET /v1/keys",
    "GET /metrics",
    "GET /healthz",
    "GET /ui/",
)
# The APIs a format's vendor has that the proxy does not serve, by path: (metric label, name). Matched with and without /v1.
KNOWN_APIS = {path: (label, title) for adapter in adapters().values() for path, label, title in adapter.api.not_served}
OTHER = "other"
MAX_LOGGED_PATH = 200


def _as_v1(path: str) -> str:
    """``path`` with exactly one leading /v1: /messages, /v1/messages and /v1/v1/messages are one API's."""
    path = path.rstrip("/") or "/"
    while path.startswith("/v1/"):
        path = path[3:]
    return f"/v1{path}"


def served_elsewhere(key: str) -> tuple[WireAdapter, str] | None:
    """The format serving ``key`` (a path with one leading /v1) at the depth its clients may miss, and
    how it lists that endpoint ("POST /v1/messages"); None when none does."""
    for adapter in adapters().values():
        if adapter.api.any_depth:
            for endpoint in adapter.api.listed:
                if endpoint.partition(" ")[2] == key:
                    return adapter, endpoint
    return None


def own_root(path: str) -> WireAdapter | None:
    """The format all of whose paths ``path`` is among (its API's own root), if one is."""
    named = path_format(path)
    return named if named is not None and named.api.own_root else None


def known_api(path: str) -> tuple[str, str] | None:
    """The (label, name) of the API ``path`` belongs to, if it is one we know (served or not)."""
    rooted = own_root(path) or (served[0] if (served := served_elsewhere(_as_v1(path))) else None)
    return (rooted.api.label, f"the {rooted.api.title}") if rooted is not None else KNOWN_APIS.get(_as_v1(path))


def not_served(request: web.BaseRequest) -> web.Response:
    """The 404 for the request's method and path: what is supported, and which API the path is when
    we know it; in the format of the request (:func:`error_for_request`), and the status a format
    asks for a client of its own at the wrong depth (``ClientApi.misdirected_status``)."""
    method, path = request.method, request.path
    key = _as_v1(path)
    status = 404
    rooted, served = own_root(path), served_elsewhere(key)
    if rooted is not None:
        api = rooted.api
        what = f"{method} {path} is not an endpoint of pinch-router's {api.title}: it serves {', '.join(api.listed)} (set the client's base URL to {api.base_url})"
    elif served is not None:
        api = served[0].api
        what = f"the {api.title} is served at {served[1]}, not {path}: set the client's base URL to {api.base_url}"
        status = request_format(path, request.headers).api.misdirected_status
    elif key in KNOWN_APIS:
        what = f"the {KNOWN_APIS[key][1]} ({path}) is not served by pinch-router yet"
    else:
        what = f"{method} {path} is not an endpoint of pinch-router"
    return error_for_request(request, invalid_request(
        f"{what}. Supported: {', '.join(SUPPORTED_ENDPOINTS)}. "
        f"Point each client at its API's base URL ({'; '.join(_base_urls())}) with model \"auto\".",
        code="not_found",
        status=status,
    ))


def _base_urls() -> list[str]:
    return [f"the {a.api.title}: {a.api.base_url}" for a in adapters().values()]


def unknown_paths(metrics: Metrics) -> Middleware:
    """Answer requests that match no route with :func:`not_served`, counting and logging each."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not isinstance(request.match_info.http_exception, web.HTTPNotFound):
            return await handler(request)
        api = known_api(request.path)
        label = api[0] if api else OTHER
        metrics.unknown_paths.labels(label).inc()
        log.warning("unknown_path", extra={"method": request.method, "path": request.path[:MAX_LOGGED_PATH], "api": label})
        return not_served(request)

    return guard


async def root(request: web.Request) -> web.Response:
    """``GET /`` and ``HEAD /``: 200, with what the proxy serves."""
    body = {"service": "pinch-router", "status": "ok", "endpoints": list(SUPPORTED_ENDPOINTS)}
    return web.Response(body=orjson.dumps(body), content_type="application/json")
