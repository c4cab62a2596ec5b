"""The Gemini API wire adapter: ``POST /v1beta/models/{model}:generateContent`` and ``:streamGenerateContent``
(and the same under ``/v1``): Gemini CLI and the google-genai SDKs.

* The model and the stream come from the path (:class:`~router.core.request_view.RequestTarget`):
  ``auto`` and every routing alias work there as on the other wires; ``?alt=sse`` frames the
  stream as SSE, its absence as one JSON array (:class:`.answers.JsonArrayFraming`).
* Validation: :func:`.validation.validate_gemini_body`; the view: :func:`.view.gemini_view` (a unit
  holds at most one ``functionResponse``; thought signatures are signed reasoning, never touched).
* Errors: Google's ``{"error": {"code", "message", "status"}}`` (:mod:`.errors`).
* Upstream body (an ``api: gemini`` provider): the client's body with only the chain's changes
  (:mod:`.body`) — every other byte, ``thoughtSignature`` included, as the client sent it. As the
  source of a translation to another format it also carries the path's ``model`` and ``stream``,
  which a Gemini body has no field for.
* Answers: SSE ``data: {chunk}`` events, relayed as they come; the chunk with a ``finishReason``
  ends the stream; usage from ``usageMetadata``.
* Its API (:data:`API`): every path under ``/v1beta`` and a model's action under ``/v1/models`` is
  its own (errors in Google's shape there, whatever the headers); outside the chain it answers
  ``:countTokens``, the model list and one model (:mod:`.models`), and the proxy's own ``GET
  /v1/models`` in Google's shape for a client that sends its key as Gemini's do.
"""

from __future__ import annotations

from typing import Any

import orjson

from router.core.errors import ApiError, ErrorAnswer, InvalidRequest, invalid_request
from router.core.retrieve import ToolOffer
from router.core.request_view import NO_TARGET, BodyChanges, RequestTarget, RequestView, rewritten_array, written_body
from router.core.results import Usage
from router.wire.gemini.answers import JsonArrayFraming, answer_problem, is_last_chunk, read_usage, usage_of
from router.wire.gemini.body import signed, within_output_limit
from router.wire.gemini.errors import render_error, stream_error
from router.wire.gemini.models import count_tokens_answer, model_entry, model_list
from router.wire.gemini.parts import CONTENTS, GEMINI, field, key_of
from router.wire.gemini.paths import API_KEY, GEMINI_PATHS, is_gemini_client
from router.wire.gemini.signatures import dropped
from router.wire.gemini.validation import ACTIONS, CheckedGemini, check_gemini_body, validate_gemini_body, with_target
from router.wire.gemini.view import GeminiConversation, gemini_view
from router.wire.routes import ClientApi, CountTokens, ModelList, ModelLookup

# The path's shape: the model is one segment without ':' (aiohttp's pattern syntax), the action one of ACTIONS.
MODEL = "{model:[^/:]+}"
MODEL_ACTION = MODEL + ":{action:" + "|".join(ACTIONS) + "}"
ROOTS = ("/v1beta", "/v1")  # the API's versions: google-genai asks /v1beta, or /v1 with api_version="v1"
PATHS = tuple(f"{root}/models/{MODEL_ACTION}" for root in ROOTS)


def is_gemini_request(body: Any, headers: Any = None) -> bool:
    """Whether a body read from a file (``pinch-router explain``) is a Gemini request: ``contents``, no ``messages``."""
    return isinstance(body, dict) and field(body, CONTENTS) is not None and "messages" not in body


API = ClientApi(
    label="gemini",
    title="Gemini API",
    names=GEMINI_PATHS,
    base_url="http://<host>:<port>",
    listed=(
        *(f"POST /v1beta/models/{{model}}:{action}" for action in (*ACTIONS, "countTokens")),
        "GET /v1beta/models",
    ),
    saved_path="/v1beta/models/auto:generateContent",  # the model from the path: auto routes
    model_client=is_gemini_client,
    saved_body=is_gemini_request,
    own_root=True,
)
# Outside the chain: a request's tokens (counted as `gemini_count_tokens`), the model list and one model
# (GET /v1/models and /v1/models/{model} are the proxy's own, in Google's shape for a Gemini client).
ENDPOINTS = (
    *(CountTokens(f"{root}/models/{MODEL}:countTokens", "gemini_count_tokens", count_tokens_answer) for root in ROOTS),
    ModelList("/v1beta/models", model_list),
    ModelLookup(f"/v1beta/models/{MODEL}", model_entry),
)
# What a silent stream is sent: whitespace, which both framings allow between chunks (the JS SDK's
# stream reader skips leading whitespace but would wait forever behind an SSE comment).
KEEP_ALIVE = b"\n"


def with_tool(payload: dict[str, Any], tool: ToolOffer | None) -> dict[str, Any]:
    """``payload`` with ``tool`` declared in a tool of its own after the client's (``payload`` itself for None)."""
    if tool is None:
        return payload
    tools = payload.get("tools")
    declared = {"functionDeclarations": [{"name": tool.name, "description": tool.description, "parameters": tool.parameters}]}
    return {**payload, "tools": [*(tools if isinstance(tools, list) else ()), declared]}


class Gemini:
    name = GEMINI
    paths = PATHS
    api = API
    endpoints = ENDPOINTS
    api_key = API_KEY  # x-goog-api-key, or ?key= on the Gemini API's paths
    conversation_key = CONTENTS[0]  # the array a resent body repeats (router.core.resent_prefix)
    keep_alive = KEEP_ALIVE
    # the body's validation made on the way to the depth walk, sparing the walk the usual contents
    check_body = staticmethod(check_gemini_body)

    def parse(self, body: Any, turn_chars: int, target: RequestTarget = NO_TARGET) -> RequestView | ApiError:
        try:
            parsed = validate_gemini_body(body, target.path.get("model"), target.path.get("action"), target.query)
        except InvalidRequest as exc:
            return invalid_request(exc.message, param=exc.param)
        return gemini_view(body, parsed, turn_chars)

    def parse_checked(self, body: Any, checked: CheckedGemini, turn_chars: int, target: RequestTarget = NO_TARGET) -> RequestView | ApiError:
        if checked.body is None:  # invalid: parse says why
            return self.parse(body, turn_chars, target)
        try:
            parsed = with_target(checked.body, target.path.get("model"), target.path.get("action"), target.query)
        except InvalidRequest as exc:
            return invalid_request(exc.message, param=exc.param)
        return gemini_view(body, parsed, turn_chars)

    def render_error(self, error: ApiError, request_id: str | None = None) -> ErrorAnswer:
        return render_error(error)  # Google's errors carry no request id

    def upstream_body(self, body: dict[str, Any], view: RequestView, changes: BodyChanges) -> bytes:
        conversation = view.conversation
        assert isinstance(conversation, GeminiConversation)
        if changes.translated:
            return orjson.dumps(self.translation_source(body, view, changes))
        payload = with_tool(within_output_limit(body, changes.output_tokens), changes.tool)
        rewritten = rewritten_array(changes, conversation.contents, conversation.content_of, conversation.contents_with)
        contents, _ = signed(rewritten, changes.stale.positions if changes.stale is not None else (), conversation.unsigned_calls)
        return written_body({**payload, key_of(body, CONTENTS): contents}, CONTENTS[0], changes)

    def translation_source(self, body: dict[str, Any], view: RequestView, changes: BodyChanges) -> dict[str, Any]:
        conversation = view.conversation
        assert isinstance(conversation, GeminiConversation)
        payload = with_tool(within_output_limit(body, changes.output_tokens), changes.tool)
        # the path's facts, for the translation (a Gemini body has no field for either)
        contents = rewritten_array(changes, conversation.contents, conversation.content_of, conversation.contents_with)
        return {**payload, key_of(body, CONTENTS): contents, "model": changes.upstream_model, "stream": view.stream}

    def passthrough_dropped(self, view: RequestView, changes: BodyChanges) -> tuple[str, ...]:
        return (dropped(changes.stale),) if changes.stale is not None else ()

    answer_problem = staticmethod(answer_problem)
    read_usage = staticmethod(read_usage)
    usage_of = staticmethod(usage_of)

    def stream_error(self, message: str, code: str, sent: int = 0) -> bytes:
        return stream_error(message, code)  # Gemini's events are not numbered

    def is_usage_only_event(self, event: bytes) -> bool:
        return False  # a Gemini stream reports usageMetadata in its chunks, always

    def is_stream_end(self, data: bytes) -> bool:
        return is_last_chunk(data)

    def stream_framing(self, view: RequestView) -> JsonArrayFraming | None:
        """The JSON array for a stream asked without ``?alt=sse``; None: SSE, as relayed."""
        conversation = view.conversation
        return JsonArrayFraming() if view.stream and isinstance(conversation, GeminiConversation) and not conversation.sse else None


GEMINI_ADAPTER = Gemini()
