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

from router.http.errors import error_for_request, messages_shaped
from router.wire.gemini.paths import is_gemini_path
from router.core.errors import invalid_request
from router.observe.metrics import Metrics
from router.contract.stage import Handler, Middleware

log = logging.getLogger("pinch_router.app")

SUPPORTED_ENDPOINTS = (
    "POST /v1/chat/completions",
    "POST /v1/messages",
    "POST /v1/messages/count_tokens",
    "POST /v1/responses",
    "POST /v1beta/models/{model}:generateContent",
    "POST /v1beta/models/{model}:streamGenerateContent",
    "POST /v1beta/models/{model}:countTokens",
    "GET /v1beta/models",
    "GET /v1/models",
    "POST /v1/outcome",
    "GET /v1/decisions",
    "GET /metrics",
    "GET /healthz",
)
# APIs served, by path: (metric label, name, where the client's base URL must point). A request for
# one at the wrong depth (a base URL missing /v1, or with one too many) is told where it is served.
SERVED_APIS = {
    "/v1/messages": ("anthropic_messages", "the Anthropic Messages API", "http://<host>:<port> (no /v1)"),
    "/v1/messages/count_tokens": ("anthropic_messages", "the Anthropic Messages API", "http://<host>:<port> (no /v1)"),
    "/v1/responses": ("openai_responses", "the OpenAI Responses API", "http://<host>:<port>/v1"),
}
# Known APIs not served, by path: (metric label, name). Matched with and without /v1.
KNOWN_APIS = {
    "/v1/completions": ("openai_completions", "the legacy OpenAI completions API"),
    "/v1/embeddings": ("openai_embeddings", "the OpenAI embeddings API"),
}
OTHER = "other"
GEMINI_API = ("gemini", "the Gemini API")
MAX_LOGGED_PATH = 200


def _as_v1(path: str) -> str:
    """``path`` with exactly one leading /v1: /messages, /v1/messages and /v1/v1/messages are one API's."""
    path = path.rstrip("/") or "/"
    while path.startswith("/v1/"):
        path = path[3:]
    return f"/v1{path}"


def known_api(path: str) -> tuple[str, str] | None:
    """The (label, name) of the API ``path`` belongs to, if it is one we know (served or not)."""
    if is_gemini_path(path):
        return GEMINI_API
    key = _as_v1(path)
    served = SERVED_APIS.get(key)
    return served[:2] if served is not None else KNOWN_APIS.get(key)


def not_served(request: web.BaseRequest) -> web.Response:
    """The 404 for the request's method and path: what is supported, and which API the path is when
    we know it; in the shape of the API its path names (:func:`error_for_request`), and a 400 for a
    Messages request at the wrong depth (see below)."""
    method, path = request.method, request.path
    key = _as_v1(path)
    status = 404
    if key in SERVED_APIS and messages_shaped(path, request.headers):
        # A Messages client whose base URL is off by a /v1: Claude Code shows any 404 as "There's an issue
        # with the selected model" and never the message; a 400's message it prints, so the fix is seen.
        status = 400
    if is_gemini_path(path):
        what = (
            f"{method} {path} is not an endpoint of pinch-router's Gemini API: it serves POST /v1beta/models/{{model}}:generateContent, "
            ":streamGenerateContent and :countTokens, GET /v1beta/models and /v1beta/models/{model} (set the client's base URL to "
            "http://<host>:<port>)"
        )
    elif key in SERVED_APIS:
        _, name, base_url = SERVED_APIS[key]
        what = f"{name} is served at POST {key}, not {path}: set the client's base URL to {base_url}"
    elif key in KNOWN_APIS:
        what = f"{KNOWN_APIS[key][1]} ({path}) is not served by pinch-router yet"
    else:
        what = f"{method} {path} is not an endpoint of pinch-router"
    return error_for_request(request, invalid_request(
        f"{what}. Supported: {', '.join(SUPPORTED_ENDPOINTS)}. "
        "Point OpenAI-compatible clients at http://<host>:<port>/v1 (base URL) with model \"auto\", "
        "Anthropic and Gemini clients at http://<host>:<port>.",
        code="not_found",
        status=status,
    ))


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
