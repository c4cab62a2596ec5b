"""First sight through the running proxy (pinch-prune with the session ledger): a repeated test run.

An agent runs the tests, reads and edits a file, runs them again: the second run prints what the
first printed. Replayed turn by turn as one session, the upstream receives the second run reduced
(what the first run shows already, pointed at; the failure lines in place) from the request that
first carries it, the very same bytes on every later turn, and each request begins with the
previous one byte for byte — for chat and for Anthropic Messages (passed through, and on a model
that checks the prefix of its signed thinking).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from router.core.pinch import is_compressed
from router.tools import mock_anthropic
from tests.support.anthropic_factories import SUPPORTS, tool_result, tool_use
from tests.support.anthropic_factories import assistant as anthropic_assistant
from tests.support.anthropic_factories import body as anthropic_body
from tests.support.anthropic_factories import user as anthropic_user
from tests.support.config import make_config, model_entry
from tests.support.factories import assistant, system, tool, user
from tests.unit.wire.test_thinking_binding import BINDING, HEADERS, run_session

CHAIN = ["session-fingerprint", "pinch-prune", "capability-gate", "upstream-forward"]
PINCH = {"enabled": True, "budget_tokens": 200_000, "keep_last_turns": 2}  # no batch: first sight alone
TEST_COMMAND = "python -m pytest -q tests/test_parser.py"
MARKER = "[pinch-router: "

PASSING = "\n".join(f"tests/test_parser.py::test_{name}_{kind} PASSED" for name in ("tokens", "blocks", "nesting", "comments", "strings", "escapes", "numbers") for kind in ("simple", "empty", "unicode", "long", "error"))
FAILURE = """=================================== FAILURES ===================================
___________________________ test_nesting_deep ____________________________
    def test_nesting_deep():
        tree = parse("a { b { c { d } } }")
>       assert tree.depth == 4
E       AssertionError: assert 3 == 4
tests/test_parser.py:88: AssertionError
FAILED tests/test_parser.py::test_nesting_deep - AssertionError: assert 3 == 4
1 failed, 35 passed in 0.42s"""
RUN = f"{PASSING}\n{FAILURE}"
PARSER = "\n".join(f"    if token.kind == {kind!r}:\n        return self.read_{kind}(token)" for kind in ("open", "close", "word", "string", "number", "comment"))

# (command, output) per tool turn: the run, the file read, an edit that changes nothing the run shows, the run again
STEPS = [(TEST_COMMAND, RUN), ("cat src/parser.py", PARSER), ("sed -i s/depth/level/ src/parser.py", ""), (TEST_COMMAND, RUN), ("git status --short", " M src/parser.py")]
SECOND_RUN = 3


def arguments(command: str) -> str:
    return orjson.dumps({"command": command}).decode()


def chat_requests() -> list[list[dict[str, Any]]]:
    messages = [system("You are a coding agent."), user("Make the parser tests pass.")]
    requests = []
    for i, (command, output) in enumerate(STEPS):
        messages = [*messages, assistant(f"Step {i}.", [(f"call_{i}", "bash", arguments(command))]), tool(f"call_{i}", output)]
        requests.append(messages)
    return requests


def anthropic_requests() -> list[list[dict[str, Any]]]:
    messages = [anthropic_user("Make the parser tests pass.")]
    requests = []
    for i, (command, output) in enumerate(STEPS):
        messages = [*messages, anthropic_assistant(tool_use(f"toolu_{i}", "Bash", command=command)), anthropic_user(tool_result(f"toolu_{i}", output))]
        requests.append(messages)
    return requests


def second_run_checks(sent: list[str]) -> None:
    """``sent``: the second run's text as the upstream received it on each request that carried it."""
    reduced = sent[0]
    assert MARKER in reduced and not is_compressed(reduced) and len(reduced) < len(RUN) // 2
    assert "of the earlier call" in reduced  # a pointer to the first run
    for line in FAILURE.splitlines()[3:]:  # the failure lines stay where they were
        assert line in reduced
    assert all(text == reduced for text in sent[1:])  # the same bytes on every later request


def appended_only(bodies: list[list[Any]]) -> bool:
    """Each request's messages begin with the previous request's, byte for byte."""
    return all(
        [orjson.dumps(m) for m in now[: len(before)]] == [orjson.dumps(m) for m in before] for before, now in zip(bodies, bodies[1:])
    )


async def decisions(client: Any, headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    return (await (await client.get("/v1/decisions", headers=headers)).json())["data"][::-1]


async def test_a_chat_session_sends_a_repeated_test_run_reduced_and_the_same_bytes_on_every_later_turn(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(make_config(url, middlewares=CHAIN, pinch=PINCH, models=[model_entry("main", context_window=1_000_000)]))
    saved = []
    for messages in chat_requests():
        response = await client.post("/v1/chat/completions", json={"model": "auto", "messages": messages}, headers={"x-router-session": "fs-chat"})
        assert response.status == 200, await response.text()
        saved.append(int(response.headers["x-router-pinch-saved"]))
    bodies = [r.body["messages"] for r in mock.received if r.path == "/v1/chat/completions"]
    assert len(bodies) == len(STEPS) and appended_only(bodies)
    assert all(body[3]["content"] == RUN for body in bodies)  # the first run, pointed at, goes as it was
    second_run_checks([body[2 + 2 * SECOND_RUN + 1]["content"] for body in bodies[SECOND_RUN:]])
    assert f'the earlier call bash {arguments(TEST_COMMAND)}' in bodies[-1][2 + 2 * SECOND_RUN + 1]["content"]
    rows = await decisions(client)
    assert [row["pinch_first_sight_new"] for row in rows][SECOND_RUN] == 1
    assert all(row["pinch_first_sight_reapplied"] >= 1 for row in rows[SECOND_RUN + 1 :])
    # the saving is first sight's, and the header says it, on the request that reduced it and every later one
    assert all(s == row["pinch_first_sight_saved"] > 0 for s, row in zip(saved[SECOND_RUN:], rows[SECOND_RUN:]))
    assert "first sight: 1 new, 0 from the ledger" in next(s for s in rows[SECOND_RUN]["stages"] if s["stage"] == "pinch-prune")["detail"]


async def test_an_anthropic_session_sends_a_repeated_test_run_reduced_and_the_same_bytes_on_every_later_turn(proxy, mock_upstream):
    mock, url = mock_upstream
    config = make_config(
        url,
        middlewares=CHAIN,
        pinch=PINCH,
        providers={"claude": {"base_url": url.removesuffix("/v1"), "api": "anthropic"}},
        models=[model_entry("claude-main", provider="claude", upstream_model="claude-up", supports=SUPPORTS, context_window=200_000)],
    )
    client = await proxy(config)
    headers = {"anthropic-version": "2023-06-01", "x-claude-code-session-id": "5b2c7a51-9d7e-4e0b-8f1a-2c3d4e5f6a7b"}
    for messages in anthropic_requests():
        response = await client.post("/v1/messages", json=anthropic_body(*messages, model="claude-main", max_tokens=1000), headers=headers)
        assert response.status == 200, await response.text()
    bodies = [r.body["messages"] for r in mock.received if r.path == "/v1/messages"]
    assert len(bodies) == len(STEPS) and appended_only(bodies)
    second_run_checks([body[2 * SECOND_RUN + 2]["content"][0]["content"] for body in bodies[SECOND_RUN:]])
    assert f'the earlier call Bash {arguments(TEST_COMMAND)}' in bodies[-1][2 * SECOND_RUN + 2]["content"][0]["content"]
    rows = await decisions(client)
    assert [row["pinch_first_sight_new"] for row in rows] == [0, 0, 0, 1, 0] and rows[-1]["pinch_first_sight_reapplied"] == 1


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_first_sight_on_a_model_that_checks_its_signed_thinking_never_unbinds_it(proxy, mock_upstream, monkeypatch, stream):
    """Claude Code's session on a binding model: every listing is reduced when first sent (its names
    step evenly) and resent as is, so no signed block's prefix ever changes: nothing refused, nothing dropped."""
    monkeypatch.setenv("MOCK_PROVIDER_KEY", "provider-secret")
    mock, url = mock_upstream
    provider = {"base_url": url.removesuffix("/v1"), "api": "anthropic", "api_key_env": "MOCK_PROVIDER_KEY"}
    fable = model_entry("fable", provider="anth", upstream_model="claude-fable-5-1", supports=SUPPORTS, max_output_tokens=2000, context_window=200_000)
    config = make_config(url, providers={"anth": provider}, models=[fable], server={"api_keys": ["local-key"]}, middlewares=CHAIN, pinch=PINCH)
    client = await proxy(config)
    responses = await run_session(client, "fable", stream)
    assert all(response.status == 200 and BINDING not in response.headers.get("x-router-dropped", "") for response in responses)
    rows = await decisions(client, HEADERS)
    assert sum(row["pinch_first_sight_new"] for row in rows) >= 4 and not any(row["pinch_newly_compressed"] for row in rows)
    sent = [mock_anthropic.without_cache_control(r.body["messages"]) for r in mock.received if r.path == "/v1/messages"]
    assert all(now[: len(before)] == before for before, now in zip(sent, sent[1:]))
