"""The stage contract (:class:`Stage`) and the one adapter that makes a stage a middleware: the only place
that catches a stage's errors. On timeout or exception it calls the stage's ``fallback``, records the outcome
and lets the request carry on (a fail-closed stage's fallback refuses it); ``CancelledError`` is never
swallowed; the rest of the chain runs outside the stage's timeout. An ``InvalidRequest`` is the client's 400."""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable
from time import perf_counter
from typing import ClassVar, Protocol

from aiohttp import web

from router.contract.context import CTX_KEY, RequestContext
from router.contract.timeout import StageTimeout, first_step
from router.core.errors import ApiError, InvalidRequest, describe, internal_failure, invalid_request
from router.core.frozen import frozen
from router.core.results import Outcome, StageRecord, round_ms

log = logging.getLogger("pinch_router.stage")

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


class Stage(Protocol):
    """One step of the chain, built with keyword arguments named after what it uses (``settings``: its config
    ``section``, whose model is that argument's type; :class:`router.server.registry.Offered`). ``requires``:
    fields or slots set before it (start-up checks the order); ``reads``: optional ones, whose writer must
    come earlier; ``provides``: the :class:`~router.core.results.Slot` names it writes (one writer each);
    ``timeout_seconds``: the bound of its own work (None: it bounds finer parts itself). ``fallback`` is cheap and never raises; a fail-closed one sets ``ctx.response``. Optional:
    ``columns`` (its decision columns: name → what it reads of the context); ``after(ctx)``, awaited once
    the rest of the chain returned (bounded; errors logged); ``carry_over(previous)``, on a reload."""

    name: ClassVar[str]
    section: ClassVar[str | None]
    requires: ClassVar[frozenset[str]]
    reads: ClassVar[frozenset[str]]
    provides: ClassVar[frozenset[str]]
    fail_mode: ClassVar[FailMode]
    timeout_seconds: float | None

    async def run(self, ctx: RequestContext) -> StageReport | None: ...

    def fallback(self, ctx: RequestContext, reason: str) -> None: ...


StageClass = type[Stage]  # as the registry holds a stage: its class, which carries its declarations


_OK = StageReport()


async def run_stage(stage: Stage, ctx: RequestContext) -> StageRecord:
    """Run one stage's own work under its timeout; append and return its trace record."""
    rest = start_stage(stage, ctx)
    return ctx.trace[-1] if rest is None else await rest


def start_stage(stage: Stage, ctx: RequestContext) -> Awaitable[StageRecord] | None:
    """Take a stage's first step now: None when it ended there (most do: no coroutine but its own is
    made), else the rest of its work to await under its timeout."""
    started = perf_counter()
    try:
        report, rest = first_step(stage.run(ctx), stage.timeout_seconds)
        if rest is not None:
            return _rest_of_stage(stage, ctx, rest, started)
        outcome, detail = (report or _OK).outcome, (report or _OK).detail
    except Exception as exc:  # the one failure boundary around stages (a stage's own TimeoutError included)
        outcome, detail = _failed(stage, ctx, exc)
    _record(stage, ctx, outcome, detail, started)
    return None


async def _rest_of_stage(stage: Stage, ctx: RequestContext, rest: Awaitable[StageReport | None], started: float) -> StageRecord:
    try:
        report = await rest or _OK
        outcome, detail = report.outcome, report.detail
    except Exception as exc:
        outcome, detail = _failed(stage, ctx, exc)
    return _record(stage, ctx, outcome, detail, started)


def _failed(stage: Stage, ctx: RequestContext, exc: Exception) -> tuple[Outcome, str]:
    if isinstance(exc, InvalidRequest):  # the client's request (a field a translation cannot carry), not the stage, failed
        ctx.response = ctx.error_response(invalid_request(exc.message, param=exc.param))
        return Outcome.ERROR, describe(exc)
    timed_out = isinstance(exc, StageTimeout)
    outcome, detail = (Outcome.TIMEOUT, f"timed out after {stage.timeout_seconds}s") if timed_out else (Outcome.ERROR, describe(exc))
    log.warning("stage_failed", extra={"stage": stage.name, "outcome": str(outcome), "detail": detail, "request_id": ctx.request_id})
    stage.fallback(ctx, detail)
    if stage.fail_mode is FailMode.CLOSED and ctx.response is None:
        ctx.response = ctx.error_response(ApiError(503, internal_failure(f"stage '{stage.name}'", ctx.request_id), "server_error", "stage_failed"))
    return outcome, detail


def _record(stage: Stage, ctx: RequestContext, outcome: Outcome, detail: str, started: float) -> StageRecord:
    record = StageRecord(stage.name, outcome, round_ms((perf_counter() - started) * 1000), detail)
    ctx.trace.append(record)
    return record


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
            try:
                await after(ctx)
            except Exception as exc:  # an after-hook never turns a served request into an error
                log.warning("stage_after_failed", extra={"stage": stage.name, "detail": describe(exc), "request_id": ctx.request_id})

    middleware.__name__ = f"stage:{stage.name}"
    return middleware
