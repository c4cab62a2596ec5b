"""The classifier I/O edge: one chat call to the configured small LLM.

By ``providers[classifier.provider].api``, through its provider adapter (:mod:`router.providers`):

* ``openai``: ``POST {base_url}/chat/completions`` with
  ``response_format: {"type": "json_object"}``;
* ``ollama``: the native ``POST {root}/api/chat`` with ``format: "json"``,
  ``stream: false`` and ``options.num_ctx = classifier.num_ctx``. Ollama's
  OpenAI-compatible endpoint silently ignores ``num_ctx`` and would cut the
  prompt at its default window (WHAT-USERS-HIT #5). The root is ``base_url``
  without a trailing ``/v1``.

Both ask for temperature 0: the same turn should classify the same way.
The call has no timeout of its own: the classifier stage's
``classifier.timeout_seconds`` bounds it. A failed call (connection, status,
an answer without a message) raises :class:`ClassifierError`; judging the
message's *content* is the core's job (:mod:`router.core.classification`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from router.config import ClassifierSettings, ProviderSettings
from router.core.content import Message
from router.clients.dependency_http import DEFAULT_MAX_RESPONSE_BYTES, DependencyFailed, answer_body, error_summary
from router.providers import provider_adapter


class ClassifierError(Exception):
    """The classifier could not be asked, or did not answer with a chat message."""


@dataclass(frozen=True, slots=True)
class ClassifierRequest:
    url: str
    payload: dict[str, Any]


def classifier_request(provider: ProviderSettings, settings: ClassifierSettings, messages: list[Message]) -> ClassifierRequest:
    """The URL and JSON payload for one classification, as the provider's adapter builds them."""
    url, payload = provider_adapter(provider).classifier_request(provider, settings.model, messages, settings.num_ctx)
    return ClassifierRequest(url, payload)


def answer_text(provider: ProviderSettings, body: bytes) -> str:
    """The assistant message's text from a provider's answer envelope."""
    try:
        envelope = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ClassifierError(f"the answer is not JSON ({error_summary(body)})") from None
    message = provider_adapter(provider).classifier_message(envelope)
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise ClassifierError(f"the answer holds no message text ({error_summary(body)})")
    return content


class ClassifierClient:
    """Asks the configured classifier model over the one shared ClientSession."""

    def __init__(
        self,
        http: aiohttp.ClientSession,
        provider: ProviderSettings,
        settings: ClassifierSettings,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self.http = http
        self.provider = provider
        self.settings = settings
        self.max_response_bytes = max_response_bytes

    async def ask(self, messages: list[Message]) -> str:
        """The classifier model's reply text; raises ClassifierError when there is none."""
        request = classifier_request(self.provider, self.settings, messages)
        headers = provider_adapter(self.provider).headers(self.provider)
        try:
            body = await answer_body(self.http, request.url, orjson.dumps(request.payload), headers, self.max_response_bytes, self.settings.timeout_seconds)
        except DependencyFailed as exc:
            raise ClassifierError(str(exc)) from None
        return answer_text(self.provider, body)
