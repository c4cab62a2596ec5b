"""A deterministic OpenAI-compatible upstream for tests, benchmarks and trying the proxy.

``pinch-router mock-upstream`` serves it on loopback. It answers chat
completions (plain and streamed, with tool calls when tools are offered and the
last message is not a tool result), Ollama's native ``/api/chat`` (the classifier's,
and tool calls as a recent Ollama sends them: :func:`ollama_answer`) and embeddings
in both APIs (a hashed bag of words: texts sharing words are similar), and records
every request it receives. On Ollama's port it stands in for all of Ollama. It also speaks the Anthropic Messages API
(``/v1/messages``, ``/v1/messages/count_tokens``) and the OpenAI Responses API
(``/v1/responses``) and the Gemini API (``/v1beta/models/{model}:generateContent`` and
``:streamGenerateContent``, ``:countTokens``, ``GET /v1beta/models``: ``mock_gemini``) well enough
for Claude Code, Codex CLI and Gemini CLI to complete a tool round trip against it (see
``mock_answers``), and the Ollama endpoints ``codex
--oss`` checks first; ``record_dir`` writes every request to a file (see
``mock_capture``). With a :class:`SimulatedPromptCache` its chat usage reports
``prompt_tokens_details.cached_tokens`` as a prefix cache would.
Tests script faults per request with :class:`Behaviour`: a status, a delay
before the head, a stall or a cut after N events, a malformed event.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import zlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from router.tools import mock_anthropic, mock_gemini, mock_responses
from router.wire import adapters
from router.tools.pinch_measures import unchanged_prefix_tokens
from router.core.tokens import TokenEstimator
from router.tools.mock_answers import MOCK_SUMMARY, RETRIEVE_LEAD_IN, asks_for_summary, estimate_tokens, summary_text, retrieve_call, ONE_LISTING, FunctionTool, MockWire, example_of, listing_tool, next_command, quoting_tool_result, shell_arguments, shell_tool, submit_command
from router.tools.mock_capture import record_file_name, request_record
from router.wire.openai_chat.answer import chat_completion
from router.tools.mock_classifier import classification


@dataclass(frozen=True, slots=True)
class Behaviour:
    """How the mock answers one request (defaults: a normal, prompt answer)."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None  # a raw body instead of the generated answer
    delay_before_head: float = 0.0
    event_delay: float = 0.0  # pause before each stream event
    stall_after_events: int | None = None  # stop sending (but keep the connection) after N events
    cut_after_events: int | None = None  # drop the connection after N events
    malformed_after_events: int | None = None  # send one broken event after N events
    text: str = "Hello from the mock upstream."
    # The answer when the request asks for JSON (response_format, Ollama's format): None ⇒ a classifier
    # prompt is answered from the turn's words (mock_classifier), so the mock serves as the classifier
    # in benchmarks and demos, and any other request with DEFAULT_JSON.
    json_text: str | None = None
    # The usage object to report instead of the generated one (e.g. with cache accounting).
    usage: dict[str, Any] | None = None
    # What the shell-tool calls of one user turn run, one call per command, before the answer (next_command).
    tool_commands: tuple[str, ...] = ONE_LISTING
    # Native /api/chat: the thinking streamed before each answer (a word a line), as a recent Ollama
    # sends a thinking model's; None: no thinking
    thinking: str | None = None


@dataclass(slots=True)
class SimulatedPromptCache:
    """A provider's prefix cache for the mock to report ``cached_tokens`` from (OpenAI's usage shape).

    Each answer reports the whole prompt and, as cached, the part that repeats
    the previous request from its start when that came at most
    ``lifetime_seconds`` earlier on ``clock`` — the rule eval-pinch prices by
    (:mod:`router.tools.pinch_measures`), so the proxy's cache accounting can be
    checked against it. ``lifetime_seconds`` 0: caches nothing.
    """

    lifetime_seconds: float
    clock: Callable[[], float] = time.monotonic
    estimator: TokenEstimator = field(default_factory=TokenEstimator)
    last: tuple[list[Any], float] | None = None

    def usage(self, body: dict[str, Any], completion_tokens: int) -> dict[str, Any]:
        messages, tools, now = body.get("messages") or [], body.get("tools"), self.clock()
        prompt = self.estimator.prompt_tokens(messages, tools)
        cached = 0
        if self.last is not None and self.lifetime_seconds > 0 and now - self.last[1] <= self.lifetime_seconds:
            cached = unchanged_prefix_tokens(self.last[0], messages, self.estimator, tools)
        self.last = (messages, now)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached},
        }


@dataclass(frozen=True, slots=True)
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    raw: bytes
    query: dict[str, str] = field(default_factory=dict)  # e.g. Claude Code's ?beta=true


# The client wires the mock answers as a provider of the same format does (chat's is its own handler below).
MOCK_WIRES = (mock_anthropic.WIRE, mock_responses.WIRE, mock_gemini.WIRE)
# The header the mock's model lists carry, so `pinch-router doctor` knows it for the mock it is.
MOCK_HEADER = "x-pinch-router-mock"


class MockUpstream:
    """``identify``: the model lists (``/api/tags``, ``/v1/models``) carry :data:`MOCK_HEADER`, so
    ``doctor`` says the upstream is the mock instead of failing on its model list; tests that stand
    it in for a real Ollama turn it off. ``record=False`` keeps no copy of the requests (``received`` stays empty): the
    served ``pinch-router mock-upstream`` has nobody to read them, and keeping every
    request grew it by ~150 KB per 62 KB request (600 MB in one proxy benchmark),
    slowing it down for whichever target a benchmark measured last. ``record_dir`` writes
    each request to a file there instead (``--record DIR``, see ``mock_capture``)."""

    def __init__(
        self,
        default: Behaviour | None = None,
        *,
        record: bool = True,
        record_dir: Path | None = None,
        prompt_cache: SimulatedPromptCache | None = None,
        identify: bool = True,
        retrieves: bool = True,
    ) -> None:
        """``retrieves``: the mock calls pinch_retrieve for a cut output among the latest tool results
        when the proxy offers it (:func:`~router.tools.mock_answers.retrieve_call`), as a model that
        needs the whole output would; False: it never does (eval-pinch counts what is one call away instead)."""
        self.default = default or Behaviour()
        self.retrieves = retrieves
        self.identity = {MOCK_HEADER: "mock-upstream"} if identify else {}
        self.record = record
        self.record_dir = record_dir
        self._record_numbers = itertools.count(1)
        self.prompt_cache = prompt_cache  # None: usage without cache accounting
        self.ollama_models: list[str] = ["mock:latest"]  # what /api/tags lists as pulled (tests set their own)
        self.script: deque[Behaviour] = deque()
        self.received: list[Received] = []
        self.open_streams = 0
        self.cancelled_streams = 0

    def then(self, *behaviours: Behaviour) -> MockUpstream:
        """Queue behaviours for the next requests, in order; afterwards the default applies."""
        self.script.extend(behaviours)
        return self

    def _answerable(self, body: dict[str, Any]) -> dict[str, Any]:
        """The body the answer is made from: without the proxy's pinch_retrieve when the mock does not retrieve."""
        tools = body.get("tools")
        if self.retrieves or not isinstance(tools, list):
            return body
        return {**body, "tools": [t for t in tools if not (isinstance(t, dict) and "pinch_retrieve" in (t.get("name"), (t.get("function") or {}).get("name")))]}

    def _remember(self, request: web.Request, body: dict[str, Any], raw: bytes = b"") -> None:
        if self.record:
            self.received.append(Received(request.path, dict(request.headers), body, raw, dict(request.query)))

    def app(self) -> web.Application:
        middlewares = [self._record_to_dir] if self.record_dir is not None else []
        app = web.Application(client_max_size=256 * 1024 * 1024, middlewares=middlewares)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/messages/count_tokens", self.anthropic_count_tokens)
        app.router.add_get("/", self.root)  # and HEAD: a base-URL probe (reported of Claude Code; 2.1.332 sent none here)
        # What `codex --oss` asks Ollama before its first /v1/responses request
        app.router.add_get("/api/version", self.ollama_version)
        app.router.add_get("/api/tags", self.ollama_tags)
        app.router.add_post("/api/pull", self.ollama_pull)
        app.router.add_post("/api/chat", self.ollama_chat)
        app.router.add_post("/v1/embeddings", self.embeddings)
        app.router.add_post("/api/embed", self.embeddings)
        app.router.add_get("/v1/models", self.models)
        for root in ("/v1beta", "/v1"):
            app.router.add_post(root + "/models/{model:[^/:]+}:countTokens", self.gemini_count_tokens)
        app.router.add_get("/v1beta/models", self.gemini_models)
        # the other APIs, as a provider of each client wire serves them: at the paths that wire declares
        for wire in MOCK_WIRES:
            for path in adapters()[wire.name].paths:
                app.router.add_post(path, self._wire_handler(wire))
        return app

    @web.middleware
    async def _record_to_dir(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """Every request, served or not (an unknown path is worth seeing too), to its own numbered file."""
        assert self.record_dir is not None
        raw = await request.read()  # cached by aiohttp: the handler reads it again
        record = request_record(request.method, request.path, request.query, request.headers, raw)
        path = self.record_dir / record_file_name(next(self._record_numbers), request.method, request.path)
        path.write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2))
        return await handler(request)

    async def root(self, request: web.Request) -> web.Response:
        return web.Response(text="pinch-router mock upstream")

    async def ollama_version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": OLLAMA_VERSION})

    async def ollama_tags(self, request: web.Request) -> web.Response:
        """The local models: ``ollama_models`` (by default only ``mock``; any other is "pulled" on request, see ``ollama_pull``)."""
        details = {"format": "gguf", "family": "mock", "parameter_size": "0B", "quantization_level": "none"}
        models = [
            {"name": name, "model": name, "modified_at": "2026-01-01T00:00:00Z", "size": 0, "digest": "0" * 64, "details": details}
            for name in self.ollama_models
        ]
        return web.json_response({"models": models}, headers=self.identity)

    async def ollama_pull(self, request: web.Request) -> web.StreamResponse:
        """Any model pulls at once: Ollama's progress stream (NDJSON) ending in ``success``; ``stream: false`` gets only that."""
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            body = None
        if not isinstance(body, dict):
            return web.json_response({"error": "invalid request body: a JSON object is required"}, status=400)  # Ollama's shape
        statuses = [{"status": "pulling manifest"}, {"status": "verifying sha256 digest"}, {"status": "success"}]
        if body.get("stream") is False:
            return web.json_response(statuses[-1])
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        for status in statuses:
            await response.write(orjson.dumps(status) + b"\n")
        await response.write_eof()
        return response

    def _wire_handler(self, wire: MockWire) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        """The handler of the wire's paths: what the path says (Gemini's model and stream) given to the
        wire beside the body as recorded (``MockWire.path_facts``), the answer and errors the wire's."""

        async def serve(request: web.Request) -> web.StreamResponse:
            facts = wire.path_facts(request.match_info, request.query) if wire.path_facts is not None else None
            return await self._serve_wire(request, wire, facts)

        return serve

    async def gemini_count_tokens(self, request: web.Request) -> web.Response:
        body = await self._json_object(request, mock_gemini.WIRE)
        if isinstance(body, web.Response):
            return body
        self._remember(request, body)
        return web.json_response(mock_gemini.count_tokens(body))

    async def gemini_models(self, request: web.Request) -> web.Response:
        return web.json_response({"models": [{"name": "models/mock", "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"]}]})

    async def anthropic_count_tokens(self, request: web.Request) -> web.Response:
        """Counts what a ``messages`` request would read; takes no behaviour from the script."""
        body = await self._json_object(request, mock_anthropic.WIRE)
        if isinstance(body, web.Response):
            return body
        self._remember(request, body)
        problem = mock_anthropic.count_tokens_error(body)
        if problem is not None:
            return _error(mock_anthropic.WIRE, 400, problem)
        return web.json_response(mock_anthropic.count_tokens(body))

    async def _json_object(self, request: web.Request, wire: MockWire) -> dict[str, Any] | web.Response:
        raw = await request.read()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            return _error(wire, 400, f"the request body is not valid JSON: {exc}")
        return body if isinstance(body, dict) else _error(wire, 400, "the request body must be a JSON object")

    async def _serve_wire(self, request: web.Request, wire: MockWire, path_facts: dict[str, Any] | None = None) -> web.StreamResponse:
        """One answer in ``wire``'s format, honouring the scripted behaviour as the chat endpoint does;
        ``path_facts``: what the URL says (Gemini's model and stream), read beside the recorded body."""
        body = await self._json_object(request, wire)
        if isinstance(body, web.Response):
            return body
        self._remember(request, body, await request.read())
        if path_facts is not None:
            body = {**body, **path_facts}
        behaviour = self.script.popleft() if self.script else self.default
        if behaviour.delay_before_head:
            await asyncio.sleep(behaviour.delay_before_head)
        if behaviour.body is not None:
            return web.Response(status=behaviour.status, body=behaviour.body, headers=behaviour.headers, content_type="application/json")
        if behaviour.status != 200:
            return _error(wire, behaviour.status, f"mock error {behaviour.status}", behaviour.headers)
        problem = wire.request_error(body)
        if problem is not None:
            return _error(wire, 400, problem)
        body = self._answerable(body)
        try:
            scripted = wire.answer(body, behaviour.text, behaviour.tool_commands)
            events = wire.events(body, scripted) if body.get("stream") else None
            whole = orjson.dumps(wire.message(body, scripted)) if events is None else b""
        except (TypeError, AttributeError, KeyError, IndexError, ValueError) as exc:
            # a field of a type the API refuses that request_error does not name (the Responses API's
            # include as a number): the provider's 400, as its schema check makes it, never the mock's 500
            return _error(wire, 400, f"invalid request: {str(exc)[:300]}")
        if events is not None:
            return await self._send_events(request, events, behaviour, wire.stream_type(body))
        return web.Response(body=whole, content_type="application/json", headers=behaviour.headers)

    async def ollama_chat(self, request: web.Request) -> web.StreamResponse:
        """Ollama's native chat, as a recent Ollama answers it (see :func:`ollama_answer`): tool calls when tools
        are offered (the ``--tool-command`` turns the chat mock follows), streamed as NDJSON unless ``stream`` is
        false (Ollama's default is to stream), and a 400 for what Ollama's own decoding refuses."""
        raw = await request.read()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            return web.json_response({"error": f"invalid character in request body: {exc}"}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"error": "json: cannot unmarshal array into Go value of type api.ChatRequest"}, status=400)
        self._remember(request, body, raw)
        behaviour = self.script.popleft() if self.script else self.default
        if behaviour.delay_before_head:
            await asyncio.sleep(behaviour.delay_before_head)
        if behaviour.status != 200 or behaviour.body is not None:
            payload = behaviour.body if behaviour.body is not None else orjson.dumps({"error": f"mock error {behaviour.status}"})
            return web.Response(status=behaviour.status, body=payload, headers=behaviour.headers, content_type="application/json")
        problem = ollama_request_error(body)
        if problem is not None:
            return web.json_response({"error": problem}, status=400)
        text = json_answer(body, behaviour) if body.get("format") == "json" or isinstance(body.get("format"), dict) else behaviour.text
        lines = ollama_answer(self._answerable(body), text, behaviour.tool_commands, behaviour.thinking)
        if body.get("stream") is False:
            return web.Response(body=orjson.dumps(ollama_whole(lines)), content_type="application/json", headers=behaviour.headers)
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson", **behaviour.headers})
        await response.prepare(request)
        for line in lines:
            if behaviour.event_delay:
                await asyncio.sleep(behaviour.event_delay)
            await response.write(orjson.dumps(line) + b"\n")
        await response.write_eof()
        return response

    async def embeddings(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        self._remember(request, body)
        texts = body.get("input") or []
        vectors = [hashed_bag_of_words(t) for t in (texts if isinstance(texts, list) else [texts])]
        if request.path == "/api/embed":
            return web.json_response({"model": body.get("model"), "embeddings": vectors})
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        return web.json_response({"object": "list", "model": body.get("model"), "data": data})

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "mock", "object": "model"}]}, headers=self.identity)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = _request_json(raw)
        self._remember(request, body, raw)
        behaviour = self.script.popleft() if self.script else self.default
        if behaviour.delay_before_head:
            await asyncio.sleep(behaviour.delay_before_head)
        if behaviour.status != 200 or behaviour.body is not None:
            payload = behaviour.body if behaviour.body is not None else orjson.dumps(
                {"error": {"message": f"mock error {behaviour.status}", "type": "mock", "param": None, "code": str(behaviour.status)}}
            )
            return web.Response(status=behaviour.status, body=payload, headers=behaviour.headers, content_type="application/json")
        text = json_answer(body, behaviour) if _wants_json(body) else behaviour.text
        if behaviour.usage is None and self.prompt_cache is not None:
            behaviour = replace(behaviour, usage=self.prompt_cache.usage(body, 7))
        body = self._answerable(body)
        if body.get("stream"):
            return await self._stream(request, body, behaviour, text)
        answer = completion(body, text, behaviour.tool_commands)
        if behaviour.usage is not None:
            answer["usage"] = behaviour.usage
        return web.Response(body=orjson.dumps(answer), content_type="application/json", headers=behaviour.headers)

    async def _stream(self, request: web.Request, body: dict[str, Any], behaviour: Behaviour, text: str) -> web.StreamResponse:
        return await self._send_events(request, stream_events(body, text, behaviour.usage, behaviour.tool_commands), behaviour)

    async def _send_events(
        self, request: web.Request, events: list[bytes], behaviour: Behaviour, content_type: str = "text/event-stream"
    ) -> web.StreamResponse:
        """Stream ``events`` with the behaviour's faults (delays, a stall, a cut, a malformed event)."""
        response = web.StreamResponse(headers={"Content-Type": content_type, **behaviour.headers})
        await response.prepare(request)
        self.open_streams += 1
        try:
            for sent, event in enumerate(events):
                if sent == behaviour.malformed_after_events:
                    await response.write(b'data: {"choices": [ this is not json\n\n')
                if sent == behaviour.cut_after_events:
                    assert request.transport is not None
                    request.transport.close()
                    return response
                if sent == behaviour.stall_after_events:
                    await asyncio.sleep(3600)
                if behaviour.event_delay:
                    await asyncio.sleep(behaviour.event_delay)
                await response.write(event)
            await response.write_eof()
        except asyncio.CancelledError:
            self.cancelled_streams += 1
            raise
        finally:
            self.open_streams -= 1
        return response


def _error(wire: MockWire, status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    body = wire.error_body(status, message)
    if isinstance(body.get("request_id"), str):  # Anthropic's: the id is also the request-id header
        headers = {"request-id": body["request_id"], **(headers or {})}
    return web.Response(status=status, body=orjson.dumps(body), headers=headers, content_type="application/json")


EMBEDDING_DIMENSIONS = 64
OLLAMA_VERSION = "0.13.5"  # a recent Ollama's: clients such as codex --oss ask for it before their first turn


def _request_json(raw: bytes) -> Any:
    """A chat body as real providers read it: numbers a double cannot hold (1e400, 2**70) are fine.

    An integer beyond 64 bits is read as the double it rounds to (infinity past 1e308), as a
    provider parsing JSON numbers as doubles does, so that the answer echoing it can be written."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw, parse_int=_int_or_double)


def _int_or_double(digits: str) -> int | float:
    if len(digits) < 21 and -(2**63) <= (value := int(digits)) < 2**64:
        return value
    return float(digits)


def hashed_bag_of_words(text: str) -> list[float]:
    """A deterministic stand-in embedding: word counts hashed into a fixed number of buckets."""
    vector = [0.0] * EMBEDDING_DIMENSIONS
    for word in str(text).lower().split():
        vector[zlib.crc32(word.encode()) % EMBEDDING_DIMENSIONS] += 1.0
    return vector


# A valid classification for the default categories: the JSON answer to anything but a classifier prompt.
DEFAULT_JSON = '{"category": "coding_general", "tier": 2, "required_context_tokens": 4000}'


def json_answer(body: dict[str, Any], behaviour: Behaviour) -> str:
    """The answer to a request for JSON: the behaviour's, else a classification of the turn's words
    when the request is the proxy's classifier prompt (:mod:`mock_classifier`), else an instance of the
    JSON schema the request names (OpenAI's ``response_format.json_schema.schema``, Ollama's ``format``
    object: what Gemini CLI's model-router call asks, translated), else :data:`DEFAULT_JSON`."""
    if behaviour.json_text is not None:
        return behaviour.json_text
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    system = "\n".join(str(m.get("content")) for m in messages if m.get("role") == "system")
    user = "\n".join(str(m.get("content")) for m in messages if m.get("role") == "user")
    found = classification(system, user)
    if found is not None:
        return found
    schema = _json_schema(body)
    return json.dumps(example_of(schema), separators=(",", ":")) if schema is not None else DEFAULT_JSON


def _json_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and isinstance(response_format.get("json_schema"), dict):
        schema = response_format["json_schema"].get("schema")
        return schema if isinstance(schema, dict) else None
    return body.get("format") if isinstance(body.get("format"), dict) else None


def _wants_json(body: dict[str, Any]) -> bool:
    response_format = body.get("response_format")
    return isinstance(response_format, dict) and response_format.get("type") in ("json_object", "json_schema")


def _command_to_call(body: dict[str, Any], commands: tuple[str, ...]) -> str | None:
    """The command of the next tool call (:func:`next_command`), None when it is time to answer: tools
    offered, and fewer tool results since the user's last message than there are commands."""
    messages = body.get("messages") or []
    if not body.get("tools") or not messages or body.get("tool_choice") == "none" or _summarising(body) or _after_summary(messages):
        return None
    prompts = "".join(str(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") in ("system", "user"))
    return next_command(commands, len(_turn_results(messages)), submit_command(prompts))


def _summary_request(body: dict[str, Any]) -> str | None:
    """The words asking for a summary of the conversation (an agent compacting it, :func:`asks_for_summary`):
    its last user message, or its system prompt (Gemini CLI's compression); None when it asks for none."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    users = [m for m in messages if m.get("role") == "user"]
    last = _text(users[-1].get("content")) if users else ""
    system = "".join(_text(m.get("content")) for m in messages if m.get("role") == "system")[:2000]
    return next((said for said in (last, system) if asks_for_summary(said)), None)


def _summarising(body: dict[str, Any]) -> bool:
    return _summary_request(body) is not None


def _after_summary(messages: list[dict[str, Any]]) -> bool:
    """The user turn holds the mock's summary (:data:`MOCK_SUMMARY`): the conversation was compacted, its commands
    ran. The turn's opening message holds it when the agent compacted mid-turn and kept the turn's calls after it
    (Claude Code's auto-compact: the summary first, then the calls and results it kept); its last user message
    when the summary closes the history (Codex)."""
    own = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    start = _turn_start(messages)
    return bool(own) and MOCK_SUMMARY in _text(own[-1].get("content")) or start >= 0 and MOCK_SUMMARY in _text(messages[start].get("content"))


def _text(content: Any) -> str:
    """A message's words: its string, or its text parts joined (a list's repr escapes the quotes in them)."""
    if isinstance(content, list):
        return "\n".join(str(p.get("text")) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return str(content)


def answer_text(body: dict[str, Any], text: str) -> str:
    """The text the mock answers with: its summary when the request asks for one, else ``text``."""
    asked = _summary_request(body)
    return text if asked is None else summary_text(asked)


def _turn_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool messages since the user's own last message (:func:`_turn_start`)."""
    return [m for m in messages[_turn_start(messages) + 1 :] if m.get("role") == "tool"]


def _turn_start(messages: list[dict[str, Any]]) -> int:
    """The index of the user's own last message (-1: none). A user message right after tool results carries
    what came with them (Claude Code's reminders beside its tool_result blocks, translated), not a new question."""
    own = (i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user" and (i == 0 or messages[i - 1].get("role") != "tool"))
    return max(own, default=-1)


def _tool_calls(body: dict[str, Any], command: str) -> list[dict[str, Any]]:
    """The agent's shell tool (:func:`shell_tool`: by its name or its schema), else its directory-listing
    tool (:func:`listing_tool`: Gemini CLI's in -p mode), when one is offered, called with valid
    arguments (``command``; the workspace), as the Anthropic and Responses mocks do, so an agent really
    runs it; else the first two tools, with ``{"n": i}`` (parallel calls, for the relay's tests)."""
    functions = [t["function"] for t in body["tools"] if isinstance(t, dict) and isinstance(t.get("function"), dict)]
    offered = [
        FunctionTool(f["name"], f.get("parameters") if isinstance(f.get("parameters"), dict) else {}, str(f.get("description") or ""))
        for f in functions if isinstance(f.get("name"), str)
    ]  # fmt: skip
    shell = shell_tool(offered) or listing_tool(offered)
    if shell is not None:
        # json, not orjson: a schema may hold numbers beyond 64 bits (the fuzzed transcripts do)
        arguments = json.dumps(shell_arguments(shell, command), separators=(",", ":"), ensure_ascii=False)
        return [{"id": f"call_mock_{len(body['messages'])}_0", "type": "function", "function": {"name": shell.name, "arguments": arguments}}]
    names = [f["name"] for f in functions][:2]
    # ids unique in the conversation (a client answers each call by its id), as a real model's are
    return [
        {"id": f"call_mock_{len(body['messages'])}_{i}", "type": "function", "function": {"name": name, "arguments": orjson.dumps({"n": i}).decode()}}
        for i, name in enumerate(names)
    ]


def prompt_tokens(body: dict[str, Any]) -> int:
    """The prompt a chat or native Ollama request sends, estimated as the mock's other APIs do
    (:func:`~router.tools.mock_answers.estimate_tokens`): its messages, the system prompt among them, and its
    tool definitions — a model reads all of them. Counting the messages alone reported Claude Code's
    prompt (its tools ~2/3 of it) at a third of its size, and its auto-compact never fired through the proxy."""
    return estimate_tokens(body.get("messages") or [], body.get("tools") or [])


def _usage(body: dict[str, Any], completion_tokens: int) -> dict[str, int]:
    prompt = prompt_tokens(body)
    return {"prompt_tokens": prompt, "completion_tokens": completion_tokens, "total_tokens": prompt + completion_tokens}


def _retrieve(body: dict[str, Any]) -> dict[str, Any] | None:
    """A ``pinch_retrieve`` call for a cut result among the tool messages that end the conversation (:func:`retrieve_call`)."""
    messages = body.get("messages") or []
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    names = [t["function"].get("name") for t in tools if isinstance(t, dict) and isinstance(t.get("function"), dict)]
    latest: list[str] = []
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "tool":
            break
        latest.append(str(message.get("content")))
    call = retrieve_call(names, latest, f"call_mock_{len(messages)}_retrieve")
    return None if call is None else {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments_json}}


def completion(body: dict[str, Any], text: str, commands: tuple[str, ...] = ONE_LISTING) -> dict[str, Any]:
    model = body.get("model", "mock")
    if (retrieve := _retrieve(body)) is not None:
        message: dict[str, Any] = {"role": "assistant", "content": RETRIEVE_LEAD_IN, "tool_calls": [retrieve]}
        return chat_completion("chatcmpl-mock", 0, model, message, "tool_calls", _usage(body, 7))
    if (command := _command_to_call(body, commands)) is not None:
        message = {"role": "assistant", "content": None, "tool_calls": _tool_calls(body, command)}
        finish = "tool_calls"
    else:
        results = _turn_results(body.get("messages") or [])
        text = answer_text(body, text)
        reply = quoting_tool_result(text, str(results[-1].get('content'))) if results and not _summarising(body) else text
        message = {"role": "assistant", "content": reply}
        finish = "stop"
    return chat_completion("chatcmpl-mock", 0, model, message, finish, _usage(body, 7))


def stream_events(body: dict[str, Any], text: str, usage: dict[str, Any] | None = None, commands: tuple[str, ...] = ONE_LISTING) -> list[bytes]:
    """The SSE events of a streamed answer, ending with [DONE]; ``usage`` replaces the generated one."""
    model = body.get("model", "mock")

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        obj = {
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    events = [chunk({"role": "assistant", "content": ""})]
    retrieve = _retrieve(body)
    if retrieve is not None:
        events.append(chunk({"content": RETRIEVE_LEAD_IN}))
    if retrieve is not None or (command := _command_to_call(body, commands)) is not None:
        calls = [retrieve] if retrieve is not None else _tool_calls(body, command)
        for i, call in enumerate(calls):
            head = {"index": i, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}}
            events.append(chunk({"tool_calls": [head]}))
        # arguments in fragments, interleaved across parallel calls by index
        fragments = [(i, call["function"]["arguments"]) for i, call in enumerate(calls)]
        for start in range(0, max((len(a) for _, a in fragments), default=0), 3):
            for i, args in fragments:
                if args[start : start + 3]:
                    events.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": args[start : start + 3]}}]}))
        events.append(chunk({}, "tool_calls"))
    else:
        for word in answer_text(body, text).split(" "):
            events.append(chunk({"content": word + " "}))
        events.append(chunk({}, "stop"))
    if (body.get("stream_options") or {}).get("include_usage"):
        report = usage if usage is not None else _usage(body, len(events))
        chunk_of_usage = {"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [], "usage": report}
        events.append(b"data: " + orjson.dumps(chunk_of_usage) + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return events


def ollama_request_error(body: dict[str, Any]) -> str | None:
    """What Ollama's decoding of a ``/api/chat`` body refuses with a 400 (Go's ``encoding/json`` into
    ``api.ChatRequest``), in its words: a message's ``content`` that is not a string (OpenAI's list of
    parts), and a tool call's ``arguments`` that are not an object (OpenAI's JSON string)."""
    messages = body.get("messages")
    if messages is not None and not isinstance(messages, list):
        return f"json: cannot unmarshal {_go_kind(messages)} into Go struct field ChatRequest.messages of type []api.Message"
    for message in messages or []:
        if not isinstance(message, dict):
            return f"json: cannot unmarshal {_go_kind(message)} into Go struct field ChatRequest.messages of type api.Message"
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            return f"json: cannot unmarshal {_go_kind(content)} into Go struct field ChatRequest.messages.content of type string"
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            arguments = function.get("arguments") if isinstance(function, dict) else None
            if arguments is not None and not isinstance(arguments, dict):
                return (
                    f"json: cannot unmarshal {_go_kind(arguments)} into Go struct field "
                    "ChatRequest.messages.tool_calls.function.arguments of type api.ToolCallFunctionArguments"
                )
    return None


def _go_kind(value: Any) -> str:
    """How Go's json errors name a JSON value's kind."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (int, float)):
        return "number"
    return "array" if isinstance(value, list) else "object"


def ollama_answer(body: dict[str, Any], text: str, commands: tuple[str, ...] = ONE_LISTING, thinking: str | None = None) -> list[dict[str, Any]]:
    """The NDJSON lines of a native ``/api/chat`` answer, as Ollama (0.12.10 and later) streams one: the text
    a word a line, or one line with every tool call whole — ``{"id": "call_…", "function": {"index", "name",
    "arguments": {…}}}``, arguments an object, never fragmented — then a last line with ``done: true``,
    ``done_reason: "stop"`` (also after tool calls) and the token counts. The calls are the chat mock's
    (:func:`_tool_calls`: the ``--tool-command`` turns), their ids unique in the conversation, as Ollama's
    random ones are. ``thinking`` comes first, a word a line in ``message.thinking``, as a thinking model's does."""
    model, stamp = body.get("model", "mock"), "2026-01-01T00:00:00Z"

    def line(message: dict[str, Any]) -> dict[str, Any]:
        return {"model": model, "created_at": stamp, "message": {"role": "assistant", "content": "", **message}, "done": False}

    thoughts = thinking.split(" ") if thinking else []
    lines = [line({"thinking": word + (" " if n < len(thoughts) - 1 else "")}) for n, word in enumerate(thoughts)]
    if (retrieve := _retrieve(body)) is not None:
        call = {"id": retrieve["id"], "function": {"index": 0, "name": retrieve["function"]["name"], "arguments": json.loads(retrieve["function"]["arguments"])}}
        lines.append(line({"tool_calls": [call]}))
    elif (command := _command_to_call(body, commands)) is not None:
        calls = [
            {
                "id": "call_" + format(zlib.crc32(f"{len(body['messages'])}:{i}".encode()), "08x"),
                "function": {"index": i, "name": call["function"]["name"], "arguments": json.loads(call["function"]["arguments"])},
            }
            for i, call in enumerate(_tool_calls(body, command))
        ]
        lines.append(line({"tool_calls": calls}))
    else:
        results = _turn_results(body.get("messages") or [])
        text = answer_text(body, text)
        reply = quoting_tool_result(text, str(results[-1].get('content'))) if results and not _summarising(body) else text
        words = reply.split(" ")
        lines += [line({"content": word + (" " if n < len(words) - 1 else "")}) for n, word in enumerate(words)]
    prompt = prompt_tokens(body)
    last = {**line({}), "done": True, "done_reason": "stop", "total_duration": 1_000_000, "load_duration": 100_000,
            "prompt_eval_count": prompt, "prompt_eval_duration": 500_000, "eval_count": len(lines), "eval_duration": 400_000}
    return [*lines, last]


def ollama_whole(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The answer of ``stream: false``: the last line with the whole message (text and thinking joined, every call)."""
    content = "".join(l["message"]["content"] for l in lines)
    thinking = "".join(l["message"].get("thinking", "") for l in lines)
    calls = [call for l in lines for call in l["message"].get("tool_calls", [])]
    message: dict[str, Any] = {"role": "assistant", "content": content, **({"thinking": thinking} if thinking else {}), **({"tool_calls": calls} if calls else {})}
    return {**lines[-1], "message": message}
