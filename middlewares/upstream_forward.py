"""upstream-forward (terminal): send the request to the chosen model, relay the answer.

Candidates are tried in the gate's order, at most ``upstream.max_attempts``
of them, until one produces a first byte. Connect errors, first-byte
timeouts and failover statuses (429, 5xx, and 401/403/404 which mean "this
provider cannot serve it") move on to the next candidate; a Retry-After up to
``max_retry_after_seconds`` is waited out before that provider is tried again,
a longer one skips it. Other 4xx answers are the client's to see and are
relayed in OpenAI format. The output limit sent is the candidate's (clamped by
the gate), and a stream asks for its usage chunk even when the client did not
(then that chunk is read but not relayed). Streams are relayed event by event as they arrive;
after the first byte a failure ends the stream with an SSE error event and
``[DONE]``. One attempt, end to end, is :mod:`router.clients.attempt`'s; the
loop over candidates, the Retry-After waits and the providers' breakers are this stage's.

With client keys that have limits (docs/keys.md), the request's key is admitted here, before any
upstream is called — once the gate chose the candidates, so the request's price is known — holding
its estimate (router.core.limits); over a limit, it is answered 429 in the client's format. When
the answer ends (a stream relayed to its end, or the client gone), the hold is settled with the
usage the upstream reported.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import ClassVar

import aiohttp

from router.clients.attempt import UpstreamAttempts
from router.clients.failure import AttemptFailure
from router.clients.relay import all_down_response, all_failed_response
from router.config import Catalogue, UpstreamSettings
from router.contract.context import RequestContext
from router.contract.stage import FailMode, StageReport
from router.core.breaker import Down, Pass, ProviderBreakers
from router.core.errors import ApiError, internal_failure
from router.core.limits import Offer, Refused, answer_charge, estimate
from router.core.pricing import ModelPrice
from router.core.results import Attempt, CAPABILITIES, Candidate, ROUTE, Route, SESSION, UPSTREAM, UpstreamResult
from router.observe.metrics import OpenCount
from router.state.limiter import KeyLimiter
from router.state.session_store import SessionStore
from router.state.remembered import remember_request

log = logging.getLogger("pinch_router.upstream")


class UpstreamForward:
    name: ClassVar[str] = "upstream-forward"
    section: ClassVar[str] = "upstream"
    requires: ClassVar[frozenset[str]] = frozenset({ROUTE.name, "view"})
    reads: ClassVar[frozenset[str]] = frozenset({SESSION.name, "client_id", CAPABILITIES.name})
    provides: ClassVar[frozenset[str]] = frozenset({UPSTREAM.name, "response"})
    fail_mode: ClassVar[FailMode] = FailMode.CLOSED

    def __init__(
        self,
        *,
        settings: UpstreamSettings,
        catalogue: Catalogue,
        http: aiohttp.ClientSession,
        state: SessionStore,
        clock: Callable[[], float],
        open_upstreams: OpenCount | None = None,
        breakers: ProviderBreakers | None = None,
        limiter: KeyLimiter | None = None,
    ) -> None:
        self.settings = settings
        self.catalogue, self.limiter = catalogue, limiter
        self.timeout_seconds: float | None = None  # per-phase timeouts instead of one total
        self.state, self.clock = state, clock
        # the process's (the app's, across reloads); a stage built alone gets its own
        self.breakers = breakers if breakers is not None else ProviderBreakers()
        self.attempts = UpstreamAttempts(http, catalogue.providers, self.settings, open_upstreams, self._answered_by)

    async def run(self, ctx: RequestContext) -> StageReport:
        route, needs = ctx[ROUTE], ctx[CAPABILITIES]
        assert route is not None  # guaranteed by `requires` and the gate failing closed
        limiter, key = self.limiter, ctx.client_id
        if limiter is None or key is None:
            return await self._forward(ctx, route)
        offers = self._offers(route)
        prompt = needs.prompt_tokens if needs is not None else 0
        hold = await limiter.reserve(key, ctx.request_id, estimate(prompt, offers.values()))
        if isinstance(hold, Refused):
            error, headers = hold.error(key)
            ctx.response = ctx.error_response(error, headers)
            return StageReport(detail=f"key {key} over its limit {hold.limit}")
        ended = False  # the answer reached its client whole
        try:
            report = await self._forward(ctx, route)
            ended = (upstream := ctx[UPSTREAM]) is not None and not upstream.client_gone and not upstream.stream_error
            return report
        finally:  # also when the client left (CancelledError): it is charged what was reported, or the estimate
            limiter.settle(hold, answer_charge(ctx[UPSTREAM], offers, prompt, ended))

    def _offers(self, route: Route) -> dict[str, Offer]:
        """Each candidate's output limit and price, by model: what the request may cost."""
        offers = {}
        for c in route.candidates:
            model = self.catalogue.model_by_name(c.model)
            cost = model.cost_per_mtok if model is not None else None
            price = ModelPrice(cost.input, cost.output, cost.cache_read, cost.cache_write) if cost is not None else ModelPrice()
            offers[c.model] = Offer(c.output_tokens or c.max_output_tokens or 0, price)
        return offers

    async def _forward(self, ctx: RequestContext, route: Route) -> StageReport:
        # The request's session-state writes (its pinch ledger, its id for POST /v1/outcome) leave in
        # one round trip now, not waited for: before its client can have the answer and send the
        # session's next turn, to whichever replica.
        session = ctx[SESSION]
        remember_request(self.state, ctx.request_id, session.key if session is not None else None, ctx.client_id, self.clock())
        self.state.flush_later()
        result = ctx[UPSTREAM] = UpstreamResult()
        failures: list[AttemptFailure] = []
        waits: dict[str, float] = {}  # provider → monotonic time its Retry-After ends
        # providers that gave no answer earlier in this request, not tried again in it (breaker or not);
        # and the breakers' reasons for the providers skipped as marked down
        silent: set[str] = set()
        down: dict[str, Down] = {}
        queue = deque(route.candidates)
        tried = 0
        while queue and tried < self.settings.max_attempts:
            candidate = queue.popleft()
            wait = waits.get(candidate.provider, 0.0) - time.monotonic()
            if wait > self.settings.max_retry_after_seconds:
                result.attempts.append(Attempt(candidate.model, candidate.provider, None, f"skipped: provider asked to wait {wait:.0f}s"))
                continue
            admitted = self._admit(candidate, result, silent, down)
            if admitted is None:
                continue
            if wait > 0:
                await self.attempts.wait(ctx, wait)
            tried += 1
            try:
                await self.attempts.serve(ctx, candidate)
            except AttemptFailure as failure:
                # a copy without the traceback, which holds this frame: else a reference cycle, freed only
                # by the garbage collector, kept each failed attempt's frames alive (a 50 MB non-JSON
                # answer's body among them) long after the request — 38 such answers held 3.9 GiB
                failures.append(replace(failure))
                result.attempts.append(Attempt(candidate.model, candidate.provider, failure.status, failure.message))
                if failure.down:
                    silent.add(candidate.provider)
                    self._mark_down(candidate.provider, failure.message)
                if failure.retry_after is not None:
                    waits[candidate.provider] = time.monotonic() + failure.retry_after
                    if not queue and failure.retry_after <= self.settings.max_retry_after_seconds:
                        queue.append(candidate)  # nobody else left: wait it out and try again
                continue
            finally:
                if admitted is Pass.PROBE:  # ended without an outcome (cancelled, a broken connection): the next request may try
                    self.breakers.abandoned(candidate.provider)
            return StageReport(detail=f"{candidate.model} answered {result.status}" + (f" after {tried} attempts" if tried > 1 else ""))
        if not failures and down:
            ctx.response = all_down_response(list(down.values()), ctx, time.monotonic())
            return StageReport(detail=f"every candidate skipped: {', '.join(down)} marked down")
        ctx.response = all_failed_response(failures, result.attempts, ctx)
        return StageReport(detail=f"all {tried} attempts failed")

    def _admit(self, candidate: Candidate, result: UpstreamResult, silent: set[str], down: dict[str, Down]) -> Pass | None:
        """Whether to try ``candidate``: how its provider's breaker lets it through, or None after
        recording among the attempts why it is skipped (no answer earlier in this request, or marked down)."""
        provider = candidate.provider
        if provider in silent:
            why = f"provider {provider} did not answer earlier in this request"
        else:
            now = time.monotonic()
            # the probe's turn lasts as long as the longest attempt can before it reports
            verdict = self.breakers.admit(provider, now, self.settings.connect_timeout_seconds + self.settings.first_byte_timeout_seconds)
            if isinstance(verdict, Pass):
                return verdict
            down[provider] = verdict
            why = verdict.text(now)
        result.attempts.append(Attempt(candidate.model, provider, None, f"skipped: {why}"))
        if provider not in result.providers_down:
            result.providers_down.append(provider)
        return None

    def _mark_down(self, provider: str, reason: str) -> None:
        """``provider`` gave no answer: open its breaker for ``upstream.breaker.open_seconds``."""
        seconds = self.settings.breaker.open_seconds
        if self.breakers.failed(provider, time.monotonic(), seconds, reason):
            log.warning("provider_down", extra={"provider": provider, "detail": f"{reason}; every request skips it for {seconds:g}s, then one tries it again"})

    def _answered_by(self, provider: str) -> None:
        """``provider`` answered (a status line came): its breaker closes."""
        if self.breakers.answered(provider):
            log.info("provider_up", extra={"provider": provider, "detail": "it answered again; requests try it again"})

    def fallback(self, ctx: RequestContext, reason: str) -> None:
        if ctx.response is None or not ctx.response.prepared:
            ctx.response = ctx.error_response(ApiError(502, internal_failure("forwarding", ctx.request_id), "upstream_error", "upstream_failed"))
