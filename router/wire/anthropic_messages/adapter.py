"""The Anthropic Messages wire adapter (``POST /v1/messages``): Claude Code and the ``anthropic`` SDK.

* Validation: :func:`.validation.validate_messages_body` (the minimal shape; every unknown
  field and block passes through), fused with the depth walk and the view's passes for the usual
  messages (:func:`.validation.check_messages_body`); the view: :func:`.view.messages_view` (a
  unit holds at most one ``tool_result``; reminders and the billing line are not the user's words).
* Errors: ``{"type": "error", "error": {"type", "message"}}`` with the status's
  Anthropic type (``invalid_request_error`` 400, ``authentication_error`` 401,
  ``not_found_error`` 404, ``request_too_large`` 413, ``rate_limit_error`` 429,
  ``api_error`` 5xx, ``overloaded_error`` 529).
* Upstream body (an ``api: anthropic`` provider): the client's body with ``model``,
  the rewritten ``tool_result`` contents and a clamped ``max_tokens`` replaced;
  everything else — thinking blocks and their signatures, ``cache_control``,
  ``context_management``, ``safeguards``, ``metadata`` — goes out as sent, except
  the thinking blocks the proxy itself made from a chat model's reasoning
  (:func:`~router.wire.anthropic_messages.validation.without_proxy_thinking`), and thinking
  itself when the tool loop in progress has none Anthropic signed (the session
  moved to Anthropic mid loop: :func:`~router.wire.anthropic_messages.validation.with_thinking_off`,
  named in ``x-router-dropped``), and, for a model that checks thinking's prefix, the
  signed thinking blocks whose prefix pinch changed
  (:func:`~router.wire.anthropic_messages.thinking.unbind`; thinking off too when that leaves the
  tool loop without it); a clamped ``max_tokens`` takes a thinking
  budget that would reach it down with it.
* Answers: Anthropic SSE (``event:`` + ``data:`` pairs ending in ``message_stop``),
  relayed event by event; usage from ``message_start`` and ``message_delta``.
* Streaming is decided by the body's ``stream``, never by ``Accept`` (Claude Code
  sends ``Accept: application/json`` with ``stream: true``).
* Its API (:data:`API`): a ``/messages`` path at any depth is its (an ``ANTHROPIC_BASE_URL`` with one
  ``/v1`` too many or too few), and so is a request carrying ``anthropic-version`` (every Anthropic
  client sends one) on a path that names no API; ``POST /v1/messages/count_tokens`` is answered
  outside the chain (:func:`count_tokens`).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from router.core.errors import ApiError, ErrorAnswer, InvalidRequest, invalid_request
from router.core.request_view import NO_TARGET, BodyChanges, RequestTarget, RequestView, rewritten_array, written_body
from router.core.results import Usage
from router.core.tokens import TokenEstimator
from router.wire.api_keys import KeySource
from router.wire.anthropic_messages.blocks import THINKING_OFF_MID_TOOL_LOOP, is_message_stop
from router.wire.anthropic_messages.body import thinking_within_output_limit, with_thinking_off, without_blocks, without_proxy_thinking
from router.wire.anthropic_messages.errors import PING_EVENT, render_error, stream_error
from router.wire.anthropic_messages.retrieve import with_tool
from router.wire.anthropic_messages.thinking import dropped, leaves_thinking_off
from router.wire.anthropic_messages.validation import AnthropicInvalid, CheckedMessages, answer_problem, check_messages_body, validate_messages_body
from router.wire.anthropic_messages.view import ANTHROPIC_MESSAGES, MessagesConversation, count_input_tokens, messages_view
from router.wire.routes import ClientApi, CountTokens
from router.wire.usage import read_usage, usage_of

PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
VERSION_HEADER = "anthropic-version"  # every Anthropic client sends it
ANTHROPIC_ONLY_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})


def is_messages_request(body: Any, headers: Any = None) -> bool:
    """Whether a body read from a file (``pinch-router explain``) is an Anthropic Messages request:
    an ``anthropic-version`` header, a top-level ``system``, or blocks only Anthropic has."""
    if headers is not None and VERSION_HEADER in headers:
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


def count_tokens(body: dict[str, Any], estimator: TokenEstimator) -> tuple[int, dict[str, Any]]:
    """``count_tokens``: the prompt's input tokens by the proxy's one estimator (Claude Code's
    ``/context`` builds its table from 26 of these), ``{"input_tokens": N}``."""
    try:
        validate_messages_body(body, count_tokens=True)
    except AnthropicInvalid as exc:
        raise InvalidRequest(exc.message) from None
    counted = count_input_tokens(body, estimator)
    return counted, {"input_tokens": counted}


API = ClientApi(
    label="anthropic_messages",
    title="Anthropic Messages API",
    names=re.compile("/messages"),
    base_url="http://<host>:<port> (no /v1)",
    listed=(f"POST {PATH}", f"POST {COUNT_TOKENS_PATH}"),
    saved_path=PATH,
    client_header=VERSION_HEADER,
    saved_body=is_messages_request,
    any_depth=True,
    # Claude Code shows any 404 as "There's an issue with the selected model" and never its message; a
    # 400's it prints, so a client told its base URL is off by a /v1 sees the fix
    misdirected_status=400,
)


class AnthropicMessages:
    name = ANTHROPIC_MESSAGES
    paths = (PATH,)
    api = API
    # answered by the proxy, never forwarded; counted and logged, but no decision row (26 per /context would bury them)
    endpoints = (CountTokens(COUNT_TOKENS_PATH, "count_tokens", count_tokens),)
    api_key = KeySource(header="x-api-key")  # Claude Code and Anthropic's SDKs
    conversation_key = "messages"  # the array a resent body repeats (router.core.resent_prefix)
    keep_alive = PING_EVENT  # Anthropic's own keep-alive: its SDKs and Claude Code skip it
    # the validation made on the way to the depth walk, with the view's facts, sparing the walk the usual messages
    check_body = staticmethod(check_messages_body)

    def parse(self, body: Any, turn_chars: int, target: RequestTarget = NO_TARGET) -> RequestView | ApiError:
        try:
            parsed = validate_messages_body(body)
        except AnthropicInvalid as exc:
            return invalid_request(exc.message)
        return messages_view(body, parsed, turn_chars)

    def parse_checked(self, body: Any, checked: CheckedMessages, turn_chars: int, target: RequestTarget = NO_TARGET) -> RequestView | ApiError:
        if checked.request is None:  # invalid: parse says why
            return self.parse(body, turn_chars)
        return messages_view(body, checked.request, turn_chars, checked)

    def render_error(self, error: ApiError, request_id: str | None = None) -> ErrorAnswer:
        return render_error(error, request_id)

    def upstream_body(self, body: dict[str, Any], view: RequestView, changes: BodyChanges) -> bytes:
        """To an Anthropic-format provider without the thinking the proxy made (it is unsigned
        there), and with thinking off mid a tool loop that has none Anthropic signed (it would
        refuse thinking on there); a translation's source keeps both, for a chat model that needs
        its reasoning back."""
        payload = self.upstream_dict(body, view, changes)
        conversation = view.conversation
        assert isinstance(conversation, MessagesConversation)
        if not changes.translated:
            if changes.stale is not None:  # by position in the client's messages: before anything moves them
                payload = {**payload, "messages": without_blocks(payload["messages"], frozenset(changes.stale.positions))}
            if conversation.proxy_thinking:
                payload = without_proxy_thinking(payload) or payload
            if conversation.needs_thinking_off or leaves_thinking_off(view.thinking, changes.stale):
                payload = with_thinking_off(payload, changes.thinking_off)
        return written_body(payload, "messages", changes)

    def translation_source(self, body: dict[str, Any], view: RequestView, changes: BodyChanges) -> dict[str, Any]:
        return self.upstream_dict(body, view, changes)  # a translation's source keeps the proxy's thinking

    def upstream_dict(self, body: dict[str, Any], view: RequestView, changes: BodyChanges) -> dict[str, Any]:
        """The body to send, before serialisation (the translation to another format starts from it)."""
        payload = dict(body)
        payload["model"] = changes.upstream_model
        conversation = view.conversation
        assert isinstance(conversation, MessagesConversation)
        payload["messages"] = rewritten_array(changes, conversation.messages, conversation.message_of, conversation.messages_with)
        limit = body.get("max_tokens")
        if changes.output_tokens is not None and isinstance(limit, int) and limit > changes.output_tokens:
            payload["max_tokens"] = changes.output_tokens
            payload = thinking_within_output_limit(payload, limit, changes.thinking_off) or payload  # the budget must stay below it
        return payload if changes.tool is None else with_tool(payload, changes.tool)

    def passthrough_dropped(self, view: RequestView, changes: BodyChanges) -> tuple[str, ...]:
        """What :meth:`upstream_body` leaves out of what the client asked (``x-router-dropped``):
        thinking switched off mid a tool loop without Anthropic's thinking, the signed thinking whose
        prefix pinch changed, and thinking itself when leaving that out leaves the loop without it."""
        conversation = view.conversation
        names: tuple[str, ...] = (THINKING_OFF_MID_TOOL_LOOP,) if isinstance(conversation, MessagesConversation) and conversation.needs_thinking_off else ()
        if changes.stale is None:
            return names
        names += (dropped(changes.stale),)
        if leaves_thinking_off(view.thinking, changes.stale) and THINKING_OFF_MID_TOOL_LOOP not in names:
            names += (THINKING_OFF_MID_TOOL_LOOP,)
        return names

    read_usage = staticmethod(read_usage)
    usage_of = staticmethod(usage_of)
    answer_problem = staticmethod(answer_problem)

    def stream_error(self, message: str, code: str, sent: int = 0) -> bytes:
        return stream_error(message, code)

    def is_usage_only_event(self, event: bytes) -> bool:
        return False  # an Anthropic stream reports usage in message_start and message_delta, always

    def is_stream_end(self, data: bytes) -> bool:
        return is_message_stop(data)

    def stream_framing(self, view: RequestView) -> None:
        return None  # server-sent events, as relayed


ANTHROPIC_MESSAGES_ADAPTER = AnthropicMessages()
