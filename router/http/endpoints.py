"""The endpoints outside the chain: health, models, outcomes, decisions, metrics."""

from __future__ import annotations

import logging
from collections.abc import Callable
from time import perf_counter
from typing import Any

import orjson
from aiohttp import web

from router.config import ANY_MODEL_ALIAS, Config
from router.wire.anthropic_messages.validation import AnthropicInvalid, validate_messages_body
from router.wire.anthropic_messages.view import count_input_tokens
from router.core.tokens import TokenEstimator
from router.core.fingerprint import header_session_key
from router.core.redaction import clip
from router.contract.context import CLIENT_ID_KEY, ERROR_CODE_KEY
from router.http.errors import anthropic_error, openai_error
from router.core.errors import ApiError, invalid_request
from router.observe.metrics import CONTENT_TYPE
from router.observe.recorder import RECORDER_KEY
from router.http.request_body import BUSY_HEADERS, BodyBudget, BodyLimits, read_json_body
from router.state.session_store import SessionStore

CONFIG_KEY = web.AppKey("config", Config)
BODY_BUDGET_KEY = web.AppKey("body_budget", BodyBudget)
STATE_KEY = web.AppKey("session_state", SessionStore)  # type: ignore[type-abstract]
# The config serving now: the reloaded one once there is one (the composition root holds the live chain).
CURRENT_CONFIG_KEY = web.AppKey("current_config", Callable[[], Config])

MAX_DECISIONS = 1000
COUNT_TOKENS = "count_tokens"  # its `endpoint` label in pinch_router_endpoint_requests_total

log = logging.getLogger("pinch_router.request")


def _json(payload: object, status: int = 200) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(payload), content_type="application/json")


async def healthz(request: web.Request) -> web.Response:
    """200 while the proxy serves; ``degraded`` (still 200) while its shared state backend is down."""
    problem = request.app[STATE_KEY].problem()
    if problem is None:
        return _json({"status": "ok"})
    return _json({"status": "degraded", "problems": [problem]})


async def list_models(request: web.Request) -> web.Response:
    """The catalogue and the routing aliases, in the OpenAI list format."""
    config = request.app[CURRENT_CONFIG_KEY]()  # the reloaded catalogue, once there is one
    data = [
        {
            "id": m.name,
            "object": "model",
            "created": 0,
            "owned_by": m.provider,
            "context_window": m.context_window,
            "max_output_tokens": m.max_output_tokens,
            "supports": m.supports.model_dump(),
            "tiers": m.tiers,
        }
        for m in config.models
    ]
    # "*" is a rule (route every unknown name), not a name a client should pick
    aliases = [alias for alias in config.routing.aliases if alias != ANY_MODEL_ALIAS]
    data += [{"id": alias, "object": "model", "created": 0, "owned_by": "pinch-router", "alias": True} for alias in aliases]
    return _json({"object": "list", "data": data})


async def _json_object(request: web.Request) -> dict[str, Any] | ApiError:
    budget = request.app[BODY_BUDGET_KEY]
    reserved = budget.reserve(request)
    if isinstance(reserved, ApiError):
        return reserved
    try:
        body = await read_json_body(request, BodyLimits.of(request.app[CONFIG_KEY].server))
    finally:
        budget.release(reserved)
    if isinstance(body, ApiError):
        return body
    if not isinstance(body, dict):
        return invalid_request("the request body must be a JSON object")
    return body


async def post_outcome(request: web.Request) -> web.Response:
    """``{request_id, success, reason?}``: how a routed request turned out, for the log and escalation."""
    body = await _json_object(request)
    if isinstance(body, ApiError):
        return openai_error(body, BUSY_HEADERS if body.code == "server_busy" else None)
    request_id, success, reason = body.get("request_id"), body.get("success"), body.get("reason")
    if not isinstance(request_id, str) or not request_id:
        return openai_error(invalid_request("'request_id' must be a non-empty string", param="request_id"))
    if not isinstance(success, bool):
        return openai_error(invalid_request("'success' must be a boolean", param="success"))
    if reason is not None and not isinstance(reason, str):
        return openai_error(invalid_request("'reason' must be a string", param="reason"))
    if not await request.app[RECORDER_KEY].outcome(request_id, success, reason[:1000] if reason else None):
        return openai_error(invalid_request(f"no request with id {clip(request_id)!r} is known", code="request_not_found", param="request_id", status=404))
    return _json({"request_id": request_id, "recorded": True})


async def list_decisions(request: web.Request) -> web.Response:
    """``?limit=&session=``: the most recent decisions, newest first; ``session`` is a session key
    (``x-router-session``) or the raw id the client sent in a ``session.headers`` header."""
    log = request.app[RECORDER_KEY].decision_log
    if log is None:
        return openai_error(invalid_request("the decision log is disabled (decision_log.enabled)", code="decision_log_disabled", status=404))
    raw_limit = request.query.get("limit", "50")
    # ASCII digits only, and few of them: "²" is a digit to str.isdigit, and int() refuses 4,300+ digits
    if not (raw_limit.isascii() and raw_limit.isdigit() and len(raw_limit) <= 4) or not 1 <= int(raw_limit) <= MAX_DECISIONS:
        return openai_error(invalid_request(f"'limit' must be a whole number from 1 to {MAX_DECISIONS}", param="limit"))
    session = request.query.get("session", "").strip()
    # the key the proxy reports (x-router-session), or the id the client sent in its session header
    # (a session of the asking client's own, when client keys are configured)
    sessions = (session, header_session_key(session, request.get(CLIENT_ID_KEY))) if session else ()
    rows = await log.recent(int(raw_limit), sessions)
    return _json({"object": "list", "data": rows})


async def prometheus_metrics(request: web.Request) -> web.Response:
    body = request.app[RECORDER_KEY].metrics.render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


async def count_message_tokens(request: web.Request) -> web.Response:
    """``POST /v1/messages/count_tokens``: the prompt's input tokens by the project's one estimator
    (Claude Code's ``/context`` builds its table from 26 of these), errors in Anthropic's shape.

    Every call is counted (``pinch_router_endpoint_requests_total{endpoint="count_tokens"}``) and
    logged (one ``count_tokens`` line: status, the figure, milliseconds), but writes no decision
    row: nothing is routed or sent upstream, and 26 rows per ``/context`` would bury the
    decisions in ``top`` and ``/v1/decisions``."""
    started = perf_counter()
    counted: int | None = None
    body = await _json_object(request)
    if isinstance(body, ApiError):
        response = anthropic_error(body, BUSY_HEADERS if body.code == "server_busy" else None)
    else:
        try:
            validate_messages_body(body, count_tokens=True)
        except AnthropicInvalid as exc:
            response = anthropic_error(invalid_request(exc.message))
        else:
            tokens = request.app[CURRENT_CONFIG_KEY]().tokens
            counted = count_input_tokens(body, TokenEstimator(tokens.image_tokens, tokens.per_message_overhead))
            response = _json({"input_tokens": counted})
    request.app[RECORDER_KEY].metrics.endpoint_requests.labels(COUNT_TOKENS, str(response.status)).inc()
    log.info(COUNT_TOKENS, extra={"status": response.status, "error_code": response.get(ERROR_CODE_KEY), "input_tokens": counted, "duration_ms": round((perf_counter() - started) * 1000, 3)})
    return response
