"""The edge of a wire format's chain endpoints: parse, validate, build the RequestContext.

It is the first middleware of each format's LLM sub-application, ahead of the stages,
because aiohttp runs middlewares before the route handler. Everything the
client can get wrong is answered here in the format's error shape: wrong
content type (415), body too large (413), too slow (408), too deep, malformed
JSON or wrong shape (400) — see :mod:`router.http.request_body` — and too many
large bodies in flight at once (503 with Retry-After).
"""

from __future__ import annotations

import asyncio
import time
from time import perf_counter
from typing import Any

from aiohttp import web
from multidict import CIMultiDictProxy

from router.config import Config
from router.contract.context import (
    CTX_KEY,
    ERROR_CODE_KEY,
    RequestContext,
    error_response,
)
from router.contract.stage import Handler, Middleware
from router.core.errors import ApiError
from router.core.json_body import Checked
from router.core.request_view import NO_TARGET, RequestTarget
from router.http.errors import own_error
from router.observe.decision_headers import decision_headers
from router.core.resent_prefix import ResentBodies
from router.http.request_body import (
    BUSY_HEADERS,
    BodyBudget,
    BodyLimits,
    keep_accepted,
    read_checked_json_body,
)
from router.http.request_ids import new_request_id
from router.observe.decision_record import (
    CLIENT_CLOSED,
    decision_from_context,
    rejected_request,
)
from router.http.guards import TENANT_KEY
from router.observe.recorder import Recorder
from router.wire import WireAdapter, own_format


def chat_edge(config: Config, recorder: Recorder, budget: BodyBudget | None = None, wire: WireAdapter | None = None) -> Middleware:
    """The edge middleware of one wire format; every request it sees, served or refused, is recorded once.

    ``wire`` (the proxy's own format when None) parses and validates the body and renders every error in its format.

    A request holds its share of ``budget`` (request bodies in flight) until its answer is done.
    """
    wire = wire or own_format()
    limits = BodyLimits.of(config.server)
    turn_chars = config.classifier.max_input_chars
    if budget is None:
        budget = BodyBudget(config.server.max_bodies_in_flight_bytes, limits.max_bytes)
    # the bodies this edge accepted last, for the next turn of each conversation to resume from
    resent = ResentBodies(config.server.resent_bodies_bytes) if config.server.resent_bodies_bytes else None
    if resent is not None:
        budget.kept.add(resent)  # forgotten when the process goes idle (router.server.memory)
    key = wire.conversation_key

    def record_served(ctx: RequestContext, status: int, code: str | None) -> None:
        recorder.record(decision_from_context(ctx, status, code, recorder.columns))

    @web.middleware
    async def edge(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = perf_counter()
        unroutable = request.match_info.http_exception  # 405 and the like skip the chain
        if unroutable is not None:
            raise unroutable
        request_id = new_request_id()
        reserved = budget.reserve(request)
        if isinstance(reserved, ApiError):
            recorder.record(rejected_request(request_id, started, reserved.status, reserved.code, _client(request)))
            return error_response(wire, reserved, {"x-router-request-id": request_id, **BUSY_HEADERS}, request_id)
        try:
            return await serve(request, handler, request_id, started)
        finally:
            budget.release(reserved)

    async def serve(request: web.Request, handler: Handler, request_id: str, started: float) -> web.StreamResponse:
        client = _client(request)
        read = await read_checked_json_body(request, limits, wire.check_body, resent, key)
        if isinstance(read, ApiError):
            recorder.record(rejected_request(request_id, started, read.status, read.code, client))
            return error_response(wire, read, {"x-router-request-id": request_id}, request_id)
        body = read.body
        # what the URL says beside the body (a format may name the model and the stream in its path)
        target = RequestTarget(dict(request.match_info), request.query) if request.match_info or request.query_string else NO_TARGET
        ctx = context_from_body(
            body, request.headers, request_id=request_id, started=started, turn_chars=turn_chars, client=request, wire=wire,
            checked=read.checked, target=target, client_id=client,
        )
        if isinstance(ctx, ApiError):
            recorder.record(rejected_request(request_id, started, ctx.status, ctx.code, client))
            return error_response(wire, ctx, {"x-router-request-id": request_id}, request_id)
        if resent is not None:
            ctx.known_body = keep_accepted(resent, read, key, limits.max_depth)
        request[CTX_KEY] = ctx
        status, code = CLIENT_CLOSED, None
        recorder.metrics.in_flight.inc()
        try:
            response = await handler(request)
            status = response.status
            # only an error response carries a code: a lookup that misses raises KeyError inside aiohttp
            code = response.get(ERROR_CODE_KEY) if status >= 400 else None
            if not response.prepared:
                response.headers.update(decision_headers(ctx))
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        except Exception:
            status, code = 500, "internal_error"
            raise
        finally:  # also when the client went away (CancelledError): status stays 499
            # The context refers to the request (ctx.client) and the request to the context:
            # unlinking them here lets reference counting free the parsed body as soon as the
            # response is done, instead of leaving it for the cyclic GC (measured: ~100 objects
            # a request, and at concurrency they get promoted to older generations first).
            del request[CTX_KEY]
            recorder.metrics.in_flight.dec()
            # Built, logged, counted and queued on the next turn of the loop, once the
            # response is on its way: recording never delays the answer.
            asyncio.get_running_loop().call_soon(record_served, ctx, status, code)

    return edge


def _client(request: web.Request) -> str | None:
    """The name of the client key the request authenticated with (None: no keys configured)."""
    tenant = request.get(TENANT_KEY)
    return tenant.name if tenant is not None else None


def context_from_body(
    body: Any,
    headers: CIMultiDictProxy[str],
    *,
    request_id: str,
    started: float,
    turn_chars: int,
    client: web.Request | None = None,
    wire: WireAdapter | None = None,
    checked: Checked | None = None,
    target: RequestTarget = NO_TARGET,
    client_id: str | None = None,
) -> RequestContext | ApiError:
    """Validate a parsed body with its wire adapter and build the context (also used by `pinch-router explain`).

    ``checked``: what the wire's ``check_body`` found on the way in, when it ran; ``target``: what
    the URL says beside the body (the path's parts, the query); ``client_id``: the name of the client
    key the request authenticated with; ``wire``: the body's format (the proxy's own when None).
    """
    wire = wire or own_format()
    view = wire.parse(body, turn_chars, target) if checked is None else wire.parse_checked(body, checked, turn_chars, target)
    if isinstance(view, ApiError):
        return view
    return RequestContext(
        request_id=request_id,
        received_at=time.time() - (perf_counter() - started),
        started=started,
        headers=headers,
        body=body,
        view=view,
        wire=wire,
        client=client,
        client_id=client_id,
    )


async def chain_end(request: web.Request) -> web.StreamResponse:
    """Reached only if no stage answered, which order validation rules out."""
    return own_error(ApiError(500, "the chain ended without an answer", "server_error", "chain_incomplete"))
