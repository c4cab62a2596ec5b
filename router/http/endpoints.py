"""The endpoints outside the chain: health, models, outcomes, decisions, metrics, and those each wire
format declares (:mod:`router.wire.routes`: a token count, its model list and one model, a fixed
answer, an operation refused), served by :func:`format_endpoint` with the format's own functions."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from time import perf_counter
from typing import Any

import orjson
from aiohttp import web

from router.config import ANY_MODEL_ALIAS, Config
from router.contract.context import ERROR_CODE_KEY, error_response
from router.core.breaker import ProviderBreakers
from router.core.errors import ApiError, InvalidRequest, invalid_request
from router.core.fingerprint import header_session_key
from router.core.limits import usage_report
from router.core.redaction import clip
from router.core.tenants import owner_scope
from router.http.guards import TENANT_KEY
from router.core.tokens import TokenEstimator
from router.http.errors import own_error
from router.http.request_body import (
    BUSY_HEADERS,
    BodyBudget,
    BodyLimits,
    read_json_body,
)
from router.http.request_ids import new_request_id
from router.observe.metrics import CONTENT_TYPE
from router.observe.recorder import RECORDER_KEY
from router.state.limiter import KeyLimiter
from router.state.session_store import SessionStore
from router.wire import WireAdapter, adapters, own_format
from router.wire.routes import CountTokens, Endpoint, FixedAnswer, ListedModel, ModelList, ModelLookup, ModelLookupByBody, Refused

CONFIG_KEY = web.AppKey("config", Config)
BODY_BUDGET_KEY = web.AppKey("body_budget", BodyBudget)
STATE_KEY = web.AppKey("session_state", SessionStore)  # type: ignore[type-abstract]
# The process's provider circuit breakers (upstream.breaker), shared with upstream-forward.
BREAKERS_KEY = web.AppKey("provider_breakers", ProviderBreakers)
# The client keys' limits and their counts (router.state.limiter); absent without client keys.
LIMITER_KEY = web.AppKey("key_limiter", KeyLimiter)
# The config serving now: the reloaded one once there is one (the composition root holds the live chain).
CURRENT_CONFIG_KEY = web.AppKey("current_config", Callable[[], Config])

MAX_DECISIONS = 1000

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


def _aliases(config: Config) -> list[str]:
    """The routing aliases a client may pick: "*" is a rule (route every unknown name), not a name."""
    return [alias for alias in config.routing.aliases if alias != ANY_MODEL_ALIAS]


def listed_models(config: Config) -> list[ListedModel]:
    """The catalogue and the routing aliases, as a format's model list shows them: a model with what its
    ``supports`` declares, an alias with what any model has (the gate picks one that can)."""
    models = [
        ListedModel(m.name, m.context_window, m.max_output_tokens, f"{m.upstream_model} via {m.provider}", tuple(k for k, on in m.supports.model_dump().items() if on))
        for m in config.models
    ]
    anything = tuple(dict.fromkeys(c for m in models for c in m.capabilities))
    return models + [ListedModel(alias, description="a routing alias: pinch-router picks the model", capabilities=anything) for alias in _aliases(config)]


def _listing_client(request: web.Request, kind: type[ModelList] | type[ModelLookup]) -> tuple[WireAdapter, Any] | None:
    """The format whose client sent the request (``ClientApi.model_client``), with its endpoint of ``kind``, if it has one."""
    for adapter in adapters().values():
        if adapter.api.model_client(request.headers, request.query):
            endpoint = next((e for e in adapter.endpoints if isinstance(e, kind)), None)
            if endpoint is not None:
                return adapter, endpoint
    return None


async def list_models(request: web.Request) -> web.Response:
    """The catalogue and the routing aliases, in the OpenAI list format — in a format's own for one of
    its clients (``ClientApi.model_client``: e.g. an SDK on an API version whose list is under ``/v1``)."""
    config = request.app[CURRENT_CONFIG_KEY]()  # the reloaded catalogue, once there is one
    claimed = _listing_client(request, ModelList)
    if claimed is not None:
        return _json(claimed[1].answer(listed_models(config)))
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
    data += [{"id": alias, "object": "model", "created": 0, "owned_by": "pinch-router", "alias": True} for alias in _aliases(config)]
    return _json({"object": "list", "data": data})


def _model_object(model: ListedModel) -> dict[str, Any]:
    """One model as OpenAI's model object."""
    return {"id": model.name, "object": "model", "created": 0, "owned_by": "pinch-router"}


async def get_model(request: web.Request) -> web.Response:
    """``GET /v1/models/{model}``: one model or alias as OpenAI's model object — in a format's own shape
    for one of its clients, as :func:`list_models`."""
    claimed = _listing_client(request, ModelLookup)
    wire, answer = (claimed[0], claimed[1].answer) if claimed is not None else (own_format(), _model_object)
    return _look_up(request, wire, answer)


def _look_up(request: web.Request, wire: WireAdapter, answer: Callable[[ListedModel], Any], name: str | None = None) -> web.Response:
    """The model ``name`` (else the path's) in ``answer``'s shape; unknown, a 404 in ``wire``'s."""
    name = request.match_info["model"] if name is None else name
    found = next((m for m in listed_models(request.app[CURRENT_CONFIG_KEY]()) if m.name == name), None)
    if found is None:
        error = invalid_request(f"model {clip(name)!r} is neither a configured model nor a routing alias", code="model_not_found", status=404)
        return error_response(wire, error)
    return _json(answer(found))


def format_endpoint(wire: WireAdapter, endpoint: Endpoint) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The handler of an endpoint ``wire`` serves outside the chain (``WireAdapter.endpoints``), its
    errors in the format's shape."""
    if isinstance(endpoint, CountTokens):

        async def count(request: web.Request) -> web.Response:
            return await _count_tokens(request, wire, endpoint)

        return count
    if isinstance(endpoint, ModelList):
        listing = endpoint

        async def list_all(request: web.Request) -> web.Response:
            return _json(listing.answer(listed_models(request.app[CURRENT_CONFIG_KEY]())))

        return list_all
    if isinstance(endpoint, ModelLookupByBody):
        by_body = endpoint

        async def look_up_named(request: web.Request) -> web.Response:
            return await _look_up_by_body(request, wire, by_body)

        return look_up_named
    if isinstance(endpoint, FixedAnswer):
        fixed = orjson.dumps(endpoint.answer)

        async def answer(request: web.Request) -> web.Response:
            return web.Response(body=fixed, content_type="application/json")

        return answer
    if isinstance(endpoint, Refused):
        refusal = ApiError(endpoint.status, endpoint.message, "invalid_request_error", endpoint.code)

        async def refuse(request: web.Request) -> web.Response:
            return error_response(wire, refusal, None, new_request_id())

        return refuse
    lookup = endpoint

    async def look_up(request: web.Request) -> web.Response:
        return _look_up(request, wire, lookup.answer)

    return look_up


async def _look_up_by_body(request: web.Request, wire: WireAdapter, endpoint: ModelLookupByBody) -> web.Response:
    """A model named in a POST body (:class:`~router.wire.routes.ModelLookupByBody`); errors in ``wire``'s shape."""
    body = await _json_object(request)
    if isinstance(body, ApiError):
        return error_response(wire, body, BUSY_HEADERS if body.code == "server_busy" else None, new_request_id())
    name = next((value for field in endpoint.fields if isinstance(value := body.get(field), str) and value), None)
    if name is None:
        return error_response(wire, invalid_request(f"'{endpoint.fields[0]}' must name a model", param=endpoint.fields[0]), None, new_request_id())
    return _look_up(request, wire, endpoint.answer, name)


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
    """``{request_id, success, reason?}``: how a routed request turned out, for the log and escalation.

    A user key reports on its own requests only: another key's request id answers the very 404 an
    unknown one does (an admin key, or no keys configured: any request)."""
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
    if not await request.app[RECORDER_KEY].outcome(request_id, success, reason[:1000] if reason else None, request.get(TENANT_KEY)):
        return own_error(invalid_request(f"no request with id {clip(request_id)!r} is known", code="request_not_found", param="request_id", status=404))
    return _json({"request_id": request_id, "recorded": True})


async def list_decisions(request: web.Request) -> web.Response:
    """``?limit=&session=``: the most recent decisions, newest first; ``session`` is a session key
    (``x-router-session``) or the raw id the client sent in a ``session.headers`` header.

    A user key sees its own rows only, whatever it asks for; an admin key (or no keys configured) every row."""
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
    tenant = request.get(TENANT_KEY)
    sessions = (session, header_session_key(session, tenant.name if tenant else None)) if session else ()
    rows = await log.recent(int(raw_limit), sessions, owner_scope(tenant))
    return _json({"object": "list", "data": rows})


async def list_keys(request: web.Request) -> web.Response:
    """The client keys by name and role, with their usage against their limits in the current windows
    (``pinch-router keys``): a user key its own only, an admin key every one. ``counts``: where the
    figures come from — ``redis`` (every worker's and replica's), or ``process`` (this process's: the
    memory backend, or Redis unreachable); ``none`` without client keys (an empty list)."""
    limiter = request.app.get(LIMITER_KEY)
    if limiter is None:
        return _json({"object": "list", "counts": "none", "data": []})
    scope = owner_scope(request.get(TENANT_KEY))
    rows = []
    for tenant in request.app[CONFIG_KEY].server.tenants():
        if scope is None or scope == tenant.name:
            report = usage_report(limiter.limits[tenant.name], await limiter.spent(tenant.name))
            rows.append({"name": tenant.name, "role": tenant.role, **report})
    return _json({"object": "list", "counts": "redis" if limiter.shared else "process", "data": rows})


async def prometheus_metrics(request: web.Request) -> web.Response:
    body = request.app[RECORDER_KEY].metrics.render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


async def _count_tokens(request: web.Request, wire: WireAdapter, endpoint: CountTokens) -> web.Response:
    """A format's token count (:class:`~router.wire.routes.CountTokens`): the body read, the format's
    ``count`` asked (:class:`InvalidRequest`: a 400 in the format's shape, with an error id of its own,
    logged with it, where the format's errors carry one).

    Every call is counted (``pinch_router_endpoint_requests_total{endpoint=<its label>}``) and
    logged (one line named after the label: status, the figure, milliseconds), but writes no decision
    row: nothing is routed or sent upstream, and a client may ask many at once (Claude Code's
    ``/context`` asks 26), which would bury the decisions in ``top`` and ``/v1/decisions``."""
    started = perf_counter()
    counted: int | None = None
    request_id = new_request_id()
    body = await _json_object(request)
    if isinstance(body, ApiError):
        response = error_response(wire, body, BUSY_HEADERS if body.code == "server_busy" else None, request_id)
    else:
        tokens = request.app[CURRENT_CONFIG_KEY]().tokens
        try:
            counted, answer = endpoint.count(body, TokenEstimator(tokens.image_tokens, tokens.per_message_overhead))
        except InvalidRequest as exc:
            response = error_response(wire, invalid_request(exc.message, param=exc.param), None, request_id)
        else:
            response = _json(answer)
    request.app[RECORDER_KEY].metrics.endpoint_requests.labels(endpoint.label, str(response.status)).inc()
    extra = {"status": response.status, "error_code": response.get(ERROR_CODE_KEY), "input_tokens": counted, "duration_ms": round((perf_counter() - started) * 1000, 3)}
    log.info(endpoint.label, extra={**extra, "request_id": request_id} if response.status >= 400 else extra)
    return response
