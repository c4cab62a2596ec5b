"""The one adapter around stages: timeouts, fallbacks, short-circuits, traces."""

from __future__ import annotations

import asyncio
from typing import ClassVar

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from router.context import CTX_KEY, Outcome, RequestContext, SessionKey
from router.errors import invalid_request
from router.stage import FailMode, StageReport, run_stage, stage_middleware
from tests.factories import make_ctx


class ScriptedStage:
    """A stage whose run() does what the test says; fallback leaves a mark."""

    name: ClassVar[str] = "scripted"
    requires: ClassVar[frozenset[str]] = frozenset()
    reads: ClassVar[frozenset[str]] = frozenset()
    provides: ClassVar[frozenset[str]] = frozenset({"session"})
    fail_mode: ClassVar[FailMode] = FailMode.OPEN

    def __init__(self, behaviour, timeout_seconds: float | None = 1.0, fail_mode: FailMode = FailMode.OPEN) -> None:
        self.behaviour = behaviour
        self.timeout_seconds = timeout_seconds
        self.settings = None
        self.fail_mode = fail_mode
        self.fallback_reasons: list[str] = []

    async def run(self, ctx: RequestContext) -> StageReport | None:
        return await self.behaviour(ctx)

    def fallback(self, ctx: RequestContext, reason: str) -> None:
        self.fallback_reasons.append(reason)
        ctx.session = SessionKey("fallback", "fallback")


async def sets_session(ctx):
    ctx.session = SessionKey("k", "header")


async def hangs(ctx):
    await asyncio.sleep(60)


async def raises(ctx):
    raise RuntimeError("boom")


async def raises_own_timeout(ctx):
    raise TimeoutError("the stage's own timeout error")


async def reports_skipped(ctx):
    return StageReport(Outcome.SKIPPED, "disabled")


async def test_ok_run_records_ok_and_keeps_the_result():
    stage = ScriptedStage(sets_session)
    ctx = make_ctx()
    record = await run_stage(stage, ctx)
    assert record.outcome is Outcome.OK
    assert ctx.session == SessionKey("k", "header")
    assert ctx.trace == [record]
    assert stage.fallback_reasons == []


async def test_a_stage_that_overruns_its_timeout_falls_back():
    stage = ScriptedStage(hangs, timeout_seconds=0.05)
    ctx = make_ctx()
    record = await run_stage(stage, ctx)
    assert record.outcome is Outcome.TIMEOUT
    assert "timed out after 0.05s" in record.detail
    assert ctx.session == SessionKey("fallback", "fallback")
    assert ctx.response is None  # fail-open: the request goes on


@pytest.mark.parametrize("behaviour", [raises, raises_own_timeout])
async def test_an_error_falls_back_and_names_the_exception(behaviour):
    stage = ScriptedStage(behaviour)
    ctx = make_ctx()
    record = await run_stage(stage, ctx)
    assert record.outcome is Outcome.ERROR
    assert record.detail.split(":")[0] in ("RuntimeError", "TimeoutError")
    assert stage.fallback_reasons == [record.detail]


async def test_a_stage_may_report_its_own_outcome():
    record = await run_stage(ScriptedStage(reports_skipped), make_ctx())
    assert (record.outcome, record.detail) == (Outcome.SKIPPED, "disabled")


async def test_a_fail_closed_stage_that_breaks_stops_the_request_with_503():
    class Closed(ScriptedStage):
        def fallback(self, ctx, reason):
            self.fallback_reasons.append(reason)

    ctx = make_ctx()
    await run_stage(Closed(raises, fail_mode=FailMode.CLOSED), ctx)
    assert ctx.response is not None and ctx.response.status == 503


async def test_cancellation_is_never_swallowed():
    stage = ScriptedStage(hangs, timeout_seconds=None)
    task = asyncio.ensure_future(run_stage(stage, make_ctx()))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert stage.fallback_reasons == []


async def serve(stages, endpoint) -> TestClient:
    """An app whose first middleware installs a ctx, then the stages, then ``handler``."""

    @web.middleware
    async def install_ctx(request, handler):
        request[CTX_KEY] = make_ctx()
        return await handler(request)

    app = web.Application(middlewares=[install_ctx, *(stage_middleware(s) for s in stages)])
    app.router.add_get("/", endpoint)
    client = TestClient(TestServer(app))
    await client.start_server()
    return client


async def test_short_circuit_returns_the_response_and_skips_later_stages():
    async def refuses(ctx):
        ctx.response = invalid_request("no", code="refused").response()

    later = ScriptedStage(sets_session)
    reached = []

    async def handler(request):
        reached.append(True)
        return web.Response(text="handler")

    client = await serve([ScriptedStage(refuses), later], handler)
    try:
        resp = await client.get("/")
        assert resp.status == 400
        assert (await resp.json())["error"]["code"] == "refused"
        assert reached == []
    finally:
        await client.close()


async def test_the_rest_of_the_chain_is_not_under_the_stage_timeout():
    """A 50 ms stage timeout must not cut a downstream that takes longer."""
    stage = ScriptedStage(sets_session, timeout_seconds=0.05)

    async def slow_handler(request):
        await asyncio.sleep(0.2)
        ctx = request[CTX_KEY]
        return web.json_response([r.outcome for r in ctx.trace])

    client = await serve([stage], slow_handler)
    try:
        resp = await client.get("/")
        assert resp.status == 200
        assert await resp.json() == ["ok"]
        assert stage.fallback_reasons == []
    finally:
        await client.close()


async def test_after_hook_runs_once_the_chain_returned_and_its_errors_are_contained():
    seen = []

    class WithAfter(ScriptedStage):
        def after(self, ctx):
            seen.append(ctx.response is None)
            raise RuntimeError("after-hook bug")

    async def handler(request):
        seen.append("handler")
        return web.Response(text="ok")

    client = await serve([WithAfter(sets_session)], handler)
    try:
        resp = await client.get("/")
        assert resp.status == 200
        assert seen == ["handler", True]
    finally:
        await client.close()
