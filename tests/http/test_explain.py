"""`pinch-router explain`: the chain's decision for a saved request, with no chat request sent."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from bench.harness import (
    TRANSCRIPTS,
    free_port,  # a loopback port where nothing listens
)
from router.cli import main
from router.config import Config, parse_config
from router.core.results import CLASSIFICATION, Outcome, PINCH, PinchMode, PinchStats, REWRITES, ROUTE, SESSION
from router.wire.openai_chat.view import ChatConversation
from router.core.pinch import MIN_SUMMARIZE_CHARS, CompressionKind, prune_results
from router.core.tokens import TokenEstimator
from router.observe.decision_record import decision_from_context
from router.tools.decision_text import decision_fields, field_lines
from router.tools.explain import (
    compressed_messages,
    explain_request,
    parse_headers,
    render_explanation,
)
from tests.support.config import chat_body, make_config, model_entry
from tests.support.factories import assistant, make_ctx, sent_messages, tool, user

TRANSCRIPT = TRANSCRIPTS / "sweagent-gpt4__pydicom__pydicom-1458.json"
ROOT = Path(__file__).resolve().parents[2]
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}]


def refused_url() -> str:
    return f"http://127.0.0.1:{free_port()}/v1"  # connecting is refused at once


def explain_settings(chat_url: str, classifier_url: str | None = None, embeddings_url: str | None = None, **sections: Any) -> dict[str, Any]:
    """The full chain; chat models on ``chat_url``, classifier and embeddings elsewhere (refused by default)."""
    raw: dict[str, Any] = {
        "middlewares": [
            "session-fingerprint", "classification-cache", "classifier", "pinch-relevance",
            "pinch-prune", "capability-gate", "upstream-forward",
        ],  # fmt: skip
        "providers": {"chat": {"base_url": chat_url}, "helper": {"base_url": classifier_url or refused_url()}},
        "models": [
            model_entry("coder", provider="chat", tiers=[1, 2]),
            model_entry("big", provider="chat", tiers=[2, 3], quality=0.4),
            model_entry("no-tools", provider="chat", supports={"tools": False}, quality=0.9),
        ],
        "classifier": {"provider": "helper", "model": "tiny-classifier", "timeout_seconds": 5},
        "pinch": {
            "enabled": True,
            "budget_tokens": 4000,
            "keep_last_turns": 3,
            "relevance": {"enabled": True, "base_url": embeddings_url or refused_url(), "timeout_seconds": 5},
        },
        "decision_log": {"enabled": False},
    }
    raw.update(sections)
    return raw


def config_of(raw: dict[str, Any]) -> Config:
    return parse_config(raw, environ={})


def config_file(tmp_path: Path, raw: dict[str, Any]) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def transcript_body() -> dict[str, Any]:
    return orjson.loads(TRANSCRIPT.read_bytes())


async def run_cli(*args: str) -> tuple[int, str, str]:
    """The real command in a subprocess, without blocking this loop (the mock upstream lives in it)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "router", *args, cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


# --- on a real transcript ------------------------------------------------------------


async def test_a_transcript_is_explained_with_fallbacks_and_compressions_and_no_chat_request(mock_upstream):
    mock, chat_url = mock_upstream
    config = config_of(explain_settings(chat_url))
    body = transcript_body()
    ctx = await explain_request(config, body)
    text = render_explanation(ctx, config, str(TRANSCRIPT))

    assert mock.received == []  # nothing went to the chat upstream
    assert ctx.response is None
    outcomes = {record.stage: record.outcome for record in ctx.trace}
    assert outcomes["classifier"] in (Outcome.ERROR, Outcome.FALLBACK)
    # deferred to pinch-prune, which made a batch and so awaited the ranking: the embedder failed, oldest first
    assert outcomes["pinch-relevance"] is Outcome.OK and outcomes["pinch-prune"] is Outcome.OK
    assert "oldest first: relevance unavailable" in next(r.detail for r in ctx.trace if r.stage == "pinch-prune")
    assert "upstream-forward" not in outcomes

    assert "requested model (none: routed)" in text
    assert "class       coding_general, tier 2, source fallback" in text
    assert "route       tier 2 → coder via chat (up-coder)" in text
    assert "candidates  coder → big" in text  # the gate's order: the chosen one, then its fallbacks
    assert "rejected    no-tools: does not support tools" in text
    assert "relevance   unavailable (request to" in text
    assert "upstream-forward      not run" in text and "explain never calls the chat upstream" in text

    assert ctx[PINCH] is not None and ctx[PINCH].compressed > 0
    compressed = text.split("compressed messages (")[1]
    assert compressed.startswith(f"{ctx[PINCH].compressed})")
    changed = [i for i, (a, b) in enumerate(zip(ctx.body["messages"], sent_messages(ctx), strict=True)) if a != b]
    rows = [line.split() for line in compressed.splitlines()[2:-1]]
    assert [int(r[0]) for r in rows] == changed
    assert {r[-1] for r in rows} <= {"elided", "placeholder"}
    tool_names = {t["function"]["name"] for t in body["tools"]}
    assert {r[1] for r in rows} <= tool_names and len({r[1] for r in rows}) > 1
    assert f"total: {ctx[PINCH].original_tokens:,} → {ctx[PINCH].final_tokens:,} tokens ({ctx[PINCH].saved_tokens:,} saved)" in text


async def test_explain_renders_its_decision_as_top_renders_the_recorded_one(mock_upstream):
    _, url = mock_upstream
    config = config_of(explain_settings(url))
    ctx = await explain_request(config, transcript_body(), offline=True)
    text = render_explanation(ctx, config).splitlines()
    recorded = field_lines(decision_fields(decision_from_context(ctx, 0, None).as_json()))
    shown = text[1 : 1 + len(recorded)]  # right after the request line, in top's order
    # the same lines but the duration, which is measured as each record is built
    assert [line for line in shown if not line.startswith("time ")] == [line for line in recorded if not line.startswith("time ")]
    assert sum(line.startswith("time ") for line in shown) == 1
    assert any(line.startswith("candidates  coder → big") for line in recorded)


@pytest.mark.system  # starts a process
async def test_the_command_prints_the_decision_and_sends_nothing_upstream(mock_upstream, tmp_path):
    mock, chat_url = mock_upstream
    status, out, err = await run_cli("explain", "--config", config_file(tmp_path, explain_settings(chat_url)), str(TRANSCRIPT))
    assert status == 0, err
    assert "route       tier 2 → coder via chat" in out
    assert "source fallback" in out
    assert "compressed messages (" in out and "placeholder" in out
    assert "Traceback" not in err and "stage_failed" not in err
    assert mock.received == []


async def test_the_classifier_is_asked_as_configured_but_the_chat_model_never(mock_upstream):
    # The mock answers JSON requests with a valid classification, so it can stand in for the classifier.
    mock, url = mock_upstream
    config = config_of(explain_settings(url, classifier_url=url))
    ctx = await explain_request(config, transcript_body())
    assert [r.body["model"] for r in mock.received] == ["tiny-classifier"]
    assert ctx[CLASSIFICATION] is not None and str(ctx[CLASSIFICATION].source) == "classifier"


async def test_offline_makes_no_network_call_at_all(mock_upstream):
    mock, url = mock_upstream
    config = config_of(explain_settings(url, classifier_url=url, embeddings_url=url))
    ctx = await explain_request(config, transcript_body(), offline=True)
    assert mock.received == []
    details = {record.stage: record.detail for record in ctx.trace}
    assert "offline" in details["classifier"] and "offline" in details["pinch-prune"]  # the ranking pinch awaited
    assert ctx[CLASSIFICATION] is not None and str(ctx[CLASSIFICATION].source) == "fallback"
    assert ctx[ROUTE] is not None and ctx[ROUTE].chosen.model == "coder"


async def test_client_headers_are_applied_like_the_proxys(mock_upstream):
    _, url = mock_upstream
    config = config_of(explain_settings(url))
    headers = parse_headers(["x-router-tier: 3", "x-session-id: abc"])
    ctx = await explain_request(config, chat_body("fix it", tools=TOOLS), headers, offline=True)
    text = render_explanation(ctx, config)
    assert "tier 3, source override" in text
    assert "route       tier 3 → big via chat" in text
    assert ctx[SESSION] is not None and ctx[SESSION].source == "header"


# --- refusals and bad input -------------------------------------------------------------


@pytest.mark.system  # starts a process
async def test_a_request_no_model_can_serve_prints_the_refusal_and_exits_1(mock_upstream, tmp_path):
    mock, url = mock_upstream
    request = tmp_path / "request.json"
    request.write_bytes(orjson.dumps(chat_body("hi", model="no-tools", tools=TOOLS)))
    status, out, err = await run_cli("explain", "--offline", "--config", config_file(tmp_path, explain_settings(url)), str(request))
    assert status == 1, err
    assert "refused     400 no_capable_model: no configured model can serve this request" in out
    assert "no-tools: does not support tools" in out
    assert "→ no capable model" in out and "rejected    no-tools: does not support tools" in out  # as the gate's trace says
    assert "capability-gate" in out and "upstream-forward      not run" in out
    assert mock.received == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b'"just a string"', "expected a chat request object or a list of messages, got str"),
        (b'{"messages": []}', "400 invalid_request (messages): 'messages' must be a non-empty array"),
        (b'{"model": 5, "messages": [{"role": "user", "content": "x"}]}', "(model): 'model' must be a non-empty string"),
    ],
)
def test_an_unusable_request_file_exits_2_with_a_message(tmp_path, capsys, content, message):
    request = tmp_path / "request.json"
    request.write_bytes(content)
    status = main(["explain", "--config", config_file(tmp_path, explain_settings(refused_url())), str(request)])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("pinch-router explain: ") and message in err
    assert "Traceback" not in err


def test_a_missing_file_and_a_bad_header_exit_2(tmp_path, capsys):
    config = config_file(tmp_path, explain_settings(refused_url()))
    assert main(["explain", "--config", config, str(tmp_path / "absent.json")]) == 2
    assert "absent.json: cannot read (No such file or directory)" in capsys.readouterr().err
    assert main(["explain", "--config", config, "-H", "no colon here", str(TRANSCRIPT)]) == 2
    assert "header 'no colon here' is not 'Name: value'" in capsys.readouterr().err


def test_a_bare_list_of_messages_is_a_request(tmp_path, capsys):
    request = tmp_path / "messages.json"
    request.write_bytes(orjson.dumps([user("hello")]))
    assert main(["explain", "--offline", "--config", config_file(tmp_path, explain_settings(refused_url())), str(request)]) == 0
    out = capsys.readouterr().out
    assert "request     1 messages, 0 tools" in out
    assert "within budget" in out


# --- the compressed-message listing -------------------------------------------------------


def test_the_compressed_results_are_listed_as_pinch_reported_them():
    messages = [
        user("task"),
        assistant(calls=[("c1", "open", "{}"), ("c2", "grep", "{}")]),
        tool("c1", "x" * 500),
        tool("c2", "y" * 100),
        assistant("done"),
    ]
    ctx = make_ctx(messages=messages)
    elided, short = "x" * 100 + "[... removed ...]", "[placeholder]"
    ctx[REWRITES] = {0: elided, 1: short}
    ctx[PINCH] = PinchStats(PinchMode.UNIFORM, 300, 100, 2, 1, 1, compressions=((0, "elided"), (1, "placeholder")))
    estimator = TokenEstimator()
    found = compressed_messages(ctx, estimator)
    assert [(m.index, m.tool, m.kind, m.chars_before, m.chars_after) for m in found] == [
        (2, "open", CompressionKind.ELIDED, 500, 117),
        (3, "grep", CompressionKind.PLACEHOLDER, 100, 13),
    ]
    assert found[0].tokens_before == estimator.message_tokens(messages[2])
    assert found[1].tokens_after == estimator.message_tokens({**messages[3], "content": short})
    ctx[PINCH] = PinchStats(PinchMode.WITHIN_BUDGET, 300, 300)
    assert compressed_messages(ctx, estimator) == []


def test_pinch_reports_each_compression_by_result_and_kind():
    parts = [{"type": "text", "text": "a" * 50}, {"type": "text", "text": "b" * 400}]
    messages = [user("task"), assistant(calls=[("c1", "view", "{}")]), tool("c1", parts), assistant(calls=[("c2", "ls", "{}")]), tool("c2", "z" * 100), assistant("done")]
    _, stats = prune_results(ChatConversation(messages), 0, 1, MIN_SUMMARIZE_CHARS)
    assert stats.compressions == ((0, "elided"), (1, "placeholder"))


@pytest.mark.parametrize(
    ("stats", "line"),
    [
        (PinchStats(PinchMode.UNIFORM, 9000, 5000, 4, 4, 0, reapplied=3, newly_compressed=1, reason="over the window"), "ledger      3 reapplied, 1 newly compressed — over the window"),
        (PinchStats(PinchMode.WITHIN_BUDGET, 900, 900, reason="within budget after the ledger"), "ledger      0 reapplied, 0 newly compressed — within budget after the ledger"),
    ],
)
def test_the_ledger_and_the_reason_are_shown(stats: PinchStats, line: str) -> None:
    ctx = make_ctx(messages=[user("task")])
    ctx[PINCH] = stats
    assert line in render_explanation(ctx, make_config()).splitlines()


def test_no_ledger_line_when_pinch_has_nothing_to_say() -> None:
    ctx = make_ctx(messages=[user("task")])
    ctx[PINCH] = PinchStats(PinchMode.WITHIN_BUDGET, 900, 900)
    assert "ledger" not in render_explanation(ctx, make_config())


async def test_explain_shows_the_model_family_a_name_matched_and_the_classifiers_reason(mock_upstream):
    """Claude Code on its default model, explained on a config with families: the family and its hint are
    in the class line, and the mock classifier's reason with the classification."""
    mock, url = mock_upstream
    raw = explain_settings(url, classifier_url=url, routing={"model_families": {"claude-*opus*": 3}})
    body = {**chat_body("the parser test fails with a traceback"), "model": "claude-opus-5-5"}
    ctx = await explain_request(config_of(raw), body)
    text = render_explanation(ctx, config_of(raw))
    assert "source classifier (debugging words: traceback, fails" in text
    assert "routed tier 3 (model family claude-*opus* → tier 3)" in text
    assert "route       tier 3 → " in text


# --- every wire format ------------------------------------------------------------------------

GEMINI_BODY = {
    "contents": [{"role": "user", "parts": [{"text": "fix the failing test"}]}],
    "tools": [{"functionDeclarations": [{"name": "bash", "parameters": {"type": "object"}}]}],
}


async def test_a_gemini_body_is_explained_as_the_gemini_api_would_serve_it(mock_upstream):
    """The body's format from the registry (``contents``), sent to its usual path (``auto``, whole);
    ``--path`` says the rest, as the URL does: the model it pins and the stream."""
    mock, url = mock_upstream
    config = config_of(explain_settings(url))
    ctx = await explain_request(config, GEMINI_BODY, offline=True)
    assert ctx.wire.name == "gemini" and not ctx.view.stream
    assert ctx.response is None and ctx[ROUTE] is not None and not ctx[ROUTE].pinned and ctx[ROUTE].candidates
    streamed = await explain_request(config, GEMINI_BODY, offline=True, path="/v1/models/big:streamGenerateContent?alt=sse")
    assert streamed.wire.name == "gemini" and streamed.view.stream
    assert streamed[ROUTE] is not None and streamed[ROUTE].pinned and streamed[ROUTE].chosen.model == "big"
    assert "1 messages, 1 tools, stream" in render_explanation(streamed, config)
    assert mock.received == []


def test_a_path_the_chain_does_not_serve_exits_2_naming_those_it_does(tmp_path, capsys):
    request = tmp_path / "request.json"
    request.write_bytes(orjson.dumps(GEMINI_BODY))
    config = config_file(tmp_path, explain_settings(refused_url()))
    assert main(["explain", "--offline", "--config", config, "--path", "/v1beta/models/auto:countTokens", str(request)]) == 2
    err = capsys.readouterr().err
    assert "--path /v1beta/models/auto:countTokens: not an endpoint the proxy serves through its chain" in err and "/v1/messages" in err
    assert main(["explain", "--offline", "--config", config, "--path", "/v1beta/models/auto:generateContent", str(request)]) == 0
