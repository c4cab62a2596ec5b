"""The Anthropic Messages wire adapter (``POST /v1/messages``): Claude Code and the ``anthropic`` SDK.

* Validation: :func:`router.wire.anthropic_messages.request.validate_messages_body` (the
  minimal shape; every unknown field and block passes through); the view:
  :func:`router.wire.anthropic_messages.view.messages_view` (a unit holds at most one
  ``tool_result``; reminders and the billing line are not the user's words).
* Errors: ``{"type": "error", "error": {"type", "message"}}`` with the status's
  Anthropic type (``invalid_request_error`` 400, ``authentication_error`` 401,
  ``not_found_error`` 404, ``request_too_large`` 413, ``rate_limit_error`` 429,
  ``api_error`` 5xx, ``overloaded_error`` 529).
* Upstream body (an ``api: anthropic`` provider): the client's body with ``model``,
  the rewritten ``tool_result`` contents and a clamped ``max_tokens`` replaced;
  everything else — thinking blocks and their signatures, ``cache_control``,
  ``context_management``, ``safeguards``, ``metadata`` — goes out as sent, except
  the thinking blocks the proxy itself made from a chat model's reasoning
  (:func:`~router.wire.anthropic_messages.request.without_proxy_thinking`), and thinking
  itself when the tool loop in progress has none Anthropic signed (the session
  moved to Anthropic mid loop: :func:`~router.wire.anthropic_messages.request.with_thinking_off`,
  named in ``x-router-dropped``), and, for a model that checks thinking's prefix, the
  signed thinking blocks whose prefix pinch changed
  (:func:`~router.wire.anthropic_messages.thinking.unbind`; thinking off too when that leaves the
  tool loop without it); a clamped ``max_tokens`` takes a thinking
  budget that would reach it down with it.
* Answers: Anthropic SSE (``event:`` + ``data:`` pairs ending in ``message_stop``),
  relayed event by event; usage from ``message_start`` and ``message_delta``.
* Streaming is decided by the body's ``stream``, never by ``Accept`` (Claude Code
  sends ``Accept: application/json`` with ``stream: true``).
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from router.contract.context import Usage
from router.translate.messages_chat import PING_EVENT, anthropic_error_event
from router.wire.anthropic_messages.request import (
    AnthropicInvalid,
    error_payload,
    is_message_stop,
    thinking_within_output_limit,
    validate_messages_body,
    with_thinking_off,
    without_blocks,
    without_proxy_thinking,
)
from router.wire.anthropic_messages.view import ANTHROPIC_MESSAGES, MessagesConversation, messages_view
from router.core.request_view import BodyChanges, RequestView
from router.wire.anthropic_messages.thinking import leaves_thinking_off
from router.core.sse import read_usage, usage_of
from router.http.errors import ERROR_CODE_KEY, JSON, ApiError, invalid_request

class AnthropicMessages:
    name = ANTHROPIC_MESSAGES
    paths = ("/v1/messages",)
    keep_alive = PING_EVENT  # Anthropic's own keep-alive: its SDKs and Claude Code skip it
    check_body = None  # validated after the depth walk, by parse

    def parse(self, body: Any, turn_chars: int) -> RequestView | ApiError:
        try:
            parsed = validate_messages_body(body)
        except AnthropicInvalid as exc:
            return invalid_request(exc.message)
        return messages_view(body, parsed, turn_chars)

    def error_response(self, error: ApiError, headers: dict[str, str] | None = None) -> web.Response:
        return anthropic_error_response(error, headers)

    def upstream_body(self, body: dict[str, Any], view: RequestView, changes: BodyChanges) -> bytes:
        """To an Anthropic-format provider without the thinking the proxy made (it is unsigned
        there), and with thinking off mid a tool loop that has none Anthropic signed (it would
        refuse thinking on there); a translation's source keeps both, for a chat model that needs
        its reasoning back."""
        payload = self.upstream_dict(body, view, changes)
        conversation = view.conversation
        assert isinstance(conversation, MessagesConversation)
        if not changes.translated:
            if changes.unbound is not None:  # by position in the client's messages: before anything moves them
                payload = {**payload, "messages": without_blocks(payload["messages"], frozenset(changes.unbound.positions))}
            if conversation.proxy_thinking:
                payload = without_proxy_thinking(payload) or payload
            if conversation.needs_thinking_off or leaves_thinking_off(view.thinking, changes.unbound):
                payload = with_thinking_off(payload, changes.thinking_off)
        return orjson.dumps(payload)

    def upstream_dict(self, body: dict[str, Any], view: RequestView, changes: BodyChanges) -> dict[str, Any]:
        """The body to send, before serialisation (the translation to another format starts from it)."""
        payload = dict(body)
        payload["model"] = changes.upstream_model
        conversation = view.conversation
        assert isinstance(conversation, MessagesConversation)
        payload["messages"] = conversation.messages_with(changes.rewrites)
        limit = body.get("max_tokens")
        if changes.output_tokens is not None and isinstance(limit, int) and limit > changes.output_tokens:
            payload["max_tokens"] = changes.output_tokens
            payload = thinking_within_output_limit(payload, limit, changes.thinking_off) or payload  # the budget must stay below it
        return payload

    def read_usage(self, body: bytes) -> Usage | None:
        return read_usage(body)

    def usage_of(self, answer: Any) -> Usage | None:
        return usage_of(answer)

    def stream_error(self, message: str, code: str) -> bytes:
        return anthropic_error_event(message, "overloaded_error" if code == "server_shutting_down" else "api_error")

    def is_usage_only_event(self, event: bytes) -> bool:
        return False  # an Anthropic stream reports usage in message_start and message_delta, always

    def is_stream_end(self, data: bytes) -> bool:
        return is_message_stop(data)


def anthropic_error_response(error: ApiError, headers: dict[str, str] | None = None) -> web.Response:
    """Any error of the proxy's, in Anthropic's shape with the status's type; the code kept for the log."""
    payload = error_payload(error.status, error.message)
    response = web.Response(status=error.status, body=orjson.dumps(payload), content_type=JSON, headers=headers)
    response[ERROR_CODE_KEY] = error.code
    if error.close_connection:
        response.force_close()
    return response




ANTHROPIC_MESSAGES_ADAPTER = AnthropicMessages()


ANTHROPIC_ONLY_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})


def is_messages_request(body: Any, headers: Any = None) -> bool:
    """Whether a body read from a file (``pinch-router explain``) is an Anthropic Messages request:
    an ``anthropic-version`` header, a top-level ``system``, or blocks only Anthropic has."""
    if headers is not None and "anthropic-version" in headers:
        return True
    if not isinstance(body, dict):
        return False
    if "system" in body:
        return True
    messages = body.get("messages")
    return isinstance(messages, list) and any(
        isinstance(b, dict) and b.get("type") in ANTHROPIC_ONLY_BLOCKS
        for m in messages
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        for b in m["content"]
    )
