"""OpenAI chat to Ollama's native ``/api/chat`` (an ``api: ollama`` provider with ``native_chat: true``), and back. Pure.

The native answer (one JSON object, or an NDJSON stream) comes back as a chat completion or chat
SSE: text, the ``thinking`` a thinking model sends beside it (by default on a recent Ollama) as
``reasoning_content``, tool calls (with the ids Ollama gives them), finish reason, usage from
``prompt_eval_count`` / ``eval_count``; an ``{"error": …}`` line mid-stream ends the client's
stream with an error event.

What the translation carries, request side: messages (text parts joined, data-URL
images as ``images``, tool calls with their arguments as objects and their ids, tool
results as ``tool`` messages with ``tool_call_id`` and ``tool_name``, an assistant's
``reasoning_content`` / ``reasoning`` as ``thinking``), ``tools``, ``stream``,
``response_format`` (json_object ⇒ ``format: "json"``, json_schema ⇒ its schema), and
``max_tokens`` / ``max_completion_tokens``, ``temperature``, ``top_p``, ``stop``,
``seed``, ``frequency_penalty``, ``presence_penalty`` into ``options``. Other chat fields have
no native equivalent and are dropped.
"""

from __future__ import annotations

from typing import Any

import orjson

from router.core.content import Message, content_text
from router.core.results import Candidate, Usage
from router.translate.chat_to_responses import reasoning_text
from router.translate.json_values import answer_object, checked_event, request_object, tool_input
from router.translate.protocol import AnswerIds, StreamBroken, Translator
from router.wire.ollama.answers import NDJSON, answer_problem, line_problem
from router.wire.openai_chat.answer import chat_completion
from router.wire.openai_chat.stream import DONE_EVENT

# chat's sampling fields that are Ollama options of the same name
OPTION_KEYS = ("temperature", "top_p", "stop", "seed", "frequency_penalty", "presence_penalty")
# Ollama's done_reason → chat's finish_reason (a model loaded or unloaded answers nothing: a stop)
FINISH_REASONS = {"stop": "stop", "length": "length", "load": "stop", "unload": "stop"}


def native_message(message: Message, call_names: dict[str, str] | None = None) -> dict[str, Any]:
    """One chat message as Ollama's native chat takes it. A tool result names its call (``tool_call_id``,
    which Ollama 0.12.10 and later read; older ones ignore it) and the tool (``tool_name``: the message's
    ``name``, else the name of the call it answers, from ``call_names``): chat results carry only the id, and
    a native model's template can show only what Ollama is given."""
    out: dict[str, Any] = {"role": message.get("role"), "content": content_text(message.get("content"))}
    content = message.get("content")
    if isinstance(content, list):
        images = [
            url.split(",", 1)[1]
            for part in content
            if isinstance(part, dict) and part.get("type") == "image_url"
            for url in [_image_url(part)]
            if url.startswith("data:") and "," in url
        ]
        if images:
            out["images"] = images
    if message.get("role") == "assistant" and (thinking := reasoning_text(message)):
        out["thinking"] = thinking  # what a thinking model's template shows of its earlier turns (gpt-oss's, on tool calls)
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        out["tool_calls"] = [native_call(call) for call in calls if isinstance(call, dict)]
    if message.get("role") == "tool":
        call_id = message.get("tool_call_id")
        name = message.get("name") if isinstance(message.get("name"), str) else (call_names or {}).get(call_id) if isinstance(call_id, str) else None
        if name:
            out["tool_name"] = name
        if isinstance(call_id, str) and call_id:
            out["tool_call_id"] = call_id
    return out


def _call_names(messages: list[Any]) -> dict[str, str]:
    """Each tool call's id → its function's name, over the assistant messages of a chat body."""
    return {
        call["id"]: call["function"]["name"]
        for message in messages
        if isinstance(message, dict) and isinstance(message.get("tool_calls"), list)
        for call in message["tool_calls"]
        if isinstance(call, dict) and isinstance(call.get("id"), str) and isinstance(call.get("function"), dict) and isinstance(call["function"].get("name"), str)
    }


def _image_url(part: dict[str, Any]) -> str:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    return url if isinstance(url, str) else ""


def native_call(call: dict[str, Any]) -> dict[str, Any]:
    """A chat tool call as Ollama takes it: arguments an object (Ollama refuses a string), as Anthropic's
    ``tool_use`` input is made — arguments that are not a JSON object go as ``{"arguments": <the text>}``,
    not lost (they were ``{}``)."""
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    native = {"function": {"name": function.get("name", ""), "arguments": tool_input(function.get("arguments"))}}
    # the call's id, which its result answers by: Ollama 0.12.10 and later take it back (older ones ignore it)
    return {"id": call["id"], **native} if isinstance(call.get("id"), str) and call["id"] else native


def native_request(body: dict[str, Any], num_ctx: int | None) -> dict[str, Any]:
    """An OpenAI chat body (as the proxy would send it) as Ollama's native ``/api/chat`` body."""
    options: dict[str, Any] = {key: body[key] for key in OPTION_KEYS if body.get(key) is not None}
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if isinstance(limit, int) and not isinstance(limit, bool):
        options["num_predict"] = limit
    if num_ctx is not None:
        options["num_ctx"] = num_ctx
    messages = body.get("messages") or []
    names = _call_names(messages)
    native: dict[str, Any] = {
        "model": body.get("model"),
        "messages": [native_message(m, names) for m in messages if isinstance(m, dict)],
        "stream": body.get("stream") is True,
        "options": options,
    }
    if body.get("tools"):
        native["tools"] = body["tools"]
    response_format = body.get("response_format")
    if isinstance(response_format, dict):
        if response_format.get("type") == "json_object":
            native["format"] = "json"
        elif response_format.get("type") == "json_schema":
            schema = response_format.get("json_schema")
            native["format"] = schema.get("schema", "json") if isinstance(schema, dict) else "json"
    return native


def chat_usage(answer: dict[str, Any]) -> dict[str, int] | None:
    prompt, completion = answer.get("prompt_eval_count"), answer.get("eval_count")
    if not isinstance(prompt, int) and not isinstance(completion, int):
        return None
    prompt, completion = prompt if isinstance(prompt, int) else 0, completion if isinstance(completion, int) else 0
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def chat_calls(calls: Any, first_index: int, id_prefix: str) -> list[dict[str, Any]]:
    """Ollama's tool calls as chat ones, each with the id Ollama gave it (0.12.10 and later: ``call_…``,
    random), else ``<id_prefix>_<index>`` (older ones give none)."""
    out = []
    for offset, call in enumerate(calls if isinstance(calls, list) else []):
        function = call.get("function") if isinstance(call, dict) and isinstance(call.get("function"), dict) else {}
        arguments = function.get("arguments", {})
        out.append(
            {
                "index": first_index + offset,
                "id": call["id"] if isinstance(call, dict) and isinstance(call.get("id"), str) and call["id"] else f"{id_prefix}_{first_index + offset}",
                "type": "function",
                "function": {"name": function.get("name", ""), "arguments": arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()},
            }
        )
    return out


class OllamaChatTranslator(Translator):
    """OpenAI chat ⇄ Ollama native chat, for one request (see the module doc)."""

    dropped: tuple[str, ...] = ()

    def __init__(self, ids: AnswerIds, system_anywhere: bool = False) -> None:  # a chat client's own messages keep their places
        self.model = ""
        self.created = ids.created
        # the answer's own call ids: "call_0" in every answer made a session's calls share ids, which a
        # client answers calls by (Anthropic's tool_use ids must be unique in the conversation)
        self.call_ids = f"call_{ids.token[:12]}"

    def request(self, body: bytes | dict[str, Any], candidate: Candidate) -> bytes:
        chat = request_object(body)
        self.model = str(chat.get("model") or "")
        return orjson.dumps(native_request(chat, candidate.context_window))

    def response_object(self, body: bytes | Any) -> dict[str, Any]:
        answer = checked_event(answer_object(body), answer_problem, "an Ollama chat answer")
        message = answer["message"]
        calls = chat_calls(message.get("tool_calls"), 0, self.call_ids)
        out_message: dict[str, Any] = {"role": "assistant", "content": message.get("content") or None}
        if isinstance(message.get("thinking"), str) and message["thinking"]:
            out_message["reasoning_content"] = message["thinking"]
        if calls:
            out_message["tool_calls"] = [{k: v for k, v in call.items() if k != "index"} for call in calls]
        finish = "tool_calls" if calls else FINISH_REASONS.get(str(answer.get("done_reason") or "stop"), "stop")
        return chat_completion(f"chatcmpl-ollama-{self.created}", self.created, answer.get("model", self.model), out_message, finish, chat_usage(answer))

    def streams(self, content_type: str) -> bool:
        return content_type == NDJSON

    def stream(self) -> OllamaStream:
        return OllamaStream(self.model, self.created, self.call_ids)


class OllamaStream:
    """Ollama's NDJSON stream as OpenAI chat SSE chunks (see :class:`router.providers.StreamTranslator`)."""

    def __init__(self, model: str, created: int, call_ids: str) -> None:
        self.model, self.created, self.call_ids = model, created, call_ids
        self.pending = bytearray()
        self.usage: Usage | None = None
        self.calls = 0
        self.started = self.done = False
        self.broken: StreamBroken | None = None  # an error line, raised after the events before it

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        chunk = {
            "id": f"chatcmpl-ollama-{self.created}",
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    def feed(self, chunk: bytes) -> bytes:
        self._raise_pending()
        self.pending += chunk
        end = self.pending.rfind(b"\n")
        if end < 0:
            return b""
        lines = bytes(self.pending[: end + 1]).splitlines()
        del self.pending[: end + 1]
        return self._lines(lines)

    def finish(self) -> bytes:
        self._raise_pending()
        rest = bytes(self.pending).strip()
        self.pending.clear()
        return self._lines([rest]) if rest else b""

    def _lines(self, lines: list[bytes]) -> bytes:
        """The events of whole lines; an error line is raised once the events before it are out."""
        out = []
        for line in lines:
            if not line.strip():
                continue
            try:
                out.append(self._line(line))
            except StreamBroken as exc:
                self.broken = exc
                break
        if not out:
            self._raise_pending()
        return b"".join(out)

    def _raise_pending(self) -> None:
        if self.broken is not None:
            raise self.broken

    def _line(self, line: bytes) -> bytes:
        if self.done:
            return b""
        try:
            answer = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise StreamBroken(f"Ollama sent a line that is not JSON ({len(line)} bytes)") from None
        if not isinstance(answer, dict):
            raise StreamBroken("Ollama sent a line that is not a JSON object")
        if "error" in answer:
            raise StreamBroken(f"Ollama: {str(answer['error'])[:300]}")
        checked_event(answer, line_problem, "a line of an Ollama chat stream")
        self.model = str(answer.get("model") or self.model)
        out = b""
        message = answer.get("message") if isinstance(answer.get("message"), dict) else {}
        delta: dict[str, Any] = {}
        if not self.started:
            delta["role"] = "assistant"
            self.started = True
        if isinstance(message.get("thinking"), str) and message["thinking"]:
            delta["reasoning_content"] = message["thinking"]
        if message.get("content"):
            delta["content"] = message["content"]
        calls = chat_calls(message.get("tool_calls"), self.calls, self.call_ids)
        if calls:
            delta["tool_calls"] = calls
            self.calls += len(calls)
        if len(delta) > ("role" in delta) or (delta and not answer.get("done")):
            out += self._chunk(delta)
        if answer.get("done"):
            self.done = True
            finish = "tool_calls" if self.calls else FINISH_REASONS.get(str(answer.get("done_reason") or "stop"), "stop")
            out += self._chunk({}, finish)
            usage = chat_usage(answer)
            if usage is not None:
                self.usage = Usage(usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"])
                usage_chunk = {"id": f"chatcmpl-ollama-{self.created}", "object": "chat.completion.chunk", "created": self.created, "model": self.model, "choices": [], "usage": usage}
                out += b"data: " + orjson.dumps(usage_chunk) + b"\n\n"
            out += DONE_EVENT
        return out
