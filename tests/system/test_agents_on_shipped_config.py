"""The agents' real request sequences through `pinch-router serve` on the shipped config.yaml.

Real processes, as a user runs them: `pinch-router mock-upstream` stands in for
Ollama (the chat models and the classifier) and `pinch-router serve --config
config.yaml` points at it through ``OLLAMA_URL``. Each agent's captured run
(tests/data/agents/) is replayed in order with its own headers: the tool turn is
answered with tool calls, the tool results with text, and no request is refused.
"""

from __future__ import annotations

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
from tests.support.agent_captures import captured, client_headers

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
