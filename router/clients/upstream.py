"""The upstream I/O edge: one chat request to one provider, with per-phase timeouts.

Timeouts are per phase, never total (WHAT-USERS-HIT #6): connecting, waiting
for the first byte, and the idle gap between chunks of a stream. A failure
before the first byte is an :class:`AttemptFailure` that says whether the next
candidate should be tried, and whether the provider gave no answer at all
(``down``: its circuit breaker opens, :mod:`router.core.breaker`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp
import orjson

from router.config import ProviderSettings, UpstreamSettings
from router.core.results import Candidate
from router.core.redaction import header_value
from router.core.retry_after import parse_retry_after
from router.clients.dependency_http import error_summary, failure_reason, is_redirect, post
from router.providers import provider_adapter

# Statuses that say "this provider cannot serve it now", so another candidate may:
# auth or missing model at that provider, timeouts, rate limits and overload.
FAILOVER_STATUSES = frozenset({401, 403, 404, 408, 409, 425, 429, 500, 502, 503, 504, 529})
MAX_ERROR_BODY = 64 * 1024


def relayable(status: int) -> bool:
    """Whether an upstream status may reach the client: 200, or a 4xx that is the client's own.

    Everything else — a redirect (never followed), 204 and other 2xx a chat
    answer never has, 1xx, 5xx and non-standard codes like 599 — is that
    provider failing, and fails over like a 5xx.
    """
    return status == 200 or (400 <= status < 500 and status not in FAILOVER_STATUSES)


@dataclass(frozen=True, slots=True)
class AttemptFailure(Exception):
    """One candidate failed before its first byte reached the client."""

    kind: str  # connect | timeout | status | read
    message: str
    status: int | None = None
    retry_after: float | None = None
    body: bytes = b""
    # The provider gave no answer at all: its connection refused or not made in time, or no first byte
    # in time. Not a connection that broke once made (a pooled keep-alive connection the provider
    # closed as the request went out fails so, and says nothing of the provider).
    down: bool = False

    def __str__(self) -> str:
        return self.message


class UpstreamClient:
    """Opens chat requests over the one shared ClientSession."""

    def __init__(self, http: aiohttp.ClientSession, providers: dict[str, ProviderSettings], settings: UpstreamSettings) -> None:
        self.http = http
        self.providers = providers
        self.settings = settings
        self._timeout = aiohttp.ClientTimeout(total=None, connect=None, sock_connect=settings.connect_timeout_seconds)

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


def error_text(body: bytes) -> str:
    """The message of an upstream error body, OpenAI-shaped or not, kept short: for the client's eyes only
    (the decision log and the log get :func:`router.clients.dependency_http.error_summary`)."""
    text = body.decode("utf-8", "replace")
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text[:300].strip() or "(empty body)"
    if isinstance(obj, dict):
        error = obj.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"][:300]
        if isinstance(error, str):
            return error[:300]
    return text[:300]
