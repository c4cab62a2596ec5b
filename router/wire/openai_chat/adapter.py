"""The OpenAI chat-completions wire adapter (``POST /v1/chat/completions``): the example to follow.

* Validation: :func:`.validation.validate_chat_body` (the minimal shape; unknown fields pass
  through), fused with the depth walk for the usual messages (:func:`.validation.check_chat_body`);
  the view: :func:`.view.chat_view` (a unit is a message, a tool result a ``tool`` message).
* Errors: ``{"error": {"message", "type", "code", "param"}}`` (:mod:`.errors`), also the proxy's own
  endpoints' and those of a request nothing marks as another format's (:func:`router.wire.own_format`);
  the paths of OpenAI's other APIs (legacy completions, embeddings) are chat's too (:data:`API`).
* Upstream body: the client's body with ``model`` and the rewritten tool messages replaced and
  :func:`.body.upstream_body`'s three fields (output limit clamp, usage request,
  prompt_cache_key); nothing else changes.
* Answers: chat SSE (``data: {...}`` chunks ending in ``data: [DONE]``), relayed event by
  event; usage from the final chunk or the whole body (:mod:`router.wire.usage`).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from router.core.errors import ApiError, ErrorAnswer, invalid_request
from router.core.request_view import NO_TARGET, BodyChanges, RequestTarget, RequestView, rewritten_array, written_body
from router.core.results import Usage
from router.core.sse import KEEP_ALIVE_COMMENT
from router.wire.api_keys import BEARER_ONLY
from router.wire.openai_chat.body import upstream_body
from router.wire.openai_chat.errors import render_error
from router.wire.openai_chat.retrieve import with_tool
from router.wire.openai_chat.stream import error_event, is_usage_only_event
from router.wire.openai_chat.validation import CheckedChat, answer_problem, check_chat_body, validate_chat_body
from router.core.errors import InvalidRequest
from router.wire.openai_chat.view import OPENAI_CHAT, ChatConversation, chat_view, messages_with
from router.wire.routes import ClientApi
from router.wire.usage import read_usage, usage_of

PATH = "/v1/chat/completions"
API = ClientApi(
    label="openai_chat",
    title="OpenAI chat completions API",
    # OpenAI's APIs' paths, at any depth, served or not: their errors are OpenAI's whatever the headers
    names=re.compile(r"/(?:chat/completions|completions|embeddings)(?:/|$)"),
    base_url="http://<host>:<port>/v1",
    listed=(f"POST {PATH}",),
    saved_path=PATH,
    not_served=(
        ("/v1/completions", "openai_completions", "legacy OpenAI completions API"),
        ("/v1/embeddings", "openai_embeddings", "OpenAI embeddings API"),
    ),
)


class OpenAIChat:
    name = OPENAI_CHAT
    paths = (PATH,)
    api = API
    endpoints = ()  # the proxy's own GET /v1/models is chat's list
    api_key = BEARER_ONLY
    conversation_key = "messages"  # the array a resent body repeats (router.core.resent_prefix)
    keep_alive = KEEP_ALIVE_COMMENT

    def parse(self, body: Any, turn_chars: int, target: RequestTarget = NO_TARGET) -> RequestView | ApiError:
        try:
            parsed = validate_chat_body(body)
        except InvalidRequest as exc:
            return invalid_request(exc.message, param=exc.param)
        return chat_view(body, parsed, turn_chars)

    # the validation made on the way to the depth walk, which it spares the usual messages
    check_body = staticmethod(check_chat_body)

    def parse_checked(self, body: Any, checked: CheckedChat, turn_chars: int, target: RequestTarget = NO_TARGET) -> RequestView | ApiError:
        if checked.request is None:  # invalid: parse says why
            return self.parse(body, turn_chars)
        return chat_view(body, checked.request, turn_chars, checked.reused, checked.facts)

    def render_error(self, error: ApiError, request_id: str | None = None) -> ErrorAnswer:
        return render_error(error, request_id)

    def upstream_body(self, body: dict[str, Any], view: RequestView, changes: BodyChanges) -> bytes:
        return written_body(self.translation_source(body, view, changes), "messages", changes)

    def translation_source(self, body: dict[str, Any], view: RequestView, changes: BodyChanges) -> dict[str, Any]:
        payload = dict(upstream_body(body, changes.output_tokens, changes.request_usage, changes.prompt_cache_key))
        payload["model"] = changes.upstream_model
        conversation = view.conversation
        assert isinstance(conversation, ChatConversation)
        messages, result_units = conversation.messages, conversation.result_units()
        payload["messages"] = rewritten_array(changes, messages, result_units.__getitem__, lambda rewrites: messages_with(messages, result_units, rewrites))
        return payload if changes.tool is None else with_tool(payload, changes.tool)

    def passthrough_dropped(self, view: RequestView, changes: BodyChanges) -> tuple[str, ...]:
        return ()  # a chat body goes out with everything the client sent

    read_usage = staticmethod(read_usage)
    usage_of = staticmethod(usage_of)
    answer_problem = staticmethod(answer_problem)

    def stream_error(self, message: str, code: str, sent: int = 0) -> bytes:
        return error_event(message, code)

    def is_usage_only_event(self, event: bytes) -> bool:
        return is_usage_only_event(event)

    def is_stream_end(self, data: bytes) -> bool:
        return data == b"[DONE]"

    def stream_framing(self, view: RequestView) -> None:
        return None  # server-sent events, as relayed


OPENAI_CHAT_ADAPTER = OpenAIChat()
