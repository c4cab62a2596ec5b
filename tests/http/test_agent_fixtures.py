"""The captured Claude Code, Codex and Gemini CLI requests (tests/data/agents) replayed against the mock upstream.

Keeps the fixtures usable: each request, sent as the agent sent it (headers
included, credentials aside), must get the answer that moved the real agent
on — a call to its shell tool on the first turn, text quoting the tool's output
once the request carries it — in the agent's own stream format.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from router.tools.mock_capture import REDACTED
from router.tools.mock_upstream import MockUpstream
from router.core.sse import data_payloads as sse_data
from tests.support.wire_factories import sse_events

AGENTS = Path(__file__).resolve().parents[1] / "data" / "agents"
# fixture → what the real agent got from the mock at that point of its run
EXPECTED = {
    "claude-code/0001-POST-v1-messages.json": ("tool call", "Bash"),
    "claude-code/0002-POST-v1-messages.json": ("text", "main.py\nnotes.txt"),
    "claude-code/0003-POST-v1-messages.json": ("tool call", "Bash"),  # the follow-up prompt, history included
    "claude-code/0004-POST-v1-messages.json": ("text", "main.py\nnotes.txt"),
    "claude-code-tui/0001-POST-v1-messages.json": ("tool call", "Bash"),  # the terminal UI, auto mode
    "claude-code-tui/0002-POST-v1-messages.json": ("text", "main.py\nnotes.txt"),
    # /context: one count per system-prompt section (this, the first) and per tool group (this, the largest)
    "claude-code-tui/0003-POST-v1-messages-count-tokens.json": ("count", 100),
    "claude-code-tui/0015-POST-v1-messages-count-tokens.json": ("count", 3000),
    "codex/0001-POST-v1-responses.json": ("tool call", "exec_command"),
    "codex/0002-POST-v1-responses.json": ("text", "main.py\nnotes.txt"),
    "codex/0003-POST-v1-responses.json": ("tool call", "exec_command"),
    "codex/0004-POST-v1-responses.json": ("text", "main.py\nnotes.txt"),
    # five tool turns in one prompt (docs.agents_pinch_check --fixtures): the mock's default answers the
    # first with its one call, each later one (results in) with text quoting them
    **{f"{agent}-tool-turns/000{n}-POST-v1-{path}.json": ("tool call", tool) if n == 1 else ("text", "line 1: measured value")
       for agent, path, tool in (("claude-code", "messages", "Bash"), ("codex", "responses", "exec_command")) for n in range(1, 7)},
    # codex --oss: what it asks Ollama first, then the same Responses turns
    "codex-oss/0001-GET-v1-models.json": ("probe", "data"),
    "codex-oss/0002-GET-api-version.json": ("probe", "version"),
    "codex-oss/0003-GET-api-tags.json": ("probe", "models"),
    "codex-oss/0004-POST-api-pull.json": ("probe", "status"),
    "codex-oss/0005-POST-v1-responses.json": ("tool call", "exec_command"),
    "codex-oss/0006-POST-v1-responses.json": ("text", "main.py\nnotes.txt"),
    # Gemini CLI: its model-router call (JSON out), then the tool turn and the turn with the result
    "gemini-cli/0001-POST-v1beta-models-gemini-3-5-flash-lite-generateContent.json": ("json", "complexity_score"),
    "gemini-cli/0002-POST-v1beta-models-gemini-3-8-flash-streamGenerateContent.json": ("tool call", "list_directory"),
    "gemini-cli/0003-POST-v1beta-models-gemini-3-8-flash-streamGenerateContent.json": ("text", "main.py (15 bytes)\nnotes.txt (18 bytes)"),
}
NOT_REPLAYED = {"host", "content-length", "accept-encoding", "connection"}


def load(name: str) -> dict[str, Any]:
    return orjson.loads((AGENTS / name).read_bytes())


def test_every_captured_request_is_replayed() -> None:
    assert sorted(str(p.relative_to(AGENTS)) for p in AGENTS.glob("*/*.json")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_captured_request_holds_no_credential_and_no_path_of_the_capturing_machine(name: str) -> None:
    record = load(name)
    credentials = {k: v for k, v in record["headers"].items() if k.lower() in ("x-api-key", "authorization", "x-goog-api-key")}
    assert all(v.endswith(REDACTED) for v in credentials.values())  # codex --oss sends none
    # the capture's temp dir is renamed to /tmp/pinch-agents (each agent's workspace there is ".../<agent>/work")
    text = re.sub(r"/tmp/pinch-agents/[\w-]+/work\b", "", json.dumps(record))
    assert "/work/" not in text and "pinch-agents-" not in text


@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_the_mock_answers_a_captured_request_in_the_agents_format(name: str) -> None:
    record = load(name)
    headers = {k: v for k, v in record["headers"].items() if k.lower() not in NOT_REPLAYED and not v.endswith(REDACTED)}
    kind, expected = EXPECTED[name]
    async with TestClient(TestServer(MockUpstream().app(), host="127.0.0.1")) as client:
        resp = await client.request(record["method"], record["path"], params=record["query"], json=record.get("body"), headers=headers)
        assert resp.status == 200, await resp.text()
        if kind == "probe":  # answered in Ollama's (or OpenAI's) shape; a pull streams NDJSON ending in success
            answers = [orjson.loads(line) for line in (await resp.read()).splitlines()]
            assert expected in answers[-1]
            assert answers[-1].get("status", "success") == "success"
            return
        if kind == "count":  # a real count, never a fake 0: Claude Code's /context shows it
            assert (await resp.json())["input_tokens"] > expected
            return
        if record["path"].startswith("/v1beta/"):
            answer = gemini_answer(await resp.read(), record["query"].get("alt") == "sse")
            if kind == "json":  # the router call's schema, answered with an instance of it
                assert expected in orjson.loads(answer["text"])
            elif kind == "tool call":
                assert answer["tool"] == expected and answer["signed"]
            else:
                assert answer["tool"] is None and expected in answer["text"]
            return
        assert resp.content_type == "text/event-stream"  # both agents stream
        events = sse_events(await resp.read())
    answer = anthropic_answer(events) if record["path"] == "/v1/messages" else responses_answer(events)
    if kind == "tool call":
        assert answer["tool"] == expected
        tools = [t.get("name") for t in record["body"]["tools"]]
        assert expected in tools
    else:
        assert answer["tool"] is None
        assert expected in answer["text"]


@pytest.mark.parametrize("name", [n for n, (kind, _) in EXPECTED.items() if kind in ("tool call", "text") and not n.startswith("gemini")])
async def test_the_mock_answers_a_captured_request_unstreamed_too(name: str) -> None:
    """The same bodies with ``stream: false``: what a client falls back to (Claude Code does on errors)."""
    record = load(name)
    kind, expected = EXPECTED[name]
    async with TestClient(TestServer(MockUpstream().app(), host="127.0.0.1")) as client:
        resp = await client.post(record["path"], params=record["query"], json={**record["body"], "stream": False})
        assert resp.status == 200, await resp.text()
        answer = await resp.json()
    if record["path"] == "/v1/messages":
        blocks = {b["type"]: b for b in answer["content"]}
        assert answer["stop_reason"] == ("tool_use" if kind == "tool call" else "end_turn")
        assert blocks["tool_use"]["name"] == expected if kind == "tool call" else expected in blocks["text"]["text"]
    else:
        items = {i["type"]: i for i in answer["output"]}
        assert answer["status"] == "completed"
        assert items["function_call"]["name"] == expected if kind == "tool call" else expected in items["message"]["content"][0]["text"]


def gemini_answer(body: bytes, sse: bool) -> dict[str, Any]:
    """The model turn a Gemini client rebuilds from its chunks (SSE, or one response), checking the last one ends it."""
    chunks = [orjson.loads(d) for d in sse_data(body)] if sse else [orjson.loads(body)]
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP" and chunks[-1]["usageMetadata"]["totalTokenCount"] > 0
    parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
    call = next((p for p in parts if "functionCall" in p), None)
    text = "".join(p.get("text", "") for p in parts if not p.get("thought"))
    return {"tool": call["functionCall"]["name"] if call else None, "signed": bool(call and call.get("thoughtSignature")), "text": text}


def anthropic_answer(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The message a client rebuilds from the stream, checking its framing on the way."""
    names = [n for n, _ in events]
    assert (names[0], names[-2], names[-1]) == ("message_start", "message_delta", "message_stop")
    assert events[0][1]["message"]["usage"]["input_tokens"] > 1000  # a real prompt, counted
    blocks: dict[int, dict[str, Any]] = {}
    for name, data in events:
        if name == "content_block_start":
            blocks[data["index"]] = {**data["content_block"], "json": ""}
        elif name == "content_block_delta":
            block, delta = blocks[data["index"]], data["delta"]
            block["json"] += delta.get("partial_json", "")
            block["text"] = block.get("text", "") + delta.get("text", "")
    tool = next((b for b in blocks.values() if b["type"] == "tool_use"), None)
    if tool is not None:
        assert json.loads(tool["json"])  # the streamed input is whole JSON with the command
    text = "".join(b.get("text", "") for b in blocks.values() if b["type"] == "text")
    return {"tool": tool["name"] if tool else None, "text": text}


def responses_answer(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    names = [n for n, _ in events]
    assert (names[0], names[1], names[-1]) == ("response.created", "response.in_progress", "response.completed")
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    output = events[-1][1]["response"]["output"]
    assert [d["item"] for n, d in events if n == "response.output_item.done"] == output
    assert output[0]["type"] == "reasoning" and output[0]["encrypted_content"]  # Codex asks for it and sends it back
    call = next((i for i in output if i["type"] == "function_call"), None)
    text = "".join(p["text"] for i in output if i["type"] == "message" for p in i["content"])
    return {"tool": call["name"] if call else None, "text": text}
