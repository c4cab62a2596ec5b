"""``api: gemini``: URLs with the model and the stream in them, the key as x-goog-api-key, the classifier's shape."""

from __future__ import annotations

import pytest

from router.config import ProviderSettings
from router.providers import provider_adapter


@pytest.mark.parametrize("base", ["https://generativelanguage.googleapis.com", "https://generativelanguage.googleapis.com/", "https://generativelanguage.googleapis.com/v1beta"])
def test_chat_urls_name_the_model_and_the_stream(base):
    p = ProviderSettings(base_url=base, api="gemini")
    adapter = provider_adapter(p)
    assert adapter.chat_wire(p) == "gemini"
    assert adapter.chat_url(p, "gemini-3.1-pro", False) == "https://generativelanguage.googleapis.com/v1beta/models/gemini-3.1-pro:generateContent"
    assert adapter.chat_url(p, "gemini-3.1-pro", True) == "https://generativelanguage.googleapis.com/v1beta/models/gemini-3.1-pro:streamGenerateContent?alt=sse"
    assert adapter.models_url(p) == "https://generativelanguage.googleapis.com/v1beta/models"


def test_the_key_goes_as_x_goog_api_key(monkeypatch):
    monkeypatch.setenv("GEMINI_KEY", "g-secret")
    p = ProviderSettings(base_url="http://h", api="gemini", api_key_env="GEMINI_KEY", headers={"x-extra": "1"})
    assert provider_adapter(p).headers(p) == {"Content-Type": "application/json", "x-extra": "1", "x-goog-api-key": "g-secret"}


def test_the_classifier_asks_for_json_and_reads_the_answers_text():
    p = ProviderSettings(base_url="http://h/v1beta", api="gemini")
    adapter = provider_adapter(p)
    url, payload = adapter.classifier_request(p, "gemini-flash-lite", [{"role": "system", "content": "classify"}, {"role": "user", "content": "x"}], 4096)
    assert url == "http://h/v1beta/models/gemini-flash-lite:generateContent"
    assert payload["systemInstruction"] == {"parts": [{"text": "classify"}]} and payload["generationConfig"] == {"temperature": 0, "responseMimeType": "application/json"}
    answer = {"candidates": [{"content": {"role": "model", "parts": [{"text": "thinking", "thought": True}, {"text": '{"category": "x"}'}]}}]}
    assert adapter.classifier_message(answer) == {"role": "assistant", "content": '{"category": "x"}'}
    with pytest.raises(ValueError, match="batchEmbedContents"):
        adapter.embeddings_url(p)
