"""The Ollama API wire adapter: ``POST /api/chat`` and ``/api/generate``, for the tools that speak only Ollama's
API (Open WebUI, Continue's and Zed's ``ollama`` providers, the ``ollama`` Python and JS clients).

* Validation: :func:`.validation.validate_ollama_body` (what Ollama's own decoding refuses; ``stream``
  defaults to true); the view: :func:`.view.ollama_view` (a unit is a message; a generate request's
  system and prompt are two).
* Errors: Ollama's ``{"error": "…"}`` (:mod:`.errors`).
* Upstream body: always a translation's source (:mod:`.body`): no provider speaks this wire, a
  native ``/api/chat`` provider's is :data:`~router.wire.ollama.answers.OLLAMA_CHAT`, reached through
  chat like every other (:mod:`router.translate.ollama_to_chat`).
* Answers: one JSON object, or NDJSON — each line an event on its way through the relay (the
  translation's ``data: {line}``), a line again for the client (:class:`.answers.NdjsonFraming`); the
  line with ``done: true`` ends the stream and carries the counts.
* Its API (:data:`API`): the paths of Ollama's API under ``/api`` are its own (errors in its shape
  there); outside the chat it answers the model list (``GET /api/tags``), one model (``POST
  /api/show``), its version and the models loaded here (none), and refuses managing models
  (``pull``, ``push``, ``create``, ``copy``, ``delete``) in Ollama's shape (:mod:`.models`).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from router.core.errors import ApiError, ErrorAnswer, InvalidRequest, invalid_request
from router.core.request_view import NO_TARGET, BodyChanges, RequestTarget, RequestView
from router.core.results import Usage
from router.wire.api_keys import BEARER_ONLY
from router.wire.ollama import body as ollama_body
from router.wire.ollama.answers import NdjsonFraming, answer_problem, is_last_line, read_usage, usage_of
from router.wire.ollama.errors import render_error, stream_error
from router.wire.ollama.models import RUNNING, VERSION, show, tags
from router.wire.ollama.validation import ACTIONS, validate_ollama_body
from router.wire.ollama.view import OLLAMA, ollama_view
from router.wire.routes import ClientApi, FixedAnswer, ModelList, ModelLookupByBody, Refused

PATHS = ("/api/{action:" + "|".join(ACTIONS) + "}",)
# Ollama's API is everything under /api, served or not: every error there is in its shape, whatever the headers.
NAMES = re.compile(r"^/api(?:/|$)")
NOT_MANAGED = "pinch-router serves the models of its config and does not manage models: {what} on the Ollama server behind it (providers in the config)"


def is_ollama_request(body: Any, headers: Any = None) -> bool:
    """Whether a body read from a file (``pinch-router explain``) is an Ollama request: a generate's ``prompt``
    without ``messages``, or chat messages with what only Ollama's have (``options``, ``format``,
    ``keep_alive``, ``think``, a message's ``images``)."""
    if not isinstance(body, dict):
        return False
    messages = body.get("messages")
    if messages is None:
        return isinstance(body.get("prompt"), str)
    return any(key in body for key in ("options", "format", "keep_alive", "think")) or (
        isinstance(messages, list) and any(isinstance(m, dict) and "images" in m for m in messages)
    )


API = ClientApi(
    label="ollama",
    title="Ollama API",
    names=NAMES,
    base_url="http://<host>:<port>",
    listed=("POST /api/chat", "POST /api/generate", "GET /api/tags", "POST /api/show", "GET /api/version", "GET /api/ps"),
    saved_path="/api/chat",
    saved_body=is_ollama_request,
    own_root=True,
)
ENDPOINTS = (
    ModelList("/api/tags", tags),
    ModelLookupByBody("/api/show", show, ("model", "name")),  # `name`: Ollama's older spelling
    FixedAnswer("/api/version", {"version": VERSION}),
    FixedAnswer("/api/ps", RUNNING),
    *(Refused("POST", f"/api/{op}", 403, NOT_MANAGED.format(what=what), "model_management") for op, what in (
        ("pull", "pull models (`ollama pull`)"), ("push", "push models"), ("create", "create models"), ("copy", "copy models"),
    )),
    Refused("DELETE", "/api/delete", 403, NOT_MANAGED.format(what="delete models"), "model_management"),
)  # fmt: skip
# What a silent stream is sent: a space, which a line's JSON may start with (a blank line would be an
# empty line to the clients, which parse every line: the ollama Python client's json.loads fails on it).
KEEP_ALIVE = b" "


class Ollama:
    name = OLLAMA
    paths = PATHS
    api = API
    endpoints = ENDPOINTS
    api_key = BEARER_ONLY  # the ollama clients send OLLAMA_API_KEY as a bearer token
    conversation_key = "messages"
    keep_alive = KEEP_ALIVE
    check_body = None

    def parse(self, body: Any, turn_chars: int, target: RequestTarget = NO_TARGET) -> RequestView | ApiError:
        try:
            parsed = validate_ollama_body(body, target.path.get("action"))
        except InvalidRequest as exc:
            return invalid_request(exc.message, param=exc.param)
        return ollama_view(parsed, turn_chars)

    def parse_checked(self, body: Any, checked: Any, turn_chars: int, target: RequestTarget = NO_TARGET) -> RequestView | ApiError:
        return self.parse(body, turn_chars, target)  # no check_body: never called with one

    def render_error(self, error: ApiError, request_id: str | None = None) -> ErrorAnswer:
        return render_error(error)  # Ollama's errors carry no request id

    def upstream_body(self, body: dict[str, Any], view: RequestView, changes: BodyChanges) -> bytes:
        return orjson.dumps(self.translation_source(body, view, changes))  # no provider speaks it: always translated

    def translation_source(self, body: dict[str, Any], view: RequestView, changes: BodyChanges) -> dict[str, Any]:
        return ollama_body.translation_source(body, view, changes)

    def passthrough_dropped(self, view: RequestView, changes: BodyChanges) -> tuple[str, ...]:
        return ()

    answer_problem = staticmethod(answer_problem)
    read_usage = staticmethod(read_usage)
    usage_of = staticmethod(usage_of)

    def stream_error(self, message: str, code: str, sent: int = 0) -> bytes:
        return stream_error(message)

    def is_usage_only_event(self, event: bytes) -> bool:
        return False  # the counts come in the last line, always

    def is_stream_end(self, data: bytes) -> bool:
        return is_last_line(data)

    def stream_framing(self, view: RequestView) -> NdjsonFraming:
        return NdjsonFraming()  # always NDJSON, as Ollama streams


OLLAMA_ADAPTER = Ollama()
