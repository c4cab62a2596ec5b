"""The stage timeout, armed only when a stage really waits (see :func:`within_timeout`)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from time import perf_counter
from typing import Any, TypeVar, cast

T = TypeVar("T")


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
    started = perf_counter()  # not the loop's clock: asking for the loop costs a getpid() system call on 3.11
    try:
        suspended_on = coro.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    deadline = None if seconds is None else asyncio.get_running_loop().time() + seconds - (perf_counter() - started)
    return cast(T, await resumed_within(coro, suspended_on, deadline))


async def resumed_within(coro: Coroutine[Any, Any, T], suspended_on: Any, deadline: float | None) -> T:
    """Carry on ``coro``, started by hand and suspended on ``suspended_on``, until it ends or ``deadline`` (loop time) passes."""
    resumed = _Resumed(coro, suspended_on)
    if deadline is None:
        return cast(T, await resumed)
    timer = asyncio.timeout_at(deadline)
    try:
        async with timer:
            return cast(T, await resumed)
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
