"""Wire formats: one package per client API, the only code that knows a request's format. Pure (sans-io).

A format's package (``openai_chat/``, ``anthropic_messages/``, ``openai_responses/``, ``gemini/``) holds its
validation, its neutral view (:class:`~router.core.request_view.RequestView`), its upstream body,
its errors and stream events, and its adapter, which is what the rest of the proxy knows of it
(:class:`WireAdapter`). No package imports the framework: an error is an
:class:`~router.core.errors.ErrorAnswer` (status, headers, bytes) and the HTTP edge makes the
response; a format's answers are bytes in, bytes out. Register a new format's adapter in
:func:`adapters`; :func:`router.server.app.create_app` mounts each of its paths with its edge,
through the one chain, and each of its ``endpoints`` outside it. Nothing outside ``router/wire/``
(and the translations) names a format: the HTTP edge, the app, ``explain`` and the tests ask the
registry (:func:`adapters`, :func:`request_format`, :func:`body_format`, :func:`chain_target`).

The adapter:

* ``name`` (``openai-chat``, ``anthropic-messages``, ``openai-responses``, ``gemini``, ``ollama``), ``paths``
  (the POST routes it serves, aiohttp patterns: a part in braces is the path's, e.g. Gemini's
  ``{model}``) and ``keep_alive`` (the bytes a silent stream is sent: Anthropic's ``ping``, an SSE
  comment for the OpenAI formats, whitespace for Gemini's and Ollama's).
* ``api`` (:class:`~router.wire.routes.ClientApi`): how the proxy names its API and knows a request for
  it before reading the body — the paths that name it, a header its clients send, how they ask for the
  model list, a saved body of it — which the edge's own answers (auth, framing errors, unknown paths)
  and ``explain`` go by, and what a client at the wrong path is told. ``endpoints``: what it serves
  outside the chain (:mod:`router.wire.routes`: a token count, its model list and one model, a fixed
  answer, an operation refused), each a kind the HTTP edge serves with the format's pure functions.
* ``api_key``: where its clients send their key besides ``Authorization: Bearer``
  (:class:`~router.wire.api_keys.KeySource`: Anthropic's ``x-api-key``; Gemini's ``x-goog-api-key``
  or ``?key=``, the query taken on the Gemini API's paths only), read by the client-key check.
* ``parse(body, turn_chars, target)``: validate the parsed JSON body and build its view, or return the
  :class:`~router.core.errors.ApiError` to answer with; ``target`` is what the URL says beside the
  body (:class:`~router.core.request_view.RequestTarget`: the model and stream a Gemini path names,
  the query), which the other formats ignore. ``check_body`` (None, or
  ``check(body, max_depth, resumed)``) and ``parse_checked``: a format may validate the body in the pass
  that proves parts of it shallow (:data:`router.core.json_body.BodyCheck`) and build its view
  from that; the answer must be ``parse``'s for every body. ``conversation_key``: the body's
  array of messages (items, contents) that an agent resends turn after turn; a body that repeats
  an earlier one's is parsed from what it adds (:mod:`router.core.resent_prefix`), and ``resumed``
  says so to the check (which may then check only the elements added).
* ``render_error(error, request_id)``: any error the proxy answers this client with, in the format's
  shape; ``request_id`` (the proxy's id of the request, None when it has none) goes where the
  format's own errors carry theirs (Anthropic's: ``request_id`` in the body, a ``request-id`` header).
* ``upstream_body(body, view, changes)``: the bytes to send a provider of this same format: the
  client's body with only the chain's changes (:class:`~router.core.request_view.BodyChanges`)
  written in; every other field as the client sent it, except what the proxy itself made and only
  a provider of another format can take (left out unless ``changes.translated`` says the body is
  a translation's source). ``translation_source(body, view, changes)``: that body, not yet
  serialised, for a translation (``changes.translated``) to read as it is — it is never written
  and read back (numbers stay as the client wrote them: an ``orjson.Fragment`` is one still).
  ``passthrough_dropped(view, changes)``: what of the client's request
  that body leaves out, named for ``x-router-dropped``.
* the answer: ``answer_problem(answer)``, what makes a provider's whole answer none of the
  format's (a completion without choices: the attempt fails instead of relaying it), and
  ``read_usage(body)`` for a whole answer (``usage_of`` for one already parsed),
  ``stream_error(message, code, sent)`` for the event that ends a broken stream after ``sent`` events
  (the Responses API numbers its events: that one is number ``sent``), ``is_usage_only_event``
  (the usage report the proxy asked for on the client's behalf, dropped) and ``is_stream_end``;
  ``stream_framing(view)``: None for a client that takes the stream as server-sent events, else how
  it takes it (:class:`~router.core.sse.StreamFraming`: Gemini's JSON array without ``?alt=sse``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from router.core.errors import ApiError, ErrorAnswer
    from router.core.json_body import BodyCheck
    from router.core.request_view import BodyChanges, RequestTarget, RequestView
    from router.core.results import Usage
    from router.core.sse import StreamFraming
    from router.wire.api_keys import KeySource
    from router.wire.routes import ClientApi, Endpoint


class WireAdapter(Protocol):
    name: str
    paths: tuple[str, ...]
    keep_alive: bytes
    conversation_key: str
    check_body: BodyCheck | None
    api_key: KeySource
    api: ClientApi
    endpoints: tuple[Endpoint, ...]

    def parse(self, body: Any, turn_chars: int, target: RequestTarget = ...) -> RequestView | ApiError: ...

    def parse_checked(self, body: Any, checked: Any, turn_chars: int, target: RequestTarget = ...) -> RequestView | ApiError:
        """``parse`` of a body ``check_body`` has already checked."""
        ...

    def render_error(self, error: ApiError, request_id: str | None = None) -> ErrorAnswer: ...

    def upstream_body(self, body: dict[str, Any], view: RequestView, changes: BodyChanges) -> bytes: ...

    def translation_source(self, body: dict[str, Any], view: RequestView, changes: BodyChanges) -> dict[str, Any]:
        """``upstream_body``'s body for a translation (``changes.translated``), not serialised; the
        translation reads it and must not change it (the next candidate starts from it again)."""
        ...

    def passthrough_dropped(self, view: RequestView, changes: BodyChanges) -> tuple[str, ...]: ...

    def read_usage(self, body: bytes) -> Usage | None: ...

    def usage_of(self, answer: Any) -> Usage | None: ...

    def answer_problem(self, answer: Any) -> str | None:
        """What makes a provider's whole answer (its parsed JSON) none of this format's, or None."""
        ...

    def stream_error(self, message: str, code: str, sent: int = 0) -> bytes: ...

    def is_usage_only_event(self, event: bytes) -> bool: ...

    def is_stream_end(self, data: bytes) -> bool:
        """Whether one SSE data line's payload (after ``data:``, stripped) is the stream's last event."""
        ...

    def stream_framing(self, view: RequestView) -> StreamFraming | None: ...


@cache
def adapters() -> dict[str, WireAdapter]:
    """Every wire adapter by name (the registry; add a new format's adapter here). Not to be changed."""
    from router.wire.anthropic_messages.adapter import ANTHROPIC_MESSAGES_ADAPTER
    from router.wire.gemini.adapter import GEMINI_ADAPTER
    from router.wire.ollama.adapter import OLLAMA_ADAPTER
    from router.wire.openai_chat.adapter import OPENAI_CHAT_ADAPTER
    from router.wire.openai_responses.adapter import OPENAI_RESPONSES_ADAPTER

    return {adapter.name: adapter for adapter in (OPENAI_CHAT_ADAPTER, ANTHROPIC_MESSAGES_ADAPTER, OPENAI_RESPONSES_ADAPTER, GEMINI_ADAPTER, OLLAMA_ADAPTER)}


def own_format() -> WireAdapter:
    """The format of the proxy's own endpoints (``/v1/outcome``, ``/v1/decisions``, ``/v1/models``) and of
    a request nothing marks as another format's: OpenAI's (chat completions)."""
    from router.wire.openai_chat.adapter import OPENAI_CHAT_ADAPTER

    return OPENAI_CHAT_ADAPTER


def path_format(path: str) -> WireAdapter | None:
    """The format whose API ``path`` names (``ClientApi.names``; of several, the one named leftmost), or None."""
    named = [(found.start(), adapter) for adapter in adapters().values() if (found := adapter.api.names.search(path)) is not None]
    return min(named, key=lambda start_adapter: start_adapter[0])[1] if named else None


def request_format(path: str, headers: Mapping[str, str]) -> WireAdapter:
    """The format of everything the edge answers a request itself: the one its path names, whatever
    its headers; on a path that names none, the one whose clients' header it carries; else the
    proxy's own."""
    named = path_format(path)
    if named is not None:
        return named
    marked = (a for a in adapters().values() if a.api.client_header is not None and a.api.client_header in headers)
    return next(marked, own_format())


def body_format(body: Any, headers: Mapping[str, str]) -> WireAdapter:
    """The format of a body read from a file (``explain``): the first that claims it
    (``ClientApi.saved_body``), else the proxy's own."""
    return next((a for a in adapters().values() if a.api.saved_body(body, headers)), own_format())


def chain_target(path: str) -> tuple[WireAdapter, dict[str, str]] | None:
    """The format whose chain endpoint ``path`` (no query) is, with the path's named parts; None for a
    path none serves through the chain."""
    from router.wire.routes import match_route

    for adapter in adapters().values():
        for pattern in adapter.paths:
            parts = match_route(pattern, path)
            if parts is not None:
                return adapter, parts
    return None
