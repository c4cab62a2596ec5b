"""The agents' real request sequences through `pinch-router serve` on the shipped config.yaml.

Real processes, as a user runs them: `pinch-router mock-upstream` stands in for
Ollama (the chat models and the classifier) and `pinch-router serve --config
config.yaml` points at it through ``OLLAMA_URL``. Each agent's captured run
(tests/data/agents/) is replayed in order with its own headers: the tool turn is
answered with tool calls, the tool results with text, and no request is refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import orjson
import pytest

from bench.harness import free_port, wait_for_port
from router.config import load_config
from router.tools.mock_answers import MOCK_SUMMARY
from router.wire.openai_responses.compaction import decode_summary
from tests.support.agent_captures import CAPTURES, captured, client_headers

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = load_config(ROOT / "config.yaml", environ={})
MAX_OUTPUT = {m.name: m.max_output_tokens for m in SHIPPED.models}


def _serve(args: list[str], port: int, cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:  # a file, never a pipe nobody reads
        process = subprocess.Popen([sys.executable, "-m", "router", *args], cwd=cwd, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT)
    wait_for_port(port, 30, process)
    return process


@pytest.fixture(scope="module")
def shipped_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The proxy's base URL (one for the module: each test reads its own session's decisions)."""
    tmp_path = tmp_path_factory.mktemp("shipped")
    mock_port, proxy_port = free_port(), free_port()
    processes = [_serve(["mock-upstream", "--port", str(mock_port)], mock_port, tmp_path, {}, tmp_path / "mock.log")]
    try:
        # the decision log in this test's own state directory, not the user's (rows of earlier runs would count)
        env = {"OLLAMA_URL": f"http://127.0.0.1:{mock_port}/v1", "PINCH_ROUTER_STATE_DIR": str(tmp_path / "state")}
        args = ["serve", "--config", str(ROOT / "config.yaml"), "--port", str(proxy_port)]
        processes.append(_serve(args, proxy_port, tmp_path, env, tmp_path / "proxy.log"))
        yield f"http://127.0.0.1:{proxy_port}"
    finally:
        for process in processes:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


async def replay(base_url: str, agent: str) -> list[tuple[aiohttp.ClientResponse, bytes]]:
    answers = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        for request in captured(agent):
            async with http.post(f"{base_url}/v1/chat/completions", json=request.body, headers=client_headers(request)) as response:
                answers.append((response, await response.read()))
    return answers


def streamed(body: bytes) -> tuple[str, list[str]]:
    """The text and the tool names a client reassembles from an SSE answer."""
    text, tools = [], []
    for line in body.splitlines():
        if line.startswith(b"data: {"):
            for choice in orjson.loads(line[6:])["choices"]:
                text.append(choice["delta"].get("content") or "")
                tools += [call["function"]["name"] for call in choice["delta"].get("tool_calls") or [] if call["function"].get("name")]
    return "".join(text).strip(), tools


async def decisions(base_url: str, session: str) -> list[dict]:
    """The session's decision rows, oldest first."""
    async with aiohttp.ClientSession() as http, http.get(f"{base_url}/v1/decisions", params={"session": session}) as response:
        return list(reversed((await response.json())["data"]))


@pytest.mark.parametrize(
    ("agent", "sources", "requested"),
    [
        ("opencode", ["classifier", "classifier", "cached"], 32_000),  # title request, tool turn, tool results
        ("pi", ["classifier", "cached"], 16_384),  # tool turn, tool results
        ("continue", ["classifier", "cached"], None),  # tool turn, tool results; no output limit
    ],
)
async def test_an_agent_completes_a_tool_round_trip_on_the_shipped_config(shipped_proxy, agent, sources, requested):
    answers = await replay(shipped_proxy, agent)
    assert [response.status for response, _ in answers] == [200] * len(answers)
    assert all(body.endswith(b"data: [DONE]\n\n") for _, body in answers)
    tool_turn, tool_results = answers[-2], answers[-1]
    assert streamed(tool_turn[1])[1] and streamed(tool_results[1]) == ("Hello from the mock upstream.", [])
    assert [response.headers["x-router-source"] for response, _ in answers] == sources
    for response, _ in answers:
        model = response.headers["x-router-model"]
        sent = response.headers.get("x-router-max-tokens")
        assert sent == (str(min(requested, MAX_OUTPUT[model])) if requested is not None else None)
    sessions = {response.headers["x-router-session"] for response, _ in answers}
    assert len(sessions) == 1  # one session: opencode's header, the others' fingerprint
    rows = await decisions(shipped_proxy, sessions.pop())
    assert [row["requested_max_tokens"] for row in rows] == [requested] * len(answers)


async def test_aider_gets_an_answer_and_the_log_its_token_counts(shipped_proxy):
    ((response, body),) = await replay(shipped_proxy, "aider")
    assert response.status == 200 and streamed(body) == ("Hello from the mock upstream.", [])
    assert b'"usage"' not in body  # aider did not ask for it
    (row,) = await decisions(shipped_proxy, response.headers["x-router-session"])
    assert row["prompt_tokens"] and row["completion_tokens"] and row["total_tokens"]
    assert row["requested_max_tokens"] is None and "x-router-max-tokens" not in response.headers


DEMO_TURNS = [  # (the user's turn, the category the mock's classifier reads in it, words of its reason, the model it routes to)
    ("add a docstring to parse_args and mention it in the README", "docs_writing", "docs words", "local-coder"),  # tier 1
    ("the parser test fails with a traceback: KeyError in tokenize()", "debugging", "debugging words", "local-reasoner"),  # tier 2
    ("redesign the architecture of the storage layer across the codebase", "coding_general", "architectural words", "local-reasoner"),  # tier 3
]


async def test_the_mocks_classifier_routes_different_turns_to_different_models_and_says_why(shipped_proxy):
    """A demo on the mock shows routing work: the mock classifies each turn from its words."""
    chosen = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        for text, category, reason, model in DEMO_TURNS:
            body = {"model": "auto", "messages": [{"role": "user", "content": text}]}
            async with http.post(f"{shipped_proxy}/v1/chat/completions", json=body) as response:
                assert response.status == 200
                assert (response.headers["x-router-category"], response.headers["x-router-model"]) == (category, model)
                (row,) = await decisions(shipped_proxy, response.headers["x-router-session"])
            assert row["source"] == "classifier" and reason in row["classifier_reason"]
            classifier = next(stage for stage in row["stages"] if stage["stage"] == "classifier")
            assert reason in classifier["detail"]
            chosen.append(row["model"])
    assert len(set(chosen)) >= 2


# --- every agent on its defaults (docs/agents_on_defaults.py --fixtures): its requests replayed as it sent them ----

ON_DEFAULTS = CAPTURES / "on-defaults"
NOT_REPLAYED = {"host", "content-length", "accept-encoding", "connection", "transfer-encoding"}


def _records(folder: Path) -> list[dict]:
    return [orjson.loads(p.read_bytes()) for p in sorted(folder.glob("*.json"))]


def _replayable(record: dict) -> dict[str, str]:
    return {k: v for k, v in record["headers"].items() if k.lower() not in NOT_REPLAYED and "[redacted]" not in v}


def _answered_calls(path: str, body: bytes) -> list[str]:
    """The tool names an answer called (a chat answer or stream, Responses / Anthropic events, Gemini chunks)."""
    if path.endswith("/chat/completions") and body.startswith(b"{"):  # not streamed (mini-swe-agent, through litellm)
        return [call["function"]["name"] for call in orjson.loads(body)["choices"][0]["message"].get("tool_calls") or []]
    if path.endswith("/chat/completions"):
        return streamed(body)[1]
    names = []
    for line in body.splitlines():
        if line.startswith(b"data: {"):
            event = orjson.loads(line[6:])
            item = event.get("item") or event.get("content_block") or {}
            if event.get("type") in ("response.output_item.done", "content_block_start") and item.get("type") in ("function_call", "custom_tool_call", "tool_use"):
                names.append(item["name"])
            for candidate in event.get("candidates") or []:  # Gemini: a functionCall part
                names += [part["functionCall"]["name"] for part in (candidate.get("content") or {}).get("parts") or [] if "functionCall" in part]
    return names


@pytest.mark.parametrize("agent", sorted(p.name for p in ON_DEFAULTS.iterdir() if p.is_dir()))
async def test_an_agent_on_its_defaults_is_served_as_it_ran(shipped_proxy, agent):
    """What each agent sent on its defaults (its model name, its own headers) gets the same turns through the shipped config."""
    records = _records(ON_DEFAULTS / agent)
    assert records and all("/work/wt" not in json.dumps(r) and "pinch-agents-" not in json.dumps(r) for r in records)  # no path of the capturing machine
    served, called = [], []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        for record in records:
            async with http.post(f"{shipped_proxy}{record['path']}", params=record["query"], json=record["body"], headers=_replayable(record)) as response:
                body = await response.read()
                served.append(response.status)
                called += _answered_calls(record["path"], body)
                session = response.headers.get("x-router-session")
    assert served == [200] * len(records)
    if any(r["body"].get("tools") or any(i.get("type") == "additional_tools" for i in r["body"].get("input") or []) for r in records):
        assert called  # the mock called the agent's shell tool, found by its name or its schema
    rows = await decisions(shipped_proxy, session)
    assert rows and all(row["status"] == 200 and row["model"] for row in rows)


async def test_claude_code_on_its_default_model_routes_to_the_top_tier(shipped_proxy):
    """Claude Code sends claude-opus-5-5 when started without --model: routed, as the family says, to the top tier."""
    records = _records(CAPTURES / "claude-code")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        for record in records:
            assert record["body"]["model"] == "claude-opus-5-5"
            async with http.post(f"{shipped_proxy}{record['path']}", params=record["query"], json=record["body"], headers=_replayable(record)) as response:
                assert response.status == 200, await response.text()
                await response.read()
                session = response.headers["x-router-session"]
    rows = await decisions(shipped_proxy, session)
    assert {(row["model_family"], row["routed_tier"], row["model"]) for row in rows} == {("claude-*opus* → tier 3", 3, "local-reasoner")}


# --- compaction: an agent summarising its session through the proxy (captured with mock-upstream --record) --------

COMPACTION = CAPTURES / "compaction"


def _events(body: bytes) -> list[dict]:
    return [orjson.loads(line[6:]) for line in body.splitlines() if line.startswith(b"data: {")]


async def _replay_records(base_url: str, folder: Path) -> list[bytes]:
    answers = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        for record in _records(folder):
            async with http.post(f"{base_url}{record['path']}", params=record["query"], json=record["body"], headers=_replayable(record)) as response:
                assert response.status == 200, await response.text()
                answers.append(await response.read())
    return answers


async def test_codex_on_openais_provider_compacts_through_a_chat_model(shipped_proxy):
    """Codex 0.171.0 pointed at the proxy as OpenAI's own provider compacts with a compaction_trigger item and wants
    exactly one compaction item back (else it fails the turn): the chat model writes the summary, the proxy hands it
    over as that item, and Codex's next request, holding it, reaches the chat model as the summary."""
    records = _records(COMPACTION / "codex-openai-provider")
    assert records[1]["body"]["input"][-1] == {"type": "compaction_trigger"}
    assert any(item.get("type") == "compaction" for item in records[2]["body"]["input"])
    tool_turn, compacting, after = await _replay_records(shipped_proxy, COMPACTION / "codex-openai-provider")
    assert _answered_calls("/v1/responses", tool_turn) == ["exec"]
    done = [e["response"] for e in _events(compacting) if e["type"] == "response.completed"]
    assert len(done) == 1 and [item["type"] for item in done[0]["output"] if item["type"] != "reasoning"] == ["compaction"]
    assert decode_summary(done[0]["output"][-1]["encrypted_content"]).strip() == MOCK_SUMMARY
    # the mock answers rather than running the turn's command again only when it reads its summary in the request
    assert _answered_calls("/v1/responses", after) == []
    assert any(e["type"] == "response.output_text.done" for e in _events(after))


async def test_codex_on_a_custom_provider_compacts_with_a_summarising_request(shipped_proxy):
    """Codex on a custom provider (`launch codex`'s wiring) compacts with a normal request whose last user message asks
    for a summary; the answer is that summary, and the turn goes on after it without running its command again."""
    tool_turn, compacting, after = await _replay_records(shipped_proxy, COMPACTION / "codex-custom-provider")
    assert _answered_calls("/v1/responses", tool_turn) == ["exec"]
    texts = ["".join(e["delta"] for e in _events(answer) if e["type"] == "response.output_text.delta") for answer in (compacting, after)]
    assert texts[0].strip() == MOCK_SUMMARY and _answered_calls("/v1/responses", compacting) == []
    assert texts[1].strip() and _answered_calls("/v1/responses", after) == []


async def test_claude_codes_compact_gets_a_summary_through_a_chat_model(shipped_proxy):
    """Claude Code 2.1.332's /compact (`claude -p /compact --continue`): the summarising request, which forbids tool
    calls in words only, gets the summary as text, no tool call — in the <summary> block it asks for."""
    records = _records(COMPACTION / "claude-code")
    answers = await _replay_records(shipped_proxy, COMPACTION / "claude-code")
    for record, answer in zip(records[2:], answers[2:], strict=True):
        assert "Your task is to create a detailed summary" in json.dumps(record["body"]["messages"][-1])
        assert _text_of(answer).strip() == f"<summary>\n{MOCK_SUMMARY}\n</summary>" and _answered_calls("/v1/messages", answer) == []


def _text_of(answer: bytes) -> str:
    """The text an Anthropic stream carries."""
    return "".join(e["delta"].get("text", "") for e in _events(answer) if e["type"] == "content_block_delta")


async def test_claude_codes_auto_compact_fires_and_the_turn_goes_on_through_a_chat_model(shipped_proxy):
    """Claude Code 2.1.332's auto-compact, run through the proxy to the chat mock (`claude -p "list the files here"`,
    CLAUDE_CODE_AUTO_COMPACT_WINDOW=100000 and CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=17: it compacts past 13,600 tokens; the
    mock's second command, `seq 1 2500`, outgrew that): it decides from the prompt the answers report, which counts
    the tool definitions and the system prompt (before, the mock counted the messages only: ~4,300 of ~12,300, and it
    never compacted). Its summarising request gets the summary in the <summary> block it asks for (without one it
    asks again), and the request after the compaction — the summary first, then the call and result it kept — is
    answered, not run again."""
    records = _records(COMPACTION / "claude-code-auto")
    first, _, compacting, after = records
    tool_turn, _, summary, answer = await _replay_records(shipped_proxy, COMPACTION / "claude-code-auto")
    body = first["body"]
    whole_prompt = len(orjson.dumps([body["system"], body["messages"], body["tools"]])) // 4
    reported = [e["usage"]["input_tokens"] for e in _events(tool_turn) if e["type"] == "message_delta"]
    assert reported and reported[0] >= 0.9 * whole_prompt
    assert _answered_calls("/v1/messages", tool_turn) == ["Bash"]
    assert "Your task is to create a detailed summary" in json.dumps(compacting["body"]["messages"][-1])
    assert _text_of(summary).strip() == f"<summary>\n{MOCK_SUMMARY}\n</summary>" and _answered_calls("/v1/messages", summary) == []
    assert MOCK_SUMMARY in json.dumps(after["body"]["messages"][0]) and after["body"]["messages"][-1]["role"] == "system"
    assert _answered_calls("/v1/messages", answer) == [] and _text_of(answer).strip()


async def test_gemini_clis_compression_gets_a_summary_through_a_chat_model(shipped_proxy):
    """Gemini CLI 0.61.0's history compression (on `--resume`, past model.compressionThreshold): a generateContent
    whose system instruction asks for a <state_snapshot> — to a model name of its own, and with each function
    response twice, as 0.61.0 resumes a session — gets the summary as text."""
    records = _records(COMPACTION / "gemini-cli")
    assert "<state_snapshot>" in json.dumps(records[-1]["body"]["systemInstruction"])
    *turn, compressing = await _replay_records(shipped_proxy, COMPACTION / "gemini-cli")
    assert _answered_calls(records[1]["path"], turn[1]) == ["run_shell_command"]
    parts = orjson.loads(compressing)["candidates"][0]["content"]["parts"]
    assert "".join(p.get("text", "") for p in parts).strip() == MOCK_SUMMARY and not any("functionCall" in p for p in parts)
