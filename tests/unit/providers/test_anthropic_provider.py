"""The ``api: anthropic`` provider: URL, key, and the client's version and betas forwarded unchanged."""

from __future__ import annotations

import orjson
import pytest
from multidict import CIMultiDict

from router.config import ConfigError, ProviderSettings
from router.core.results import Candidate
from router.providers import provider_adapter
from router.providers.anthropic import DEFAULT_VERSION, anthropic_headers, messages_url
from router.translate.chat_to_messages import ChatToMessagesTranslator
from router.translate.messages_to_chat import MessagesToChatTranslator
from router.translate.registry import translator

BETAS = "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,effort-2025-11-24"
from tests.support.wire_factories import ANSWER_IDS


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


def test_the_adapter_sends_the_providers_key_as_x_api_key_and_a_default_version(monkeypatch) -> None:
    monkeypatch.setenv("PROVIDER_KEY", "sk-ant")
    p = ProviderSettings(base_url="https://api.anthropic.com", api="anthropic", api_key_env="PROVIDER_KEY", headers={"x-org": "o"})
    adapter = provider_adapter(p)
    assert adapter.chat_wire(p) == "anthropic-messages" and adapter.chat_url(p) == "https://api.anthropic.com/v1/messages"
    assert adapter.headers(p) == {"Content-Type": "application/json", "x-org": "o", "anthropic-version": DEFAULT_VERSION, "x-api-key": "sk-ant"}
    assert adapter.forwarded_client_headers == ("anthropic-version", "anthropic-beta")


def test_the_classifier_can_run_on_an_anthropic_provider() -> None:
    p = ProviderSettings(base_url="https://api.anthropic.com/v1", api="anthropic")
    adapter = provider_adapter(p)
    url, payload = adapter.classifier_request(p, "claude-haiku", [{"role": "system", "content": "classify"}, {"role": "user", "content": "fix it"}], 4096)
    assert url == "https://api.anthropic.com/v1/messages"
    assert payload == {"model": "claude-haiku", "messages": [{"role": "user", "content": [{"type": "text", "text": "fix it"}]}], "system": "classify",
                       "max_tokens": 512, "temperature": 0, "stream": False}
    answer = {"type": "message", "content": [{"type": "text", "text": '{"category": "debugging"}'}]}
    assert adapter.classifier_message(answer) == {"role": "assistant", "content": '{"category": "debugging"}'}
    assert adapter.classifier_message({"content": []}) is None


def test_both_directions_between_anthropic_and_chat_are_registered() -> None:
    assert isinstance(translator("anthropic-messages", "openai-chat", ANSWER_IDS), MessagesToChatTranslator)
    assert isinstance(translator("openai-chat", "anthropic-messages", ANSWER_IDS), ChatToMessagesTranslator)
    assert translator("anthropic-messages", "anthropic-messages", ANSWER_IDS) is None


def test_relevance_cannot_name_an_anthropic_provider() -> None:
    from tests.support.config import make_config
    with pytest.raises(ConfigError, match="pinch.relevance.provider: 'claude' is `api: anthropic`, which has no embeddings API"):
        make_config(providers={"mock": {"base_url": "http://127.0.0.1:9/v1"}, "claude": {"base_url": "https://api.anthropic.com", "api": "anthropic"}},
                    pinch={"enabled": True, "relevance": {"enabled": True, "provider": "claude"}})


@pytest.mark.parametrize(
    ("pair", "tools", "dropped"),
    [
        (("anthropic-messages", "openai-chat"), [{"name": "Bash", "input_schema": {"type": "object"}}, {"type": "web_search_20250305", "name": "web_search"}], ("tool web_search",)),
        (("anthropic-messages", "openai-chat"), [{"name": "Bash", "input_schema": {"type": "object"}}], ()),
        (("openai-chat", "anthropic-messages"), [{"type": "function", "function": {"name": "f", "parameters": {}}}, {"type": "custom", "custom": {"name": "g"}}], ("tool custom",)),
    ],
)
def test_a_tool_the_other_api_cannot_carry_is_left_out_and_named(pair, tools, dropped) -> None:
    translation = translator(*pair, ANSWER_IDS)
    messages = [{"role": "user", "content": "hi"}]
    sent = orjson.loads(translation.request(orjson.dumps({"model": "m", "messages": messages, "tools": tools, "max_tokens": 10}), Candidate("m", "p", upstream_model="up")))
    assert translation.dropped == dropped
    assert len(sent.get("tools", [])) == len(tools) - len(dropped)
