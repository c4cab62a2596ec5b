"""The OpenAI Responses API wire adapter (``POST /v1/responses``), stateless: what Codex CLI speaks.

* Validation: :func:`router.wire.openai_responses.validation.validate_responses_body` —
  ``store: false`` and the whole conversation in ``input``; a request that needs
  state kept on a server (``previous_response_id``, ``store: true``, …) gets a
  400 naming the field. The view: :func:`router.wire.openai_responses.view.responses_view`
  (a unit is an input item, a tool result a ``function_call_output``; reasoning
  items and their ``encrypted_content`` are never touched).
* Errors: OpenAI's ``{"error": {"message", "type", "code", "param"}}``, as for chat.
* Upstream body, for a provider that speaks Responses too (``wire: openai-responses``):
  the client's body with only the chain's changes written in
  (:func:`router.wire.openai_responses.view.body_with_changes`); the answer is relayed
  event by event as the provider sent it, the stream ending at
  ``response.completed`` / ``.incomplete`` / ``.failed`` (there is no [DONE]).
* For a provider that speaks chat completions, :class:`ResponsesToChat`
  translates the request (:mod:`router.translate.responses_to_chat`) and the answer
  back into Responses events (:mod:`router.translate.chat_to_responses`).
"""

from __future__ import annotations

import secrets
import time
from typing import Any

import orjson
from aiohttp import web

from router.contract.context import Usage
from router.wire.openai_chat.validation import InvalidRequest
from router.translate.chat_to_responses import ChatStreamTranslator, ResponseFrame, chat_chunks, completion_to_response, sse_event
from router.core.request_view import BodyChanges, RequestView
from router.wire.openai_responses.validation import validate_responses_body
from router.translate.responses_to_chat import responses_to_chat
from router.wire.openai_responses.view import OPENAI_RESPONSES, body_with_changes, responses_view
from router.core.sse import KEEP_ALIVE_COMMENT, SseRelay, is_event_of_type, read_usage, usage_of
from router.http.errors import ApiError, invalid_request

# The events that end a Responses stream (it has no [DONE]).
END_TYPES = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})


class OpenAIResponses:
    name = OPENAI_RESPONSES
    paths = ("/v1/responses",)
    keep_alive = KEEP_ALIVE_COMMENT
    check_body = None  # validated after the depth walk, by parse

    def parse(self, body: Any, turn_chars: int) -> RequestView | ApiError:
        try:
            parsed = validate_responses_body(body)
        except InvalidRequest as exc:
            return invalid_request(exc.message, param=exc.param)
        return responses_view(body, parsed, turn_chars)

    def error_response(self, error: ApiError, headers: dict[str, str] | None = None) -> web.Response:
        return error.response(headers)

    def upstream_body(self, body: dict[str, Any], view: RequestView, changes: BodyChanges) -> bytes:
        return orjson.dumps(body_with_changes(body, view, changes))

    def read_usage(self, body: bytes) -> Usage | None:
        return read_usage(body)

    def usage_of(self, answer: Any) -> Usage | None:
        return usage_of(answer)

    def stream_error(self, message: str, code: str) -> bytes:
        """The Responses API's ``error`` event (the stream's sequence is the provider's: no number is made up)."""
        return sse_event({"type": "error", "code": code, "message": message, "param": None})

    def is_usage_only_event(self, event: bytes) -> bool:
        return False  # a Responses stream reports usage in response.completed, always

    def is_stream_end(self, data: bytes) -> bool:
        return is_event_of_type(data, END_TYPES)


OPENAI_RESPONSES_ADAPTER = OpenAIResponses()


def is_responses_request(body: Any) -> bool:
    """Whether a body read from a file (``pinch-router explain``) is a Responses API request:
    its conversation is ``input``, not chat's ``messages``."""
    return isinstance(body, dict) and "input" in body and "messages" not in body


def new_frame(body: dict[str, Any]) -> ResponseFrame:
    return ResponseFrame(f"resp_{secrets.token_hex(12)}", int(time.time()), body)


class ResponsesToChat:
    """Translator from a Responses request to a chat-completions provider, and its answer back.

    One per request: :meth:`request` reads the Responses body the adapter
    wrote (chain's changes included) and keeps it, for the answer to echo.
    """

    def __init__(self) -> None:
        self.frame = new_frame({})
        self.dropped: tuple[str, ...] = ()

    def request(self, body: bytes, candidate: Any = None) -> bytes:
        responses = orjson.loads(body)
        parsed = validate_responses_body(responses)  # valid: the edge checked it, the chain kept it so
        self.frame = new_frame(responses)
        translation = responses_to_chat(responses, parsed.items)
        self.dropped = translation.dropped
        return orjson.dumps(translation.body)

    def response(self, body: bytes) -> bytes:
        """A whole chat completion as a Responses ``response``; what is no completion passes as it came."""
        try:
            completion = orjson.loads(body)
        except orjson.JSONDecodeError:
            return body
        response = completion_to_response(completion, self.frame)
        return body if response is None else orjson.dumps(response)

    def streams(self, content_type: str) -> bool:
        return content_type == "text/event-stream"

    def stream(self) -> ChatStreamAsResponses:
        return ChatStreamAsResponses(self.frame)


class ChatStreamAsResponses:
    """One chat SSE stream in (raw bytes), Responses events out, whole events only.

    An upstream error inside the stream ends it with ``response.failed``; the
    end of the chat stream (``[DONE]`` or the connection closing after it)
    completes the response, with the usage the stream reported.
    """

    def __init__(self, frame: ResponseFrame) -> None:
        self.chat = SseRelay()
        self.translator = ChatStreamTranslator(frame)
        self.started = False

    @property
    def usage(self) -> Usage | None:
        return self.chat.usage

    def feed(self, chunk: bytes) -> bytes:
        events = [] if self.started else self.translator.start()
        self.started = True
        for parsed in chat_chunks(self.chat.feed(chunk)):
            events += self.translator.feed(parsed)
        if self.chat.done:
            events += self.translator.finish()
        return b"".join(sse_event(e) for e in events)

    def finish(self) -> bytes:
        """At the end of the upstream stream: complete the response if [DONE] did not already —
        or fail it, when the stream closed before saying how the answer finished."""
        if not self.started:
            return b""
        if self.chat.done or self.translator.finish_reason is not None:
            events = self.translator.finish()
        else:
            events = self.translator.fail("the provider closed the stream before its end", "upstream_stream_interrupted")
        return b"".join(sse_event(e) for e in events)
