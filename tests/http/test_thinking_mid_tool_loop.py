"""A session that reaches Claude mid tool loop, with thinking on.

Routing, fallback, escalation or a window that no longer fits can move a session between
providers inside one tool loop. When the step before came from a model without Anthropic's
thinking (an OpenAI-chat or Ollama model, or the proxy's own thinking, which is left out),
Anthropic refuses the request with thinking on: the last assistant message of a tool loop must
start with a thinking block it signed. The proxy sends that one request with thinking off —
Anthropic's advice, and its rule of one thinking configuration per assistant turn — and says so
(``x-router-dropped``, the decision row); the next user turn has thinking again, and a loop that
does carry Anthropic's thinking goes out as it came.

The loopback mock enforces Anthropic's rule with its wording, so the tests through the proxy
fail where the real API would.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import pytest
from multidict import CIMultiDict, CIMultiDictProxy

from router.config import ConfigError, parse_config
from router.core.request_view import BodyChanges
from router.tools import mock_anthropic
from router.tools.decision_text import decision_detail
from router.tools.explain import explain_request, render_explanation
from router.tools.mock_answers import seal
from router.wire.anthropic_messages.adapter import ANTHROPIC_MESSAGES_ADAPTER
from router.wire.anthropic_messages.blocks import (
    PROXY_THINKING_SIGNATURE,
    THINKING_OFF_MID_TOOL_LOOP,
    tool_loop_without_thinking,
)
from router.wire.anthropic_messages.body import thinking_within_output_limit
from router.wire.anthropic_messages.validation import validate_messages_body
from router.wire.anthropic_messages.view import messages_view
from tests.support.anthropic_factories import (
    BASH,
    assistant,
    body,
    text,
    thinking,
    tool_result,
    tool_use,
    two_wire_config,
    user,
)
from tests.support.config import model_entry
from tests.support.wire_factories import (
    function_call,
    function_call_output,
    input_message,
    responses_body,
)

SIGNED = thinking("Claude reasoned", seal("Claude reasoned"))  # what the mock signed, so it accepts it back
PROXY_MADE = thinking("the chat model reasoned", PROXY_THINKING_SIGNATURE)
REDACTED = {"type": "redacted_thinking", "data": "c2VhbGVk"}
ADAPTIVE = {"type": "adaptive"}
HEADERS = {"x-api-key": "local-key", "anthropic-version": "2023-06-01", "Content-Type": "application/json"}


def loop_after(step: dict[str, Any]) -> list[dict[str, Any]]:
    """A tool loop in progress: the user's task, the assistant ``step`` calling Bash, its result."""
    return [user("list the files"), step, user(tool_result("toolu_1", "a.py"))]


# ---- the rule, pure


@pytest.mark.parametrize(
    ("messages", "refused"),
    [
        (loop_after(assistant(tool_use("toolu_1"))), True),  # an OpenAI-chat or Ollama model's step
        (loop_after(assistant(text("Let me look."), tool_use("toolu_1"))), True),  # "…but found `text`"
        (loop_after(assistant(PROXY_MADE, tool_use("toolu_1"))), True),  # left out for Anthropic: nothing left
        (loop_after(assistant(SIGNED, tool_use("toolu_1"))), False),
        (loop_after(assistant(REDACTED, tool_use("toolu_1"))), False),
        ([*loop_after(assistant(tool_use("toolu_1"))), assistant(text("a.py")), user("now the tests")], False),  # the loop ended
        ([user("hi"), assistant(text("hello")), user("list the files")], False),  # no tool loop
        # back on Claude: the chat model's step is an older one, the last starts with Anthropic's thinking
        ([*loop_after(assistant(tool_use("toolu_1"))), assistant(SIGNED, tool_use("toolu_2")), user(tool_result("toolu_2", "b.py"))], False),
    ],
    ids=["chat step", "text first", "proxy's thinking", "signed", "redacted", "loop ended", "no loop", "older step"],
)
def test_anthropic_refuses_thinking_when_the_last_tool_step_has_none_it_signed(messages, refused) -> None:
    assert tool_loop_without_thinking(messages) is refused
    # the mock, as Anthropic, refuses each of them (the proxy's block already for its signature)
    assert (mock_anthropic.request_error(body(*messages, thinking=ADAPTIVE, max_tokens=2000)) is not None) is refused


@pytest.mark.parametrize(
    ("asked", "turned_off"),
    [(ADAPTIVE, True), ({"type": "enabled", "budget_tokens": 2000}, True), ({"type": "disabled"}, False), (None, False)],
    ids=["adaptive", "enabled", "disabled", "absent"],
)
def test_the_adapter_says_what_the_provider_is_not_sent_only_when_thinking_was_asked(asked, turned_off) -> None:
    request = body(*loop_after(assistant(tool_use("toolu_1"))), **({"thinking": asked} if asked else {}))
    view = messages_view(request, validate_messages_body(request), 2000)
    dropped = ANTHROPIC_MESSAGES_ADAPTER.passthrough_dropped(view, BodyChanges("claude-up"))
    assert dropped == ((THINKING_OFF_MID_TOOL_LOOP,) if turned_off else ())
    assert view.conversation.needs_thinking_off is turned_off


def test_the_mocks_wording_is_anthropics() -> None:
    error = mock_anthropic.request_error(body(*loop_after(assistant(tool_use("toolu_1"))), thinking=ADAPTIVE, max_tokens=2000))
    assert error == (
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, "
        "a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). "
        "We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. "
        "Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
    )
    assert mock_anthropic.request_error(body(*loop_after(assistant(tool_use("toolu_1"))), thinking={"type": "disabled"}, max_tokens=2000)) is None


# ---- the thinking budget under a lowered output limit, pure


def budgeted(budget: int, max_tokens: int) -> dict[str, Any]:
    return body(user("hi"), thinking={"type": "enabled", "budget_tokens": budget}, max_tokens=max_tokens)


@pytest.mark.parametrize(
    ("budget", "asked", "sent", "expected"),
    [
        (100_000, 128_000, 64_000, {"type": "enabled", "budget_tokens": 50_000}),  # scaled with the limit
        (31_999, 32_000, 16_000, {"type": "enabled", "budget_tokens": 15_999}),  # Claude Code's old pair: all but one token
        (1_500, 128_000, 1_200, {"type": "enabled", "budget_tokens": 1_024}),  # never below Anthropic's floor
        (2_000, 128_000, 1_024, None),  # no room for the floor: off (left out, the default form)
    ],
    ids=["scaled", "all but one", "floor", "no room"],
)
def test_a_thinking_budget_the_lowered_limit_would_reach_comes_down_with_it(budget, asked, sent, expected) -> None:
    lowered = {**budgeted(budget, asked), "max_tokens": sent}
    assert mock_anthropic.request_error(lowered) is not None  # what the clamp alone would send
    fitted = thinking_within_output_limit(lowered, asked)
    assert fitted is not None and fitted.get("thinking") == expected
    assert mock_anthropic.request_error(fitted) is None


@pytest.mark.parametrize(("form", "expected"), [("disabled", {"type": "disabled"}), ("between_tools", {"type": "between_tools"})])
def test_with_no_room_for_a_budget_thinking_goes_off_in_the_models_form(form, expected) -> None:
    lowered = {**budgeted(2_000, 128_000), "max_tokens": 1_024}
    assert thinking_within_output_limit(lowered, 128_000, form)["thinking"] == expected


@pytest.mark.parametrize(("budget", "asked", "sent"), [(8_000, 128_000, 64_000), (130_000, 128_000, 64_000)], ids=["fits", "client's own"])
def test_a_budget_the_proxy_did_not_break_goes_as_sent(budget, asked, sent) -> None:
    """Still below the lowered limit; or the client's own pair already had it at or above its limit
    (the interleaved-thinking beta allows that): not the proxy's to mend."""
    assert thinking_within_output_limit({**budgeted(budget, asked), "max_tokens": sent}, asked) is None


@pytest.mark.parametrize("asked", [ADAPTIVE, {"type": "disabled"}, None], ids=["adaptive", "disabled", "absent"])
def test_only_a_manual_budget_is_fitted(asked) -> None:
    request = body(user("hi"), max_tokens=1000, **({"thinking": asked} if asked else {}))
    assert thinking_within_output_limit(request, 128_000) is None


@pytest.mark.parametrize(
    ("budget", "max_tokens", "message"),
    [(500, 2000, "greater than or equal to 1024"), (2000, 2000, "`max_tokens` must be greater than `thinking.budget_tokens`")],
    ids=["below the floor", "at the limit"],
)
def test_the_mock_refuses_a_budget_anthropic_refuses(budget, max_tokens, message) -> None:
    assert message in (mock_anthropic.request_error(budgeted(budget, max_tokens)) or "")


# ---- through the proxy, to the loopback mock that enforces the rule


@pytest.fixture
async def client(proxy, mock_upstream, monkeypatch, request):
    monkeypatch.setenv("MOCK_PROVIDER_KEY", "provider-secret")
    mock, url = mock_upstream
    client = await proxy(two_wire_config(url, thinking_off=getattr(request, "param", "omit")))  # claude-main's form
    client.mock = mock
    return client


async def claude_code_turn(client, model: str, messages: list[dict[str, Any]], **extra: Any) -> tuple[aiohttp.ClientResponse, dict[str, Any]]:
    request = {"model": model, "max_tokens": 2000, "tools": [BASH], "messages": messages, "thinking": ADAPTIVE, **extra}
    response = await client.post("/v1/messages?beta=true", data=orjson.dumps(request), headers=HEADERS)
    return response, await response.json()


def sent_to_anthropic(client) -> list[Any]:
    return [r for r in client.mock.received if r.path == "/v1/messages"]


async def chat_models_step(client) -> list[dict[str, Any]]:
    """Claude Code's first step on the chat model (translated: it gives no thinking) and the history it sends next."""
    response, answer = await claude_code_turn(client, "chat-main", [user("list the files")])
    assert response.status == 200 and [b["type"] for b in answer["content"]] == ["tool_use"]
    call = answer["content"][0]
    return [user("list the files"), {"role": "assistant", "content": answer["content"]}, user(tool_result(call["id"], "a.py"))]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_claude_code_moving_to_claude_mid_tool_loop_gets_its_answer_with_thinking_off(client, stream) -> None:
    """The default form (``omit``): ``thinking`` left out, as for models that think only when asked."""
    history = await chat_models_step(client)
    context_management = {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}, {"type": "clear_tool_uses_20250919"}]}
    request = {"model": "claude-main", "max_tokens": 2000, "tools": [BASH], "messages": history, "thinking": ADAPTIVE,
               "context_management": context_management, "output_config": {"effort": "high"}, "stream": stream}
    response = await client.post("/v1/messages?beta=true", data=orjson.dumps(request), headers=HEADERS)
    raw = await response.read()
    assert response.status == 200, raw  # the mock, as Anthropic, refuses thinking on here
    assert b"a.py" in raw  # the answer quotes the tool's result
    assert response.headers["x-router-dropped"] == THINKING_OFF_MID_TOOL_LOOP
    (sent,) = sent_to_anthropic(client)
    assert "thinking" not in sent.body
    assert sent.body["context_management"] == {"edits": [{"type": "clear_tool_uses_20250919"}]}  # clear_thinking needs thinking on
    assert sent.body["messages"] == history and sent.body["output_config"] == {"effort": "high"}  # nothing else changes
    rows = (await (await client.get("/v1/decisions", headers=HEADERS)).json())["data"]
    assert rows[0]["model"] == "claude-main" and rows[0]["wire_dropped"] == THINKING_OFF_MID_TOOL_LOOP
    assert f"anthropic-messages → anthropic-messages, passed through, dropped {THINKING_OFF_MID_TOOL_LOOP}" in decision_detail(rows[0])  # top's detail


async def test_explain_says_thinking_would_go_off(mock_upstream) -> None:
    request = body(*loop_after(assistant(tool_use("toolu_1"))), model="claude-main", thinking=ADAPTIVE)
    config = two_wire_config(mock_upstream[1])
    ctx = await explain_request(config, request, CIMultiDictProxy(CIMultiDict(HEADERS)))
    assert f"would go to claude-main (anthropic-messages → anthropic-messages, passed through, dropped {THINKING_OFF_MID_TOOL_LOOP})" in render_explanation(ctx, config)


@pytest.mark.parametrize(
    ("client", "sent_thinking"),
    [("disabled", {"type": "disabled"}), ("between_tools", {"type": "between_tools"})],
    indirect=["client"],
)
async def test_a_model_that_thinks_by_default_gets_thinking_off_in_its_own_form(client, sent_thinking) -> None:
    history = await chat_models_step(client)
    response, answer = await claude_code_turn(client, "claude-main", history)
    assert response.status == 200, answer
    assert sent_to_anthropic(client)[-1].body["thinking"] == sent_thinking


def test_a_form_anthropic_does_not_have_is_a_config_error() -> None:
    raw = {"providers": {"anth": {"base_url": "http://127.0.0.1:9", "api": "anthropic"}}, "models": [model_entry("c", provider="anth", thinking_off="off")]}
    with pytest.raises(ConfigError, match="thinking_off"):
        parse_config(raw, environ={})


async def test_the_next_user_turn_has_thinking_again(client) -> None:
    history = await chat_models_step(client)
    _, answer = await claude_code_turn(client, "claude-main", history)
    next_turn = [*history, {"role": "assistant", "content": answer["content"]}, user("now the tests")]
    response, _ = await claude_code_turn(client, "claude-main", next_turn)
    assert response.status == 200 and "x-router-dropped" not in response.headers
    assert sent_to_anthropic(client)[-1].body["thinking"] == ADAPTIVE


async def test_a_loop_that_carries_anthropics_signed_thinking_goes_out_as_it_came(client) -> None:
    response, answer = await claude_code_turn(client, "claude-main", [user("list the files")])
    step = {"role": "assistant", "content": answer["content"]}
    assert [b["type"] for b in step["content"]] == ["thinking", "tool_use"]
    history = [user("list the files"), step, user(tool_result(step["content"][1]["id"], "a.py"))]
    request = {"model": "claude-main", "max_tokens": 2000, "tools": [BASH], "messages": history, "thinking": ADAPTIVE}
    response = await client.post("/v1/messages?beta=true", data=orjson.dumps(request), headers=HEADERS)
    assert response.status == 200 and "x-router-dropped" not in response.headers
    sent = sent_to_anthropic(client)[-1]
    assert sent.body == {**request, "model": "claude-up"}
    assert orjson.dumps(step["content"][0]) in sent.raw  # the signed block, byte for byte


async def test_a_thinking_budget_is_lowered_with_the_clamped_output_limit(client) -> None:
    """Claude Code's 128000 is clamped to claude-main's 64000; a budget of 100000 would then be refused."""
    response, answer = await claude_code_turn(client, "claude-main", [user("hi")], max_tokens=128_000,
                                              thinking={"type": "enabled", "budget_tokens": 100_000})
    assert response.status == 200, answer
    (sent,) = sent_to_anthropic(client)
    assert (sent.body["max_tokens"], sent.body["thinking"]) == (64_000, {"type": "enabled", "budget_tokens": 50_000})
    assert response.headers["x-router-max-tokens"] == "64000"


# ---- chat and Responses clients to Claude: their reasoning settings are not Anthropic thinking


CHAT_LOOP = [
    {"role": "user", "content": "list the files"},
    {"role": "assistant", "content": None, "reasoning_content": "ls will do",
     "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "Bash", "arguments": "{\"command\": \"ls\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "a.py"},
]
CHAT_TOOLS = [{"type": "function", "function": {"name": "Bash", "parameters": BASH["input_schema"]}}]


async def test_a_chat_client_moving_to_claude_mid_tool_loop_is_answered(client) -> None:
    """opencode's history after a step on another model; its ``reasoning_effort`` is not sent as ``thinking``
    (its history carries no thinking Anthropic signed, so every step of the loop would be refused)."""
    request = {"model": "claude-main", "messages": CHAT_LOOP, "tools": CHAT_TOOLS, "reasoning_effort": "high", "temperature": 0.2}
    response = await client.post("/v1/chat/completions", json=request, headers={"Authorization": "Bearer local-key"})
    answer = await response.json()
    assert response.status == 200 and "tool said: a.py" in answer["choices"][0]["message"]["content"]
    (sent,) = sent_to_anthropic(client)
    assert "thinking" not in sent.body and sent.body["temperature"] == 0.2
    assert [b["type"] for b in sent.body["messages"][1]["content"]] == ["tool_use"]


async def test_a_responses_client_moving_to_claude_mid_tool_loop_is_answered(client) -> None:
    """Codex's history after a step on another model, with its usual ``reasoning`` settings."""
    request = responses_body(
        input_message("user", "list the files"), function_call("call_1", "Bash", command="ls"), function_call_output("call_1", "a.py"),
        model="claude-main", reasoning={"effort": "medium", "summary": "auto"}, tools=[{"type": "function", "name": "Bash", "parameters": BASH["input_schema"]}],
    )
    response = await client.post("/v1/responses", json=request, headers={"Authorization": "Bearer local-key"})
    answer = await response.json()
    assert response.status == 200, answer
    (sent,) = sent_to_anthropic(client)
    assert "thinking" not in sent.body
    assert [b["type"] for b in sent.body["messages"][1]["content"]] == ["tool_use"]
