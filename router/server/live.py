"""The serving chain as a swappable value: reload a config without a restart.

A :class:`Generation` is everything built from one config for the LLM
endpoints: the stages (as middlewares) and each client API's edge.
:class:`LiveChain` holds the current one; the middleware it gives each LLM
sub-application (:meth:`LiveChain.middleware`, that sub-application's only one)
takes the generation current when a request *arrives* and runs the request
through it to the end, so a swap never touches a request in flight: those
finish on the old chain, new ones get the new chain.

``reload`` reads, validates and builds a config exactly as start-up does
(:func:`load_serving_config`, then the same :meth:`LiveChain.build`), and swaps
only when every step succeeded; otherwise the running generation stays and the
error is logged. Sections that live outside the chain are kept from the running
config and reported as needing a restart (:data:`RESTART_ONLY`). ``/metrics``
says how the last reload went and which config is serving.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import aiohttp
from aiohttp import web
from prometheus_client import Gauge

from router.contract.chain import ChainError, build_chain
from router.server.registry import REGISTRY, StageRegistry, stage_builder
from router.config import Config, ConfigError, config_secrets
from router.core.breaker import ProviderBreakers
from router.core.config_diff import changed_paths
from router.core.redaction import Redactor
from router.observe.metrics import MULTIPROCESS_DIR_ENV
from router.observe.prices import prices_of
from router.observe.recorder import Recorder
from router.state.limiter import KeyLimiter
from router.state.session_store import SessionStore
from router.contract.stage import Handler, Middleware, Stage

log = logging.getLogger("pinch_router.reload")

# Built outside the chain, once per process: the listening socket and its limits
# (server), the connection pool's size, the decision log's file and queue, and the
# escalation settings, and the session-state backend. A reload keeps the running values and says so.
RESTART_ONLY = ("server", "upstream.max_connections", "decision_log", "escalation", "state")


def load_serving_config(path: str | Path, stages: StageRegistry = REGISTRY) -> Config:
    """Read and validate a config for serving: the file (with ``stages``' schema), the chain order, then the
    client keys' ``key_env`` variables (a key that cannot be read would lock its user out). Raises ConfigError
    or ChainError."""
    config = stages.load_config(path)
    stages.chain(config.middlewares)
    config.server.client_keys()
    return config


def config_hash(config: Config) -> str:
    """A short hash of the validated config (comments and layout of the file do not change it)."""
    return hashlib.sha256(config.model_dump_json().encode()).hexdigest()[:12]


# Builds the edge of one client API (parse, validate, record) from a config.
EdgeFactory = Callable[[Config, Recorder], Middleware]


@dataclass(frozen=True, slots=True)
class Generation:
    config: Config
    stages: tuple[Stage, ...]
    chain: tuple[Middleware, ...]  # the stages as middlewares, in configured order
    edges: dict[EdgeFactory, Middleware]  # each registered edge, built from this config


@dataclass(frozen=True, slots=True)
class ReloadResult:
    ok: bool
    changed: tuple[str, ...] = ()  # dotted key paths applied
    needs_restart: tuple[str, ...] = ()  # changed, not applied
    error: str = ""


class LiveChain:
    def __init__(
        self,
        config: Config,
        *,
        http: aiohttp.ClientSession,
        recorder: Recorder,
        clock: Callable[[], float],
        state: SessionStore | None = None,
        breakers: ProviderBreakers | None = None,
        limiter: KeyLimiter | None = None,
        stages: StageRegistry = REGISTRY,
    ) -> None:
        self.http = http
        # the keys' limits are read at start (server is restart-only), their counts the process's
        self.limiter = limiter
        self.stage_registry = stages  # what every generation's chain is made of, a reload's too
        # the provider breakers are the process's too: a reload keeps what they know
        self.breakers = breakers if breakers is not None else ProviderBreakers()
        # the session state is the process's: every generation reads and writes the same one
        self.state = state if state is not None else recorder.state
        self.recorder = recorder
        self.clock = clock
        self._edges: list[EdgeFactory] = []
        self.current = self.build(config)
        registry = recorder.metrics.registry
        # Under --workers: 0 while any worker's last reload failed; the oldest worker's load; every hash served.
        self._reload_ok = Gauge(
            "pinch_router_config_last_reload_successful",
            "1 if the last config reload was applied (or none was tried)",
            registry=registry,
            multiprocess_mode="livemin",
        )
        self._reload_time = Gauge(
            "pinch_router_config_last_reload_success_timestamp_seconds",
            "When the serving config was last loaded",
            registry=registry,
            multiprocess_mode="livemin",
        )
        self._info = Gauge(
            "pinch_router_config_info", "The serving config's hash (config_hash)", ["config_hash"], registry=registry, multiprocess_mode="livemax"
        )
        self._hash = config_hash(config)
        self._reload_ok.set(1)
        self._reload_time.set(time.time())
        self._info.labels(self._hash).set(1)

    @property
    def config(self) -> Config:
        return self.current.config

    def middleware(self, edge: EdgeFactory) -> Middleware:
        """The one middleware of a sub-application whose requests enter through ``edge``, then the chain.

        Each request runs on the generation current when it arrives, to its end.
        Every client API's sub-application gets its own (``live.middleware(chat_edge)``);
        all of them share one chain and swap together.
        """
        self._edges.append(edge)
        current = self.current
        self.current = Generation(current.config, current.stages, current.chain, {**current.edges, edge: edge(current.config, self.recorder)})

        # The chain composed for the last generation and end handler seen: aiohttp hands the same
        # end handler to every request (it caches its own composition), so the partials are made
        # once per generation, not per request (~0.5 % of a small request's instructions).
        composed: tuple[Generation, Handler, Handler] | None = None

        @web.middleware
        async def dispatch(request: web.Request, handler: Handler) -> web.StreamResponse:
            nonlocal composed
            generation = self.current
            if composed is None or composed[0] is not generation or composed[1] is not handler:
                chain = handler
                for middleware in reversed(generation.chain):
                    chain = partial(middleware, handler=chain)
                composed = (generation, handler, chain)
            return await generation.edges[edge](request, composed[2])

        return dispatch

    def build(self, config: Config, previous: Generation | None = None) -> Generation:
        """The edges and the stages for ``config``, sharing the process's HTTP session, recorder and escalation state.

        With ``previous`` (a reload), each new stage that defines ``carry_over`` takes
        what is still valid from its predecessor of the same name (see
        :class:`router.contract.stage.CarryOver`): sessions keep their cached classification.
        """
        build = stage_builder(
            config,
            http=self.http,
            clock=self.clock,
            state=self.state,
            escalation=self.recorder.escalation,
            open_upstreams=self.recorder.metrics.upstream_open,
            breakers=self.breakers,
            limiter=self.limiter,
        )
        stages, chain = build_chain(self.stage_registry.chain(config.middlewares), build)
        if previous is not None:
            old = {stage.name: stage for stage in previous.stages}
            for stage in stages:
                carry_over = getattr(stage, "carry_over", None)
                if carry_over is not None and stage.name in old:
                    carry_over(old[stage.name])
        return Generation(config, tuple(stages), chain, {edge: edge(config, self.recorder) for edge in self._edges})


    def reload(self, path: str | Path, prepare: Callable[[Config], Config] = lambda c: c) -> ReloadResult:
        """Load ``path`` as start-up does and swap it in; on any problem keep the running chain.

        ``prepare`` is what start-up applied to the loaded config (placing the state
        files), so both are compared alike.
        """
        running = self.config
        try:
            loaded = prepare(load_serving_config(path, self.stage_registry))
            config = _keep_restart_only(loaded, running)
            generation = self.build(config, previous=self.current)
        except (ConfigError, ChainError) as error:
            return self._failed(str(error))
        except Exception as error:  # a stage that cannot be built from a valid config: keep serving the old one
            log.exception("config_reload_build_failed")
            return self._failed(f"{type(error).__name__}: {error}")
        old, new = running.model_dump(mode="json"), loaded.model_dump(mode="json")
        changed = changed_paths(old, new)
        self._reload_ok.set(1)
        if not changed:  # e.g. SIGHUP and the file watch both saw one edit
            log.info("config_reload_unchanged", extra={"path": str(path)})
            return ReloadResult(True)
        needs_restart = tuple(p for p in changed if _restart_only(p))
        applied = tuple(p for p in changed if not _restart_only(p))
        self.current = generation
        # keys the new config names are redacted from now on; the old ones stay redacted too
        self.recorder.redactor = Redactor([*self.recorder.redactor.secrets, *config_secrets(config)])
        self.recorder.metrics.set_catalogue([m.name for m in config.models], list(config.routing.categories), list(config.providers))
        self.recorder.metrics.set_prices(prices_of(config))
        logging.getLogger().setLevel(config.logging.level.upper())
        self._reload_time.set(time.time())
        if MULTIPROCESS_DIR_ENV in os.environ:  # a worker's file cannot drop a series: zero it
            self._info.labels(self._hash).set(0)
        else:
            self._info.clear()
        self._hash = config_hash(config)
        self._info.labels(self._hash).set(1)
        log.info("config_reloaded", extra={"path": str(path), "changed": list(applied), "config_hash": config_hash(config)})
        for key in needs_restart:
            log.warning("config_change_needs_restart", extra={"key": key, "detail": f"{key} changed; restart to apply it"})
        return ReloadResult(True, applied, needs_restart)

    def _failed(self, error: str) -> ReloadResult:
        self._reload_ok.set(0)
        log.error("config_reload_failed", extra={"error": error, "detail": "the running config stays in use"})
        return ReloadResult(False, error=error)


def _restart_only(path: str) -> bool:
    return any(path == key or path.startswith(f"{key}.") for key in RESTART_ONLY)


def _keep_restart_only(loaded: Config, running: Config) -> Config:
    upstream = loaded.upstream.model_copy(update={"max_connections": running.upstream.max_connections})
    return loaded.model_copy(
        update={
            "server": running.server,
            "decision_log": running.decision_log,
            "escalation": running.escalation,
            "upstream": upstream,
            "state": running.state,
        }
    )


LIVE_KEY = web.AppKey("live_chain", LiveChain)
