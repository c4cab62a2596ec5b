"""The OpenAI Responses API wire adapter (``POST /v1/responses``), stateless: what Codex CLI speaks.

* Validation: :func:`.validation.validate_responses_body` —
  ``store: false`` and the whole conversation in ``input``; a request that needs
  state kept on a server (``previous_response_id``, ``store: true``, …) gets a
  400 naming the field; fused with the depth walk and the view's passes for the usual items
  (:func:`.validation.check_responses_body`). The view: :func:`.view.responses_view`
  (a unit is an input item, a tool result a ``function_call_output``; reasoning
  items and their ``encrypted_content`` are never touched).
* Errors: OpenAI's ``{"error": {"message", "type", "code", "param"}}``, as for chat.
* Upstream body, for a provider that speaks Responses too (``wire: openai-responses``):
  the client's body with only the chain's changes written in
  (:func:`.view.body_with_changes`); the answer is relayed
  event by event as the provider sent it, the stream ending at
  ``response.completed`` / ``.incomplete`` / ``.failed`` (there is no [DONE]).
* A provider that speaks chat completions gets the request translated and the answer back
  (:mod:`router.translate.responses_to_chat`, :mod:`router.translate.chat_to_responses`).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from router.core.errors import ApiError, ErrorAnswer, InvalidRequest, invalid_request
from router.core.request_view import NO_TARGET, BodyChanges, RequestTarget, RequestView, written_body
from router.core.results import Usage
from router.core.sse import KEEP_ALIVE_COMMENT, is_event_of_type
from router.wire.api_keys import BEARER_ONLY
from router.wire.openai_chat.errors import render_error
from router.wire.openai_responses.stream import END_TYPES, error_event
from router.wire.openai_responses.validation import CheckedResponses, answer_problem, check_responses_body, validate_responses_body
from router.wire.openai_responses.view import OPENAI_RESPONSES, body_with_changes, responses_view
from router.wire.routes import ClientApi
from router.wire.usage import read_usage, usage_of

PATH = "/v1/responses"


def is_responses_request(body: Any, headers: Any = None) -> bool:
    """Whether a body read from a file (``pinch-router explain``) is a Responses API request:
    its conversation is ``input``, not chat's ``messages``."""
    return isinstance(body, dict) and "input" in body and "messages" not in body


API = ClientApi(
    label="openai_responses",
    title="OpenAI Responses API",
    names=re.compile(r"/responses(?:/|$)"),
    base_url="http://<host>:<port>/v1",
    listed=(f"POST {PATH}",),
    saved_path=PATH,
    saved_body=is_responses_request,
    any_depth=True,
)


class OpenAIResponses:
    name = OPENAI_RESPONSES
    paths = (PATH,)
    api = API
    endpoints = ()
    api_key = BEARER_ONLY
    conversation_key = "input"  # the array a resent body repeats (router.core.resent_prefix)
    keep_alive = KEEP_ALIVE_COMMENT
    # the validation made on the way to the depth walk, with the view's facts, sparing the walk the usual items
    check_body = staticmethod(check_responses_body)

    def parse(self, body: Any, turn_chars: int, target: RequestTarget = NO_TARGET) -> RequestView | ApiError:
        try:
            parsed = validate_responses_body(body)
        except InvalidRequest as exc:
            return invalid_request(exc.message, param=exc.param)
        return responses_view(body, parsed, turn_chars)

    def parse_checked(self, body: Any, checked: CheckedResponses, turn_chars: int, target: RequestTarget = NO_TARGET) -> RequestView | ApiError:
        if checked.request is None:  # invalid: parse says why
            return self.parse(body, turn_chars)
        return responses_view(body, checked.request, turn_chars, checked)

    def render_error(self, error: ApiError, request_id: str | None = None) -> ErrorAnswer:
        return render_error(error, request_id)  # OpenAI's shape, as for chat

    def upstream_body(self, body: dict[str, Any], view: RequestView, changes: BodyChanges) -> bytes:
        return written_body(body_with_changes(body, view, changes), "input", changes)

    def translation_source(self, body: dict[str, Any], view: RequestView, changes: BodyChanges) -> dict[str, Any]:
        return body_with_changes(body, view, changes)

    def passthrough_dropped(self, view: RequestView, changes: BodyChanges) -> tuple[str, ...]:
        return ()  # only the reasoning items the proxy made are left out, and they are the proxy's own

    read_usage = staticmethod(read_usage)
    usage_of = staticmethod(usage_of)
    answer_problem = staticmethod(answer_problem)

    def stream_error(self, message: str, code: str, sent: int = 0) -> bytes:
        return error_event(message, code, sent)

    def is_usage_only_event(self, event: bytes) -> bool:
        return False  # a Responses stream reports usage in response.completed, always

    def is_stream_end(self, data: bytes) -> bool:
        return is_event_of_type(data, END_TYPES)

    def stream_framing(self, view: RequestView) -> None:
        return None  # server-sent events, as relayed


OPENAI_RESPONSES_ADAPTER = OpenAIResponses()

