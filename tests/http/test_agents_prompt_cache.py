"""Real agents' multi-turn sessions through the proxy with pinch on: the prompt cache stays warm.

The captures (tests/data/agents/*-tool-turns, ``docs.agents_pinch_check --fixtures``) are one
session each in which the agent ran five tool turns, the results (about 1,600 tokens each) piling
up: Claude Code 2.1.332 (Anthropic Messages, ``cache_control`` breakpoints moving to the newest
message) and Codex CLI 0.171.0 (OpenAI Responses items). Replayed in order, as sent, through the
proxy to a provider of the agent's own API (passed through), with a window so small that pinch
must compress on a warm cache. What went upstream, compared request to request in the form a
prefix cache compares (:func:`router.tools.pinch_measures.as_cached`), must only ever grow at the end —
but where pinch compressed a result for the first time; a compressed result is resent byte for
byte ever after; and the whole session is one session key.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from router.tools.pinch_measures import as_cached, prompt_units, results_by_call
from router.tools.mock_capture import REDACTED
from tests.support.agent_captures import CAPTURES
from tests.support.config import make_config, model_entry
from tests.http.test_agent_fixtures import NOT_REPLAYED
from tests.support.wire_factories import sse_events

MARKER = b"pinch-router"  # in every form pinch sends a compressed (or first-sight) result in
COMPRESSED = (b"[pinch-router: old ", b"[... pinch-router removed ")  # a placeholder, an elision: a batch's


def compressed(content: bytes) -> bool:
    return any(marker in content for marker in COMPRESSED)


def session(agent: str) -> list[dict[str, Any]]:
    return [orjson.loads(path.read_bytes()) for path in sorted((CAPTURES / f"{agent}-tool-turns").glob("*.json"))]


def replayed_headers(record: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in record["headers"].items() if k.lower() not in NOT_REPLAYED and not v.endswith(REDACTED)}


# agent: (its endpoint, the model it asked for, the provider speaking its API, the window that binds)
AGENTS = {
    "claude-code": ("/v1/messages", "mock-claude", {"api": "anthropic"}, 9_000),
    "codex": ("/v1/responses", "mock-responses", {"wire": "openai-responses"}, 9_000),
}


def test_the_agents_own_requests_only_grow_at_the_end_in_the_form_a_cache_compares():
    """The ground truth for the comparison below: without the proxy each request repeats the previous one
    and adds to it — once Claude Code's moving ``cache_control`` breakpoint, and its newest message sent as
    blocks (to carry the breakpoint) that it later sends as a string, compare as what they stand for."""
    for agent in AGENTS:
        units = [prompt_units(record["body"]) for record in session(agent)]
        cached = [as_cached(u) for u in units]
        assert len(units) == 6
        assert all(now[: len(before)] == before for before, now in zip(cached, cached[1:])), agent
    claude = [prompt_units(record["body"]) for record in session("claude-code")]
    assert not all(now[: len(before)] == before for before, now in zip(claude, claude[1:]))  # as sent, they differ


@pytest.mark.parametrize("agent", sorted(AGENTS))
async def test_a_real_session_through_pinch_changes_what_was_sent_only_where_it_compresses_anew(proxy, mock_upstream, agent):
    path, model, api, window = AGENTS[agent]
    mock, url = mock_upstream
    base = url.removesuffix("/v1") if api.get("api") == "anthropic" else url
    config = make_config(
        url,
        middlewares=["session-fingerprint", "pinch-prune", "capability-gate", "upstream-forward"],
        providers={"agent-api": {"base_url": base, **api}},
        models=[model_entry(model, provider="agent-api", upstream_model="mock", context_window=window, max_output_tokens=2_000)],
        pinch={"enabled": True, "budget_tokens": 4_000, "keep_last_turns": 1},
    )
    client = await proxy(config)
    keys = set()
    for record in session(agent):
        response = await client.post(path, json=record["body"], headers=replayed_headers(record), params=record.get("query") or {})
        assert response.status == 200, await response.text()
        await response.read()
        keys.add(response.headers["x-router-session"])
    rows = (await (await client.get("/v1/decisions", params={"session": next(iter(keys))})).json())["data"][::-1]
    pinch = [(row["pinch_mode"], row["pinch_reapplied"], row["pinch_newly_compressed"], row["pinch_reason"]) for row in rows]
    assert len(keys) == 1 and len(rows) == 6 and {row["session_source"] for row in rows} == {"header"}

    sent = [as_cached(prompt_units(received.body)) for received in mock.received]
    batches = 0
    for n, (before, now) in enumerate(zip(sent, sent[1:]), start=1):
        change = next((i for i, (a, b) in enumerate(zip(before, now)) if a != b), None)
        if change is not None:
            # only a result compressed for the first time may differ from what was sent (verbatim or
            # as its first-sight text before)
            assert compressed(orjson.dumps(now[change])) and not compressed(orjson.dumps(before[change])), (n, pinch[n])
            assert pinch[n][2] > 0, pinch[n]
            batches += 1
        earlier, later = results_by_call(before), results_by_call(now)
        for call, content in earlier.items():
            if compressed(content):  # compressed once: the same bytes ever after, never back
                assert later[call] == content, (n, call)
            elif MARKER in content:  # reduced at first sight: the same bytes, until a batch compresses it further
                assert later[call] == content or (compressed(later[call]) and pinch[n][2] > 0), (n, call)
    # every request that compressed anew changed what was sent there, every other one only added to it
    assert batches == sum(1 for _, _, new, _ in pinch[1:] if new) >= 1, pinch
    # the ledger resent (a compression or a first-sight text), nothing new
    assert any((reapplied or row["pinch_first_sight_reapplied"]) and not new for (_, reapplied, new, _), row in zip(pinch, rows)), pinch
    assert all("window" in reason for _, _, new, reason in pinch if new), pinch  # forced: the cache is warm throughout


@pytest.mark.parametrize("stream", [True, False])
async def test_every_answer_translated_for_claude_code_has_its_own_message_id(proxy, mock_upstream, stream):
    """The chat mock, as many servers do, gives every answer the same id (Ollama: "chatcmpl-" and 0…998; its
    native chat: none). Claude Code files the blocks of an answer by its message id: when the proxy made the
    id from the provider's, five tool turns came back to it as one assistant turn with five calls, the history
    it sent reordered (all calls, then all results) and the prompt's prefix changed on every request."""
    _, url = mock_upstream
    client = await proxy(make_config(url, models=[model_entry("mock-claude", context_window=200_000)]))
    ids = []
    for record in session("claude-code"):
        body = {**record["body"], "stream": stream}
        response = await client.post("/v1/messages", json=body, headers=replayed_headers(record), params=record.get("query") or {})
        assert response.status == 200, await response.text()
        if stream:
            ids.append(next(data["message"]["id"] for name, data in sse_events(await response.read()) if name == "message_start"))
        else:
            ids.append((await response.json())["id"])
    assert len(set(ids)) == len(ids) == 6 and all(i.startswith("msg_") for i in ids)
