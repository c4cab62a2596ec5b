"""The ``api: anthropic`` provider: URL, key, and the client's version and betas forwarded unchanged."""

from __future__ import annotations

import pytest
from multidict import CIMultiDict

from router.providers.anthropic import DEFAULT_VERSION, anthropic_headers, messages_url

BETAS = "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,effort-2025-11-24"


@pytest.mark.parametrize("base", ["https://api.anthropic.com", "https://api.anthropic.com/", "https://api.anthropic.com/v1", "https://api.anthropic.com/v1/"])
def test_messages_live_under_v1(base: str) -> None:
    assert messages_url(base) == "https://api.anthropic.com/v1/messages"


def test_the_clients_version_and_betas_go_out_unchanged_with_the_providers_own_key() -> None:
    client = CIMultiDict({"Anthropic-Version": "2024-10-22", "anthropic-beta": BETAS, "x-api-key": "client-key", "X-Claude-Code-Session-Id": "s"})
    headers = anthropic_headers("provider-key", client, {"x-org": "o"})
    assert headers == {"Content-Type": "application/json", "x-org": "o", "anthropic-version": "2024-10-22", "anthropic-beta": BETAS, "x-api-key": "provider-key"}


def test_a_client_without_a_version_gets_the_default_and_no_betas() -> None:
    headers = anthropic_headers(None, CIMultiDict({"Authorization": "Bearer x"}), {})
    assert headers == {"Content-Type": "application/json", "anthropic-version": DEFAULT_VERSION}
