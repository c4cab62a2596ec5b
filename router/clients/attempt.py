"""One upstream attempt, end to end: the request to one candidate's provider — connect, send, the
first byte, the answer read or relayed, the connection released — and its timing.

Timeouts are per phase, never total (WHAT-USERS-HIT #6): connecting, the first byte (a stream's
head has its own, shorter bound), and the idle gap between chunks of a stream. A failure before
the first byte is an :class:`AttemptFailure` that says whether the next candidate should be tried,
and whether the provider gave no answer at all (``down``: its circuit breaker opens,
:mod:`router.core.breaker`). The candidate loop around attempts is the terminal stage's
(:mod:`middlewares.upstream_forward`); the formats of an attempt are :mod:`router.clients.exchange`'s,
the copying of a stream :mod:`router.clients.relay`'s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from time import perf_counter
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp
import orjson
from aiohttp import web

from router.clients.dependency_http import BodyTooLarge, error_summary, failure_reason, is_redirect, post, read_bounded
from router.clients.exchange import Exchange
from router.clients.failure import AttemptFailure, relayable
from router.clients.relay import StreamRelay, relay_client_error
from router.clients.retrieve import RetrieveLoop
from router.config import ProviderSettings, UpstreamSettings
from router.contract.context import RequestContext
from router.core.errors import JSON
from router.core.redaction import header_value
from router.core.results import SESSION, UPSTREAM, Attempt, Candidate, UpstreamResult
from router.core.retry_after import parse_retry_after
from router.observe.decision_headers import decision_headers
from router.providers import provider_adapter

if TYPE_CHECKING:
    from router.observe.metrics import OpenCount

T = TypeVar("T")
MAX_ERROR_BODY = 64 * 1024

async def booked_as_upstream(ctx: RequestContext, awaitable: Awaitable[T]) -> T:
    """Await something upstream, booking the time as upstream wait, not proxy overhead."""
    started = perf_counter()
    try:
        return await awaitable
    finally:
        ctx.upstream_wait += perf_counter() - started


class UpstreamAttempts:
    """Serves a request from one candidate at a time, over the one shared ClientSession."""

    def __init__(
        self,
        http: aiohttp.ClientSession,
        providers: dict[str, ProviderSettings],
        settings: UpstreamSettings,
        open_gauge: OpenCount | None = None,
        answered_by: Callable[[str], None] = lambda provider: None,
    ) -> None:
        """``open_gauge``: the answers being relayed right now; ``answered_by(provider)``: a status
        line came from it (its breaker closes)."""
        self.http = http
        self.providers = providers
        self.settings = settings
        self.open_gauge = open_gauge
        self.answered_by = answered_by
        self._timeout = aiohttp.ClientTimeout(total=None, connect=None, sock_connect=settings.connect_timeout_seconds)

    async def serve(self, ctx: RequestContext, candidate: Candidate) -> None:
        """Serve the request from ``candidate``: ``ctx.response`` set (a stream relayed to its end), or
        :class:`AttemptFailure` before the first byte reached the client."""
        result = ctx[UPSTREAM]
        assert result is not None
        settings, provider = self.settings, self.providers[candidate.provider]
        session = ctx[SESSION]
        cache_key = session.key if session is not None and provider.set_prompt_cache_key else None
        exchange = Exchange(ctx, candidate, provider, cache_key)
        result.wire_out, result.dropped = exchange.wire_out, exchange.dropped  # this attempt's: a failover overwrites them
        sent = perf_counter()
        # a stream's head has its own, shorter timeout: a live provider sends it at once (its first event may take long)
        head_timeout = settings.stream_head_timeout_seconds if ctx.view.stream else settings.first_byte_timeout_seconds
        try:
            response = await booked_as_upstream(ctx, self.open(candidate, exchange.payload, head_timeout, ctx.headers, stream=ctx.view.stream))
        except AttemptFailure as failure:
            if failure.status is not None:
                self.answered_by(candidate.provider)
            raise
        self.answered_by(candidate.provider)
        if self.open_gauge is not None:
            self.open_gauge.inc()
        try:
            if response.status >= 400:
                body = await booked_as_upstream(ctx, self.read_error_body(response))
                ctx.response = relay_client_error(response.status, body, candidate, ctx, same_wire=exchange.translation is None, headers=response.headers)
                _answered(result, candidate, response.status, sent)
                return
            retrieve = RetrieveLoop(ctx, exchange.retrieve, exchange.payload) if exchange.retrieve is not None else None
            if exchange.streams(response.content_type):
                reopen = None if retrieve is None else lambda payload: self.reopen(ctx, candidate, payload, settings.stream_head_timeout_seconds, stream=True)
                relay = StreamRelay(
                    ctx, response, settings, drop_usage_only=exchange.inject_usage, translate=exchange.stream(), retrieve=retrieve, reopen=reopen
                )
                remaining = settings.first_byte_timeout_seconds - (perf_counter() - sent)
                first = await booked_as_upstream(ctx, relay.first_chunk(max(remaining, 0.001)))
                _answered(result, candidate, response.status, sent)
                await relay.run(first, decision_headers)
            else:
                body, answer = await booked_as_upstream(ctx, self.read_answer(response))
                if retrieve is not None:  # the model's pinch_retrieve calls answered here, the request continued
                    body, answer = await retrieve.whole(
                        body, answer, lambda payload: self.reopen(ctx, candidate, payload, settings.first_byte_timeout_seconds), self._read_booked(ctx)
                    )
                # before it counts as answered: an answer that is none of its format fails this attempt
                body, content_type, usage = exchange.answer(body, answer, response.headers.get("Content-Type", JSON))
                _answered(result, candidate, response.status, sent)
                result.usage = usage
                ctx.response = web.Response(status=response.status, body=body, headers={"Content-Type": header_value(content_type, 200)})
            result.total_ms = (perf_counter() - sent) * 1000
        finally:
            response.release()
            if self.open_gauge is not None:
                self.open_gauge.dec()

    async def wait(self, ctx: RequestContext, seconds: float) -> None:
        """A provider's Retry-After waited out before it is tried again, booked as upstream wait."""
        await booked_as_upstream(ctx, asyncio.sleep(seconds))

    async def reopen(self, ctx: RequestContext, candidate: Candidate, payload: bytes, timeout: float, *, stream: bool = False) -> aiohttp.ClientResponse:
        """The request sent to ``candidate`` again, continued with a retrieve round (:mod:`router.clients.retrieve`):
        its response once its status line came; any error status is an :class:`AttemptFailure`."""
        response = await booked_as_upstream(ctx, self.open(candidate, payload, timeout, ctx.headers, stream=stream))
        if response.status >= 400:
            body = await self.read_error_body(response)
            raise AttemptFailure("status", f"a pinch_retrieve round was answered {response.status}: {error_summary(body)}", status=response.status, body=body)
        return response

    def _read_booked(self, ctx: RequestContext) -> Callable[[aiohttp.ClientResponse], Awaitable[tuple[bytes, Any]]]:
        return lambda response: booked_as_upstream(ctx, self.read_answer(response))

    async def read_answer(self, response: aiohttp.ClientResponse) -> tuple[bytes, Any]:
        """The answer body and its JSON, bounded and under the idle gap; one that is not JSON is this provider failing."""
        settings = self.settings
        try:
            body = await read_bounded(response, settings.max_response_bytes, settings.idle_timeout_seconds)
        except TimeoutError:
            raise AttemptFailure("timeout", f"answer body stalled for {settings.idle_timeout_seconds:g}s") from None
        except BodyTooLarge as exc:
            raise AttemptFailure("read", str(exc)) from None
        except aiohttp.ClientError as exc:
            raise AttemptFailure("read", f"answer body broke off ({type(exc).__name__})") from None
        try:
            return body, orjson.loads(body)
        except orjson.JSONDecodeError:
            raise AttemptFailure("read", f"answered {response.status} with a body that is not JSON ({len(body)} bytes)") from None

    async def open(
        self,
        candidate: Candidate,
        payload: bytes,
        first_byte_timeout: float,
        client_headers: Mapping[str, str] | None = None,
        *,
        stream: bool = False,
    ) -> aiohttp.ClientResponse:
        """POST the payload; return the response once its status line arrived.

        A status that calls for failover is read (bounded), released and raised
        as an AttemptFailure; other statuses are returned for the caller to relay.
        ``client_headers`` reach the provider only where its adapter names them
        (``forwarded_client_headers``: an Anthropic provider's version and betas). ``stream``: the
        request streams (a provider that says so in its URL, Gemini's, needs it).
        """
        provider = self.providers[candidate.provider]
        adapter = provider_adapter(provider)
        url = adapter.chat_url(provider, candidate.upstream_model, stream)
        headers = adapter.headers(provider)
        for name in getattr(adapter, "forwarded_client_headers", ()):
            value = client_headers.get(name) if client_headers is not None else None
            if value is not None:
                headers[name] = header_value(value)  # as the client sent it, unless it is unfit for a header
        try:
            async with asyncio.timeout(first_byte_timeout):
                response = await post(self.http, url, payload, headers, self._timeout)
        except aiohttp.ConnectionTimeoutError:
            raise AttemptFailure(
                "connect", f"cannot connect to {url} (no connection within {self.settings.connect_timeout_seconds:g}s)", down=True
            ) from None
        except TimeoutError:
            raise AttemptFailure("timeout", f"no answer from {url} within {first_byte_timeout:g}s", down=True) from None
        except aiohttp.ClientConnectorError as exc:
            raise AttemptFailure("connect", f"cannot connect to {url} ({failure_reason(exc)})", down=True) from None
        except (aiohttp.ClientError, OSError) as exc:
            raise AttemptFailure("connect", f"request to {url} failed ({failure_reason(exc)})") from None
        if not relayable(response.status):
            status = response.status
            location = response.headers.get("Location")
            body = await self.read_error_body(response)
            retry_after = parse_retry_after(response.headers.get("Retry-After"), time.time())
            said = f"a redirect{' elsewhere' if location else ''}, not followed" if is_redirect(status) else error_summary(body)
            raise AttemptFailure("status", f"{url} answered {status}: {said}", status=status, retry_after=retry_after, body=body)
        return response

    async def read_error_body(self, response: aiohttp.ClientResponse) -> bytes:
        try:
            async with asyncio.timeout(self.settings.idle_timeout_seconds):
                return await response.content.read(MAX_ERROR_BODY)
        except (TimeoutError, aiohttp.ClientError):
            return b""
        finally:
            response.release()


def _answered(result: UpstreamResult, candidate: Candidate, status: int, sent: float) -> None:
    result.model, result.provider, result.status = candidate.model, candidate.provider, status
    result.first_byte_ms = (perf_counter() - sent) * 1000
    result.attempts.append(Attempt(candidate.model, candidate.provider, status))
