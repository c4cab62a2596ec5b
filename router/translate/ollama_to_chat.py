"""An Ollama client (``/api/chat``, ``/api/generate``) to an OpenAI-chat provider: the request, the answer and its
stream back. Pure.

The mapping between Ollama's shapes and chat's is shared with the provider side
(:mod:`router.translate.chat_to_ollama`, chat to a native ``/api/chat``): a tool call each way
(``native_call``, ``chat_calls``), the options that are chat's sampling fields (``OPTION_KEYS``).
Every other provider format is reached through chat (:mod:`router.translate.chained`), a native
Ollama provider too: the client's body is always this translation's source, never passed through.

The request: messages as chat's — an assistant's ``tool_calls`` (arguments an object) with their ids
(``call_<message>_<n>`` for a call the client sent without one, the same on every turn) and its
``thinking`` as ``reasoning_content`` (kept only for a model that wants it,
``models[].reasoning_content``); a ``tool`` result after the calls it answers, by its
``tool_call_id``, else its ``tool_name``, else in order; ``images`` (base64) as ``image_url`` data
URLs, a tool result's in a user message after the results. A generate request's system and prompt
are its messages. ``options``: ``num_predict`` ⇒ ``max_tokens``, ``temperature``, ``top_p``,
``stop``, ``seed``, ``frequency_penalty``, ``presence_penalty`` as chat's fields; the others
(``num_ctx``, ``top_k``, …), ``keep_alive`` and a generate's ``template`` and ``context`` have no chat
equivalent: ``template`` and ``context`` are named in ``x-router-dropped``, the rest only tune the
model's server. ``format``: ``"json"`` ⇒ ``response_format: json_object``, a schema ⇒ ``json_schema``;
``think``: a level ⇒ ``reasoning_effort``; ``think: false`` leaves the reasoning out of the answer.

The answer comes back as Ollama's: ``message`` (or a generate's ``response``) with the text, the
reasoning as ``thinking``, each tool call whole (``{"id", "function": {"name", "arguments": {…}}}``,
its id the provider's, else ``call_<token>_<n>``), then ``done: true``, ``done_reason`` (``stop``,
after tool calls too, or ``length``) and the counts (``prompt_eval_count``, ``eval_count``). A
stream comes back a line an event: text and thinking as they arrive, the calls whole in one line
once the provider's are, the last line with the counts.
"""

from __future__ import annotations

from typing import Any

import orjson

from router.core.content import Message, content_text
from router.core.results import Candidate
from router.translate.chat_shape import strict_chat_messages
from router.translate.chat_to_ollama import OPTION_KEYS, chat_calls, native_call
from router.translate.json_values import chat_stream, checked_answer, first_choice, request_object
from router.translate.messages_to_chat import answered_call, one_result_per_call
from router.translate.protocol import EVENT_STREAM, AnswerIds, ToChat
from router.translate.sse_frames import FromChatStream
from router.wire.ollama.answers import answer_line, created_at
from router.wire.openai_chat.validation import answer_problem as chat_answer_problem

# A base64 image's first characters → its type (Ollama takes the bytes; a data URL names the type)
IMAGE_TYPES = (("iVBORw0KGgo", "image/png"), ("/9j/", "image/jpeg"), ("R0lGOD", "image/gif"), ("UklGR", "image/webp"))
UNCARRIED = ("template", "context")  # a generate request's: the model's own template, an earlier answer's tokens


class OllamaToChat(ToChat):
    """An Ollama request to an OpenAI-chat provider, and its answer back (one request)."""

    def __init__(self, ids: AnswerIds, system_anywhere: bool = False) -> None:
        self.system_anywhere = system_anywhere  # the provider takes system messages anywhere (else: one, leading)
        self.model = ""
        self.generate = False
        self.thinking = True  # the reasoning goes back as `thinking` unless the client said think: false
        self.dropped: tuple[str, ...] = ()
        self.created = created_at(ids.created)
        self.call_ids = f"call_{ids.token[:12]}"

    def chat_request(self, body: bytes | dict[str, Any], candidate: Candidate) -> dict[str, Any]:
        """The chat body, before it is written (a chained translation hands it on as it is)."""
        source = request_object(body)
        self.model = candidate.model
        self.generate = "prompt" in source  # the wire adapter's source keeps a generate request's prompt only
        self.thinking = source.get("think") is not False
        self.dropped = tuple(key for key in UNCARRIED if source.get(key))
        chat = ollama_to_chat_body(source, candidate.upstream_model, reasoning_content=candidate.reasoning_content)
        chat["messages"] = strict_chat_messages(chat["messages"], system_anywhere=self.system_anywhere)
        return chat

    def response_object(self, body: bytes | Any) -> dict[str, Any]:
        completion = checked_answer(body, chat_answer_problem, "a chat completion")
        choice, message = first_choice(completion)
        reasoning = message.get("reasoning_content")
        calls = [ollama_call(call, self.call_ids, n) for n, call in enumerate(c for c in message.get("tool_calls") or [] if isinstance(c, dict))]
        line = answer_line(
            self.generate, self.model, self.created, content_text(message.get("content")),
            reasoning if self.thinking and isinstance(reasoning, str) else None, calls,
            done_reason(choice.get("finish_reason")), counts(completion.get("usage")),
        )  # fmt: skip
        return line

    def streams(self, content_type: str) -> bool:
        return content_type == EVENT_STREAM

    def stream(self) -> ChatToOllamaLines:
        return ChatToOllamaLines(self.model, self.created, self.call_ids, self.generate, self.thinking)


def image_url(data: str) -> str:
    """A base64 image (Ollama's) as a data URL (chat's), its type read from its first bytes (PNG when unknown)."""
    if data.startswith("data:"):
        return data
    kind = next((kind for start, kind in IMAGE_TYPES if data.startswith(start)), "image/png")
    return f"data:{kind};base64,{data}"


def _image_parts(images: Any) -> list[dict[str, Any]]:
    return [{"type": "image_url", "image_url": {"url": image_url(i)}} for i in images or () if isinstance(i, str)]


def chat_messages(messages: list[Message]) -> list[Message]:
    """Ollama messages as chat messages, for :func:`one_result_per_call` (see the module doc)."""
    out: list[Message] = []
    open_calls: list[tuple[str, str]] = []  # (id, name) of the last assistant turn's calls not yet answered
    result_images: list[dict[str, Any]] = []  # the tool results' images, for a user message after them
    for at, message in enumerate(messages):
        role = message["role"]
        if role != "tool" and result_images:
            out.append({"role": "user", "content": result_images})
            result_images = []
        if role == "assistant":
            calls = [{k: v for k, v in call.items() if k != "index"} for call in chat_calls(message.get("tool_calls"), 0, f"call_{at}")]
            chat: Message = {"role": "assistant", "content": message.get("content") or None}
            if calls:
                chat["tool_calls"] = calls
            if message.get("thinking"):
                chat["reasoning_content"] = message["thinking"]
            out.append(chat)
            open_calls = [(call["id"], call["function"]["name"]) for call in calls]
        elif role == "tool":
            call_id = answered_call(message.get("tool_call_id"), message.get("tool_name"), open_calls)
            if call_id is not None:
                out.append({"role": "tool", "tool_call_id": call_id, "content": message.get("content") or ""})
            result_images += _image_parts(message.get("images"))
        else:
            images = _image_parts(message.get("images"))
            text = message.get("content") or ""
            content: Any = [*([{"type": "text", "text": text}] if text else []), *images] if images else text
            out.append({"role": role, "content": content})
    if result_images:
        out.append({"role": "user", "content": result_images})
    return out


def ollama_to_chat_body(body: dict[str, Any], upstream_model: str, *, reasoning_content: bool = False) -> dict[str, Any]:
    """An Ollama body (the wire adapter's source: its ``messages``, ``stream`` said) as a chat-completions body for ``upstream_model``."""
    out: dict[str, Any] = {"model": upstream_model, "messages": one_result_per_call(chat_messages(body.get("messages") or []), reasoning_content)}
    options = body.get("options") if isinstance(body.get("options"), dict) else {}
    limit = options.get("num_predict")
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        out["max_tokens"] = limit
    out |= {key: options[key] for key in OPTION_KEYS if options.get(key) is not None}
    if body.get("tools") and "prompt" not in body:
        out["tools"] = body["tools"]
    fmt = body.get("format")
    if fmt == "json":
        out["response_format"] = {"type": "json_object"}
    elif isinstance(fmt, dict):
        out["response_format"] = {"type": "json_schema", "json_schema": {"name": "output", "schema": fmt}}
    if isinstance(body.get("think"), str):
        out["reasoning_effort"] = body["think"]
    out.update(chat_stream(body))  # the last line reports real counts
    return out


def ollama_call(call: dict[str, Any], call_ids: str, position: int) -> dict[str, Any]:
    """A chat tool call (its arguments JSON text) as Ollama's, whole (its arguments an object), with an id."""
    native = native_call(call)
    return native if "id" in native else {"id": f"{call_ids}_{position}", **native}


def done_reason(finish_reason: Any) -> str:
    """Chat's finish reason as Ollama's ``done_reason``: ``length``, else ``stop`` (after tool calls too, as Ollama says)."""
    return "length" if finish_reason == "length" else "stop"


def counts(usage: Any) -> tuple[int, int]:
    """A chat ``usage`` as Ollama's counts: (``prompt_eval_count``, ``eval_count``)."""
    usage = usage if isinstance(usage, dict) else {}
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    return (
        prompt if isinstance(prompt, int) and not isinstance(prompt, bool) else 0,
        completion if isinstance(completion, int) and not isinstance(completion, bool) else 0,
    )


class ChatToOllamaLines(FromChatStream):
    """A chat-completions stream as Ollama's lines (see the module doc), each an SSE event on its way through
    the relay (the client wire's framing makes it a line again)."""

    def __init__(self, model: str, created: str, call_ids: str, generate: bool = False, thinking: bool = True) -> None:
        super().__init__()
        self.model, self.created, self.call_ids, self.generate, self.thinking = model, created, call_ids, generate, thinking

    def _line(self, text: str = "", thinking: str | None = None, calls: list[dict[str, Any]] | None = None, **last: Any) -> bytes:
        return b"data: " + orjson.dumps(answer_line(self.generate, self.model, self.created, text, thinking, calls, **last)) + b"\n\n"

    def _pieces(self, pieces: list[tuple[str, str]]) -> list[bytes]:
        return [self._line(text, reasoning if self.thinking and reasoning else None) for reasoning, text in pieces if text or self.thinking]

    def _last(self) -> list[bytes]:
        """The calls, whole, in one line (as Ollama sends them), then the last line: its reason and counts."""
        calls = [ollama_call(call, self.call_ids, n) for n, call in enumerate(self.calls.whole())]
        lines = [self._line(calls=calls)] if calls and not self.generate else []
        return [*lines, self._line(done_reason=done_reason(self.finish_reason), counts=counts(self.chat_usage))]
