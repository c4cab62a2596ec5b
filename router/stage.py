"""The stage contract and the one adapter that turns a stage into a middleware.

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
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass
from time import perf_counter
from typing import Any, ClassVar, Protocol, TypeVar, cast

from aiohttp import web

from router.context import CTX_KEY, Outcome, RequestContext, StageRecord
from router.errors import ApiError

log = logging.getLogger("pinch_router.stage")

T = TypeVar("T")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Middleware = Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]


class FailMode(enum.StrEnum):
    OPEN = "open"  # on failure, the stage's fallback supplies a safe default and the request goes on
    CLOSED = "closed"  # on failure, the request stops with an error response


@dataclass(frozen=True, slots=True)
class StageReport:
    """What ``run`` tells the trace; returning None means plain OK."""

    outcome: Outcome = Outcome.OK
    detail: str = ""


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


async def run_stage(stage: Stage, ctx: RequestContext) -> StageRecord:
    """Run one stage's own work under its timeout; append and return its trace record."""
    started = perf_counter()
    try:
        report = await within_timeout(stage.run(ctx), stage.timeout_seconds) or StageReport()
        outcome, detail = report.outcome, report.detail
    except StageTimeout:
        outcome, detail = Outcome.TIMEOUT, f"timed out after {stage.timeout_seconds}s"
        _fail(stage, ctx, outcome, detail)
    except Exception as exc:  # the one failure boundary around stages (a stage's own TimeoutError included)
        outcome, detail = Outcome.ERROR, _describe(exc)
        _fail(stage, ctx, outcome, detail)
    record = StageRecord(stage.name, outcome, round((perf_counter() - started) * 1000, 3), detail)
    ctx.trace.append(record)
    return record


class StageTimeout(TimeoutError):
    """The stage's own timeout expired (not a TimeoutError the stage raised itself)."""


async def within_timeout(coro: Coroutine[Any, Any, T], seconds: float | None) -> T:
    """``await coro`` with ``seconds`` for all of it (from now); :class:`StageTimeout` when they run out.

    Same as ``async with asyncio.timeout(seconds): await coro``, except that the
    timer is armed only if the coroutine actually suspends. Most stages finish
    without awaiting anything (a cache lookup, pinch, the gate), and a timer
    could not interrupt that synchronous work anyway; arming and cancelling
    one per stage per request cost ~8% of the proxy's CPU at concurrency 16
    (each cancelled timer also lingers in the event loop's heap).
    """
    loop = asyncio.get_running_loop()
    deadline = None if seconds is None else loop.time() + seconds
    try:
        suspended_on = coro.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    resumed = _Resumed(coro, suspended_on)
    if deadline is None:
        return await resumed
    timer = asyncio.timeout_at(deadline)
    try:
        async with timer:
            return await resumed
    except TimeoutError:
        if timer.expired():
            raise StageTimeout from None
        raise


class _Resumed:
    """Awaitable that carries on a coroutine already started by hand, from where it suspended.

    It hands the task what the coroutine is waiting on, then passes every
    wake-up (and every exception thrown in, cancellation included) on to it.
    """

    def __init__(self, coro: Coroutine[Any, Any, Any], suspended_on: Any) -> None:
        self.coro = coro
        self.suspended_on = suspended_on

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, waiting_on = self.coro, self.suspended_on
        while True:
            try:
                sent = yield waiting_on
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # noqa: BLE001 - thrown in by the task (e.g. CancelledError): the coroutine's to handle
                try:
                    waiting_on = coro.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    waiting_on = coro.send(sent)
                except StopIteration as done:
                    return done.value


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _fail(stage: Stage, ctx: RequestContext, outcome: Outcome, detail: str) -> None:
    log.warning("stage_failed", extra={"stage": stage.name, "outcome": str(outcome), "detail": detail, "request_id": ctx.request_id})
    stage.fallback(ctx, detail)
    if stage.fail_mode is FailMode.CLOSED and ctx.response is None:
        ctx.response = ApiError(503, f"stage '{stage.name}' failed: {detail}", "server_error", "stage_failed").response()


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
        if ctx.response is None:
            await run_stage(stage, ctx)
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
