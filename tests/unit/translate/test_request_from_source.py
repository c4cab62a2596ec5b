"""A translation reads the client's body as the wire adapter made it, never written and read back.

The exchange hands every translator :meth:`~router.wire.WireAdapter.translation_source` (a dict)
instead of the bytes it used to serialise and the translator parsed again. For every registered
pair the provider's body must be the very bytes the round trip gave, on the agents' captured
bodies and on a body holding ``1e400`` (kept as the client wrote it), and the source must come
out unchanged: a failover's next candidate starts from it again. A whole answer is read from its
parsed JSON, which the exchange already has, with the same result as from its bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from router.core.json_body import faithful_loads
from router.core.request_view import NO_TARGET, BodyChanges, RequestTarget
from router.core.results import Candidate
from router.translate.protocol import AnswerIds
from router.translate.registry import TRANSLATORS
from router.wire import adapters
from tests.support.factories import agent_session

AGENTS = Path(__file__).resolve().parents[2] / "data" / "agents"
CANDIDATE = Candidate("bench-model", "p", "up-model", output_tokens=512, max_output_tokens=1024, reasoning_content=True)
IDS = AnswerIds("ab" * 12, 1_700_000_000)
CHAT_ANSWER = {
    "id": "c", "object": "chat.completion", "created": 1, "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "done", "tool_calls": [{"id": "k", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}, "finish_reason": "tool_calls"}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
}  # fmt: skip
ANSWERS = {
    "openai-chat": CHAT_ANSWER,
    "anthropic-messages": {"id": "m", "type": "message", "role": "assistant", "model": "m", "content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 1}},
    "ollama-chat": {"model": "m", "message": {"role": "assistant", "content": "done"}, "done": True, "prompt_eval_count": 3, "eval_count": 1},
    "gemini": {"candidates": [{"content": {"role": "model", "parts": [{"text": "done"}]}, "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1}},
}


def bodies() -> list[Any]:
    """(client wire, body, target): each client wire's captured bodies, and a chat session."""
    found = [pytest.param("openai-chat", {"model": "auto", "max_tokens": 100, "messages": agent_session(results=2, chars=200), "tools": [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]}, NO_TARGET, id="chat-session")]
    for path in sorted(AGENTS.glob("*/*.json")):
        recorded = json.loads(path.read_text())
        if not isinstance(recorded, dict) or recorded.get("method") != "POST" or not isinstance(recorded.get("body"), dict):
            continue
        route, name = recorded["path"], f"{path.parent.name}/{path.name}"
        if route == "/v1/messages":
            found.append(pytest.param("anthropic-messages", recorded["body"], NO_TARGET, id=name))
        elif route == "/v1/responses":
            found.append(pytest.param("openai-responses", recorded["body"], NO_TARGET, id=name))
        elif route.startswith("/v1beta/models/") and ":" in route:
            model, action = route.removeprefix("/v1beta/models/").split(":", 1)
            found.append(pytest.param("gemini", recorded["body"], RequestTarget(path={"model": model, "action": action}, query=recorded.get("query") or {}), id=name))
    return found


def with_huge_number(wire: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with a ``1e400`` where a translation carries it on (the sampling temperature), parsed as the edge parses it."""
    key = "generationConfig" if wire == "gemini" else "temperature"
    marked = {**body, key: {**(body.get(key) or {}), "temperature": "#N"}} if wire == "gemini" else {**body, key: "#N"}
    return faithful_loads(orjson.dumps(marked).replace(b'"#N"', b"1e400"))


def source_of(wire: str, body: dict[str, Any], target: RequestTarget) -> dict[str, Any]:
    adapter = adapters()[wire]
    view = adapter.parse(body, 2000, target)
    assert not hasattr(view, "status"), view
    return adapter.translation_source(body, view, BodyChanges(upstream_model="up-model", output_tokens=512, translated=True))


@pytest.mark.parametrize("huge", [False, True], ids=["as-sent", "1e400"])
@pytest.mark.parametrize(("wire", "body", "target"), bodies())
def test_the_translation_of_the_source_is_the_translation_of_its_bytes(wire, body, target, huge):
    if huge:
        body = with_huge_number(wire, body)
    source = source_of(wire, body, target)
    before = orjson.dumps(source)
    pairs = [(client, provider) for client, provider in TRANSLATORS if client == wire]
    assert pairs
    for client, provider in pairs:
        from_source = TRANSLATORS[client, provider](IDS, False).request(source, CANDIDATE)
        from_bytes = TRANSLATORS[client, provider](IDS, False).request(before, CANDIDATE)
        assert from_source == from_bytes, (client, provider)
        assert orjson.dumps(source) == before, f"{client} → {provider} changed the body it read"
        if huge:
            assert b"1e400" in from_source or provider in ("anthropic-messages",), (client, provider)


@pytest.mark.parametrize(("client", "provider"), sorted(TRANSLATORS))
def test_an_answer_is_read_alike_from_its_json_and_from_its_bytes(client, provider):
    wire_body = {"openai-chat": {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}}.get(client)
    answer = ANSWERS[provider]
    parsed, raw = TRANSLATORS[client, provider](IDS, False), TRANSLATORS[client, provider](IDS, False)
    if wire_body is not None:
        parsed.request(wire_body, CANDIDATE), raw.request(orjson.dumps(wire_body), CANDIDATE)
    assert parsed.response(answer) == raw.response(orjson.dumps(answer))


@pytest.mark.parametrize("huge", [False, True], ids=["as-sent", "1e400"])
@pytest.mark.parametrize(("wire", "body", "target"), bodies())
def test_a_chained_translation_hands_its_chat_body_on_unwritten(wire, body, target, huge):
    """Through chat (Responses → Anthropic, Gemini → Ollama, …): the second translation reads the
    first's chat body as a dict, and the provider gets the bytes the written-and-read-back body gave."""
    from router.translate.chained import ChainedTranslator

    if huge:
        body = with_huge_number(wire, body)
    source = source_of(wire, body, target)
    chained = [(client, provider) for client, provider in TRANSLATORS if client == wire and isinstance(TRANSLATORS[client, provider](IDS, False), ChainedTranslator)]
    for client, provider in chained:
        translator = TRANSLATORS[client, provider](IDS, False)
        read: list[Any] = []
        second_request = translator.second.request
        translator.second.request = lambda chat, candidate: read.append(chat) or second_request(chat, candidate)  # type: ignore[method-assign]
        sent = translator.request(source, CANDIDATE)
        assert len(read) == 1 and isinstance(read[0], dict), (client, provider)
        apart = TRANSLATORS[client, provider](IDS, False)
        assert sent == apart.second.request(apart.first.request(source, CANDIDATE), CANDIDATE), (client, provider)
    if wire != "openai-chat":
        assert chained, wire
