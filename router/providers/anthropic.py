"""``api: anthropic``: Anthropic's API, or any server that speaks the Messages API.

* Chat goes to ``{base_url}/v1/messages`` (``base_url`` may end in ``/v1`` or not),
  wire ``anthropic-messages``: an Anthropic client's request is passed through, an
  OpenAI-chat client's is translated (:mod:`router.translate.chat_to_messages`).
* Auth is the provider's own key as ``x-api-key`` (never the client's).
* ``anthropic-version`` and ``anthropic-beta`` are forwarded exactly as the client
  sent them (:data:`FORWARDED_CLIENT_HEADERS`: Claude Code's betas switch on fields
  its body carries — ``context_management``, mid-conversation system messages,
  effort…); a client that sent no version (an OpenAI-chat client) gets
  :data:`DEFAULT_VERSION`.
* The classifier can run on it (a Messages request with the classifier's prompt as
  the system text); Anthropic has no embeddings API, so relevance cannot name it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from router.config import ProviderSettings
from router.core.content import Message
from router.core.redaction import header_value
from router.providers.model_lists import ModelListing
from router.providers.openai import listed_ids
from router.translate.chat_to_messages import chat_to_messages_body
from router.wire.anthropic_messages.blocks import blocks_of
from router.wire.anthropic_messages.view import ANTHROPIC_MESSAGES

DEFAULT_VERSION = "2023-06-01"
FORWARDED_CLIENT_HEADERS = ("anthropic-version", "anthropic-beta")
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
            headers[name] = header_value(value)
    headers.setdefault("anthropic-version", DEFAULT_VERSION)
    if api_key:
        headers["x-api-key"] = api_key
    return headers


class AnthropicProvider:
    api = "anthropic"
    models = ModelListing(listed_ids)  # Anthropic's list is OpenAI's shape
    forwarded_client_headers = FORWARDED_CLIENT_HEADERS

    def chat_wire(self, provider: ProviderSettings) -> str:
        return ANTHROPIC_MESSAGES

    def chat_url(self, provider: ProviderSettings, model: str = "", stream: bool = False) -> str:
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
