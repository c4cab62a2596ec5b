"""Pinch on real agent transcripts (tests/data/transcripts), through the running proxy.

Each transcript is sent at budgets of 20k and 50k tokens; the mock upstream
records what it received. On that: the invariants of ARCHITECTURE §5 hold, and
the stats are exact (the saving in ``x-router-pinch-saved`` is exactly the
estimate of what was sent subtracted from the estimate of what the client sent).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from router.core.retrieve import RETRIEVE_TOOL
from router.wire.openai_chat.retrieve import with_tool

from bench.harness import TRANSCRIPTS
from router.core.pinch import compress_tool_result, is_compressed
from router.wire.openai_chat.pinch import tool_name_for
from router.core.tokens import DEFAULT_ESTIMATOR
from router.wire.openai_chat.view import protected_from, trim_candidates
from tests.support.config import make_config, model_entry
URL = "/v1/chat/completions"
KEEP_LAST_TURNS, MAX_SUMMARIZE_CHARS = 4, 4000
DIRECTORY = TRANSCRIPTS
TRANSCRIPTS = sorted(p for p in DIRECTORY.glob("*.json") if not p.name.endswith(".meta.json")) if DIRECTORY.is_dir() else []

pytestmark = pytest.mark.skipif(not TRANSCRIPTS, reason=f"no transcripts in {DIRECTORY}")


def load(path: Path) -> dict[str, Any]:
    data = orjson.loads(path.read_bytes())
    return {"model": "auto", "messages": data["messages"], "tools": data.get("tools")}


def tokens(messages: list[dict[str, Any]], tools: Any) -> int:
    return DEFAULT_ESTIMATOR.prompt_tokens(messages, tools)


@pytest.mark.parametrize("budget", [20_000, 50_000])
@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[p.stem for p in TRANSCRIPTS])
async def test_real_transcript_through_the_proxy(proxy, mock_upstream, path: Path, budget: int):
    mock, url = mock_upstream
    pinch = {"enabled": True, "budget_tokens": budget, "keep_last_turns": KEEP_LAST_TURNS, "max_summarize_chars": MAX_SUMMARIZE_CHARS}
    chain = ["session-fingerprint", "pinch-prune", "capability-gate", "upstream-forward"]
    models = [model_entry("main", context_window=1_000_000)]
    client = await proxy(make_config(url, middlewares=chain, pinch=pinch, models=models))
    body = load(path)
    original, tools = body["messages"], body["tools"]
    response = await client.post(URL, json=body)
    assert response.status == 200, await response.text()
    received = mock.received[0].body  # the first round (the mock may then call pinch_retrieve, and the proxy continue)
    sent = received["messages"]

    # exact stats: what the client sent, minus the saving, is what the upstream got
    saved = int(response.headers["x-router-pinch-saved"])
    assert tokens(sent, received.get("tools")) == tokens(original, tools) - saved
    # the client's tools, and pinch_retrieve after them (lossy first sight: the client offers tools)
    assert received.get("tools") == with_tool({"tools": tools}, RETRIEVE_TOOL)["tools"]

    # invariants: same count, order, roles, keys and pairing; only old tool results changed, and the
    # in-progress turn's at first sight (a new session's first request: they were never sent)
    assert len(sent) == len(original)
    candidates = set(trim_candidates(original, KEEP_LAST_TURNS))
    in_progress = protected_from(original, 1)
    compressed = []
    for index, (old, new) in enumerate(zip(original, sent, strict=True)):
        assert new["role"] == old["role"] and list(new) == list(old)
        assert all(new[k] == old[k] for k in old if k != "content")
        if new == old:
            continue
        assert DEFAULT_ESTIMATOR.message_tokens(new) < DEFAULT_ESTIMATOR.message_tokens(old)
        if index > in_progress and old["role"] == "tool":
            assert "[pinch-router: " in new["content"] and not is_compressed(new["content"])  # a first-sight text
            continue
        assert index in candidates and index < protected_from(original, KEEP_LAST_TURNS)
        compressed.append(index)
    assert all(sent[i] == original[i] for i in range(len(original)) if original[i]["role"] != "tool")
    called: set[str] = set()
    for message in sent:  # every result still answers a call made before it
        called.update(call["id"] for call in message.get("tool_calls") or [])
        assert message["role"] != "tool" or message["tool_call_id"] in called

    # within budget (once first sight reduced the new results) no old result changes; over it, every old
    # result that can shrink does (uniform mode)
    (row,) = (await (await client.get("/v1/decisions")).json())["data"]
    if tokens(original, tools) - row["pinch_first_sight_saved"] <= budget:
        assert compressed == []
    else:
        shrinkable = [i for i in sorted(candidates) if compress_tool_result(original[i], tool_name_for(original, i), MAX_SUMMARIZE_CHARS)]
        assert compressed == shrinkable and saved > 0
