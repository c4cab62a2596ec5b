"""An OpenAI-chat client (opencode, aider, the openai SDK, …) to an ``api: gemini`` provider: the request,
the answer and its stream back. Pure.

Decisions, where the two APIs have no common ground:

Every system/developer message joins the ``systemInstruction``. Consecutive messages of one side are
one content (Gemini alternates ``user`` and ``model``). An assistant's tool calls become
``functionCall`` parts (arguments as an object, the call's id kept), the first of each turn with
Google's placeholder signature (:data:`~router.wire.gemini.parts.SKIP_SIGNATURE`: the calls were not
made by this Gemini, and Gemini 3 refuses a call without one); its reasoning is left out (Gemini
reads only its own, signed). Tool messages become ``functionResponse`` parts (``response:
{"output": <text>}``, named after the call they answer), exactly one per call, a missing one as
``(no result)`` — Gemini refuses a turn whose responses do not match its calls. Data-URL images
become ``inlineData``, other URLs ``fileData``. Function tools go as ``parametersJsonSchema`` (JSON
Schema as it is); ``tool_choice`` as ``toolConfig`` (``required`` ⇒ ``ANY``, one function ⇒ ``ANY``
with that name); ``response_format`` as ``responseMimeType: application/json`` (with
``responseJsonSchema`` for a schema); ``max_tokens`` / ``max_completion_tokens``, ``temperature``,
``top_p``, ``stop``, ``seed`` and the penalties as ``generationConfig``. Other chat fields have no
Gemini equivalent and are left out.

The answer's text, its thought parts (as ``reasoning_content``) and its calls (their ids, else
``call_<token>_<n>``) come back as a chat completion, ``usageMetadata`` as ``usage`` (cached tokens in
``prompt_tokens_details``, thoughts in ``completion_tokens_details.reasoning_tokens``); a stream as
chat chunks, each call whole in one chunk, ending with the finish reason, the usage chunk and
``[DONE]`` once a chunk carries Gemini's ``finishReason``.
"""

from __future__ import annotations

from typing import Any

import orjson

from router.core.content import content_text
from router.core.results import Candidate
from router.translate.chat_to_messages import image_source
from router.translate.json_values import add_turn, checked_answer, request_object, stop_sequences, tool_input
from router.translate.protocol import EVENT_STREAM, AnswerIds, Translator
from router.translate.sse_frames import SseTranslator, provider_event
from router.wire.gemini.adapter import GEMINI_ADAPTER
from router.wire.gemini.answers import answer_problem as gemini_answer_problem
from router.wire.gemini.answers import chunk_problem as gemini_chunk_problem
from router.wire.gemini.parts import SKIP_SIGNATURE, function_call, is_thought, parts_of, text_of
from router.wire.openai_chat.answer import chat_completion
from router.wire.openai_chat.stream import DONE_EVENT

NO_RESULT = "(no result)"
FINISH_REASONS = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
}
_SAMPLING = (("temperature", "temperature"), ("top_p", "topP"), ("seed", "seed"), ("presence_penalty", "presencePenalty"), ("frequency_penalty", "frequencyPenalty"))


class ChatToGemini(Translator):
    """An OpenAI chat request to a Gemini provider, and its answer back (one request)."""

    dropped: tuple[str, ...] = ()

    def __init__(self, ids: AnswerIds, system_anywhere: bool = False) -> None:  # Gemini's system is systemInstruction: nothing to place
        self.model = ""
        self.created = ids.created
        self.chunk_id = f"chatcmpl-{ids.token}"
        self.call_ids = f"call_{ids.token[:12]}"

    def request(self, body: bytes | dict[str, Any], candidate: Candidate) -> bytes:
        chat = request_object(body)
        self.model = candidate.model
        tools = chat.get("tools") if isinstance(chat.get("tools"), list) else []
        self.dropped = tuple(f"tool {t.get('type')}" for t in tools if isinstance(t, dict) and not isinstance(t.get("function"), dict))
        return orjson.dumps(chat_to_gemini_body(chat))

    def response_object(self, body: bytes | Any) -> dict[str, Any]:
        answer = checked_answer(body, gemini_answer_problem, "a Gemini answer")
        return gemini_to_chat_completion(answer, self.model, self.chunk_id, self.created, self.call_ids)

    def streams(self, content_type: str) -> bool:
        return content_type == EVENT_STREAM

    def stream(self) -> GeminiToChatSse:
        return GeminiToChatSse(self.model, self.chunk_id, self.created, self.call_ids)


def _user_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}] if content else []
    parts = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") in ("text", "input_text") and isinstance(part.get("text"), str):
            parts.append({"text": part["text"]})
        elif part.get("type") == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if isinstance(url, str):
                source = image_source(url)
                if source["type"] == "base64":
                    parts.append({"inlineData": {"mimeType": source["media_type"], "data": source["data"]}})
                else:
                    parts.append({"fileData": {"mimeType": _mime_of(url), "fileUri": url}})
    return parts


def _mime_of(url: str) -> str:
    ending = url.lower().rsplit("?", 1)[0].rsplit(".", 1)[-1]
    return {"png": "image/png", "gif": "image/gif", "webp": "image/webp"}.get(ending, "image/jpeg")


def chat_to_gemini_body(body: dict[str, Any]) -> dict[str, Any]:
    """A chat-completions body as a Gemini ``generateContent`` body (the model and the stream go in the URL)."""
    system: list[str] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # call id → function name, for the responses
    open_calls: list[str] = []  # the last assistant turn's call ids still waiting for their result

    def add(role: str, parts: list[dict[str, Any]]) -> None:
        add_turn(contents, role, parts, "parts")

    def close_calls() -> None:
        add("user", [_response_part(call_id, names.get(call_id, ""), NO_RESULT) for call_id in open_calls])
        open_calls.clear()

    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role, content = message.get("role"), message.get("content")
        if role in ("tool", "function"):
            call_id = message.get("tool_call_id") or message.get("name") or ""
            if call_id in open_calls:
                open_calls.remove(call_id)
                add("user", [_response_part(call_id, names.get(call_id, message.get("name") or ""), content_text(content))])
            continue
        close_calls()
        if role in ("system", "developer"):
            if text := content_text(content):
                system.append(text)
        elif role == "user":
            add("user", _user_parts(content))
        elif role == "assistant":
            parts = [{"text": text}] if (text := content_text(content)) else []
            for call in message.get("tool_calls") or []:
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(function, dict):
                    continue
                call_id = call.get("id") if isinstance(call.get("id"), str) else ""
                names[call_id] = str(function.get("name", ""))
                part: dict[str, Any] = {"functionCall": {"name": names[call_id], "args": tool_input(function.get("arguments"))}}
                if call_id:
                    part["functionCall"] = {"id": call_id, **part["functionCall"]}
                    open_calls.append(call_id)
                if not any(function_call(p) is not None for p in parts):
                    part["thoughtSignature"] = SKIP_SIGNATURE
                parts.append(part)
            add("model", parts)
    close_calls()
    out: dict[str, Any] = {"contents": contents}
    if system:
        out["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
    generation: dict[str, Any] = {}
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        generation["maxOutputTokens"] = limit
    for key, gemini_key in _SAMPLING:
        if body.get(key) is not None:
            generation[gemini_key] = body[key]
    stop = stop_sequences(body)
    if stop:
        generation["stopSequences"] = stop
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"):
        generation["responseMimeType"] = "application/json"
        schema = fmt.get("json_schema", {}).get("schema") if isinstance(fmt.get("json_schema"), dict) else None
        if isinstance(schema, dict):
            generation["responseJsonSchema"] = schema
    if generation:
        out["generationConfig"] = generation
    declarations = [_declaration(t["function"]) for t in body.get("tools") or [] if isinstance(t, dict) and isinstance(t.get("function"), dict)]
    if declarations:
        out["tools"] = [{"functionDeclarations": declarations}]
        config = _function_calling(body.get("tool_choice"))
        if config is not None:
            out["toolConfig"] = {"functionCallingConfig": config}
    return out


def _response_part(call_id: str, name: str, text: str) -> dict[str, Any]:
    response: dict[str, Any] = {"name": name, "response": {"output": text}}
    return {"functionResponse": {"id": call_id, **response} if call_id else response}


def _declaration(function: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": function.get("name", "")}
    if isinstance(function.get("description"), str):
        out["description"] = function["description"]
    out["parametersJsonSchema"] = function.get("parameters") if isinstance(function.get("parameters"), dict) else {"type": "object", "properties": {}}
    return out


def _function_calling(choice: Any) -> dict[str, Any] | None:
    if choice == "none":
        return {"mode": "NONE"}
    if choice == "required":
        return {"mode": "ANY"}
    if choice == "auto":
        return {"mode": "AUTO"}
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict) and isinstance(choice["function"].get("name"), str):
        return {"mode": "ANY", "allowedFunctionNames": [choice["function"]["name"]]}
    return None


def chat_usage(metadata: Any) -> dict[str, Any] | None:
    """``usageMetadata`` as a chat ``usage``: the output is the candidates' tokens and the thoughts'."""
    if not isinstance(metadata, dict):
        return None

    def number(key: str) -> int:
        value = metadata.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    prompt, thoughts = number("promptTokenCount"), number("thoughtsTokenCount")
    completion = number("candidatesTokenCount") + thoughts
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": number("totalTokenCount") or prompt + completion,
        "prompt_tokens_details": {"cached_tokens": number("cachedContentTokenCount")},
    }
    if thoughts:
        usage["completion_tokens_details"] = {"reasoning_tokens": thoughts}
    return usage


def _candidate(answer: dict[str, Any]) -> dict[str, Any]:
    candidates = answer.get("candidates")
    return candidates[0] if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict) else {}


def _finish(candidate: dict[str, Any], has_calls: bool, blocked: bool = False) -> str:
    if has_calls:
        return "tool_calls"
    reason = candidate.get("finishReason")
    return "content_filter" if blocked and reason is None else FINISH_REASONS.get(str(reason or "STOP"), "stop")


def _chat_call(call: dict[str, Any], call_ids: str, position: int) -> dict[str, Any]:
    call_id = call.get("id") if isinstance(call.get("id"), str) and call["id"] else f"{call_ids}_{position}"
    return {"id": call_id, "type": "function", "function": {"name": call.get("name", ""), "arguments": orjson.dumps(call.get("args") or {}).decode()}}


def gemini_to_chat_completion(answer: dict[str, Any], model: str, completion_id: str, created: int, call_ids: str) -> dict[str, Any]:
    """A whole ``GenerateContentResponse`` as a chat completion."""
    candidate = _candidate(answer)
    parts = parts_of(candidate.get("content"))
    texts = [t for p in parts if (t := text_of(p)) is not None]
    reasoning = [p["text"] for p in parts if is_thought(p) and isinstance(p.get("text"), str)]
    found = [call for call in map(function_call, parts) if call is not None]
    calls = [_chat_call(call, call_ids, n) for n, call in enumerate(found)]
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    finish = _finish(candidate, bool(calls), "promptFeedback" in answer)
    return chat_completion(completion_id, created, model, message, finish, chat_usage(answer.get("usageMetadata")))


class GeminiToChatSse(SseTranslator):
    """Gemini's SSE chunks as a chat-completions stream (see the module doc). The usage chunk is
    always made: the relay drops it when the client did not ask for it."""

    def __init__(self, model: str, chunk_id: str, created: int, call_ids: str) -> None:
        super().__init__(GEMINI_ADAPTER)
        self.model, self.chunk_id, self.created, self.call_ids = model, chunk_id, created, call_ids
        self.started = False
        self.calls = 0
        self.metadata: Any = None

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        chunk = {"id": self.chunk_id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    def _data(self, data: bytes) -> list[bytes]:
        answer = provider_event(data, gemini_chunk_problem, "a Gemini stream chunk")
        if answer is None:
            return []
        if isinstance(answer.get("usageMetadata"), dict):
            self.metadata = answer["usageMetadata"]
        out: list[bytes] = []
        if not self.started:
            self.started = True
            out.append(self._chunk({"role": "assistant", "content": ""}))
        candidate = _candidate(answer)
        for part in parts_of(candidate.get("content")):
            call = function_call(part)
            if call is not None:
                chat = _chat_call(call, self.call_ids, self.calls)
                out.append(self._chunk({"tool_calls": [{"index": self.calls, **chat}]}))
                self.calls += 1
            elif is_thought(part) and isinstance(part.get("text"), str) and part["text"]:
                out.append(self._chunk({"reasoning_content": part["text"]}))
            elif (text := text_of(part)) is not None and text:
                out.append(self._chunk({"content": text}))
        if candidate.get("finishReason") or (answer.get("promptFeedback") and not candidate):
            out += self._end(candidate, "promptFeedback" in answer)
        return out

    def _end(self, candidate: dict[str, Any], blocked: bool) -> list[bytes]:
        self.done = True
        out = [self._chunk({}, _finish(candidate, self.calls > 0, blocked))]
        usage = chat_usage(self.metadata)
        if usage is not None:
            usage_chunk = {"id": self.chunk_id, "object": "chat.completion.chunk", "created": self.created, "model": self.model, "choices": [], "usage": usage}
            out.append(b"data: " + orjson.dumps(usage_chunk) + b"\n\n")
        return [*out, DONE_EVENT]

    def _closing(self) -> list[bytes]:
        return []  # no finishReason: cut short
