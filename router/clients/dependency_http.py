"""How the proxy speaks HTTP to its dependencies: the chat upstream, the classifier, the embeddings endpoint.

Every such call goes through here, so each rule holds in one place:

* **No redirects** (WHAT-USERS-HIT #19): a 3xx is never followed — it would send
  the prompt (307/308) or a GET (301/302/303) to a host that is not in the
  config, and relay that host's answer as the configured model's. The caller
  treats a 3xx as that dependency's failure, named by its status.
* **Bounded reads**: an answer body is read chunk by chunk, each chunk within
  an idle gap (never a total: a slow but steady answer is fine), and at most
  ``max_bytes`` after decoding. aiohttp inflates gzip/deflate as the body is
  read, a chunk at a time, so the cap bounds inflation as well: a 1 MB gzip
  bomb stops at the cap instead of growing to 1 GiB in memory.
* **Failures described without what the dependency sent**: aiohttp's parse
  errors quote the raw bytes they choked on (a provider that echoes its key
  into a status line or an oversize header puts the key there), and error
  bodies often echo the request (the user's text). What is kept: the status,
  the error object's ``type`` and ``code`` (short tokens), the body's size,
  the exception's type and the parser's description up to the quoted data.
"""

from __future__ import annotations

import re
from typing import Any

import aiohttp
import orjson

from router.contract.timeout import within_timeout


# upstream.max_response_mb's default, for clients built without a config.
DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024


class BodyTooLarge(Exception):
    """The answer body is larger than the configured cap (after decoding)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"the answer is larger than {max_bytes / 1048576:g} MB (upstream.max_response_mb)")
        self.max_bytes = max_bytes


def is_redirect(status: int) -> bool:
    return 300 <= status < 400


async def post(
    http: aiohttp.ClientSession,
    url: str,
    payload: bytes,
    headers: dict[str, str],
    timeout: aiohttp.ClientTimeout | None = None,
) -> aiohttp.ClientResponse:
    """POST to a dependency, never following a redirect; the caller reads and releases the response."""
    kwargs: dict[str, Any] = {"data": payload, "headers": headers, "allow_redirects": False}
    if timeout is not None:
        kwargs["timeout"] = timeout
    return await http.post(url, **kwargs)


async def read_bounded(response: aiohttp.ClientResponse, max_bytes: int, idle_seconds: float) -> bytes:
    """The whole decoded body, at most ``max_bytes``, each chunk within ``idle_seconds``.

    Raises :class:`BodyTooLarge`, ``TimeoutError`` (a gap longer than
    ``idle_seconds``) or ``aiohttp.ClientError`` (the body broke off).
    """
    if response.content_length is not None and response.content_length > max_bytes:
        raise BodyTooLarge(max_bytes)
    chunks: list[bytes] = []
    size = 0
    content = response.content
    while True:
        chunk = await within_timeout(content.readany(), idle_seconds)  # no timer for a chunk already received
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > max_bytes:
            raise BodyTooLarge(max_bytes)
        chunks.append(chunk)
        if content.at_eof():  # the rest has been read already (most answers come whole): no read for the empty end
            return b"".join(chunks)


# aiohttp's parse errors quote what they received after a colon; other errors quote it.
_PARSER_QUOTES = re.compile(r"[:'\"\n]")
_QUOTES = re.compile(r"['\"\n<]")
MAX_REASON_CHARS = 120


class DependencyFailed(Exception):
    """A dependency (classifier, embeddings) gave no usable answer; the message says why."""


async def answer_body(
    http: aiohttp.ClientSession, url: str, payload: bytes, headers: dict[str, str], max_bytes: int, idle_seconds: float
) -> bytes:
    """A dependency's 200 answer body, bounded; :class:`DependencyFailed` saying why there is none: the
    request failed, the body was too large, a redirect (never followed) or another status came. A stall
    (``TimeoutError``) is the caller's to name."""
    try:
        async with await post(http, url, payload, headers) as response:
            status = response.status
            body = b"" if is_redirect(status) else await read_bounded(response, max_bytes, idle_seconds)
    except BodyTooLarge as exc:
        raise DependencyFailed(f"{url}: {exc}") from None
    except aiohttp.ClientError as exc:
        raise DependencyFailed(f"request to {url} failed ({failure_reason(exc)})") from None
    if is_redirect(status):
        raise DependencyFailed(f"{url} answered {status}: a redirect, not followed")
    if status != 200:
        raise DependencyFailed(f"{url} answered {status}: {error_summary(body)}")
    return body


def failure_reason(exc: BaseException) -> str:
    """A client-side failure in words safe to show and store: its type and description, no received bytes."""
    name = type(exc).__name__
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"{name}: {exc}"  # made of the configured host and port and the OS's error only
    if isinstance(exc, aiohttp.ClientResponseError):
        # e.g. 'Bad status line:\n  Invalid status code:\n\n  b"HTTP/1.1 2x0 <what the server sent>"'
        said = _PARSER_QUOTES.split(exc.message, 1)[0]
    else:
        said = _QUOTES.split(str(exc), 1)[0]
    said = said.strip().rstrip(":").strip()[:MAX_REASON_CHARS]
    return f"{name}: {said}" if said else name


_TOKEN = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def error_summary(body: bytes) -> str:
    """What an error body says, as far as it can be kept: its ``type``/``code``, else its size.

    The ``message`` is left out on purpose: providers echo the request in it
    (the user's text, sometimes the key), and this summary goes to the
    decision log and the log.
    """
    if not body.strip():
        return "empty body"
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return f"non-JSON body of {len(body)} bytes"
    error = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(error, dict):
        parts = [f"{key} {value}" for key in ("type", "code") if isinstance((value := error.get(key)), str) and _TOKEN.fullmatch(value)]
        if parts:
            return ", ".join(parts)
    return f"JSON body of {len(body)} bytes"
