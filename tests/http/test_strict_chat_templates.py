"""Every captured agent request, as the proxy sends it to a chat provider, renders in strict chat templates.

The chat templates Ollama, llama.cpp and vLLM render prompts with raise on what they do not accept:
a system message anywhere but first ("System message must be at the beginning."), or — in the
Llama-2 / Mistral style — user and assistant turns that do not alternate. Each captured Claude Code
and Codex request (tests/data/agents/) goes through the proxy on the shipped config to the mock
standing in for Ollama, is translated to chat there, and what the mock received is rendered with a
real template engine (jinja2's sandbox, as transformers and vLLM render templates) in two strict
templates (tests/data/chat_templates/). The chat agents' own requests pass through untranslated
(opencode's title request sends two user messages in a row, as opencode wrote it): they are held to
the leading-system template, which demands no alternation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import orjson
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from router.config import load_config
from router.tools.mock_capture import REDACTED
from router.translate.chat_shape import strict_chat_messages
from tests.support.agent_captures import CAPTURES, captured, client_headers

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "tests" / "data" / "chat_templates"
NOT_REPLAYED = {"host", "content-length", "accept-encoding", "connection"}
TRANSLATED = sorted(
    str(p.relative_to(CAPTURES))
    for p in CAPTURES.rglob("*.json")
    if orjson.loads(p.read_bytes())["path"] in ("/v1/messages", "/v1/responses")
)
CHAT_AGENTS = sorted(p.stem for p in CAPTURES.glob("*.jsonl"))
# the chat agents run on their defaults (docs/agents_on_defaults.py), one request a file
CHAT_ON_DEFAULTS = sorted(
    str(p.relative_to(CAPTURES)) for p in (CAPTURES / "on-defaults").rglob("*.json") if orjson.loads(p.read_bytes())["path"] == "/v1/chat/completions"
)


class TemplateError(Exception):
    """What ``raise_exception`` raises in a template (transformers raises its TemplateError)."""


def _raise(message: str) -> None:
    raise TemplateError(message)


def template(name: str) -> jinja2.Template:
    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    environment.globals["raise_exception"] = _raise
    environment.filters["tojson"] = lambda value: orjson.dumps(value).decode()
    return environment.from_string((TEMPLATES / name).read_text())


LEADING_SYSTEM, ALTERNATING = template("leading_system.jinja"), template("alternating.jinja")


def render(chat: dict[str, Any], *templates: jinja2.Template) -> None:
    for strict in templates:
        strict.render(messages=chat["messages"], tools=chat.get("tools"), add_generation_prompt=True)


def test_the_templates_are_strict_where_they_say():
    """They raise on what the proxy used to send: a later system message, two users in a row."""
    system_late = [{"role": "system", "content": "a"}, {"role": "user", "content": "hi"}, {"role": "system", "content": "env"}]
    with pytest.raises(TemplateError, match="System message must be at the beginning"):
        render({"messages": system_late}, LEADING_SYSTEM)
    with pytest.raises(TemplateError, match="Only the first message may be a system message"):
        render({"messages": system_late}, ALTERNATING)
    two_users = [{"role": "system", "content": "a"}, {"role": "user", "content": "env"}, {"role": "user", "content": "hi"}]
    with pytest.raises(TemplateError, match="must alternate"):
        render({"messages": two_users}, ALTERNATING)
    render({"messages": strict_chat_messages(system_late + two_users[1:])}, LEADING_SYSTEM, ALTERNATING)


@pytest.fixture
async def shipped(proxy, mock_upstream, tmp_path):
    mock, url = mock_upstream
    config = load_config(ROOT / "config.yaml", environ={"OLLAMA_URL": url})
    config = config.model_copy(update={"decision_log": config.decision_log.model_copy(update={"path": str(tmp_path / "d.sqlite3")})})
    return mock, await proxy(config)


@pytest.mark.parametrize("name", TRANSLATED)
async def test_a_translated_agent_request_renders_in_strict_chat_templates(shipped, name):
    mock, client = shipped
    record = orjson.loads((CAPTURES / name).read_bytes())
    headers = {k: v for k, v in record["headers"].items() if k.lower() not in NOT_REPLAYED and not v.endswith(REDACTED)}
    # captured straight against the mock, some name its models (mock-claude, …): those route as auto
    body = {**record["body"], "model": "auto"} if record["body"]["model"].startswith("mock") else record["body"]
    async with client.post(record["path"], params=record["query"], json=body, headers=headers) as response:
        assert response.status == 200, await response.text()
        await response.read()
    (chat,) = [r.body for r in mock.received if r.path.endswith("/chat/completions")]
    assert chat["messages"][0]["role"] == "system"
    render(chat, LEADING_SYSTEM, ALTERNATING)


@pytest.mark.parametrize("agent", CHAT_AGENTS)
async def test_a_chat_agents_request_renders_in_the_leading_system_template(shipped, agent):
    mock, client = shipped
    for request in captured(agent):
        headers = {k: v for k, v in client_headers(request).items() if k.lower() not in NOT_REPLAYED}
        async with client.post("/v1/chat/completions", json=request.body, headers=headers) as response:
            assert response.status == 200, await response.text()
            await response.read()
    chats = [r.body for r in mock.received if r.path.endswith("/chat/completions")]
    assert len(chats) == len(captured(agent))
    for chat in chats:
        render(chat, LEADING_SYSTEM)


async def test_a_provider_that_takes_system_messages_anywhere_gets_them_where_the_client_put_them(proxy, mock_upstream, tmp_path):
    mock, url = mock_upstream
    config = load_config(ROOT / "config.yaml", environ={"OLLAMA_URL": url})
    providers = {"ollama": config.providers["ollama"].model_copy(update={"system_messages": "anywhere"})}
    client = await proxy(config.model_copy(update={"providers": providers, "decision_log": config.decision_log.model_copy(update={"path": str(tmp_path / "d")})}))
    record = orjson.loads((CAPTURES / "claude-code/0001-POST-v1-messages.json").read_bytes())
    async with client.post("/v1/messages", json={**record["body"], "stream": False}) as response:
        assert response.status == 200, await response.text()
    (chat,) = [r.body for r in mock.received if r.path.endswith("/chat/completions")]
    assert [m["role"] for m in chat["messages"]] == ["system", "user", "system"]  # Claude Code's order


@pytest.mark.parametrize("name", CHAT_ON_DEFAULTS)
async def test_a_chat_agents_request_on_its_defaults_renders_in_the_leading_system_template(shipped, name):
    mock, client = shipped
    record = orjson.loads((CAPTURES / name).read_bytes())
    headers = {k: v for k, v in record["headers"].items() if k.lower() not in NOT_REPLAYED and not v.endswith(REDACTED)}
    async with client.post(record["path"], json=record["body"], headers=headers) as response:
        assert response.status == 200, await response.text()
        await response.read()
    (chat,) = [r.body for r in mock.received if r.path.endswith("/chat/completions")]
    render(chat, LEADING_SYSTEM)
