"""Relaying an upstream answer to the client: SSE streams and client-side errors."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

import aiohttp
import orjson
from aiohttp import web

from router.config import UpstreamSettings
from router.core.breaker import Down
from router.core.results import Attempt, Candidate, UPSTREAM
from router.contract.context import RequestContext
from router.core.sse import EventTooLarge, SseRelay
from router.clients.drain import OPEN_STREAMS_KEY
from router.observe.recorder import RECORDER_KEY
from router.core.errors import ApiError
from router.translate.protocol import StreamBroken, StreamTranslator
from router.contract.timeout import StageTimeout, within_timeout
from router.clients.failure import AttemptFailure, error_text
from router.clients.retrieve import Reopen, RetrieveLoop

log = logging.getLogger("pinch_router.relay")


class StreamRelay:
    """Copies one upstream SSE stream to the client, whole events as they arrive.

    While the client has received nothing for ``upstream.stream_keepalive_seconds``
    (a long prefill or thinking, or a translated stream whose provider sends only what
    the client's format drops), it is sent its format's keep-alive (``ctx.wire.keep_alive``),
    between whole events. Only once the head is committed, with the first event: before
    that the request may still fail over to the next candidate, or answer with the
    provider's error status, which a committed ``200`` head would rule out — and the
    head's ``x-router-*`` name the model that answered. The idle gap still counts the
    provider's silence alone: keep-alives never keep a dead upstream open.
    """

    def __init__(
        self,
        ctx: RequestContext,
        upstream: aiohttp.ClientResponse,
        settings: UpstreamSettings,
        *,
        drop_usage_only: bool = False,
        translate: StreamTranslator | None = None,
        retrieve: RetrieveLoop | None = None,
        reopen: Reopen | None = None,
    ) -> None:
        """``translate``: the provider streams another wire format; its events are translated first.
        ``retrieve`` (with ``reopen``, which sends the request again): the request offers
        pinch_retrieve; before anything else the provider's events go through its filter, and a round
        that called only the tool is followed by the next round's, read on in the same stream."""
        self.ctx = ctx
        self.translate = translate
        self.upstream = self.first_upstream = upstream
        self.retrieve, self.reopen = retrieve, reopen
        self.rounds = retrieve.stream_filter() if retrieve is not None else None
        self.idle = settings.idle_timeout_seconds
        self.write_timeout = settings.client_write_timeout_seconds
        self.keepalive = settings.stream_keepalive_seconds or None
        self.last_write = 0.0  # loop time of the client's last bytes
        self.events = SseRelay(ctx.wire, max_event_bytes=settings.max_stream_event_bytes, drop_usage_only=drop_usage_only)
        self.client_gone = False
        self.cut_reason = ""  # set when the proxy itself ends the stream (shutdown)
        # how the client takes the stream when not as SSE (Gemini's JSON array); None: as relayed
        self.framing = ctx.wire.stream_framing(ctx.view)
        # the one redaction pass, over each event as it leaves: a provider may echo its key in a stream too
        recorder = ctx.client.config_dict.get(RECORDER_KEY) if ctx.client is not None else None
        self.redactor = recorder.redactor if recorder is not None and recorder.redactor else None

    def cut(self, reason: str) -> None:
        """End the stream now, from outside: the pump wakes, the client gets an error event and [DONE]."""
        self.cut_reason = reason
        self.upstream.close()

    async def first_chunk(self, timeout: float) -> bytes:
        """Wait for the first complete event; failing here still allows the next candidate."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    chunk = await self.upstream.content.readany()
                    if not chunk and self.translate is not None and (rest := self.translate.finish()):
                        return self.events.feed(rest)
                    if not chunk:
                        raise AttemptFailure("read", "stream ended before its first event")
                    ready = self.events.feed(self._translated(chunk))
                    if self._round_over():
                        ready += await self._next_round()
                    if ready:
                        return ready
        except TimeoutError:
            raise AttemptFailure("timeout", f"no stream data within {timeout:g}s", down=True) from None
        except EventTooLarge as exc:
            raise AttemptFailure("read", str(exc)) from None
        except StreamBroken as exc:
            raise AttemptFailure("read", str(exc)) from None
        except aiohttp.ClientError as exc:
            raise AttemptFailure("read", f"stream broke before its first event ({type(exc).__name__})") from None

    def _translated(self, chunk: bytes, filtered: bool = False) -> bytes:
        if self.rounds is not None and not filtered:
            chunk = self.rounds.feed(chunk)
        return chunk if self.translate is None else self.translate.feed(chunk)

    def _round_over(self) -> bool:
        return self.retrieve is not None and self.retrieve.round_over()

    async def _next_round(self) -> bytes:
        """The round ended having called only pinch_retrieve: read on from the next round's response
        (:class:`AttemptFailure` when it fails before its status line); or, the rounds run out, the
        client's events for the round's closing events held back."""
        assert self.retrieve is not None and self.reopen is not None and self.rounds is not None
        following = await self.retrieve.next_stream(self.reopen)
        if following is None:
            return self.events.feed(self._translated(self.rounds.release(), filtered=True))
        if self.upstream is not self.first_upstream:
            self.upstream.release()
        self.upstream = following
        return b""

    async def run(self, first: bytes, head: Callable[[RequestContext], dict[str, str]]) -> None:
        """Send the head and ``first``, then relay until [DONE], EOF or a failure."""
        ctx = self.ctx
        response = web.StreamResponse(status=self.upstream.status)
        response.content_type = "text/event-stream" if self.framing is None else self.framing.content_type
        response.headers["Cache-Control"] = "no-cache"
        response.headers.update(head(ctx))
        assert ctx.client is not None, "streaming needs the client connection"
        await response.prepare(ctx.client)
        ctx.response = response
        if not await self._write(response, first):
            return
        streams = ctx.client.config_dict.get(OPEN_STREAMS_KEY)
        if streams is not None:
            streams.add(self)
        result = ctx[UPSTREAM]
        try:
            failure = await self._pump(response)
        finally:
            if streams is not None:
                streams.discard(self)
            if self.upstream is not self.first_upstream:  # a retrieve round's (the attempt releases the first)
                self.upstream.release()
            if result is not None:  # also when the client's leaving cancelled the relay: its key is charged what was reported
                result.usage = self.events.usage if self.translate is None or self.translate.usage is None else self.translate.usage
        if result is not None:
            result.stream_error = failure
            result.client_gone = self.client_gone
        if self.client_gone:
            return
        if failure:
            log.warning("stream_interrupted", extra={"request_id": ctx.request_id, "reason": failure})
            sent = self.events.events  # the events relayed before it (the Responses API numbers its events)
            event = (
                ctx.wire.stream_error(failure, "server_shutting_down", sent)
                if self.cut_reason
                else ctx.wire.stream_error(f"upstream stream interrupted: {failure}", "upstream_stream_interrupted", sent)
            )
            if not await self._write(response, event):
                return
        if self.framing is not None and not await self._write(response, self.framing.close(), framed=True):
            return
        await response.write_eof()

    async def _pump(self, response: web.StreamResponse) -> str:
        """Relay the rest; return why the stream broke, or '' when it ended cleanly."""
        while not self.events.done:
            try:
                chunk = await self._next_chunk(response)
            except TimeoutError:
                return f"no data for {self.idle:g}s"
            except aiohttp.ClientError as exc:
                return self.cut_reason or f"connection to the provider broke ({type(exc).__name__})"
            if chunk is None:
                return "client disconnected"
            if self.cut_reason:
                return self.cut_reason
            try:
                if not chunk and self.translate is not None:
                    chunk = self.translate.finish()
                    if not chunk:
                        return "" if self.events.done else "the provider closed the stream before its end"
                elif not chunk:
                    return "" if self.events.done else "the provider closed the stream before [DONE]"
                ready = self.events.feed(self._translated(chunk))
                if self._round_over():
                    ready += await self._next_round()
            except (EventTooLarge, StreamBroken) as exc:
                return str(exc)
            except AttemptFailure as failure:
                return failure.message
            if ready and not await self._write(response, ready):
                return "client disconnected"
        return ""

    async def _next_chunk(self, response: web.StreamResponse) -> bytes | None:
        """The provider's next bytes within the idle gap (TimeoutError after it), keeping the
        client alive meanwhile; None when a keep-alive found the client gone."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.idle
        while True:
            wake = give_up if self.keepalive is None else min(give_up, self.last_write + self.keepalive)
            timer = asyncio.timeout_at(wake)
            try:
                async with timer:
                    return await self.upstream.content.readany()
            except TimeoutError:
                if not timer.expired() or loop.time() >= give_up:
                    raise
            if not await self._write(response, self.ctx.wire.keep_alive, framed=True):
                return None

    async def _write(self, response: web.StreamResponse, data: bytes, framed: bool = False) -> bool:
        """Write to the client (whole events, in the client's framing unless ``framed`` says they are);
        False when the client has gone away or stopped reading.

        A write waits only when the client's socket is full; a client that
        takes longer than ``client_write_timeout_seconds`` to accept a chunk is
        disconnected, so its upstream connection is released instead of pinned.
        The timer is armed only when the write really waits (within_timeout).
        """
        if self.redactor is not None:
            data = self.redactor.bytes(data)
        if self.framing is not None and not framed:
            data = self.framing.events(data)
        try:
            await within_timeout(response.write(data), self.write_timeout)
        except (ConnectionResetError, aiohttp.ClientConnectionResetError):
            log.info("client_disconnected", extra={"request_id": self.ctx.request_id})
            self.client_gone = True
            return False
        except StageTimeout:
            log.info("client_stopped_reading", extra={"request_id": self.ctx.request_id, "timeout_seconds": self.write_timeout})
            self.client_gone = True
            transport = self.ctx.client.transport if self.ctx.client is not None else None
            if transport is not None:
                transport.abort()  # drops what is buffered for it; nothing more will be written
            return False
        self.last_write = asyncio.get_running_loop().time()
        return True


# The provider's id of a request, relayed with its error: the body names it too (Anthropic's request_id).
RELAYED_ERROR_HEADERS = ("request-id", "x-request-id")


def relay_client_error(
    status: int, body: bytes, candidate: Candidate, ctx: RequestContext, *, same_wire: bool = True, headers: Mapping[str, str] | None = None
) -> web.Response:
    """An upstream 4xx the client must see (keys are removed by the app's redaction pass).

    From a provider speaking the client's own wire format, an error object in
    that format (``{"error": {...}}``) is relayed as it came, with the provider's
    request id header (of ``headers``, the provider's); anything else becomes the
    proxy's own error, rendered by the client's wire adapter.
    """
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        obj = None
    if same_wire and isinstance(obj, dict) and isinstance(obj.get("error"), dict):
        kept = {name: headers[name] for name in RELAYED_ERROR_HEADERS if headers is not None and name in headers}
        return web.Response(status=status, body=body, content_type="application/json", headers=kept)
    message = f"{candidate.model} via {candidate.provider} answered {status}: {error_text(body)}"
    return ctx.error_response(ApiError(status, message, "invalid_request_error", f"upstream_{status}"))


# The OpenAI and Anthropic SDKs retry a 5xx (Claude Code up to 10 times, silently) unless the answer
# says otherwise with this header, which both honour.
NO_RETRY = {"x-should-retry": "false"}
NO_RETRY_NOTE = "every candidate was tried (the proxy already fell back), so a retry now would fail the same way: not retrying (x-should-retry: false)"


def all_down_response(down: list[Down], ctx: RequestContext, now: float) -> web.Response:
    """The error of a request whose every candidate was skipped, its provider marked down (in the client's format).

    A 503 at once, naming each provider and when it is tried again: ``Retry-After`` says when the
    first of them is, and ``x-should-retry: false`` keeps the SDKs from retrying at once into the
    same skip (a client that waits out ``Retry-After`` finds the provider tried again).
    """
    first = min(down, key=lambda d: d.retry_at)
    message = f"no candidate was tried: {'; '.join(d.text(now) for d in down)}; not retrying now (x-should-retry: false)"
    headers = {**NO_RETRY, "Retry-After": str(first.retry_in(now))}
    return ctx.error_response(ApiError(503, message, "upstream_error", "provider_down"), headers)


def all_failed_response(failures: list[AttemptFailure], attempts: list[Attempt], ctx: RequestContext) -> web.Response:
    """One error for a request no candidate could serve, naming every attempt (in the client's error format).

    The proxy has done the fallback a client's retry would do, so a 502 or 504 tells the client's
    SDK not to retry (``x-should-retry: false``) and says so; a 429 keeps its ``Retry-After`` and
    stays retryable: a rate limit passes.
    """
    summary = "; ".join(f"{a.model} via {a.provider}: {a.error}" for a in attempts) or "no candidate was tried"
    last = failures[-1] if failures else None
    if last is not None and last.status == 429:
        headers = {"Retry-After": f"{last.retry_after:.0f}"} if last.retry_after is not None else None
        return ctx.error_response(ApiError(429, f"rate limited upstream: {summary}", "rate_limit_error", "upstream_rate_limited"), headers)
    if last is not None and last.kind == "timeout":
        return ctx.error_response(ApiError(504, f"upstream timed out: {summary}; {NO_RETRY_NOTE}", "upstream_error", "upstream_timeout"), NO_RETRY)
    return ctx.error_response(ApiError(502, f"no upstream could answer: {summary}; {NO_RETRY_NOTE}", "upstream_error", "upstream_unavailable"), NO_RETRY)
