"""The endpoints outside the chain: health, models, outcomes, decisions, metrics."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from time import perf_counter
from typing import Any

import orjson
from aiohttp import web

from router.config import ANY_MODEL_ALIAS, Config
from router.contract.context import ERROR_CODE_KEY
from router.core.breaker import ProviderBreakers
from router.core.errors import ApiError, InvalidRequest, invalid_request
from router.core.fingerprint import header_session_key
from router.core.redaction import clip
from router.http.guards import CLIENT_ID_KEY
from router.core.tokens import TokenEstimator
from router.contract.context import error_response
from router.http.errors import error_for_request, own_error
from router.http.request_body import (
    BUSY_HEADERS,
    BodyBudget,
    BodyLimits,
    read_json_body,
)
from router.http.request_ids import new_request_id
from router.observe.metrics import CONTENT_TYPE
from router.observe.recorder import RECORDER_KEY
from router.state.session_store import SessionStore
from router.wire.anthropic_messages.validation import (
    AnthropicInvalid,
    validate_messages_body,
)
from router.wire.anthropic_messages.view import count_input_tokens
from router.wire.gemini.models import count_tokens as count_gemini_contents
from router.wire.gemini.models import model_entry
from router.wire.gemini.adapter import GEMINI_ADAPTER
from router.wire.gemini.paths import is_gemini_client
from router.wire.routes import ListedModel

CONFIG_KEY = web.AppKey("config", Config)
BODY_BUDGET_KEY = web.AppKey("body_budget", BodyBudget)
STATE_KEY = web.AppKey("session_state", SessionStore)  # type: ignore[type-abstract]
# The process's provider circuit breakers (upstream.breaker), shared with upstream-forward.
BREAKERS_KEY = web.AppKey("provider_breakers", ProviderBreakers)
# The config serving now: the reloaded one once there is one (the composition root holds the live chain).
CURRENT_CONFIG_KEY = web.AppKey("current_config", Callable[[], Config])

MAX_DECISIONS = 1000
COUNT_TOKENS = "count_tokens"  # its `endpoint` label in pinch_router_endpoint_requests_total
GEMINI_COUNT_TOKENS = "gemini_count_tokens"

log = logging.getLogger("pinch_router.request")


def _json(payload: object, status: int = 200) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(payload), content_type="application/json")


async def healthz(request: web.Request) -> web.Response:
    """200 while the proxy serves; ``degraded`` (still 200) while its shared state backend is down.

    ``providers_down``, while any: the providers this process's breakers skip, each with the seconds
    until a request tries it again — names from the config only, no URL or reason (the endpoint
    needs no key). A provider down leaves ``status`` alone: the proxy itself serves.
    """
    problem = request.app[STATE_KEY].problem()
    health: dict[str, Any] = {"status": "ok"} if problem is None else {"status": "degraded", "problems": [problem]}
    breakers = request.app.get(BREAKERS_KEY)
    now = time.monotonic()
    if breakers is not None and (down := breakers.down(now)):
        health["providers_down"] = [{"provider": d.provider, "retry_in_seconds": round(d.retry_at - now, 1)} for d in down]
    return _json(health)


def _gemini_models(config: Config) -> list[dict[str, Any]]:
    """The catalogue and the routing aliases as Google's ``Model`` objects."""
    aliases = [alias for alias in config.routing.aliases if alias != ANY_MODEL_ALIAS]
    return [model_entry(ListedModel(m.name, m.context_window, m.max_output_tokens, f"{m.upstream_model} via {m.provider}")) for m in config.models] + [
        model_entry(ListedModel(alias, description="a routing alias: pinch-router picks the model")) for alias in aliases
    ]


async def list_gemini_models(request: web.Request) -> web.Response:
    """``GET /v1beta/models``: the catalogue and the aliases in Google's list format (one page)."""
    return _json({"models": _gemini_models(request.app[CURRENT_CONFIG_KEY]())})


async def get_gemini_model(request: web.Request) -> web.Response:
    """``GET /v1beta/models/{model}`` (and ``/v1/models/{model}``): one model or alias; Google's shape
    for a Gemini client and under ``/v1beta``, the OpenAI model object for any other client."""
    name = request.match_info["model"]
    config = request.app[CURRENT_CONFIG_KEY]()
    google = request.path.startswith("/v1beta/") or is_gemini_client(request.headers, request.query)
    found = next((entry for entry in _gemini_models(config) if entry["name"] == f"models/{name}"), None)
    if found is None:
        error = invalid_request(f"model {clip(name)!r} is neither a configured model nor a routing alias", code="model_not_found", status=404)
        return error_response(GEMINI_ADAPTER, error) if google else own_error(error)
    if google:
        return _json(found)
    return _json({"id": name, "object": "model", "created": 0, "owned_by": "pinch-router"})


async def list_models(request: web.Request) -> web.Response:
    """The catalogue and the routing aliases, in the OpenAI list format — in Google's for a Gemini
    client (one that sends ``x-goog-api-key`` or ``?key=``: the google-genai SDK on ``api_version="v1"``)."""
    config = request.app[CURRENT_CONFIG_KEY]()  # the reloaded catalogue, once there is one
    if is_gemini_client(request.headers, request.query):
        return _json({"models": _gemini_models(config)})
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
        return own_error(body, BUSY_HEADERS if body.code == "server_busy" else None)
    request_id, success, reason = body.get("request_id"), body.get("success"), body.get("reason")
    if not isinstance(request_id, str) or not request_id:
        return own_error(invalid_request("'request_id' must be a non-empty string", param="request_id"))
    if not isinstance(success, bool):
        return own_error(invalid_request("'success' must be a boolean", param="success"))
    if reason is not None and not isinstance(reason, str):
        return own_error(invalid_request("'reason' must be a string", param="reason"))
    if not await request.app[RECORDER_KEY].outcome(request_id, success, reason[:1000] if reason else None):
        return own_error(invalid_request(f"no request with id {clip(request_id)!r} is known", code="request_not_found", param="request_id", status=404))
    return _json({"request_id": request_id, "recorded": True})


async def list_decisions(request: web.Request) -> web.Response:
    """``?limit=&session=``: the most recent decisions, newest first; ``session`` is a session key
    (``x-router-session``) or the raw id the client sent in a ``session.headers`` header."""
    log = request.app[RECORDER_KEY].decision_log
    if log is None:
        return own_error(invalid_request("the decision log is disabled (decision_log.enabled)", code="decision_log_disabled", status=404))
    raw_limit = request.query.get("limit", "50")
    # ASCII digits only, and few of them: "²" is a digit to str.isdigit, and int() refuses 4,300+ digits
    if not (raw_limit.isascii() and raw_limit.isdigit() and len(raw_limit) <= 4) or not 1 <= int(raw_limit) <= MAX_DECISIONS:
        return own_error(invalid_request(f"'limit' must be a whole number from 1 to {MAX_DECISIONS}", param="limit"))
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

    def count(body: dict[str, Any], estimator: TokenEstimator) -> tuple[int, dict[str, Any]]:
        try:
            validate_messages_body(body, count_tokens=True)
        except AnthropicInvalid as exc:
            raise InvalidRequest(exc.message) from None
        counted = count_input_tokens(body, estimator)
        return counted, {"input_tokens": counted}

    return await _count_tokens(request, COUNT_TOKENS, lambda error, headers, request_id: error_for_request(request, error, headers, request_id=request_id), count)


async def count_gemini_tokens(request: web.Request) -> web.Response:
    """``POST /v1beta/models/{model}:countTokens`` (``/v1`` too): ``{"totalTokens"}`` by the same
    estimator, errors in Google's shape; counted (``endpoint="gemini_count_tokens"``) and logged as
    :func:`count_message_tokens` is, no decision row."""

    def count(body: dict[str, Any], estimator: TokenEstimator) -> tuple[int, dict[str, Any]]:
        counted = count_gemini_contents(body, estimator)
        return counted, {"totalTokens": counted}

    return await _count_tokens(request, GEMINI_COUNT_TOKENS, lambda error, headers, request_id: error_for_request(request, error, headers, request_id=request_id), count)


async def _count_tokens(
    request: web.Request,
    endpoint: str,
    error_of: Callable[..., web.Response],
    count: Callable[[dict[str, Any], TokenEstimator], tuple[int, dict[str, Any]]],
) -> web.Response:
    """One token-counting endpoint: the body read, ``count`` asked (:class:`InvalidRequest`: a 400 in
    the endpoint's shape, by ``error_of(error, headers, request_id)``: an error's own id, logged with
    it, as Anthropic's errors carry one), the call counted and logged under ``endpoint``."""
    started = perf_counter()
    counted: int | None = None
    request_id = new_request_id()
    body = await _json_object(request)
    if isinstance(body, ApiError):
        response = error_of(body, BUSY_HEADERS if body.code == "server_busy" else None, request_id)
    else:
        tokens = request.app[CURRENT_CONFIG_KEY]().tokens
        try:
            counted, answer = count(body, TokenEstimator(tokens.image_tokens, tokens.per_message_overhead))
        except InvalidRequest as exc:
            response = error_of(invalid_request(exc.message, param=exc.param), None, request_id)
        else:
            response = _json(answer)
    request.app[RECORDER_KEY].metrics.endpoint_requests.labels(endpoint, str(response.status)).inc()
    extra = {"status": response.status, "error_code": response.get(ERROR_CODE_KEY), "input_tokens": counted, "duration_ms": round((perf_counter() - started) * 1000, 3)}
    log.info(endpoint, extra={**extra, "request_id": request_id} if response.status >= 400 else extra)
    return response
