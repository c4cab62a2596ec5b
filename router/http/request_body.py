"""Reading a client's JSON body: the one reader behind every endpoint that takes one (chat, /v1/outcome).

Everything a client can get wrong about a body is answered here with an
OpenAI error object, never a 5xx:

* a content type other than JSON ⇒ 415;
* a gzip or deflate body that is not one — bytes that do not decode, or a
  stream that stops before its end (a gzip body without its trailer, which
  holds the checksum and the length: the body was cut short) ⇒ 400. Bodies
  are decoded here, as they are read, within the size limit (the app turns
  aiohttp's own decoding off: it accepts a gzip stream cut anywhere);
  ``br``/``zstd`` ⇒ 415;
* larger than ``server.max_body_mb`` (after decoding) ⇒ 413;
* not read completely within ``server.body_timeout_seconds`` ⇒ 408 (a
  trickling or stalled upload no longer holds a connection and its memory);
* not JSON ⇒ 400; nested deeper than ``server.max_json_depth`` ⇒ 400 naming the limit.

Numbers are kept as the client wrote them (:mod:`router.core.json_body`).
"""

from __future__ import annotations

import dataclasses
import weakref
import zlib
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson
from aiohttp import web

from router.config import ServerSettings
from router.contract.timeout import within_timeout
from router.core.errors import ApiError, invalid_request
from router.core.json_body import BodyCheck, Checked, faithful_loads, json_shape
from router.core.resent_prefix import KnownBody, Resumed, ResentBodies


@dataclass(frozen=True, slots=True)
class BodyLimits:
    max_bytes: int
    max_depth: int
    timeout_seconds: float

    @classmethod
    def of(cls, server: ServerSettings) -> BodyLimits:
        return cls(server.max_body_bytes, server.max_json_depth, server.body_timeout_seconds)


async def read_json_body(request: web.Request, limits: BodyLimits) -> Any:
    """The parsed JSON body, or the ApiError that explains why there is none."""
    read = await read_checked_json_body(request, limits, None)
    return read if isinstance(read, ApiError) else read.body


async def read_checked_json_body(
    request: web.Request, limits: BodyLimits, check: BodyCheck | None, resent: ResentBodies | None = None, key: str = ""
) -> CheckedBody | ApiError:
    """:func:`read_json_body`, the body checked by ``check`` on the way (:func:`parse_checked_json_body`)."""
    if request.content_type != "application/json":
        return invalid_request(
            f"Content-Type must be application/json, not {request.content_type[:100] or 'missing'}",
            code="unsupported_media_type",
            status=415,
        )
    if request.content_length is not None and request.content_length > limits.max_bytes:
        return dataclasses.replace(_too_large(limits.max_bytes), close_connection=True)  # not read: no keep-alive
    coding = content_coding(request.headers.get("Content-Encoding", ""))
    if isinstance(coding, ApiError):
        return dataclasses.replace(coding, close_connection=True)  # not read: no keep-alive
    try:  # a body that is already in (most are) arms no timer
        raw = await within_timeout(_read_bytes(request, limits.max_bytes, coding), limits.timeout_seconds)
    except (web.HTTPRequestEntityTooLarge, TimeoutError, web.RequestPayloadError, zlib.error, BodyCutShort) as exc:
        # The rest of the body is never read, so the connection cannot carry another request.
        return dataclasses.replace(_unreadable(request, exc, limits), close_connection=True)
    return parse_checked_json_body(raw, limits.max_depth, check, resent, key)


# aiohttp's own decoding of request bodies is off (create_app's handler_args): this module decodes.
SERVER_HANDLER_ARGS = {"auto_decompress": False}
GZIP, DEFLATE = "gzip", "deflate"


class BodyCutShort(Exception):
    """A compressed body ended before its compressed stream did."""


def content_coding(header: str) -> str | None | ApiError:
    """``gzip``, ``deflate``, None (as sent), or the 415 for a coding the proxy does not decode.

    A label nobody defines is taken as no coding, as aiohttp took it: the body is then what it is."""
    label = header.strip().lower()
    if label in (GZIP, "x-gzip"):
        return GZIP
    if label == DEFLATE:
        return DEFLATE
    if label in ("br", "zstd"):
        return invalid_request("unsupported Content-Encoding: send identity, gzip or deflate", code="unsupported_content_encoding", status=415)
    return None


class _Decoder:
    """A gzip or deflate body decoded chunk by chunk, never past ``room`` bytes out.

    ``end`` raises :class:`BodyCutShort` unless the compressed stream ended (a gzip member's
    trailer read). Concatenated gzip members are one body, as gzip itself reads them; deflate
    without its zlib header is read raw, as aiohttp did (some clients send it so)."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self.inflate: Any = None

    def feed(self, data: bytes, room: int) -> bytes:
        out: list[bytes] = []
        while data:
            if self.inflate is None or (self.inflate.eof and self.coding == GZIP):
                self.inflate = zlib.decompressobj(31 if self.coding == GZIP else 15 if data[0] & 0xF == 8 else -15)
            elif self.inflate.eof:
                raise zlib.error("data after the end of the deflate stream")
            out.append(self.inflate.decompress(data, room + 1))
            room -= len(out[-1])
            if room < 0:
                break  # past the limit: the caller refuses the body
            data = self.inflate.unused_data
        return b"".join(out)

    def end(self) -> None:
        if self.inflate is None or not self.inflate.eof:
            raise BodyCutShort(f"the {self.coding} body ends before its compressed stream does (no trailer: it was cut short)")


async def _read_bytes(request: web.Request, max_bytes: int, coding: str | None = None) -> bytes:
    """The whole body, decoded from ``coding``, as one bytes object; ``HTTPRequestEntityTooLarge`` past
    ``max_bytes`` (decoded); ``zlib.error`` or :class:`BodyCutShort` for a body that is no ``coding``.

    aiohttp's ``request.read()`` grows a bytearray chunk by chunk and copies it into
    bytes at the end: three copies of the body (~0.7 M instructions on a 224 KB one).
    Here the chunks are kept and joined once, and a body that came in one piece (the
    usual case: ``readany`` hands over what has arrived at once) is not copied at all.
    """
    content = request.content
    # as request.read() does: the body is read whole anyway, so no pause between chunks
    # (older aiohttp releases have no such knob; their request.read() sets none either)
    raise_limit = getattr(content, "set_read_chunk_size", None)
    if raise_limit is not None:
        raise_limit(max_bytes)
    chunks: list[bytes] = []
    size = 0
    decoder = _Decoder(coding) if coding is not None else None
    while chunk := await content.readany():
        if decoder is not None:
            chunk = decoder.feed(chunk, max_bytes - size)
        size += len(chunk)
        if size > max_bytes:
            raise web.HTTPRequestEntityTooLarge(max_bytes, size)
        chunks.append(chunk)
    if decoder is not None:
        decoder.end()
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _unreadable(request: web.Request, exc: BaseException, limits: BodyLimits) -> ApiError:
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return _too_large(limits.max_bytes)
    if isinstance(exc, TimeoutError):
        return invalid_request(
            f"the request body did not arrive within {limits.timeout_seconds:g}s (server.body_timeout_seconds)",
            code="request_timeout",
            status=408,
        )
    encoding = request.headers.get("Content-Encoding", "")[:40]
    if isinstance(exc, BodyCutShort):
        return invalid_request(str(exc), code="invalid_content_encoding")
    return invalid_request(
        f"the request body could not be read as sent (Content-Encoding {encoding!r} that does not match the bytes, or broken framing)",
        code="invalid_content_encoding",
    )


"""A wire's validation of a parsed body made before the depth walk: ``check(body, max_depth)``.

It must never raise and must leave every error for later (the depth's comes first), and its
``walk`` must give :func:`json_shape` the body's own answer — the parts it leaves out proven to
nest within ``max_depth`` with no float in them. One that stumbles on a value nested deeper than
Python or orjson can follow is as if there were none (:func:`_checked`)."""


class CheckedBody(NamedTuple):
    body: Any
    checked: Checked | None  # None: not checked (no check, or the body was parsed again for its numbers)
    raw: bytes = b""
    resumed: Resumed | None = None  # parsed from what it adds to a body kept earlier


def keep_accepted(resent: ResentBodies, read: CheckedBody, key: str, max_depth: int) -> KnownBody | None:
    """Keep a body whose request was accepted for the next one to resume from (:mod:`router.core.resent_prefix`):
    only one checked on its way in (a body parsed again for its numbers is not)."""
    if read.checked is None:
        return None
    return resent.keep(read.raw, read.body, key, max_depth, read.checked.facts, read.resumed)


def parse_json_body(raw: bytes, max_depth: int) -> Any:
    """Parse and check a body's bytes: the value, or the ApiError (400) that says what is wrong."""
    read = parse_checked_json_body(raw, max_depth, None)
    return read if isinstance(read, ApiError) else read.body


def parse_checked_json_body(
    raw: bytes, max_depth: int, check: BodyCheck | None, resent: ResentBodies | None = None, key: str = ""
) -> CheckedBody | ApiError:
    """:func:`parse_json_body`, with the wire's ``check`` run on the parsed body before the depth walk.

    One pass over the messages then both validates them and spares the walk the usual ones;
    the answer is the same as without ``check``: too deep first, then a suspect number parsed
    again from the raw bytes (and its body left unchecked, for the wire to validate as usual).
    With ``resent`` (the edge's bodies kept, :mod:`router.core.resent_prefix`), a body that
    repeats one of them up to one of its ``key`` array's elements is parsed from the bytes it
    adds, and ``check`` is told so; the answer is the same again.
    """
    resumed = resent.resume(raw, key, max_depth) if resent is not None and check is not None else None
    if resumed is not None:
        body = resumed.body
    else:
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            if "infinity" not in str(exc):  # 1e400 is valid JSON that only a double cannot hold
                return invalid_request(f"the body is not valid JSON: {exc}", code="invalid_json")
            return _faithful_body(raw, max_depth)
    checked = None if check is None else _checked(check, body, max_depth, resumed)
    walk = body if checked is None else checked.walk
    if resumed is not None and type(walk) is dict:
        walk = _not_walked_before(walk, resumed.parent.body)
    shape = json_shape(walk, max_depth)
    if shape.too_deep:
        return _too_deep(max_depth)
    if shape.numbers_suspect:
        return _faithful_body(raw, max_depth)
    return CheckedBody(body, checked, raw, resumed)


def _checked(check: BodyCheck, body: Any, max_depth: int, resumed: Resumed | None) -> Checked | None:
    """``check``'s answer; None (the whole body walked, then validated by the wire as usual) when
    it stumbled on a value nested too deep for Python (a string made of a list ~980 levels deep
    raises RecursionError) or for orjson (which writes at most 254 levels): the check runs before
    the depth walk, so it may meet such a value where it expects a flat one, and the depth's 400
    comes first."""
    try:
        return check(body, max_depth, resumed)
    except (RecursionError, orjson.JSONEncodeError):
        return None


def _not_walked_before(walk: dict[str, Any], parent: dict[str, Any]) -> dict[str, Any]:
    """``walk`` without the values that are the very objects of the kept body resumed from (the
    settings and tools it repeated): that body's own walk, with the same limit and at the same
    level, found them within it and float-free, and no parsed object is ever changed."""
    fresh = {name: value for name, value in walk.items() if value is not parent.get(name)}
    return fresh if len(fresh) != len(walk) else walk


def _faithful_body(raw: bytes, max_depth: int) -> CheckedBody | ApiError:
    """The body parsed again keeping every number as written (:func:`faithful_loads`), and its depth checked."""
    try:
        body = faithful_loads(raw)
    except (ValueError, RecursionError) as exc:
        return invalid_request(f"the body is not valid JSON: {str(exc)[:200]}", code="invalid_json")
    if json_shape(body, max_depth).too_deep:
        return _too_deep(max_depth)
    return CheckedBody(body, None)


def _too_deep(max_depth: int) -> ApiError:
    return invalid_request(
        f"the body is nested deeper than {max_depth} levels (server.max_json_depth)", code="json_too_deep"
    )


def _too_large(max_bytes: int) -> ApiError:
    return invalid_request(
        f"the request body is larger than the {max_bytes / 1048576:g} MB limit (server.max_body_mb)",
        code="request_too_large",
        status=413,
    )


LARGE_BODY_BYTES = 4 * 1024 * 1024  # an agent's usual body is well below: 50 KB – 1 MB


class BodyBudget:
    """Bytes of request bodies held by the requests in flight, all together (``server.max_bodies_in_flight_mb``).

    A parsed body takes ~4–5× its size in memory for as long as its request
    lives, so without a bound a burst of large bodies grows the process
    without limit. A request reserves its declared ``Content-Length`` (the
    whole per-body limit when it declares none) before reading and gives it
    back when its answer is done; one that does not fit is refused with 503
    and ``Retry-After`` instead of being read.
    """

    def __init__(self, max_bytes: int, per_body_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.per_body_bytes = per_body_bytes
        self.held = 0
        # bodies of LARGE_BODY_BYTES or more given back since the start: what server.memory.MemoryReturn watches
        self.released_large = 0
        self.reserved_count = 0  # requests admitted since the start: none new and none held means idle
        # the edges' kept bodies (router.core.resent_prefix), forgotten once the process is idle
        self.kept: weakref.WeakSet[ResentBodies] = weakref.WeakSet()

    def reserve(self, request: web.Request) -> int | ApiError:
        """The bytes reserved for this request, or the 503 to answer when they do not fit."""
        wanted = min(request.content_length or self.per_body_bytes, self.per_body_bytes)
        if self.held + wanted > self.max_bytes:
            return ApiError(
                503,
                f"too many large request bodies in flight ({self.max_bytes / 1048576:g} MB together, "
                "server.max_bodies_in_flight_mb); retry shortly",
                "server_error",
                "server_busy",
            )
        self.held += wanted
        self.reserved_count += 1
        return wanted

    def release(self, reserved: int) -> None:
        self.held -= reserved
        if reserved >= LARGE_BODY_BYTES:
            self.released_large += reserved


BUSY_HEADERS = {"Retry-After": "1"}
