"""``api: openai``: any OpenAI-compatible server (OpenAI, vLLM, llama.cpp, LM Studio, Ollama's /v1).

Chat ``POST {base_url}/chat/completions`` (wire ``openai-chat``), or with
``wire: openai-responses`` ``POST {base_url}/responses`` (the Responses API); the
classifier on the same endpoint with ``response_format: json_object``;
embeddings ``POST {base_url}/embeddings`` (``data[i].embedding``, put back in
input order by ``data[i].index``). The key, when ``api_key_env`` names one, is
sent as a Bearer token.
"""

from __future__ import annotations

from typing import Any

from router.config import ProviderSettings
from router.core.content import Message
from router.providers.model_lists import ModelListing
from router.wire.openai_responses.view import OPENAI_RESPONSES


def bearer_headers(provider: ProviderSettings) -> dict[str, str]:
    """Content type, the provider's configured headers, and its key as a Bearer token."""
    headers = {"Content-Type": "application/json", **provider.headers}
    key = provider.api_key()
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def openai_embeddings_vectors(envelope: dict[str, Any]) -> Any:
    data = envelope.get("data")
    if not isinstance(data, list) or not all(isinstance(item, dict) and "embedding" in item for item in data):
        raise ValueError("the answer has no 'data' list of embeddings")
    indexes = [item.get("index", position) for position, item in enumerate(data)]
    if not all(type(i) is int for i in indexes) or sorted(indexes) != list(range(len(data))):
        raise ValueError(f"the answer's data indexes are not 0..{len(data) - 1}")
    return [item["embedding"] for _, item in sorted(zip(indexes, data, strict=True), key=lambda pair: pair[0])]


def listed_ids(listing: Any) -> set[str]:
    """The model ids of an OpenAI-shaped model list, ``{"data": [{"id"}]}``."""
    return {str(e["id"]) for e in listing["data"]}


class OpenAIProvider:
    api = "openai"
    models = ModelListing(listed_ids)

    def chat_wire(self, provider: ProviderSettings) -> str:
        return provider.wire  # openai-chat, or openai-responses for a Responses API provider

    def chat_url(self, provider: ProviderSettings, model: str = "", stream: bool = False) -> str:
        return f"{provider.url}/responses" if provider.wire == OPENAI_RESPONSES else f"{provider.url}/chat/completions"

    def models_url(self, provider: ProviderSettings) -> str:
        return f"{provider.url}/models"

    def headers(self, provider: ProviderSettings) -> dict[str, str]:
        return bearer_headers(provider)

    def classifier_request(self, provider: ProviderSettings, model: str, messages: list[Message], num_ctx: int) -> tuple[str, dict[str, Any]]:
        payload = {"model": model, "messages": messages, "response_format": {"type": "json_object"}, "temperature": 0, "stream": False}
        return f"{provider.url}/chat/completions", payload

    def classifier_message(self, envelope: Any) -> Any:
        choices = envelope.get("choices") if isinstance(envelope, dict) else None
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            return choices[0].get("message")
        return None

    def embeddings_url(self, provider: ProviderSettings) -> str:
        return f"{provider.url}/embeddings"

    def embeddings_vectors(self, envelope: dict[str, Any]) -> Any:
        return openai_embeddings_vectors(envelope)


OPENAI = OpenAIProvider()
