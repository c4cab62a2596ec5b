"""The HTTP middlewares every request passes, outside the chain: the last line of defence against
an error leaving as a trace, the one redaction pass over error bodies, and client auth."""

from __future__ import annotations

import hmac
import logging

from aiohttp import web

from router.contract.stage import Handler, Middleware
from router.core.errors import ApiError
from router.core.redaction import clip
from router.core.tenants import Tenant
from router.http.errors import error_for_request, from_http_exception
from router.http.request_ids import new_request_id
from router.observe.metrics import Metrics
from router.observe.recorder import Recorder
from router.wire import adapters
from router.wire.api_keys import KeySource, offered_key, refused_query_key

log = logging.getLogger("pinch_router.app")

UNAUTHENTICATED_PATHS = frozenset({"/healthz", "/", "/api/hello"})  # probes: a health check, a base-URL check
# Set by the client-key check: the tenant the key it matched names (its name and role, never the key).
TENANT_KEY = web.RequestKey("pinch_router_tenant", Tenant)


@web.middleware
async def error_boundary(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Last line of defence: every error leaves in the client's format (:func:`error_for_request`), never as a trace."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return from_http_exception(request, exc)
    except Exception:
        log.exception("unhandled_error", extra={"path": request.path})
        return error_for_request(request, ApiError(500, "internal error in the proxy; see its log", "server_error", "internal_error"))


def redact_answers(recorder: Recorder) -> Middleware:
    """The redaction pass over every whole body a client gets: errors, and answers (a provider may
    echo its key in a 200 too); a stream's events get the same pass as they are relayed
    (:class:`router.clients.relay.StreamRelay`).

    It uses the recorder's redactor of the moment: a config reload may bring new secrets.
    """

    @web.middleware
    async def redact(request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await handler(request)
        redactor = recorder.redactor
        if redactor and isinstance(response, web.Response) and isinstance(response.body, bytes):
            response.body = redactor.bytes(response.body)
        return response

    return redact


def client_auth(client_keys: list[tuple[Tenant, str]], metrics: Metrics | None = None, pages: frozenset[str] = frozenset()) -> Middleware:
    """Bearer-key check on every path but /healthz, when keys are configured; each refusal is logged and counted.

    ``pages``: paths that hold no data and need no key either — the dashboard's pages, which a browser
    loads before anyone typed a key (their figures come from endpoints that need one).

    ``client_keys``: each key with the tenant it authenticates as (``ServerSettings.client_keys``).
    The key may come as ``Authorization: Bearer``, or where a wire format's clients send it
    (:mod:`router.wire.api_keys`, as each adapter declares: a header of its own, or a query parameter
    on that format's own paths only; one anywhere else counts as no key). Keys are never logged: the
    log line has the path only.
    A request let through carries the tenant of the key it matched (``TENANT_KEY``): its sessions,
    decisions and outcomes are its own (:mod:`router.core.tenants`)."""
    open_paths = UNAUTHENTICATED_PATHS | pages
    keys = [secret.encode() for _, secret in client_keys]
    tenants = [tenant for tenant, _ in client_keys]
    sources = tuple(adapter.api_key for adapter in adapters().values())
    how = "send Authorization: Bearer <key> (or " + ", or ".join(f"{s.header}: <key>" for s in sources if s.header) + ")"

    @web.middleware
    async def auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        if keys and request.path not in open_paths:
            scheme, _, token = request.headers.get("Authorization", "").partition(" ")
            if not scheme and (wire_key := offered_key(sources, request.headers, request.query, request.path)) is not None:
                scheme, token = "bearer", wire_key
            # aiohttp decodes header bytes that are not UTF-8 as surrogates; back to the bytes sent
            offered = token.strip().encode("utf-8", "surrogateescape")
            # compare against every key so the time taken does not say which matched
            matched = [hmac.compare_digest(offered, key) for key in keys]
            if scheme.lower() != "bearer" or not any(matched):
                request_id = new_request_id()
                log.info("unauthorized", extra={"path": clip(request.path, 200), "scheme": clip(scheme, 20) if scheme else None, "request_id": request_id})
                if metrics is not None:
                    metrics.refused.labels("unauthorized").inc()
                error = ApiError(401, f"missing or invalid API key: {how}{_url_key_note(sources, request)}", "authentication_error", "invalid_api_key")
                return error_for_request(request, error, {"WWW-Authenticate": "Bearer"}, request_id=request_id)
            request[TENANT_KEY] = tenants[matched.index(True)]
        return await handler(request)

    return auth


def _url_key_note(sources: tuple[KeySource, ...], request: web.Request) -> str:
    """Why a key in this URL did not count, when one came there."""
    param = refused_query_key(sources, request.query, request.path)
    return "" if param is None else f"; a key in the URL (?{param}=) is not taken on this path: send it in a header"
