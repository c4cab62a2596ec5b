"""The OpenAI chat-completions wire adapter (``POST /v1/chat/completions``): the example to follow.

* Validation: :func:`router.wire.openai_chat.validation.validate_chat_body` (the minimal
  shape; unknown fields pass through); the view:
  :func:`router.wire.openai_chat.view.chat_view` (a unit is a message, a tool result a
  ``tool`` message).
* Errors: ``{"error": {"message", "type", "code", "param"}}`` (:class:`router.http.errors.ApiError`).
* Upstream body: the client's body with ``model`` and the rewritten tool
  messages replaced and :func:`router.wire.openai_chat.body.upstream_body`'s
  three fields (output limit clamp, usage request, prompt_cache_key); nothing
  else changes.
* Answers: chat SSE (``data: {...}`` chunks ending in ``data: [DONE]``),
  relayed event by event; usage from the final chunk or the whole body.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from router.contract.context import Usage
from router.wire.openai_chat.validation import CheckedChat, InvalidRequest, check_chat_body, validate_chat_body
from router.wire.openai_chat.view import OPENAI_CHAT, ChatConversation, chat_view, messages_with
from router.core.request_view import BodyChanges, RequestView
from router.core.sse import KEEP_ALIVE_COMMENT, error_event, read_usage, usage_of
from router.wire.openai_chat.body import is_usage_only_event, upstream_body
from router.http.errors import ApiError, invalid_request


class OpenAIChat:
    name = OPENAI_CHAT
    paths = ("/v1/chat/completions",)
    keep_alive = KEEP_ALIVE_COMMENT

    def parse(self, body: Any, turn_chars: int) -> RequestView | ApiError:
        try:
            parsed = validate_chat_body(body)
        except InvalidRequest as exc:
            return invalid_request(exc.message, param=exc.param)
        return chat_view(body, parsed, turn_chars)

    # the validation made on the way to the depth walk, which it spares the usual messages
    check_body = staticmethod(check_chat_body)

    def parse_checked(self, body: Any, checked: CheckedChat, turn_chars: int) -> RequestView | ApiError:
        if checked.request is None:  # invalid: parse says why
            return self.parse(body, turn_chars)
        return chat_view(body, checked.request, turn_chars)

    def error_response(self, error: ApiError, headers: dict[str, str] | None = None) -> web.Response:
        return error.response(headers)

    def upstream_body(self, body: dict[str, Any], view: RequestView, changes: BodyChanges) -> bytes:
        payload = dict(
            upstream_body(body, changes.output_tokens, changes.request_usage, changes.prompt_cache_key)
        )
        payload["model"] = changes.upstream_model
        conversation = view.conversation
        assert isinstance(conversation, ChatConversation)
        payload["messages"] = messages_with(conversation.messages, conversation.result_units(), changes.rewrites)
        return orjson.dumps(payload)

    def read_usage(self, body: bytes) -> Usage | None:
        return read_usage(body)

    def usage_of(self, answer: Any) -> Usage | None:
        return usage_of(answer)

    def stream_error(self, message: str, code: str) -> bytes:
        return error_event(message, code)

    def is_usage_only_event(self, event: bytes) -> bool:
        return is_usage_only_event(event)

    def is_stream_end(self, data: bytes) -> bool:
        return data == b"[DONE]"


OPENAI_CHAT_ADAPTER = OpenAIChat()
