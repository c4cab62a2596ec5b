"""The composition root: config in, aiohttp application out.

Each wire format's LLM endpoints (``WireAdapter.paths``) live on sub-applications whose
middlewares are the format's edge and the configured stages, so ``/healthz``, ``/v1/models``,
``/metrics`` and the endpoints a format serves outside the chain (``WireAdapter.endpoints``) never
pass through it. Formats are asked of the wire registry, never named here. One
``aiohttp.ClientSession`` is shared by every stage; tests inject their own.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections.abc import AsyncIterator, Callable
from functools import partial

import aiohttp
from aiohttp import hdrs, web

from router.clients.drain import OPEN_STREAMS_KEY, OpenStreams
from router.config import Config, config_secrets
from router.core.breaker import ProviderBreakers
from router.core.redaction import Redactor
from router.http.edge import chain_end, chat_edge
from router.http.endpoints import (
    BODY_BUDGET_KEY,
    BREAKERS_KEY,
    CONFIG_KEY,
    CURRENT_CONFIG_KEY,
    LIMITER_KEY,
    STATE_KEY,
    format_endpoint,
    get_model,
    healthz,
    list_decisions,
    list_keys,
    list_models,
    post_outcome,
    prometheus_metrics,
)
from router.http.connections import ConnectionGuard
from router.http.dashboard import OPEN_PATHS, add_dashboard
from router.http.framing_errors import use_proxy_request_handler
from router.http.guards import client_auth, error_boundary, redact_answers
from router.http.request_body import LARGE_BODY_BYTES, SERVER_HANDLER_ARGS, BodyBudget
from router.http.unknown_paths import root, unknown_paths
from router.observe.decision_log import DecisionLog
from router.observe.metrics import MULTIPROCESS_DIR_ENV, Metrics, sample_worker_gauges
from router.observe.prices import prices_of
from router.observe.recorder import RECORDER_KEY, Recorder
from router.server.live import LIVE_KEY, LiveChain
from router.server.registry import REGISTRY, StageRegistry
from router.server.memory import CHECK_SECONDS as MEMORY_CHECK_SECONDS
from router.server.memory import MEMORY_RETURN_AFTER_BYTES, MemoryReturn
from router.state.escalation import SessionEscalation
from router.state.limiter import KeyLimiter, RedisLimits
from router.state.session_store import LocalStore, ResilientStore, SessionStore, redis_store
from router.wire import adapters

log = logging.getLogger("pinch_router.app")

HTTP_KEY = web.AppKey("http", aiohttp.ClientSession)


async def create_app(
    config: Config,
    *,
    http: aiohttp.ClientSession | None = None,
    clock: Callable[[], float] | None = None,
    stages: StageRegistry = REGISTRY,
    wall_clock: Callable[[], float] = time.time,
) -> web.Application:
    """Build the proxy. Raises ChainError for an unusable middleware order (before anything is opened).

    ``stages``: the stages the chain is made of (``config`` is read with its schema,
    :meth:`StageRegistry.config_schema`); their declared columns go into every decision record.

    ``clock`` times what the session state keeps: monotonic for the in-process
    store, the wall clock for Redis (replicas on other machines share its values).
    ``wall_clock``: the time of the decision rows, and of the windows of the keys' limits (UTC).
    Raises ConfigError when a client key's ``key_env`` variable is unset (before anything is opened).
    """
    client_keys = config.server.client_keys()
    owns_http = http is None
    if http is None:
        http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=config.upstream.max_connections, limit_per_host=0),
            raise_for_status=False,
            # One session serves every client: a cookie a provider sets for one must
            # never ride along on another's request.
            cookie_jar=aiohttp.DummyCookieJar(),
        )
    metrics = Metrics([m.name for m in config.models], list(config.routing.categories), list(config.providers), clients=config.server.key_names())
    metrics.set_prices(prices_of(config))
    state = session_store(config, metrics)
    if clock is None:
        clock = time.time if config.state.backend == "redis" else time.monotonic
    escalation = (
        SessionEscalation(state, config.escalation.failures, config.escalation.window_minutes * 60)
        if config.escalation.enabled
        else None
    )
    redactor = Redactor(config_secrets(config))
    settings = config.decision_log
    columns = tuple(name for name, _ in stages.columns)
    decision_log = DecisionLog(settings.path, settings.queue_size, settings.batch_size, settings.flush_interval_seconds, columns) if settings.enabled else None
    recorder = Recorder(
        metrics,
        decision_log,
        escalation,
        clock=clock,
        wall_clock=wall_clock,
        redactor=redactor,
        state=state,
        columns=stages.columns,
    )

    # One per process (each worker of `serve --workers N` its own), kept across reloads; on monotonic time.
    breakers = ProviderBreakers()
    metrics.providers_down = lambda: [down.provider for down in breakers.down(time.monotonic())]
    max_bytes = config.server.max_body_bytes
    budget = BodyBudget(config.server.max_bodies_in_flight_bytes, max_bytes)  # one per process, kept across reloads
    idle_checks = math.ceil(config.server.resent_bodies_idle_seconds / MEMORY_CHECK_SECONDS)
    memory = MemoryReturn(budget, after_bytes=MEMORY_RETURN_AFTER_BYTES, quiet_bytes=LARGE_BODY_BYTES, idle_checks=idle_checks)
    limiter = key_limiter(config, state, metrics, wall_clock)  # one per process, kept across reloads (server is read at start)
    try:  # the stages (and edges), swapped on reload; an unusable order raises ChainError here
        live = LiveChain(config, http=http, recorder=recorder, clock=clock, state=state, breakers=breakers, limiter=limiter, stages=stages)
    except Exception:
        await state.close()  # never started: this only releases the Redis client
        if owns_http:
            await http.close()
        raise
    app = web.Application(
        middlewares=[redact_answers(recorder), error_boundary, client_auth(client_keys, metrics, OPEN_PATHS), unknown_paths(metrics)],
        client_max_size=max_bytes,
        # every server of the app, the test server's too
        handler_args={**SERVER_HANDLER_ARGS, "keepalive_timeout": config.server.keepalive_timeout_seconds},
    )
    app[CONFIG_KEY] = config
    app[HTTP_KEY] = http
    app[RECORDER_KEY] = recorder
    app[BODY_BUDGET_KEY] = budget
    app[LIVE_KEY] = live
    app[CURRENT_CONFIG_KEY] = lambda: live.config
    app[OPEN_STREAMS_KEY] = OpenStreams()
    app.router.add_get("/", root)  # HEAD too
    app.router.add_get("/api/hello", root)  # HEAD too: Claude Code's reachability probe (HEAD /api/hello)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", prometheus_metrics)
    app.router.add_get("/v1/models", list_models)
    app.router.add_get("/v1/models/{model:[^/:]+}", get_model)
    app.router.add_post("/v1/outcome", post_outcome)
    app.router.add_get("/v1/decisions", list_decisions)
    app.router.add_get("/v1/keys", list_keys)
    add_dashboard(app)  # /ui/: the pages, and their figures from the decision log
    wires = adapters().values()
    # each wire format's endpoints outside the chain (a token count, its model list), routed before
    # its chain endpoints, whose sub-applications take every path under their fixed start
    for wire, endpoint in ((w, e) for w in wires for e in w.endpoints):
        add = app.router.add_get if endpoint.method == hdrs.METH_GET else partial(app.router.add_route, endpoint.method)  # GET: HEAD too
        add(endpoint.path, format_endpoint(wire, endpoint))
    for wire, path in ((w, p) for w in wires for p in w.paths):
        # each its own sub-application and edge, through the same chain; a path with parts of its own
        # (a {model}) is a route under the sub-application mounted at its fixed start
        prefix, braces, rest = path.partition("/{")
        llm = web.Application(middlewares=[live.middleware(partial(chat_edge, budget=budget, wire=wire))], client_max_size=max_bytes)
        llm.router.add_post(braces + rest if braces else "", chain_end)
        app.add_subapp(prefix, llm)
    server = config.server  # connection settings are the process's (a reload does not change them)
    use_proxy_request_handler(
        app,
        lambda error: metrics.refused.labels(error.code).inc(),
        lambda: ConnectionGuard(server.head_timeout_seconds, server.max_connections, lambda why: metrics.connections_closed.labels(why).inc(), metrics.connections_open.set),
    )
    app[STATE_KEY] = state
    app[BREAKERS_KEY] = breakers
    if limiter is not None:
        app[LIMITER_KEY] = limiter

    async def connect_state(_: web.Application) -> None:
        await state.start()  # never fails: an unreachable Redis means serving in fallback

    async def close_state(_: web.Application) -> None:
        if limiter is not None:
            await limiter.close()  # the requests admitted ahead given back, the last charges on their way to Redis
        await state.close()

    app.on_startup.append(connect_state)
    app.on_cleanup.append(close_state)

    async def return_memory(_: web.Application) -> AsyncIterator[None]:
        trimming = asyncio.get_running_loop().create_task(memory.run(), name="memory-return")
        yield
        trimming.cancel()
        await asyncio.gather(trimming, return_exceptions=True)

    app.cleanup_ctx.append(return_memory)

    if MULTIPROCESS_DIR_ENV in os.environ:  # a worker of `serve --workers N`

        async def sample_gauges(_: web.Application) -> AsyncIterator[None]:
            sampler = asyncio.get_running_loop().create_task(sample_worker_gauges(metrics), name="worker-gauges")
            yield
            sampler.cancel()
            await asyncio.gather(sampler, return_exceptions=True)

        app.cleanup_ctx.append(sample_gauges)

    if redactor:
        log_filter = redactor.log_filter()

        async def redact_logs(_: web.Application) -> None:
            for handler in logging.getLogger().handlers:
                handler.addFilter(log_filter)

        async def stop_redacting_logs(_: web.Application) -> None:
            for handler in logging.getLogger().handlers:
                handler.removeFilter(log_filter)

        app.on_startup.append(redact_logs)
        app.on_cleanup.append(stop_redacting_logs)

    if decision_log is not None:

        async def open_log(_: web.Application) -> None:
            await decision_log.start()

        async def close_log(_: web.Application) -> None:
            await decision_log.close()  # flushes: nothing recorded before shutdown is lost

        app.on_startup.append(open_log)
        app.on_cleanup.append(close_log)

    if owns_http:

        async def close_http(_: web.Application) -> None:
            await http.close()

        app.on_cleanup.append(close_http)
    return app


def session_store(config: Config, metrics: Metrics) -> SessionStore:
    """The process's session state: in memory, or Redis with the in-process store as its fallback."""
    if config.state.backend == "memory":
        metrics.state_up.set(1)
        return LocalStore()
    return redis_store(config.state.redis, on_fallback=metrics.state_fallback.inc, on_state=lambda up: metrics.state_up.set(int(up)))


def key_limiter(config: Config, state: SessionStore, metrics: Metrics, clock: Callable[[], float] = time.time) -> KeyLimiter | None:
    """The client keys' limits and their counts: on Redis when the session state is, this process's
    otherwise (and while Redis is down); None without client keys."""
    limits = config.server.key_limits()
    if not limits:
        return None
    redis, store = (RedisLimits(state.redis.client, state.redis.namespace), state) if isinstance(state, ResilientStore) else (None, None)
    return KeyLimiter(limits, redis=redis, store=store, clock=clock, on_charged=metrics.key_charged, on_refused=metrics.key_limited)
