"""Provider adapters: one module per provider ``api``, the only code that builds a provider's URLs and headers.

A provider adapter (:class:`ProviderAdapter`) says, for one kind of
provider, where chat, the classifier and embeddings are asked, with which
headers (auth included: the key named by ``api_key_env``, read per use), and
which wire format its chat speaks (:meth:`ProviderAdapter.chat_wire`).
Register a new kind in :data:`PROVIDER_ADAPTERS` under its ``api`` (and add
the name to ``ProviderSettings.api`` in config).

**Translation.** upstream-forward asks :func:`translator` for the (client
wire, provider wire) pair: the same format in and out is a pass-through (no
translator: the client's body with only the chain's changes, the answer
relayed event by event); a registered pair translates the request and the
answer, streams included; a pair with no translator is not servable by that
provider (the candidate fails over). Register a translator in
:data:`TRANSLATORS`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from router.config import ProviderSettings
    from router.contract.context import Candidate, Usage
    from router.core.content import Message


class ProviderAdapter(Protocol):
    api: str

    def chat_wire(self, provider: ProviderSettings) -> str:
        """The wire format the provider's chat endpoint speaks (e.g. ``openai-chat``)."""
        ...

    def chat_url(self, provider: ProviderSettings) -> str: ...

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


class Translator(Protocol):
    """Turns a request in the client's wire format into the provider's, and the provider's answer back.

    ``request``: the upstream body (bytes, as the client's wire adapter wrote
    it) → the provider's body. ``response``: a whole answer → the client's.
    ``stream()``: a fresh :class:`StreamTranslator` for one streamed answer;
    ``streams(content_type)``: whether an answer of that type is a stream.
    ``dropped``: what ``request`` could not carry to the provider (``"tool web_search"``,
    …), reported to the client in ``x-router-dropped`` instead of failing the request.
    """

    dropped: tuple[str, ...]

    def request(self, body: bytes, candidate: Candidate) -> bytes: ...

    def response(self, body: bytes) -> bytes: ...

    def streams(self, content_type: str) -> bool: ...

    def stream(self) -> StreamTranslator: ...


class StreamTranslator(Protocol):
    """One streamed answer: provider bytes in, whole client events out.

    ``feed`` returns the client's complete events so far (maybe b""), and
    raises :class:`StreamBroken` when the provider reports an error mid-stream;
    ``finish`` the events owed at the provider's end of stream (b"" when it
    ended cleanly already). ``usage``: the usage the provider reported.
    """

    usage: Usage | None

    def feed(self, chunk: bytes) -> bytes: ...

    def finish(self) -> bytes: ...


class StreamBroken(Exception):
    """The provider reported an error inside a stream it had started."""


def _adapters() -> dict[str, ProviderAdapter]:
    from router.providers.anthropic import ANTHROPIC
    from router.providers.ollama import OLLAMA
    from router.providers.openai import OPENAI

    return {adapter.api: adapter for adapter in (OPENAI, OLLAMA, ANTHROPIC)}


PROVIDER_ADAPTERS: dict[str, ProviderAdapter] = _adapters()


def provider_adapter(provider: ProviderSettings) -> ProviderAdapter:
    return PROVIDER_ADAPTERS[provider.api]


def _translators() -> dict[tuple[str, str], Callable[[], Translator]]:
    from router.wire.anthropic_messages.view import ANTHROPIC_MESSAGES
    from router.providers.anthropic import (
        ChatToMessagesTranslator,
        MessagesToChatTranslator,
        messages_to_ollama_native,
        responses_to_messages,
        responses_to_ollama_native,
    )
    from router.providers.ollama import OLLAMA_CHAT, OllamaChatTranslator
    from router.wire.openai_chat.adapter import OPENAI_CHAT
    from router.wire.openai_responses.adapter import OPENAI_RESPONSES, ResponsesToChat

    return {
        (OPENAI_CHAT, OLLAMA_CHAT): OllamaChatTranslator,
        (ANTHROPIC_MESSAGES, OPENAI_CHAT): MessagesToChatTranslator,
        (OPENAI_CHAT, ANTHROPIC_MESSAGES): ChatToMessagesTranslator,
        (ANTHROPIC_MESSAGES, OLLAMA_CHAT): messages_to_ollama_native,
        (OPENAI_RESPONSES, OPENAI_CHAT): ResponsesToChat,
        (OPENAI_RESPONSES, ANTHROPIC_MESSAGES): responses_to_messages,  # both through chat
        (OPENAI_RESPONSES, OLLAMA_CHAT): responses_to_ollama_native,
    }


TRANSLATORS = _translators()


class Untranslatable(LookupError):
    """No translator from the client's wire format to the provider's."""


def translator(client_wire: str, provider_wire: str) -> Translator | None:
    """None for a pass-through (the same format); else the pair's translator (:class:`Untranslatable` if none)."""
    if client_wire == provider_wire:
        return None
    make = TRANSLATORS.get((client_wire, provider_wire))
    if make is None:
        raise Untranslatable(f"no translation from {client_wire} to {provider_wire}")
    return make()
