"""``api: gemini``: Google's Gemini API (``generativelanguage.googleapis.com``), or any server that speaks it.

* Chat goes to ``{base_url}/v1beta/models/{model}:generateContent``, streamed to
  ``:streamGenerateContent?alt=sse`` (``base_url`` may end in ``/v1beta`` or ``/v1``, else ``/v1beta``
  is added), wire ``gemini``: a Gemini client's request is passed through — only what the chain
  changed differs, ``thoughtSignature`` parts byte for byte — and the other formats' are translated
  (:mod:`router.translate.chat_to_gemini`, through chat for Anthropic and Responses clients).
* Auth is the provider's own key as ``x-goog-api-key`` (never the client's).
* The classifier can run on it: a ``generateContent`` with the classifier's prompt as the system
  instruction and ``responseMimeType: application/json``. Embeddings are not asked of it: Gemini's
  ``batchEmbedContents`` takes another request shape than the two the relevance client speaks.
"""

from __future__ import annotations

from typing import Any

from router.config import ProviderSettings
from router.core.content import Message
from router.providers.model_lists import ModelListing
from router.translate.chat_to_gemini import chat_to_gemini_body
from router.wire.gemini.parts import GEMINI as GEMINI_WIRE
from router.wire.gemini.parts import is_thought, parts_of, text_of

API_KEY_HEADER = "x-goog-api-key"


def api_root(base_url: str) -> str:
    """The API's versioned root: ``base_url`` when it ends in ``/v1beta`` or ``/v1``, else ``{base_url}/v1beta``."""
    base = base_url.rstrip("/")
    return base if base.endswith(("/v1beta", "/v1")) else f"{base}/v1beta"


def generate_url(base_url: str, model: str, stream: bool) -> str:
    root = f"{api_root(base_url)}/models/{model}"
    return f"{root}:streamGenerateContent?alt=sse" if stream else f"{root}:generateContent"


def listed_names(listing: Any) -> set[str]:
    """The model names of Google's model list, ``{"models": [{"name": "models/…"}]}``."""
    return {str(e["name"]).removeprefix("models/") for e in listing["models"]}


class GeminiProvider:
    api = "gemini"
    models = ModelListing(listed_names)

    def chat_wire(self, provider: ProviderSettings) -> str:
        return GEMINI_WIRE

    def chat_url(self, provider: ProviderSettings, model: str = "", stream: bool = False) -> str:
        return generate_url(provider.url, model, stream)

    def models_url(self, provider: ProviderSettings) -> str:
        return f"{api_root(provider.url)}/models"  # {"models": [{"name": "models/…"}]}

    def headers(self, provider: ProviderSettings) -> dict[str, str]:
        headers = {"Content-Type": "application/json", **provider.headers}
        key = provider.api_key()
        if key:
            headers[API_KEY_HEADER] = key
        return headers

    def classifier_request(self, provider: ProviderSettings, model: str, messages: list[Message], num_ctx: int) -> tuple[str, dict[str, Any]]:
        payload = chat_to_gemini_body({"messages": messages, "temperature": 0, "response_format": {"type": "json_object"}})
        return generate_url(provider.url, model, False), payload

    def classifier_message(self, envelope: Any) -> Any:
        candidates = envelope.get("candidates") if isinstance(envelope, dict) else None
        first = candidates[0] if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict) else {}
        texts = [t for p in parts_of(first.get("content")) if not is_thought(p) and (t := text_of(p)) is not None]
        return {"role": "assistant", "content": "".join(texts)} if texts else None

    def embeddings_url(self, provider: ProviderSettings) -> str:
        raise ValueError("an `api: gemini` provider's embeddings (batchEmbedContents) are not a shape the proxy speaks")

    def embeddings_vectors(self, envelope: dict[str, Any]) -> Any:
        raise ValueError("an `api: gemini` provider's embeddings (batchEmbedContents) are not a shape the proxy speaks")


GEMINI = GeminiProvider()
