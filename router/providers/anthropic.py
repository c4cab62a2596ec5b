"""The ``api: anthropic`` provider: Anthropic's API, or any server that speaks the Messages API.

* Chat goes to ``{base_url}/v1/messages`` (``base_url`` may end in ``/v1`` or not).
* Auth is the provider's own key as ``x-api-key`` (never the client's).
* ``anthropic-version`` and ``anthropic-beta`` are forwarded exactly as the client
  sent them (Claude Code's betas switch on fields its body carries:
  ``context_management``, mid-conversation system messages, effort…); a client that
  sent no version (an OpenAI-chat client routed here) gets :data:`DEFAULT_VERSION`.
* Its wire format is ``anthropic-messages``: an Anthropic client's request is passed
  through, an OpenAI-chat client's is translated (:mod:`router.core.anthropic_chat`).
"""

from __future__ import annotations

from collections.abc import Mapping

ANTHROPIC_WIRE = "anthropic-messages"
DEFAULT_VERSION = "2023-06-01"
FORWARDED_HEADERS = ("anthropic-version", "anthropic-beta")


def messages_url(base_url: str) -> str:
    base = base_url.rstrip("/")
    return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"


def anthropic_headers(api_key: str | None, client_headers: Mapping[str, str] | None, configured: Mapping[str, str]) -> dict[str, str]:
    """The headers of one request: JSON, the configured extras, the client's version and betas unchanged, the key."""
    headers = {"Content-Type": "application/json", **configured}
    for name in FORWARDED_HEADERS:
        value = client_headers.get(name) if client_headers is not None else None
        if value is not None:
            headers[name] = value
    headers.setdefault("anthropic-version", DEFAULT_VERSION)
    if api_key:
        headers["x-api-key"] = api_key
    return headers
