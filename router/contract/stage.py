"""The stage contract — :class:`Stage`, :class:`StageDeps`, :class:`FailMode` — and the one adapter
that turns a stage into a middleware (its timeout: :mod:`router.contract.timeout`).

A stage is a small object (see :class:`Stage`) that reads the
:class:`RequestContext` and writes one slot. :func:`run_stage` is the only
place that catches stage errors: on timeout or exception it calls the stage's
``fallback``, records the outcome and lets the request carry on.
``CancelledError`` (a client that went away) is never swallowed.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from time import perf_counter
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from aiohttp import web

from router.contract.context import CTX_KEY, Outcome, RequestContext, StageRecord
from router.core.frozen import frozen
from router.core.results import round_ms
from router.core.session_state import SessionReads
from router.core.tokens import TokenEstimator
from router.http.errors import ApiError
from router.state.escalation import SessionEscalation
from router.state.session_store import LocalStore, SessionStore
from router.contract.timeout import StageTimeout, resumed_within, within_timeout

if TYPE_CHECKING:
    import aiohttp

    from router.config import Config
    from router.observe.metrics import Metrics

log = logging.getLogger("pinch_router.stage")

__all__ = ["FailMode", "Stage", "StageClass", "StageDeps", "StageReport", "StageTimeout", "run_stage", "stage_middleware", "within_timeout"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Middleware = Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]


class FailMode(enum.StrEnum):
    OPEN = "open"  # on failure, the stage's fallback supplies a safe default and the request goes on
    CLOSED = "closed"  # on failure, the request stops with an error response


@frozen
class StageReport:
    """What ``run`` tells the trace; returning None means plain OK."""

    outcome: Outcome = Outcome.OK
    detail: str = ""


@dataclass(frozen=True, slots=True)
class StageDeps:
    """What a stage may be built with: settings and the shared I/O seams."""

    config: Config
    http: aiohttp.ClientSession
    estimator: TokenEstimator
    clock: Callable[[], float] = time.monotonic
    escalation: SessionEscalation | None = None  # shared with POST /v1/outcome
    metrics: Metrics | None = None  # for gauges of what is open right now
    # What the proxy remembers per session between requests (classifications, pinch ledgers):
    # one per process, kept across reloads, on Redis with state.backend: redis.
    state: SessionStore = field(default_factory=LocalStore)
    # The session keys the chain's stages read on each request; session-fingerprint reads them
    # all in one round trip into ctx.session_state. One per built chain.
    session_reads: SessionReads = field(default_factory=SessionReads)


class Stage(Protocol):
    """One step of the chain.

    ``requires``: context fields that must be set (by the edge or an earlier
    stage) — start-up rejects an order that breaks this. ``reads``: optional
    inputs; if a stage in the chain provides one, it must come earlier.
    ``provides``: the fields this stage writes. ``timeout_seconds`` bounds the
    stage's own work (None: the stage enforces finer timeouts itself).
    ``fallback`` must be cheap and must not raise; for a fail-closed stage it
    should set ``ctx.response`` (the adapter sets a 503 if it does not).
    """

    name: ClassVar[str]
    requires: ClassVar[frozenset[str]]
    reads: ClassVar[frozenset[str]]
    provides: ClassVar[frozenset[str]]
    fail_mode: ClassVar[FailMode]
    timeout_seconds: float | None
    settings: Any

    async def run(self, ctx: RequestContext) -> StageReport | None: ...

    def fallback(self, ctx: RequestContext, reason: str) -> None: ...


class StageClass(Protocol):
    """A stage's class, as the registry holds it: its declarations, and built from :class:`StageDeps`."""

    name: str
    requires: frozenset[str]
    reads: frozenset[str]
    provides: frozenset[str]

    def __call__(self, deps: StageDeps) -> Stage: ...


class AfterHook(Protocol):
    """Optional: a stage may also define ``after(ctx)``, called once the rest of
    the chain has returned (or raised, or the client left). It must be cheap
    and bounded (one session-state write, within the store's timeout) and must
    not raise; errors are logged and ignored. The classification cache uses it
    to store what the classifier decided.
    """

    async def after(self, ctx: RequestContext) -> None: ...


class CarryOver(Protocol):
    """Optional: a stage that keeps state across requests (a cache) may define
    ``carry_over(previous)``. On a config reload the new stage is built from the
    new config, then called with the running stage of the same name, and takes
    over whatever is still valid under its own new settings; without it, a reload
    starts the stage empty.
    """

    def carry_over(self, previous: Any) -> None: ...


_OK = StageReport()


async def run_stage(stage: Stage, ctx: RequestContext) -> StageRecord:
    """Run one stage's own work under its timeout; append and return its trace record."""
    rest = start_stage(stage, ctx)
    return ctx.trace[-1] if rest is None else await rest


def start_stage(stage: Stage, ctx: RequestContext) -> Awaitable[StageRecord] | None:
    """Take a stage's first step now: None when it ended there (its record is in the trace),
    else the rest of its work to await, under its timeout.

    Most stages end without suspending, and then no coroutine but the stage's own is made:
    this is within_timeout's first step, inlined (the timer is armed only from the first
    suspension, its deadline counted from the start).
    """
    started = perf_counter()
    try:
        run = stage.run(ctx)
        try:
            suspended_on = run.send(None)
        except StopIteration as done:
            report = done.value or _OK
        else:
            return _rest_of_stage(stage, ctx, run, suspended_on, started)
        outcome, detail = report.outcome, report.detail
    except Exception as exc:  # the one failure boundary around stages (a stage's own TimeoutError included)
        outcome, detail = _failed(stage, ctx, exc)
    _record(stage, ctx, outcome, detail, started)
    return None


async def _rest_of_stage(stage: Stage, ctx: RequestContext, run: Any, suspended_on: Any, started: float) -> StageRecord:
    try:
        seconds = stage.timeout_seconds
        deadline = None if seconds is None else asyncio.get_running_loop().time() + seconds - (perf_counter() - started)
        report = await resumed_within(run, suspended_on, deadline) or _OK
        outcome, detail = report.outcome, report.detail
    except Exception as exc:
        outcome, detail = _failed(stage, ctx, exc)
    return _record(stage, ctx, outcome, detail, started)


def _failed(stage: Stage, ctx: RequestContext, exc: Exception) -> tuple[Outcome, str]:
    if isinstance(exc, StageTimeout):
        outcome, detail = Outcome.TIMEOUT, f"timed out after {stage.timeout_seconds}s"
    else:
        outcome, detail = Outcome.ERROR, _describe(exc)
    _fail(stage, ctx, outcome, detail)
    return outcome, detail


def _record(stage: Stage, ctx: RequestContext, outcome: Outcome, detail: str, started: float) -> StageRecord:
    record = StageRecord(stage.name, outcome, round_ms((perf_counter() - started) * 1000), detail)
    ctx.trace.append(record)
    return record


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _fail(stage: Stage, ctx: RequestContext, outcome: Outcome, detail: str) -> None:
    log.warning("stage_failed", extra={"stage": stage.name, "outcome": str(outcome), "detail": detail, "request_id": ctx.request_id})
    stage.fallback(ctx, detail)
    if stage.fail_mode is FailMode.CLOSED and ctx.response is None:
        ctx.response = ctx.error_response(ApiError(503, f"stage '{stage.name}' failed: {detail}", "server_error", "stage_failed"))


async def run_after(name: str, after: Callable[[RequestContext], Awaitable[None]], ctx: RequestContext) -> None:
    try:
        await after(ctx)
    except Exception as exc:  # an after-hook never turns a served request into an error
        log.warning("stage_after_failed", extra={"stage": name, "detail": _describe(exc), "request_id": ctx.request_id})


def stage_middleware(stage: Stage) -> Middleware:
    """Wrap a stage as an aiohttp middleware; the rest of the chain runs outside its timeout."""

    after: Callable[[RequestContext], Awaitable[None]] | None = getattr(stage, "after", None)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        ctx = request[CTX_KEY]
        if ctx.response is None and (rest := start_stage(stage, ctx)) is not None:
            await rest
        if ctx.response is not None:
            return ctx.response
        if after is None:
            return await handler(request)
        try:
            return await handler(request)
        finally:
            await run_after(stage.name, after, ctx)

    middleware.__name__ = f"stage:{stage.name}"
    return middleware
