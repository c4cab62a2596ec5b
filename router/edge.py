"""The edge of the chat endpoint: parse, validate, build the RequestContext.

It is the first middleware of the LLM sub-application, ahead of the stages,
because aiohttp runs middlewares before the route handler. Everything the
client can get wrong is answered here with an OpenAI error object: wrong
content type (415), body too large (413), malformed JSON or wrong shape (400).
"""

from __future__ import annotations

import secrets
import time
from time import perf_counter

import orjson
from aiohttp import web

from router.config import Config
from router.context import CTX_KEY, RequestContext
from router.core.chat_request import InvalidRequest, validate_chat_body
from router.core.turn_text import extract_turn_text
from router.errors import ApiError, invalid_request
from router.headers import decision_headers
from router.stage import Handler, Middleware


def new_request_id() -> str:
    return f"req_{secrets.token_hex(12)}"


def chat_edge(config: Config) -> Middleware:
    max_bytes = config.server.max_body_bytes
    turn_chars = config.classifier.max_input_chars

    @web.middleware
    async def edge(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = perf_counter()
        unroutable = request.match_info.http_exception  # 405 and the like skip the chain
        if unroutable is not None:
            raise unroutable
        request_id = new_request_id()
        body = await _read_body(request, max_bytes)
        if isinstance(body, ApiError):
            return body.response({"x-router-request-id": request_id})
        try:
            parsed = validate_chat_body(body)
        except InvalidRequest as exc:
            return invalid_request(exc.message, param=exc.param).response({"x-router-request-id": request_id})
        ctx = RequestContext(
            request_id=request_id,
            received_at=time.time(),
            started=started,
            headers=request.headers,
            body=body,
            messages=parsed.messages,
            turn_text=extract_turn_text(parsed.messages, turn_chars),
            requested_model=parsed.model,
            stream=parsed.stream,
            client=request,
            send_messages=parsed.messages,
        )
        request[CTX_KEY] = ctx
        response = await handler(request)
        if not response.prepared:
            response.headers.update(decision_headers(ctx))
        return response

    return edge


async def _read_body(request: web.Request, max_bytes: int) -> object:
    """The parsed JSON body, or the ApiError that explains why there is none."""
    if request.content_type != "application/json":
        return invalid_request(
            f"Content-Type must be application/json, not {request.content_type or 'missing'}",
            code="unsupported_media_type",
            status=415,
        )
    if request.content_length is not None and request.content_length > max_bytes:
        return _too_large(max_bytes)
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return _too_large(max_bytes)
    if len(raw) > max_bytes:
        return _too_large(max_bytes)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return invalid_request(f"the body is not valid JSON: {exc}", code="invalid_json")


def _too_large(max_bytes: int) -> ApiError:
    return invalid_request(
        f"the request body is larger than the {max_bytes / 1048576:g} MB limit (server.max_body_mb)",
        code="request_too_large",
        status=413,
    )


async def chain_end(request: web.Request) -> web.StreamResponse:
    """Reached only if no stage answered, which order validation rules out."""
    return ApiError(500, "the chain ended without an answer", "server_error", "chain_incomplete").response()
