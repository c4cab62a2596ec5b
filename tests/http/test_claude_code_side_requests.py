"""WHAT-USERS-HIT #15 for Claude Code: its title request never decides its session's category.

Claude Code asks for a session title with a short request of its own — no tools, JSON output
(``output_config.format``), the same ``X-Claude-Code-Session-Id`` as its work — before and
between its tool turns (the opencode sequence is ``test_classification_cache.py``). The
tool turns are Claude Code 2.1.332's captured requests (``tests/data/agents/claude-code``).
"""

from __future__ import annotations

from typing import Any

from tests.support.anthropic_factories import BILLING, captured, text, user
from tests.support.classifier_fakes import CATEGORIES, OLLAMA_CHAT_URL, FakeClock, classifier_config, classifier_payloads, mocked_classifier, ollama_reply, verdict

SESSION_HEADER = "x-claude-code-session-id"
TITLE_SCHEMA = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"], "additionalProperties": False}


def turn(n: int) -> dict[str, Any]:
    return captured(f"claude-code/000{n}-POST-v1-messages.json")


def title_request(session: str) -> tuple[dict[str, Any], dict[str, str]]:
    body = {
        "model": "claude-haiku-4-5",  # its small model; the work goes to claude-opus-5-5
        "max_tokens": 512,
        "system": [BILLING, text("Generate a concise, sentence-case title (3-7 words) for this coding session.")],
        "messages": [user("list the files here")],
        "output_config": {"format": {"type": "json_schema", "schema": TITLE_SCHEMA}},
        "stream": False,
    }
    return body, {SESSION_HEADER: session, "anthropic-version": "2023-06-01"}


async def test_claude_codes_title_request_does_not_decide_the_category_of_its_tool_turns(proxy, mock_upstream):
    first = turn(1)
    session = {k.lower(): v for k, v in first["headers"].items()}[SESSION_HEADER]
    title, title_headers = title_request(session)
    with mocked_classifier() as mock:
        for category, tier in (("docs_writing", 1), ("debugging", 3), ("docs_writing", 1)):
            mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict(category, tier)))
        # Claude Code names Anthropic's models: `routing.aliases: ["*"]` routes every such name
        routing = {"categories": CATEGORIES, "tiers": [1, 2, 3], "fallback_category": "coding_general", "fallback_tier": 2, "aliases": ["*"]}
        client = await proxy(classifier_config(mock_upstream[1], routing=routing), clock=FakeClock())

        async def send(body: dict[str, Any], headers: dict[str, str]) -> tuple[str, str, str]:
            resp = await client.post("/v1/messages", json=body, headers=headers)
            assert resp.status == 200, await resp.text()
            await resp.read()
            assert resp.headers["x-router-session"]
            return resp.headers["x-router-source"], resp.headers["x-router-category"], resp.headers["x-router-tier"]

        def work(n: int) -> tuple[dict[str, Any], dict[str, str]]:
            return turn(n)["body"], {SESSION_HEADER: session, "anthropic-version": "2023-06-01"}

        assert await send(title, title_headers) == ("classifier", "docs_writing", "1")
        assert await send(*work(1)) == ("classifier", "debugging", "3")
        assert await send(*work(2)) == ("cached", "debugging", "3")
        assert await send(title, title_headers) == ("classifier", "docs_writing", "1")  # classified alone, never stored
        assert await send(*work(3)) == ("cached", "debugging", "3")
        assert len(classifier_payloads(mock)) == 3
