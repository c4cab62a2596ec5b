"""The edge of the chat endpoint: parse, validate, build the RequestContext.

It is the first middleware of the LLM sub-application, ahead of the stages,
because aiohttp runs middlewares before the route handler. Everything the
client can get wrong is answered here with an OpenAI error object: wrong
content type (415), body too large (413), too slow (408), too deep, malformed
JSON or wrong shape (400) — see :mod:`router.request_body` — and too many
large bodies in flight at once (503 with Retry-After).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from time import perf_counter
from typing import Any

from aiohttp import web
from multidict import CIMultiDictProxy

from router.config import Config
from router.context import CTX_KEY, RequestContext
from router.core.chat_request import InvalidRequest, validate_chat_body
from router.core.turn_text import extract_turn_text
from router.decision_record import (
    CLIENT_CLOSED,
    decision_from_context,
    rejected_request,
)
from router.errors import ERROR_CODE_KEY, ApiError, invalid_request
from router.headers import decision_headers
from router.recorder import Recorder
from router.request_body import BUSY_HEADERS, BodyBudget, BodyLimits, read_json_body
from router.stage import Handler, Middleware


def new_request_id() -> str:
    return f"req_{secrets.token_hex(12)}"


def chat_edge(config: Config, recorder: Recorder, budget: BodyBudget | None = None) -> Middleware:
    """The edge middleware; every request it sees, served or refused, is recorded once.

    A request holds its share of ``budget`` (request bodies in flight) until its answer is done.
    """
    limits = BodyLimits.of(config.server)
    turn_chars = config.classifier.max_input_chars
    if budget is None:
        budget = BodyBudget(config.server.max_bodies_in_flight_bytes, limits.max_bytes)

    def record_served(ctx: RequestContext, status: int, code: str | None) -> None:
        recorder.record(decision_from_context(ctx, status, code))

    @web.middleware
    async def edge(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = perf_counter()
        unroutable = request.match_info.http_exception  # 405 and the like skip the chain
        if unroutable is not None:
            raise unroutable
        request_id = new_request_id()
        reserved = budget.reserve(request)
        if isinstance(reserved, ApiError):
            recorder.record(rejected_request(request_id, started, reserved.status, reserved.code))
            return reserved.response({"x-router-request-id": request_id, **BUSY_HEADERS})
        try:
            return await serve(request, handler, request_id, started)
        finally:
            budget.release(reserved)

    async def serve(request: web.Request, handler: Handler, request_id: str, started: float) -> web.StreamResponse:
        body = await read_json_body(request, limits)
        if isinstance(body, ApiError):
            recorder.record(rejected_request(request_id, started, body.status, body.code))
            return body.response({"x-router-request-id": request_id})
        ctx = context_from_body(body, request.headers, request_id=request_id, started=started, turn_chars=turn_chars, client=request)
        if isinstance(ctx, ApiError):
            recorder.record(rejected_request(request_id, started, ctx.status, ctx.code))
            return ctx.response({"x-router-request-id": request_id})
        request[CTX_KEY] = ctx
        status, code = CLIENT_CLOSED, None
        recorder.metrics.in_flight.inc()
        try:
            response = await handler(request)
            status, code = response.status, response.get(ERROR_CODE_KEY)
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


def context_from_body(
    body: Any,
    headers: CIMultiDictProxy[str],
    *,
    request_id: str,
    started: float,
    turn_chars: int,
    client: web.Request | None = None,
) -> RequestContext | ApiError:
    """Validate a parsed body and build the context (also used by `pinch-router explain`)."""
    try:
        parsed = validate_chat_body(body)
    except InvalidRequest as exc:
        return invalid_request(exc.message, param=exc.param)
    return RequestContext(
        request_id=request_id,
        received_at=time.time() - (perf_counter() - started),
        started=started,
        headers=headers,
        body=body,
        messages=parsed.messages,
        turn_text=extract_turn_text(parsed.messages, turn_chars),
        requested_model=parsed.model,
        stream=parsed.stream,
        client=client,
        send_messages=parsed.messages,
    )


async def chain_end(request: web.Request) -> web.StreamResponse:
    """Reached only if no stage answered, which order validation rules out."""
    return ApiError(500, "the chain ended without an answer", "server_error", "chain_incomplete").response()
