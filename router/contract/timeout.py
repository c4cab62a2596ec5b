"""A timeout armed only once the work really waits: the one implementation, for stages and writes.
Most stages end without awaiting anything, and a timer could not interrupt synchronous work anyway;
arming and cancelling one per stage per request cost ~8 % of the CPU at concurrency 16."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from time import perf_counter
from typing import Any, TypeVar, cast

T = TypeVar("T")


class StageTimeout(TimeoutError):
    """The timeout given expired (not a TimeoutError the work raised itself)."""


def first_step(coro: Coroutine[Any, Any, T], seconds: float | None) -> tuple[T | None, Coroutine[Any, Any, T] | None]:
    """Run ``coro`` until it first suspends: ``(its result, None)`` when it ended there, else
    ``(None, the rest of it)`` to await, with ``seconds`` for all of it counted from now."""
    started = perf_counter()  # not the loop's clock: asking for the loop costs a getpid() system call on 3.11
    try:
        suspended_on = coro.send(None)
    except StopIteration as done:
        return cast(T, done.value), None
    deadline = None if seconds is None else asyncio.get_running_loop().time() + seconds - (perf_counter() - started)
    return None, _rest(coro, suspended_on, deadline)


async def within_timeout(coro: Coroutine[Any, Any, T], seconds: float | None) -> T:
    """``await coro`` with ``seconds`` for all of it; :class:`StageTimeout` when they run out."""
    value, rest = first_step(coro, seconds)
    return cast(T, value) if rest is None else await rest


async def _rest(coro: Coroutine[Any, Any, T], suspended_on: Any, deadline: float | None) -> T:
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
    """Carries on a coroutine started by hand: hands the task what it waits on, then passes every
    wake-up (and every exception thrown in, cancellation included) on to it."""

    def __init__(self, coro: Coroutine[Any, Any, Any], suspended_on: Any) -> None:
        self.coro, self.suspended_on = coro, suspended_on

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
