"""A Gemini client (Gemini CLI, the google-genai SDKs) to an OpenAI-chat provider: the request, the
answer and its stream back. Pure.

Decisions, where the two APIs have no common ground:

The ``systemInstruction`` becomes the one leading system message. Each ``functionResponse`` becomes
a ``tool`` message right after the assistant turn whose call it answers — by its ``id`` when it has
one, else by name, in order (Gemini's own rule) — exactly one per call (:func:`one_result_per_call`);
its content is the response's one string field (Gemini CLI's ``output``) or its JSON. A call
without an ``id`` gets ``call_<content>_<part>``, the same on every turn. ``inlineData`` images go
as ``image_url`` data URLs, ``fileData`` images as their URI. Thought parts go back as
``reasoning_content`` only to a model that wants it (``models[].reasoning_content``); thought
signatures, ``thinkingConfig``, ``safetySettings``, ``topK`` and ``cachedContent`` (state kept at
Google, named in ``x-router-dropped``) have no chat equivalent and are left out, and so are tools
other than function declarations (``googleSearch``, ``codeExecution``, … — each named). Gemini's
OpenAPI schemas (``"type": "OBJECT"``) become JSON Schema (``"object"``). ``responseMimeType:
application/json`` with a schema becomes ``response_format: json_schema``, without one
``json_object``; ``toolConfig``'s mode ``ANY`` becomes ``required`` (one allowed name: that function),
``NONE`` ``none``.

The answer comes back as a ``GenerateContentResponse``: the text, the reasoning as a thought part
when the client asked for thoughts (``includeThoughts``), each tool call as a ``functionCall`` with
its id (``call_<token>_<n>`` when the provider gave none), the finish reason (``STOP``, also after
calls; ``MAX_TOKENS``; ``SAFETY``) and ``usageMetadata`` with ``cachedContentTokenCount`` and
``thoughtsTokenCount`` when the provider reported them. A stream comes back as SSE chunks: text and
thoughts as they arrive, each call whole once its arguments are (Gemini never splits one), the
finish reason and usage in the last chunk (with an empty text part when it has nothing else).
"""

from __future__ import annotations

from typing import Any

import orjson

from router.core.content import Message, content_text
from router.core.results import Candidate
from router.translate.chat_shape import strict_chat_messages
from router.translate.element_memo import ElementMemo, PassMemo
from router.translate.json_values import chat_stream, checked_answer, first_choice, request_object, tool_input
from router.translate.messages_to_chat import answered_call, one_result_per_call
from router.translate.protocol import EVENT_STREAM, AnswerIds, ToChat
from router.translate.sse_frames import FromChatStream
from router.wire.gemini.answers import SSE_EVENT_END
from router.wire.gemini.parts import (
    CACHED_CONTENT,
    CONTENTS,
    DECLARATIONS,
    FILE_DATA,
    GENERATION,
    INLINE_DATA,
    MAX_OUTPUT,
    MIME_TYPE,
    RESPONSE_JSON_SCHEMA,
    RESPONSE_MIME,
    RESPONSE_SCHEMA,
    SYSTEM,
    TOOL_CONFIG,
    TOOLS,
    all_text,
    field,
    function_call,
    function_response,
    is_image_part,
    is_model,
    is_thought,
    parts_of,
)
from router.wire.gemini.layout import response_text
from router.wire.gemini.view import includes_thoughts
from router.wire.openai_chat.validation import answer_problem as chat_answer_problem

# generationConfig's fields a chat body has, by their two spellings
_SAMPLING = (
    (("temperature", "temperature"), "temperature"),
    (("topP", "top_p"), "top_p"),
    (("seed", "seed"), "seed"),
    (("presencePenalty", "presence_penalty"), "presence_penalty"),
    (("frequencyPenalty", "frequency_penalty"), "frequency_penalty"),
)
STOP_SEQUENCES = ("stopSequences", "stop_sequences")
FUNCTION_CALLING = ("functionCallingConfig", "function_calling_config")
ALLOWED_NAMES = ("allowedFunctionNames", "allowed_function_names")
FINISH_REASONS = {"stop": "STOP", "length": "MAX_TOKENS", "tool_calls": "STOP", "function_call": "STOP", "content_filter": "SAFETY"}
_SCHEMA_ONLY_GEMINI = frozenset({"propertyOrdering", "property_ordering", "nullable"})


class GeminiToChat(ToChat):
    """A Gemini request to an OpenAI-chat provider, and its answer back (one request)."""

    def __init__(self, ids: AnswerIds, system_anywhere: bool = False) -> None:
        self.system_anywhere = system_anywhere  # the provider takes system messages anywhere (else: one, leading)
        self.model = ""
        self.reasoning = self.thoughts = False
        self.dropped: tuple[str, ...] = ()
        self.response_id = f"pinch-{ids.token}"
        self.call_ids = f"call_{ids.token[:12]}"

    def chat_request(self, body: bytes | dict[str, Any], candidate: Candidate) -> dict[str, Any]:
        """The chat body, before it is written (a chained translation hands it on as it is)."""
        gemini = request_object(body)
        self.model, self.reasoning = candidate.model, candidate.reasoning_content
        self.thoughts = includes_thoughts(gemini)
        self.dropped = dropped_by_chat(gemini)
        chat = gemini_to_chat_body(gemini, candidate.upstream_model, reasoning_content=self.reasoning)
        chat["messages"] = strict_chat_messages(chat["messages"], system_anywhere=self.system_anywhere, memo=STRICT)
        return chat

    def response_object(self, body: bytes | Any) -> dict[str, Any]:
        completion = checked_answer(body, chat_answer_problem, "a chat completion")
        return chat_completion_to_gemini(completion, self.model, self.response_id, self.call_ids, self.thoughts)

    def streams(self, content_type: str) -> bool:
        return content_type == EVENT_STREAM

    def stream(self) -> ChatToGeminiSse:
        return ChatToGeminiSse(self.model, self.response_id, self.call_ids, self.thoughts)


def dropped_by_chat(body: dict[str, Any]) -> tuple[str, ...]:
    """What a chat provider cannot be given: tools other than function declarations, ``cachedContent``."""
    tools = field(body, TOOLS)
    names = [f"tool {next(iter(t), 'unknown')}" for t in tools if isinstance(t, dict) and not field(t, DECLARATIONS)] if isinstance(tools, list) else []
    if field(body, CACHED_CONTENT) is not None:
        names.append("cachedContent")
    return tuple(names)


def json_schema(schema: Any) -> Any:
    """A Gemini schema (OpenAPI's subset: upper-case ``type``, ``nullable``) as JSON Schema; a JSON Schema
    comes back as it was, but for ``propertyOrdering``."""
    if isinstance(schema, list):
        return [json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: json_schema(v) if k not in ("enum", "const", "default", "example", "required") else v for k, v in schema.items() if k not in _SCHEMA_ONLY_GEMINI}
    kind = out.get("type")
    if isinstance(kind, str):
        out["type"] = kind.lower()
    elif isinstance(kind, list):
        out["type"] = [k.lower() if isinstance(k, str) else k for k in kind]
    if schema.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _image_part(part: dict[str, Any]) -> dict[str, Any] | None:
    inline = field(part, INLINE_DATA)
    if isinstance(inline, dict) and isinstance(inline.get("data"), str):
        return {"type": "image_url", "image_url": {"url": f"data:{field(inline, MIME_TYPE) or 'image/png'};base64,{inline['data']}"}}
    uri = field(field(part, FILE_DATA), ("fileUri", "file_uri"))
    return {"type": "image_url", "image_url": {"url": uri}} if isinstance(uri, str) else None


def chat_view(system: Any, contents: list[Any], memo: PassMemo[Message] | None = None) -> list[Message]:
    """The conversation as chat messages, for :func:`one_result_per_call`: each function response a
    ``tool`` message after the calls it answers, its content's other parts the user's after it.

    With a ``memo``, what was made of the contents a conversation repeats (the very objects) is taken
    again up to its last model content among them: a content's view depends on it, its place (the
    ids of calls without one) and the calls of the model content before it, none of which a model
    content's view depends on — so the output before one is final and the pass goes on from there."""
    out: list[Message] = []
    if system is not None and (text := all_text(system)):
        out.append({"role": "system", "content": text})
    start, made, marks = memo.resume(contents, None) if memo is not None else (0, [], [])
    open_calls: list[tuple[str, str]] = []  # (id, name) of the last model turn's calls not yet answered
    for c in range(start, len(contents)):
        content = contents[c]
        parts = parts_of(content)
        if is_model(content):
            marks.append((c, len(made)))
            texts, reasoning, calls = [], [], []
            for p, part in enumerate(parts):
                call = function_call(part)
                if call is not None:
                    call_id = call["id"] if isinstance(call.get("id"), str) and call["id"] else f"call_{c}_{p}"
                    calls.append({"id": call_id, "type": "function", "function": {"name": call.get("name", ""), "arguments": orjson.dumps(call.get("args") or {}).decode()}})
                elif isinstance(part.get("text"), str):
                    (reasoning if is_thought(part) else texts).append(part["text"])
            message: Message = {"role": "assistant", "content": "".join(texts) or None}
            if calls:
                message["tool_calls"] = calls
            if reasoning:
                message["reasoning_content"] = "".join(reasoning)
            made.append(message)
            open_calls = [(call["id"], call["function"]["name"]) for call in calls]
            continue
        user: list[dict[str, Any]] = []
        for part in parts:
            response = function_response(part)
            if response is not None:
                call_id = answered_call(response.get("id"), response.get("name"), open_calls)
                if call_id is not None:
                    text, _ = response_text(response.get("response"))
                    made.append({"role": "tool", "tool_call_id": call_id, "content": text})
                user += [image for inner in parts_of(response) if is_image_part(inner) and (image := _image_part(inner)) is not None]
            elif isinstance(part.get("text"), str) and not is_thought(part):
                user.append({"type": "text", "text": part["text"]})
            elif is_image_part(part) and (image := _image_part(part)) is not None:
                user.append(image)
        if user:  # parts stay parts (Gemini CLI's session context and the prompt are two); one text is a string
            made.append({"role": "user", "content": user if len(user) > 1 or user[0]["type"] != "text" else user[0]["text"]})
    if memo is not None:
        memo.keep(contents, None, made, marks)
    return out + made


# What was made of a conversation's contents, taken again for the contents the next request repeats
# (router.translate.element_memo): its view, the view made sendable, its strict shape
CONTENT_VIEWS: PassMemo[Message] = PassMemo()
SENDABLE: PassMemo[Message] = PassMemo()
STRICT: PassMemo[Message] = PassMemo()


def gemini_to_chat_body(body: dict[str, Any], upstream_model: str, *, reasoning_content: bool = False) -> dict[str, Any]:
    """A Gemini body (with the path's ``stream``, as the wire adapter writes a translation's source) as
    a chat-completions body for ``upstream_model``."""
    # made sendable apart: the system message (no call, nothing open after it) is made anew each time,
    # the conversation's messages (the same objects while resent) once, then taken again
    sendable = one_result_per_call(chat_view(field(body, SYSTEM), []), reasoning_content)
    sendable += one_result_per_call(chat_view(None, field(body, CONTENTS) or [], CONTENT_VIEWS), reasoning_content, SENDABLE)
    out: dict[str, Any] = {"model": upstream_model, "messages": sendable}
    generation = field(body, GENERATION) if isinstance(field(body, GENERATION), dict) else {}
    limit = field(generation, MAX_OUTPUT)
    if isinstance(limit, int) and not isinstance(limit, bool):
        out["max_tokens"] = limit
    for names, key in _SAMPLING:
        if (value := field(generation, names)) is not None:
            out[key] = value
    stops = field(generation, STOP_SEQUENCES)
    if isinstance(stops, list) and stops:
        out["stop"] = stops
    groups = field(body, TOOLS) or []
    # a resent body's tools are the very objects of the body before (resent_prefix): made once, taken again
    tools = [tool for made in TOOL_GROUPS.map(groups if isinstance(groups, list) else list(groups), _chat_tools) for tool in made]
    if tools:
        out["tools"] = tools
        choice = _tool_choice(field(field(body, TOOL_CONFIG), FUNCTION_CALLING))
        if choice is not None:
            out["tool_choice"] = choice
    mime = field(generation, RESPONSE_MIME)
    schema = field(generation, RESPONSE_JSON_SCHEMA) or field(generation, RESPONSE_SCHEMA)
    if isinstance(schema, dict):
        out["response_format"] = {"type": "json_schema", "json_schema": {"name": "output", "schema": json_schema(schema)}}
    elif isinstance(mime, str) and mime.lower().startswith("application/json"):
        out["response_format"] = {"type": "json_object"}
    out.update(chat_stream(body))  # the last chunk reports real usage
    return out


TOOL_GROUPS: ElementMemo[list[dict[str, Any]]] = ElementMemo()


def _chat_tools(group: Any) -> list[dict[str, Any]]:
    """A Gemini tool's function declarations as chat tools (none for a tool of another kind)."""
    return [_chat_tool(d) for d in field(group, DECLARATIONS) or [] if isinstance(d, dict)] if isinstance(group, dict) else []


def _chat_tool(declaration: dict[str, Any]) -> dict[str, Any]:
    schema = declaration.get("parametersJsonSchema", declaration.get("parameters_json_schema", declaration.get("parameters")))
    function: dict[str, Any] = {"name": declaration["name"], "parameters": json_schema(schema) if isinstance(schema, dict) else {"type": "object", "properties": {}}}
    if isinstance(declaration.get("description"), str):
        function["description"] = declaration["description"]
    return {"type": "function", "function": function}


def _tool_choice(config: Any) -> Any:
    mode = str(field(config, ("mode", "mode")) or "").upper()
    if mode == "NONE":
        return "none"
    if mode == "ANY":
        names = field(config, ALLOWED_NAMES)
        if isinstance(names, list) and len(names) == 1 and isinstance(names[0], str):
            return {"type": "function", "function": {"name": names[0]}}
        return "required"
    return "auto" if mode in ("AUTO", "VALIDATED") else None


def gemini_usage(usage: Any) -> dict[str, int]:
    """A chat ``usage`` as ``usageMetadata``: the prompt (cached part included), the output less its
    reasoning, the reasoning, the cached part."""
    usage = usage if isinstance(usage, dict) else {}

    def number(key: str, within: dict[str, Any] = usage) -> int:
        value = within.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    prompt, completion = number("prompt_tokens"), number("completion_tokens")
    details = usage.get("completion_tokens_details")
    thoughts = number("reasoning_tokens", details) if isinstance(details, dict) else 0
    cached_in = usage.get("prompt_tokens_details")
    cached = number("cached_tokens", cached_in) if isinstance(cached_in, dict) else 0
    metadata = {"promptTokenCount": prompt, "candidatesTokenCount": max(completion - thoughts, 0), "totalTokenCount": number("total_tokens") or prompt + completion}
    if cached:
        metadata["cachedContentTokenCount"] = cached
    if thoughts:
        metadata["thoughtsTokenCount"] = thoughts
    return metadata


def _call_part(call: dict[str, Any], call_ids: str, position: int) -> dict[str, Any]:
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    call_id = call.get("id") if isinstance(call.get("id"), str) and call["id"] else f"{call_ids}_{position}"
    return {"functionCall": {"id": call_id, "name": function.get("name") or "", "args": tool_input(function.get("arguments"))}}


def _response(parts: list[dict[str, Any]], model: str, response_id: str, finish: str | None = None, usage: dict[str, int] | None = None) -> dict[str, Any]:
    """One ``GenerateContentResponse``. Its content always has a part: a stream's last chunk after text (or an
    answer with nothing to say) has an empty text part, as Gemini 3's last chunk does — the google-genai
    SDK's ``Chat`` drops a turn from its history when any chunk's content has no parts."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts or [{"text": ""}]}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    out: dict[str, Any] = {"candidates": [candidate]}
    if usage is not None:
        out["usageMetadata"] = usage
    out["modelVersion"] = model
    out["responseId"] = response_id
    return out


def chat_completion_to_gemini(completion: dict[str, Any], model: str, response_id: str, call_ids: str, thoughts: bool = False) -> dict[str, Any]:
    """A non-streamed chat completion as a ``GenerateContentResponse``."""
    choice, message = first_choice(completion)
    parts: list[dict[str, Any]] = []
    reasoning = message.get("reasoning_content")
    if thoughts and isinstance(reasoning, str) and reasoning:
        parts.append({"text": reasoning, "thought": True})
    if text := content_text(message.get("content")):
        parts.append({"text": text})
    calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    parts += [_call_part(call, call_ids, n) for n, call in enumerate(calls)]
    finish = FINISH_REASONS.get(choice.get("finish_reason") or "stop", "STOP")
    return _response(parts, model, response_id, finish, gemini_usage(completion.get("usage")))


def _event(response: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(response) + SSE_EVENT_END


class ChatToGeminiSse(FromChatStream):
    """A chat-completions stream as Gemini's SSE chunks (see the module doc)."""

    def __init__(self, model: str, response_id: str, call_ids: str, thoughts: bool = False) -> None:
        super().__init__()
        self.model, self.response_id, self.call_ids, self.thoughts = model, response_id, call_ids, thoughts

    def _pieces(self, pieces: list[tuple[str, str]]) -> list[bytes]:
        parts: list[dict[str, Any]] = []
        for reasoning, text in pieces:
            if self.thoughts and reasoning:
                parts.append({"text": reasoning, "thought": True})
            if text:
                parts.append({"text": text})
        return [_event(_response(parts, self.model, self.response_id))] if parts else []

    def _last(self) -> list[bytes]:
        """The last chunk: the calls, whole, the finish reason and the usage."""
        parts = [_call_part(call, self.call_ids, n) for n, call in enumerate(self.calls.whole())]
        finish = FINISH_REASONS.get(self.finish_reason or "stop", "STOP")
        return [_event(_response(parts, self.model, self.response_id, finish, gemini_usage(self.chat_usage)))]
