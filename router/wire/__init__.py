"""Wire adapters: one module per client API, the only code that knows a request's wire format.

The contract (:class:`WireAdapter`) — what a new format's module provides and
what the rest of the proxy relies on:

* ``keep_alive``: the bytes a stream is sent while the client has had nothing for
  ``upstream.stream_keepalive_seconds`` (Anthropic's ``ping`` event, an SSE comment
  for the OpenAI formats): one whole event, written between the relayed ones.
* ``name`` (``openai-chat``, ``anthropic-messages``, ``openai-responses``) and
  ``paths``, the POST routes it serves. Register it in :func:`adapters`:
  :func:`router.server.app.create_app` mounts each path on its own sub-application
  with its edge, ``live.middleware(partial(chat_edge, wire=ADAPTER, budget=budget))``
  (every edge shares the one chain and swaps with it on reload).
* ``parse(body, turn_chars)``: validate the parsed JSON body and build the
  protocol-neutral :class:`~router.core.request_view.RequestView` (its module
  doc says what a unit, a tool result and a rewrite are), or return the
  :class:`~router.http.errors.ApiError` to answer with.
* ``check_body`` (None, or ``check(body, max_depth)``) and ``parse_checked(body, checked,
  turn_chars)``: a wire may validate the parsed body before the depth walk, in the same pass
  that proves parts of it shallow (:data:`router.http.request_body.BodyCheck`), and build its view
  from that; the answer must be ``parse``'s for every body (the chat wire does, for the usual
  messages of a long transcript).
* ``error_response(error, headers)``: any error the proxy answers this client
  with, in the format's own shape and with the error's status (OpenAI
  ``{"error": {...}}``; Anthropic ``{"type": "error", "error": {...}}``).
  Stages refuse through :meth:`router.contract.context.RequestContext.error_response`,
  which asks the request's adapter, so no stage knows the shape.
* ``upstream_body(body, view, changes)``: the bytes to send a provider that
  speaks this same format: the client's body with only the chain's changes
  (:class:`~router.core.request_view.BodyChanges`: pinch's rewrites, the
  chosen model, the output limit clamp, the usage request, prompt_cache_key)
  written in; every other field goes out as the client sent it — except what
  the proxy itself made earlier and only a provider of another format can take
  (the Anthropic thinking and the Responses reasoning items made from a chat
  model's reasoning), left out unless ``changes.translated`` says the body is the
  source of a translation instead.
* the answer: ``read_usage(body)`` for a whole answer (``usage_of(answer)`` for one
  already parsed), ``stream_error(message,
  code)`` for the event that ends a broken stream, ``is_usage_only_event`` (the
  usage report the proxy asked for on the client's behalf, dropped) and
  ``is_stream_end`` (chat's ``[DONE]``, Anthropic's ``message_stop``, the
  Responses API's ``response.completed``…) for the
  relay, which forwards a stream in this format event by event.
  Answers from a provider speaking another format are translated by the
  translation registry (:mod:`router.providers`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from aiohttp import web

    from router.contract.context import Usage
    from router.core.request_view import BodyChanges, RequestView
    from router.http.errors import ApiError
    from router.http.request_body import BodyCheck


class WireAdapter(Protocol):
    name: str
    paths: tuple[str, ...]
    keep_alive: bytes

    check_body: BodyCheck | None

    def parse(self, body: Any, turn_chars: int) -> RequestView | ApiError: ...

    def parse_checked(self, body: Any, checked: Any, turn_chars: int) -> RequestView | ApiError:
        """``parse`` of a body ``check_body`` has already checked (only asked of a wire that has one)."""
        ...

    def error_response(self, error: ApiError, headers: dict[str, str] | None = None) -> web.Response: ...

    def upstream_body(self, body: dict[str, Any], view: RequestView, changes: BodyChanges) -> bytes: ...

    def read_usage(self, body: bytes) -> Usage | None: ...

    def usage_of(self, answer: Any) -> Usage | None: ...

    def stream_error(self, message: str, code: str) -> bytes: ...

    def is_usage_only_event(self, event: bytes) -> bool: ...

    def is_stream_end(self, data: bytes) -> bool:
        """Whether one SSE data line's payload (after ``data:``, stripped) is the stream's last event."""
        ...


def adapters() -> dict[str, WireAdapter]:
    """Every wire adapter by name (the registry; add a new format's adapter here)."""
    from router.wire.anthropic_messages.adapter import ANTHROPIC_MESSAGES_ADAPTER
    from router.wire.openai_chat.adapter import OPENAI_CHAT_ADAPTER
    from router.wire.openai_responses.adapter import OPENAI_RESPONSES_ADAPTER

    return {adapter.name: adapter for adapter in (OPENAI_CHAT_ADAPTER, ANTHROPIC_MESSAGES_ADAPTER, OPENAI_RESPONSES_ADAPTER)}
