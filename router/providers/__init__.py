"""Provider adapters: one module per provider ``api``, the only code that builds a provider's URLs and headers.

A provider adapter (:class:`ProviderAdapter`) says, for one kind of
provider, where chat, the classifier and embeddings are asked, with which
headers (auth included: the key named by ``api_key_env``, read per use), and
which wire format its chat speaks (:meth:`ProviderAdapter.chat_wire`), and how it lists its models
for ``doctor`` (:class:`~router.providers.model_lists.ModelListing`: nothing about one provider's kind is written outside its module).
Register a new kind in :data:`PROVIDER_ADAPTERS` under its ``api`` (and add
the name to ``ProviderSettings.api`` in config). A request to a provider whose
wire format is not the client's is translated: :mod:`router.translate`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from router.config import ProviderSettings
    from router.core.content import Message
    from router.providers.model_lists import ModelListing


class ProviderAdapter(Protocol):
    api: str
    models: ModelListing

    def chat_wire(self, provider: ProviderSettings) -> str:
        """The wire format the provider's chat endpoint speaks (e.g. ``openai-chat``)."""
        ...

    def chat_url(self, provider: ProviderSettings, model: str, stream: bool) -> str:
        """Where one chat request goes: ``model`` (the candidate's upstream id) and ``stream`` (whether
        it streams) for a provider whose URL names them (Gemini's); the others ignore both."""
        ...

    def models_url(self, provider: ProviderSettings) -> str:
        """Where the provider lists its models (what ``doctor`` checks the catalogue against)."""
        ...

    def headers(self, provider: ProviderSettings) -> dict[str, str]:
        """Every request's headers: content type, the configured extra headers, the key. Nothing the client sent."""
        ...

    def classifier_request(self, provider: ProviderSettings, model: str, messages: list[Message], num_ctx: int) -> tuple[str, dict[str, Any]]:
        """URL and JSON payload of one classification (JSON output, temperature 0, not streamed)."""
        ...

    def classifier_message(self, envelope: Any) -> Any:
        """The answer message (a dict with ``content``) of a classifier answer, or None."""
        ...

    def embeddings_url(self, provider: ProviderSettings) -> str: ...

    def embeddings_vectors(self, envelope: dict[str, Any]) -> Any:
        """The raw vectors of an embeddings answer in input order; ValueError naming what is missing."""
        ...


def _adapters() -> dict[str, ProviderAdapter]:
    from router.providers.anthropic import ANTHROPIC
    from router.providers.gemini import GEMINI
    from router.providers.ollama import OLLAMA
    from router.providers.openai import OPENAI

    return {adapter.api: adapter for adapter in (OPENAI, OLLAMA, ANTHROPIC, GEMINI)}


PROVIDER_ADAPTERS: dict[str, ProviderAdapter] = _adapters()


def provider_adapter(provider: ProviderSettings) -> ProviderAdapter:
    return PROVIDER_ADAPTERS[provider.api]


def answers_retrieve(provider: ProviderSettings) -> bool:
    """Whether the proxy can answer ``pinch_retrieve`` calls in the format ``provider``'s chat speaks
    (:func:`router.wire.retrieve.retrieve_format`): only then is the tool offered and a lossy cut made."""
    from router.wire.retrieve import retrieve_format

    return retrieve_format(provider_adapter(provider).chat_wire(provider)) is not None
