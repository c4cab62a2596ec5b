"""docs/configuration.md's YAML snippet, loaded as a user would and served as the page says.

The page shows one provider entry for Ollama's native chat. This test takes the snippet from
the page itself (so an edit of the page is tested as written), adds it to the shipped
``config.yaml``, loads the file through ``router.config.load_config`` and checks what the
text around it says: an ``api: ollama`` provider in native mode, ``/api/chat`` with
``options.num_ctx`` = the model's ``context_window``, the answer an OpenAI chat completion.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from router.config import load_config, parse_config
from tests.http.test_ollama_native import NativeOllama
from tests.support.config import chat_body
from tests.support.servers import loopback_server

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "configuration.md"


def page_snippets() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)


def shipped_with_snippet(snippet: str) -> dict[str, Any]:
    """The shipped config.yaml with the snippet's providers added and one catalogue model on them."""
    raw = yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))
    provider_name, = yaml.safe_load(snippet)["providers"]
    raw["providers"].update(yaml.safe_load(snippet)["providers"])
    template = raw["models"][0]
    raw["models"] = [{**template, "name": "local-qwen", "provider": provider_name, "upstream_model": "qwen", "context_window": 16_384}]
    raw["middlewares"] = ["session-fingerprint", "capability-gate", "upstream-forward"]  # no classifier model to ask
    raw["decision_log"] = {"path": ":memory:"}
    return raw


def test_the_page_shows_one_yaml_snippet_and_it_is_the_ollama_native_provider():
    snippets = page_snippets()
    assert len(snippets) == 1, "a new YAML snippet on docs/configuration.md needs its own test here"
    assert yaml.safe_load(snippets[0]) == {"providers": {"ollama": {"base_url": "http://localhost:11434", "api": "ollama", "native_chat": True}}}


def test_the_snippet_loads_through_the_config_loader_as_a_native_ollama_provider(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(shipped_with_snippet(page_snippets()[0])), encoding="utf-8")
    config = load_config(path, environ={})
    provider = config.providers["ollama"]
    assert (provider.api, provider.native_chat, str(provider.base_url).rstrip("/")) == ("ollama", True, "http://localhost:11434")


async def test_a_chat_request_goes_to_api_chat_with_num_ctx_the_models_window_and_comes_back_as_chat(proxy):
    mock = NativeOllama()
    async with loopback_server(mock.app()) as url:
        raw = shipped_with_snippet(page_snippets()[0].replace("http://localhost:11434", url))
        client = await proxy(parse_config(raw, environ={}))
        response = await client.post("/v1/chat/completions", json=chat_body())
        assert response.status == 200
        answer = await response.json()
    assert mock.paths == ["/api/chat"]
    assert mock.received[0]["options"]["num_ctx"] == 16_384
    assert answer["object"] == "chat.completion" and answer["choices"][0]["message"]["content"] == "Hello"
