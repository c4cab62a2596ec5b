"""``api: anthropic``: Anthropic's API, or any server that speaks the Messages API.

* Chat goes to ``{base_url}/v1/messages`` (``base_url`` may end in ``/v1`` or not),
  wire ``anthropic-messages``: an Anthropic client's request is passed through, an
  OpenAI-chat client's is translated (:class:`ChatToMessagesTranslator`).
* Auth is the provider's own key as ``x-api-key`` (never the client's).
* ``anthropic-version`` and ``anthropic-beta`` are forwarded exactly as the client
  sent them (:data:`FORWARDED_CLIENT_HEADERS`: Claude Code's betas switch on fields
  its body carries — ``context_management``, mid-conversation system messages,
  effort…); a client that sent no version (an OpenAI-chat client) gets
  :data:`DEFAULT_VERSION`.
* The classifier can run on it (a Messages request with the classifier's prompt as
  the system text); Anthropic has no embeddings API, so relevance cannot name it.

The translators between the two wire formats live here too:
:class:`MessagesToChatTranslator` (an Anthropic client, e.g. Claude Code, routed to an
OpenAI-compatible or Ollama model) and :class:`ChatToMessagesTranslator` (an OpenAI-chat
client routed to an ``api: anthropic`` model). The pure translations are
:mod:`router.translate.messages_chat` and :mod:`router.translate.messages_chat_stream`.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

import orjson

from router.config import ProviderSettings
from router.contract.context import Candidate
from router.translate.messages_chat import (
    chat_completion_to_message,
    chat_to_messages_body,
    message_to_chat_completion,
    messages_to_chat_body,
    server_tools,
)
from router.wire.anthropic_messages.request import blocks_of
from router.wire.anthropic_messages.view import ANTHROPIC_MESSAGES, count_input_tokens
from router.core.content import Message
from router.translate.messages_chat_stream import AnthropicToChatSse, ChatToAnthropicSse, UpstreamStreamError
from router.providers import StreamBroken

DEFAULT_VERSION = "2023-06-01"
FORWARDED_CLIENT_HEADERS = ("anthropic-version", "anthropic-beta")
# Sent when an OpenAI-chat client set no output limit and the model has none configured (Anthropic requires one).
FALLBACK_MAX_TOKENS = 8192
EVENT_STREAM = "text/event-stream"
CLASSIFIER_MAX_TOKENS = 512  # its answer is one small JSON object


def messages_url(base_url: str) -> str:
    return f"{_v1(base_url)}/messages"


def _v1(base_url: str) -> str:
    """The API's ``/v1`` root, whether ``base_url`` ends in it or not."""
    base = base_url.rstrip("/")
    return base if base.endswith("/v1") else f"{base}/v1"


def anthropic_headers(api_key: str | None, client_headers: Mapping[str, str] | None, configured: Mapping[str, str]) -> dict[str, str]:
    """The headers of one request: JSON, the configured extras, the client's version and betas unchanged, the key."""
    headers = {"Content-Type": "application/json", **configured}
    for name in FORWARDED_CLIENT_HEADERS:
        value = client_headers.get(name) if client_headers is not None else None
        if value is not None:
            headers[name] = value
    headers.setdefault("anthropic-version", DEFAULT_VERSION)
    if api_key:
        headers["x-api-key"] = api_key
    return headers


class AnthropicProvider:
    api = "anthropic"
    forwarded_client_headers = FORWARDED_CLIENT_HEADERS

    def chat_wire(self, provider: ProviderSettings) -> str:
        return ANTHROPIC_MESSAGES

    def chat_url(self, provider: ProviderSettings) -> str:
        return messages_url(provider.url)

    def models_url(self, provider: ProviderSettings) -> str:
        return f"{_v1(provider.url)}/models"  # Anthropic's list: {"data": [{"id": …}]}, as OpenAI's

    def headers(self, provider: ProviderSettings) -> dict[str, str]:
        """Without a client's (the classifier, an OpenAI-chat client): the default version."""
        return anthropic_headers(provider.api_key(), None, provider.headers)

    def classifier_request(self, provider: ProviderSettings, model: str, messages: list[Message], num_ctx: int) -> tuple[str, dict[str, Any]]:
        payload = chat_to_messages_body({"messages": messages, "temperature": 0}, model, CLASSIFIER_MAX_TOKENS)
        return messages_url(provider.url), {**payload, "stream": False}

    def classifier_message(self, envelope: Any) -> Any:
        if not isinstance(envelope, dict):
            return None
        texts = [b.get("text", "") for b in blocks_of(envelope.get("content")) if b.get("type") == "text"]
        return {"role": "assistant", "content": "".join(texts)} if texts else None

    def embeddings_url(self, provider: ProviderSettings) -> str:
        raise ValueError("an `api: anthropic` provider has no embeddings endpoint")

    def embeddings_vectors(self, envelope: dict[str, Any]) -> Any:
        raise ValueError("an `api: anthropic` provider has no embeddings endpoint")


ANTHROPIC = AnthropicProvider()


class _BrokenAsStreamBroken:
    """A core stream translator whose provider-side errors surface as :class:`StreamBroken` for the relay."""

    def __init__(self, inner: ChatToAnthropicSse | AnthropicToChatSse) -> None:
        self.inner = inner

    @property
    def usage(self):  # noqa: ANN201 - the provider's Usage, read from its events
        return self.inner.usage

    def feed(self, chunk: bytes) -> bytes:
        try:
            return self.inner.feed(chunk)
        except UpstreamStreamError as exc:
            raise StreamBroken(str(exc)) from None

    def finish(self) -> bytes:
        try:
            return self.inner.finish()
        except UpstreamStreamError as exc:
            raise StreamBroken(str(exc)) from None


class MessagesToChatTranslator:
    """An Anthropic Messages request to an OpenAI-chat provider, and its answer back (one request)."""

    def __init__(self) -> None:
        self.model = ""
        self.input_tokens = 0
        self.reasoning = False
        self.dropped: tuple[str, ...] = ()
        # the answer's own id, never the provider's: those repeat (a constant, Ollama's "chatcmpl-<0…998>",
        # none at all), and Claude Code merges the answers that share one into one turn
        self.message_id = f"msg_{secrets.token_hex(12)}"

    def request(self, body: bytes, candidate: Candidate) -> bytes:
        messages_body = orjson.loads(body)
        self.model, self.reasoning = candidate.model, candidate.reasoning_content
        self.dropped = server_tools(messages_body)
        # the prompt as sent, after pinch: a chat stream reports usage only at its end, message_start needs it now
        self.input_tokens = count_input_tokens(messages_body)
        return orjson.dumps(messages_to_chat_body(messages_body, candidate.upstream_model, reasoning_content=self.reasoning))

    def response(self, body: bytes) -> bytes:
        return orjson.dumps(
            chat_completion_to_message(_object(body), self.model, self.input_tokens, message_id=self.message_id, reasoning_content=self.reasoning)
        )

    def streams(self, content_type: str) -> bool:
        return content_type == EVENT_STREAM

    def stream(self) -> _BrokenAsStreamBroken:
        return _BrokenAsStreamBroken(ChatToAnthropicSse(self.model, self.input_tokens, message_id=self.message_id, reasoning_content=self.reasoning))


class ChatToMessagesTranslator:
    """An OpenAI chat request to an Anthropic-format provider, and its answer back (one request)."""

    def __init__(self) -> None:
        self.model = ""
        self.dropped: tuple[str, ...] = ()

    def request(self, body: bytes, candidate: Candidate) -> bytes:
        chat = orjson.loads(body)
        self.model = candidate.model
        tools = chat.get("tools") if isinstance(chat.get("tools"), list) else []  # only function tools go over
        self.dropped = tuple(f"tool {t.get('type')}" for t in tools if isinstance(t, dict) and not isinstance(t.get("function"), dict))
        limit = candidate.output_tokens or candidate.max_output_tokens or FALLBACK_MAX_TOKENS
        return orjson.dumps(chat_to_messages_body(chat, candidate.upstream_model, limit))

    def response(self, body: bytes) -> bytes:
        return orjson.dumps(message_to_chat_completion(_object(body), self.model))

    def streams(self, content_type: str) -> bool:
        return content_type == EVENT_STREAM

    def stream(self) -> _BrokenAsStreamBroken:
        return _BrokenAsStreamBroken(AnthropicToChatSse(self.model))


def _object(raw: bytes) -> dict[str, Any]:
    value = orjson.loads(raw)
    return value if isinstance(value, dict) else {}


class ChainedTranslator:
    """Two translations one after the other: the client's wire → an intermediate wire → the provider's.

    An Anthropic client to Ollama's native chat goes Anthropic → OpenAI chat → Ollama, and its
    answer back the same way, so no third translation is written for the pair; a Responses
    client to an Anthropic or Ollama-native provider goes through chat the same way.
    """

    def __init__(self, first: Any, second: Any) -> None:
        self.first, self.second = first, second

    @property
    def dropped(self) -> tuple[str, ...]:
        """What either translation left out."""
        return (*self.first.dropped, *self.second.dropped)

    def request(self, body: bytes, candidate: Candidate) -> bytes:
        return self.second.request(self.first.request(body, candidate), candidate)

    def response(self, body: bytes) -> bytes:
        return self.first.response(self.second.response(body))

    def streams(self, content_type: str) -> bool:
        return self.second.streams(content_type)

    def stream(self) -> ChainedStream:
        return ChainedStream(self.first.stream(), self.second.stream())


class ChainedStream:
    def __init__(self, outer: Any, inner: Any) -> None:
        self.outer, self.inner = outer, inner  # inner: provider bytes → intermediate; outer: → client

    @property
    def usage(self):  # noqa: ANN201 - the provider's own figures, from the inner translator
        return self.inner.usage or self.outer.usage

    def feed(self, chunk: bytes) -> bytes:
        middle = self.inner.feed(chunk)
        return self.outer.feed(middle) if middle else b""

    def finish(self) -> bytes:
        middle = self.inner.finish()
        return (self.outer.feed(middle) if middle else b"") + self.outer.finish()


def messages_to_ollama_native() -> ChainedTranslator:
    from router.providers.ollama import OllamaChatTranslator

    return ChainedTranslator(MessagesToChatTranslator(), OllamaChatTranslator())


def responses_to_messages() -> ChainedTranslator:
    from router.wire.openai_responses.adapter import ResponsesToChat

    return ChainedTranslator(ResponsesToChat(), ChatToMessagesTranslator())


def responses_to_ollama_native() -> ChainedTranslator:
    from router.providers.ollama import OllamaChatTranslator
    from router.wire.openai_responses.adapter import ResponsesToChat

    return ChainedTranslator(ResponsesToChat(), OllamaChatTranslator())
