"""``api: ollama``: an Ollama server; ``base_url`` is its root or its ``/v1``.

* Chat: by default Ollama's OpenAI-compatible ``{root}/v1/chat/completions``
  (wire ``openai-chat``, passed through). That endpoint ignores a per-request
  ``num_ctx`` and silently truncates the prompt to the window the model was
  loaded with. With ``native_chat: true`` chat goes to the native
  ``{root}/api/chat`` instead (wire ``ollama-chat``), with ``options.num_ctx``
  set to the model's configured ``context_window``: one stable value per
  model, because Ollama reloads a model whenever ``num_ctx`` changes, so sizing
  it per request would cost a reload; the request and its answer are translated there
  (:mod:`router.translate.chat_to_ollama`).
* Classifier: native ``{root}/api/chat`` with ``format: "json"``, not streamed,
  ``options.num_ctx = classifier.num_ctx`` (WHAT-USERS-HIT #5).
* Embeddings: native ``{root}/api/embed`` (the answer's ``embeddings``).
"""

from __future__ import annotations

from typing import Any

from router.config import ProviderSettings
from router.core.content import Message
from router.providers.model_lists import ModelListing
from router.providers.openai import bearer_headers
from router.wire.ollama.answers import OLLAMA_CHAT
from router.wire.openai_chat.view import OPENAI_CHAT


def ollama_root(provider: ProviderSettings) -> str:
    return provider.url.removesuffix("/v1")


def tagged(name: str) -> str:
    """A model name with Ollama's implicit tag: ``qwen3`` is ``qwen3:latest``."""
    return name if ":" in name else f"{name}:latest"


def pulled_models(listing: Any) -> set[str]:
    """The pulled models of an ``/api/tags`` answer, ``{"models": [{"name", "model"}]}``, tagged."""
    return {tagged(str(e.get(k))) for e in listing["models"] for k in ("name", "model") if e.get(k)}


def pull_command(model: str) -> str:
    return f"ollama pull {model}"


def not_pulled(provider: ProviderSettings, url: str) -> str:
    return f"not pulled into Ollama at {ollama_root(provider)}"


class OllamaProvider:
    api = "ollama"
    models = ModelListing(pulled_models, tagged, pull_command, not_pulled, "start Ollama (`ollama serve`)")

    def chat_wire(self, provider: ProviderSettings) -> str:
        return OLLAMA_CHAT if provider.native_chat else OPENAI_CHAT

    def chat_url(self, provider: ProviderSettings, model: str = "", stream: bool = False) -> str:
        root = ollama_root(provider)
        return f"{root}/api/chat" if provider.native_chat else f"{root}/v1/chat/completions"

    def models_url(self, provider: ProviderSettings) -> str:
        return f"{ollama_root(provider)}/api/tags"  # the pulled models, as Ollama's own API lists them

    def headers(self, provider: ProviderSettings) -> dict[str, str]:
        return bearer_headers(provider)

    def classifier_request(self, provider: ProviderSettings, model: str, messages: list[Message], num_ctx: int) -> tuple[str, dict[str, Any]]:
        payload = {"model": model, "messages": messages, "format": "json", "stream": False, "options": {"num_ctx": num_ctx, "temperature": 0}}
        return f"{ollama_root(provider)}/api/chat", payload

    def classifier_message(self, envelope: Any) -> Any:
        return envelope.get("message") if isinstance(envelope, dict) else None

    def embeddings_url(self, provider: ProviderSettings) -> str:
        return f"{ollama_root(provider)}/api/embed"

    def embeddings_vectors(self, envelope: dict[str, Any]) -> Any:
        if "embeddings" not in envelope:
            raise ValueError("the answer has no 'embeddings'")
        return envelope["embeddings"]


OLLAMA = OllamaProvider()
