"""Provider adapters: one place for each provider api's URLs, headers and chat wire format."""

from __future__ import annotations

import pytest

from router.config import ConfigError, ProviderSettings
from router.providers import PROVIDER_ADAPTERS, provider_adapter
from router.translate.chat_to_ollama import OllamaChatTranslator
from router.translate.protocol import Untranslatable
from router.translate.registry import translator
from router.wire.ollama.answers import OLLAMA_CHAT
from router.wire.openai_chat.adapter import OPENAI_CHAT
from tests.support.config import make_config
from tests.support.wire_factories import ANSWER_IDS


def provider(**settings) -> ProviderSettings:
    return ProviderSettings(**settings)


@pytest.mark.parametrize(
    ("settings", "chat", "classifier", "embeddings", "wire"),
    [
        ({"base_url": "http://h:8080/v1/"}, "http://h:8080/v1/chat/completions", "http://h:8080/v1/chat/completions", "http://h:8080/v1/embeddings", OPENAI_CHAT),
        ({"base_url": "http://h:11434/v1", "api": "ollama"}, "http://h:11434/v1/chat/completions", "http://h:11434/api/chat", "http://h:11434/api/embed", OPENAI_CHAT),
        ({"base_url": "http://h:11434", "api": "ollama"}, "http://h:11434/v1/chat/completions", "http://h:11434/api/chat", "http://h:11434/api/embed", OPENAI_CHAT),
        ({"base_url": "http://h:11434/v1", "api": "ollama", "native_chat": True}, "http://h:11434/api/chat", "http://h:11434/api/chat", "http://h:11434/api/embed", OLLAMA_CHAT),
    ],
)
def test_each_use_of_a_provider_has_its_url_and_wire(settings, chat, classifier, embeddings, wire):
    p = provider(**settings)
    adapter = provider_adapter(p)
    assert adapter.chat_url(p) == chat and adapter.embeddings_url(p) == embeddings and adapter.chat_wire(p) == wire
    url, payload = adapter.classifier_request(p, "small", [{"role": "user", "content": "x"}], 2048)
    assert url == classifier and payload["model"] == "small" and payload["stream"] is False


@pytest.mark.parametrize("api", sorted(set(PROVIDER_ADAPTERS) - {"anthropic", "gemini"}))  # their own: test_anthropic_provider.py, test_gemini_provider.py
def test_headers_carry_the_configured_headers_and_the_key_never_the_clients(api, monkeypatch):
    monkeypatch.setenv("PROVIDER_KEY", "sk-test")
    p = provider(base_url="http://h/v1", api=api, api_key_env="PROVIDER_KEY", headers={"OpenAI-Organization": "org"})
    assert provider_adapter(p).headers(p) == {"Content-Type": "application/json", "OpenAI-Organization": "org", "Authorization": "Bearer sk-test"}


def test_the_same_wire_in_and_out_passes_through_and_an_unknown_pair_is_refused():
    assert translator(OPENAI_CHAT, OPENAI_CHAT, ANSWER_IDS) is None
    assert isinstance(translator(OPENAI_CHAT, OLLAMA_CHAT, ANSWER_IDS), OllamaChatTranslator)
    with pytest.raises(Untranslatable, match="no translation from ollama-chat to openai-chat"):
        translator(OLLAMA_CHAT, OPENAI_CHAT, ANSWER_IDS)


def test_relevance_names_a_provider_like_the_classifier():
    config = make_config(
        providers={"mock": {"base_url": "http://127.0.0.1:9/v1"}, "emb": {"base_url": "http://127.0.0.1:11434", "api": "ollama"}},
        pinch={"enabled": True, "relevance": {"enabled": True, "provider": "emb"}},
    )
    embeddings = config.embeddings_provider()
    assert provider_adapter(embeddings).embeddings_url(embeddings) == "http://127.0.0.1:11434/api/embed"


def test_the_older_relevance_keys_keep_working_without_a_provider():
    config = make_config(pinch={"enabled": True, "relevance": {"enabled": True, "base_url": "http://127.0.0.1:8080/v1", "api": "openai"}})
    embeddings = config.embeddings_provider()
    assert provider_adapter(embeddings).embeddings_url(embeddings) == "http://127.0.0.1:8080/v1/embeddings"


def test_an_unknown_relevance_provider_stops_start_up_naming_the_key():
    with pytest.raises(ConfigError, match=r"pinch\.relevance\.provider: unknown provider 'nope'"):
        make_config(pinch={"enabled": True, "relevance": {"enabled": True, "provider": "nope"}})


@pytest.mark.parametrize(
    ("api", "listing", "names"),
    [
        ("openai", {"object": "list", "data": [{"id": "gpt-4o"}, {"id": "o3"}]}, {"gpt-4o", "o3"}),
        ("anthropic", {"data": [{"id": "claude-sonnet-4-5", "type": "model"}]}, {"claude-sonnet-4-5"}),
        ("ollama", {"models": [{"name": "qwen3:14b", "model": "qwen3:14b"}, {"name": "llama3"}]}, {"qwen3:14b", "llama3:latest"}),
        ("gemini", {"models": [{"name": "models/gemini-2.5-pro"}]}, {"gemini-2.5-pro"}),
    ],
)
def test_each_provider_reads_its_own_model_list_for_doctor(api, listing, names):
    assert PROVIDER_ADAPTERS[api].models.names(listing) == names


def test_only_ollama_has_a_pull_command_and_its_own_hints():
    ollama = PROVIDER_ADAPTERS["ollama"].models
    assert ollama.pull is not None and ollama.pull("qwen3:14b") == "ollama pull qwen3:14b" and ollama.listed_name("qwen3") == "qwen3:latest"
    assert "ollama serve" in ollama.start and ollama.missing(provider(base_url="http://h:11434/v1", api="ollama"), "u") == "not pulled into Ollama at http://h:11434"
    assert all(PROVIDER_ADAPTERS[api].models.pull is None for api in ("openai", "anthropic", "gemini"))
    with pytest.raises(KeyError):
        PROVIDER_ADAPTERS["openai"].models.names({"models": []})  # no model list: doctor says so
