"""The embeddings I/O edge: ONE batched request for many texts.

Two wire formats, by the api of the provider ``pinch.relevance.provider`` names (else by
``pinch.relevance.api``), through its provider adapter (:mod:`router.providers`):

* ``openai``: ``POST {base_url}/embeddings`` with ``{"model", "input": [...]}``;
  the answer's ``data[i].embedding``, put back in input order by ``data[i].index``
  (OpenAI, vLLM, llama.cpp's server, LM Studio, Ollama's ``/v1``).
* ``ollama``: the native ``POST {root}/api/embed`` with ``{"model", "input": [...]}``;
  the answer's ``embeddings``. The root is ``base_url`` without a trailing ``/v1``,
  so the same ``base_url`` works for both kinds.

The provider's ``api_key_env`` names an environment variable whose value is
sent as a Bearer token. The call has no timeout of its own: the pinch-relevance stage's
``relevance.timeout_seconds`` bounds it. Every failure — connection,
non-200 status, malformed JSON, a wrong count, ragged dimensions, NaN or
infinity — raises :class:`EmbeddingsError` with a reason fit for a log line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import aiohttp
import orjson

from router.config import ProviderSettings, RelevanceSettings
from router.core.relevance import InvalidEmbeddings, Vectors, embeddings_matrix
from router.clients.dependency_http import DEFAULT_MAX_RESPONSE_BYTES, DependencyFailed, answer_body, error_summary
from router.providers import provider_adapter


class EmbeddingsError(Exception):
    """No usable embeddings came back; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def embeddings_url(provider: ProviderSettings) -> str:
    return provider_adapter(provider).embeddings_url(provider)


def answer_vectors(provider: ProviderSettings, body: bytes) -> Any:
    """The raw vectors of an answer body, in input order (not yet validated)."""
    envelope = _parse_json(body)
    if not isinstance(envelope, dict):
        raise EmbeddingsError(f"the answer is not a JSON object ({error_summary(body)})")
    try:
        return provider_adapter(provider).embeddings_vectors(envelope)
    except ValueError as exc:
        raise EmbeddingsError(f"{exc} ({error_summary(body)})") from None


def _parse_json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    try:
        # Python-made servers write NaN and Infinity literals, which strict JSON
        # (orjson) refuses; parse them so validation can name the real problem.
        return json.loads(body)
    except ValueError:
        raise EmbeddingsError(f"the answer is not JSON ({error_summary(body)})") from None


class EmbeddingsClient:
    """Embeds texts with the configured model over the one shared ClientSession."""

    def __init__(
        self,
        http: aiohttp.ClientSession,
        settings: RelevanceSettings,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        provider: ProviderSettings | None = None,
    ) -> None:
        """``provider``: where to ask (``Config.embeddings_provider()``); None ⇒ the settings' own older keys."""
        self.http = http
        self.settings = settings
        self.max_response_bytes = max_response_bytes
        self.provider = provider if provider is not None else ProviderSettings(
            base_url=settings.base_url, api=settings.api, api_key_env=settings.api_key_env
        )
        self.url = embeddings_url(self.provider)
        self.requests_sent = 0  # for eval-pinch and benchmarks: calls made, failed ones included

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """One vector per text, in order, as a validated 2-D array; raises EmbeddingsError."""
        payload = orjson.dumps({"model": self.settings.model, "input": list(texts)})
        self.requests_sent += 1
        headers = provider_adapter(self.provider).headers(self.provider)
        try:
            body = await answer_body(self.http, self.url, payload, headers, self.max_response_bytes, self.settings.timeout_seconds)
        except TimeoutError:
            raise EmbeddingsError(f"request to {self.url} timed out") from None
        except DependencyFailed as exc:
            raise EmbeddingsError(str(exc)) from None
        try:
            return embeddings_matrix(answer_vectors(self.provider, body), len(texts))
        except InvalidEmbeddings as exc:
            raise EmbeddingsError(f"invalid embeddings from {self.url}: {exc}") from None
