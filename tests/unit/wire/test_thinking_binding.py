"""Signed thinking bound to the prefix before it (Anthropic's preserved thinking) and pinch.

On Claude Fable 5.1, Opus 5.5 and the other models Anthropic lists, a thinking block sent back is
valid only while ``system``, ``tools`` and everything before it are what they were when Claude
produced it; else the API answers 400 ("The block is bound to a different conversation"), on
every retry. Pinch compresses old tool results, so each batch changes the prefix of every signed
block after its first rewritten result. The proxy leaves exactly those blocks out, on that request
and every later one of the session (they are recorded beside the ledger), thinking off when that
leaves the tool loop in progress without it, and says so in ``x-router-dropped``.

The loopback mock signs thinking over its prefix for those models and refuses, with Anthropic's
wording, a request whose prefix of a block changed, so a Claude-Code-shaped session through the
proxy fails where the real API would.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from multidict import CIMultiDict, CIMultiDictProxy

from router.core.cache_timing import CacheState, CacheVerdict
from router.core.pinch_ledger import (
    EMPTY_LEDGER,
    Ledger,
    PinchPolicy,
    PinchSession,
    WindowLimit,
    pinch_conversation,
)
from router.core.results import PINCH as PINCH_STATS, PinchMode
from router.core.tokens import DEFAULT_ESTIMATOR
from router.tools import mock_anthropic
from router.tools.explain import explain_request, render_explanation
from router.wire.anthropic_messages.blocks import THINKING_OFF_MID_TOOL_LOOP
from router.wire.anthropic_messages.thinking import (
    BINDING_MODELS,
    HOLD_FOR_LOOP_THINKING,
    binds_thinking,
    block_key,
    loop_thinking_at_stake,
    unbind,
)
from router.wire.openai_chat.view import ChatConversation
from tests.support.anthropic_factories import (
    SUPPORTS,
    assistant,
    body,
    streamed_message,
    text,
    thinking,
    tool_result,
    tool_use,
    user,
)
from tests.support.config import make_config, model_entry
from tests.support.factories import agent_session

ADAPTIVE = {"type": "adaptive"}
BINDING = "thinking bound to a prefix pinch changed"


def signed(name: str) -> dict[str, Any]:
    return thinking(f"I will look at {name}.", signature=f"sig-{name}")


def keys(*names: str) -> tuple[str, ...]:
    return tuple(block_key(signed(name)) for name in names)  # type: ignore[misc]


LOOP = [
    user("fix the bug"),
    assistant(signed("a"), tool_use("toolu_1")),
    user(tool_result("toolu_1", "a.py " * 100)),
    assistant(signed("b"), tool_use("toolu_2")),
    user(tool_result("toolu_2", "b.py " * 100)),
    assistant(signed("c"), text("done")),
    user("and now the tests"),
    assistant(signed("d"), tool_use("toolu_3")),
    user(tool_result("toolu_3", "c.py")),
]


# ---- which blocks a change unbinds (pure)


def test_a_change_unbinds_every_signed_block_after_it_and_none_before() -> None:
    found = unbind(LOOP, changed_from=2)
    assert found.positions == ((3, 0), (5, 0), (7, 0))
    assert found.keys == keys("b", "c", "d") and found.new == 3


def test_blocks_unbound_before_are_unbound_again_and_later_ones_kept() -> None:
    """The next request: nothing new compressed, the record says which blocks stay out; a block Claude
    produced after the batch (bound to the compressed prefix) is kept."""
    later = [*LOOP, assistant(signed("e"), text("tests pass"))]
    found = unbind(later, changed_from=None, remembered=keys("b", "c", "d"))
    assert found.positions == ((3, 0), (5, 0), (7, 0)) and found.new == 0
    assert found.keys == keys("b", "c", "d")


def test_nothing_changed_and_nothing_recorded_unbinds_nothing() -> None:
    assert unbind(LOOP, changed_from=None).positions == ()
    assert unbind(LOOP, changed_from=len(LOOP) - 1).positions == ()  # the change is after every block


@pytest.mark.parametrize(("changed_from", "off"), [(4, True), (0, True), (None, False)], ids=["loop's thinking unbound", "all", "none"])
def test_the_loop_in_progress_losing_its_thinking_is_named(changed_from, off) -> None:
    assert unbind(LOOP, changed_from).loop_without_reasoning is off


@pytest.mark.parametrize(
    ("messages", "at_stake"),
    [(LOOP, True), (LOOP[:6], False), ([*LOOP[:6], user("next"), assistant(tool_use("toolu_9")), user(tool_result("toolu_9", "x"))], False)],
    ids=["loop opened with signed thinking", "loop ended", "loop without thinking"],
)
def test_the_loops_thinking_is_at_stake_only_while_a_signed_block_opens_it(messages, at_stake) -> None:
    assert loop_thinking_at_stake(messages) is at_stake


def test_redacted_thinking_is_unbound_and_the_proxys_own_thinking_is_not_counted() -> None:
    redacted = {"type": "redacted_thinking", "data": "opaque"}
    messages = [user("q"), assistant(thinking("mine", signature=""), tool_use("toolu_1")), user(tool_result("toolu_1", "x")),
                assistant(redacted, text("ok")), user("next")]
    assert unbind(messages, changed_from=0).positions == ((3, 0),)


def session_pinch(messages: list[dict[str, Any]], ledger: Ledger, budget: int, **options: Any) -> Any:
    policy = PinchPolicy(budget_tokens=budget, keep_last_turns=1, max_summarize_chars=400, low_watermark=0.6)
    return pinch_conversation(ChatConversation(messages), ledger, policy, CacheState(CacheVerdict.COLD, "cache cold"), **options)


def test_the_ledger_says_from_which_result_on_a_request_differs_from_the_sessions_previous_one() -> None:
    """The first result sent otherwise than before (newly compressed, or an elided one turned into a
    placeholder); none when only the ledger was resent, the very same bytes."""
    messages = agent_session(6)
    first = session_pinch(messages, EMPTY_LEDGER, budget=DEFAULT_ESTIMATOR.prompt_tokens(messages) - 1)
    assert first.first_changed == min(first.rewrites)
    again = session_pinch(agent_session(7), first.ledger, budget=10**9)
    assert again.first_changed is None and again.rewrites
    batch = session_pinch(agent_session(9), again.ledger, budget=1)  # elided results turn placeholders too
    assert batch.first_changed == min(p for p, sent in batch.rewrites.items() if again.rewrites.get(p) != sent)


def test_a_held_batch_waits_for_the_budget_but_never_for_the_window() -> None:
    messages = agent_session(6)
    size = DEFAULT_ESTIMATOR.prompt_tokens(messages)
    held = session_pinch(messages, EMPTY_LEDGER, budget=size // 2, soft_hold="held: why")
    assert held.stats.mode is PinchMode.DEFERRED and not held.rewrites and held.stats.reason == "over budget; cache cold; held: why"
    window = WindowLimit("m", "p", size, size // 2)
    forced = session_pinch(messages, EMPTY_LEDGER, budget=size // 2, soft_hold="held: why", windows=[window])
    assert forced.stats.newly_compressed and forced.stats.final_tokens <= window.prompt_limit


@pytest.mark.parametrize("model", [*BINDING_MODELS, "claude-opus-5-5-20261101", "anthropic.claude-fable-5-1-v1:0", "us.anthropic.claude-sonnet-5-5"])
def test_the_models_anthropic_documents_bind_thinking(model) -> None:
    assert binds_thinking(model)


@pytest.mark.parametrize("model", ["claude-opus-5", "claude-fable-5", "claude-sonnet-4-6", "claude-up", "gpt-5"])
def test_other_models_do_not(model) -> None:
    assert not binds_thinking(model)


def test_the_configured_flag_wins() -> None:
    assert binds_thinking("my-proxy-alias", True) and not binds_thinking("claude-fable-5-1", False)


def test_a_ledger_stored_before_the_record_existed_reads_as_none_recorded() -> None:
    stored = orjson.loads(PinchSession(requests=3).encode())
    del stored["unbound"]
    assert PinchSession.decode(orjson.dumps(stored)) == PinchSession(requests=3)
    assert PinchSession.decode(PinchSession(stale_keys=("k1", "k2")).encode()).stale_keys == ("k1", "k2")


# ---- the mock refuses what the prefix check refuses


def mock_session(model: str, turns: int = 2) -> list[dict[str, Any]]:
    """A history the mock produced turn by turn, each user turn a tool round trip then text."""
    history: list[dict[str, Any]] = []
    for turn in range(turns):
        history.append(user(f"task {turn}"))
        while True:
            request = body(*history, model=model, thinking=ADAPTIVE)
            assert mock_anthropic.request_error(request) is None
            answer = mock_anthropic.message(request, mock_anthropic.answer(request, "done"))
            history.append(assistant(*answer["content"]))
            if answer["stop_reason"] != "tool_use":
                break
            history.append(user(tool_result(answer["content"][-1]["id"], f"listing {turn} " * 50)))
    return history


def test_the_mock_refuses_a_bound_block_whose_prefix_changed_with_anthropics_words() -> None:
    history = mock_session("claude-fable-5-1")
    history[2] = user(tool_result(history[2]["content"][0]["tool_use_id"], "[compressed]"))
    problem = mock_anthropic.request_error(body(*history, model="claude-fable-5-1", thinking=ADAPTIVE))
    assert problem == f"messages.3.content.0: {mock_anthropic.BOUND_ELSEWHERE}"
    assert "thinking-binding-controls-2026-08-01" in problem and '"drop_block"' in problem
    # a model that does not check the prefix, and count_tokens, take it
    assert mock_anthropic.request_error(body(*history, model="claude-up", thinking=ADAPTIVE)) is None
    assert mock_anthropic.count_tokens_error(body(*history, model="claude-fable-5-1")) is None


def test_the_mock_refuses_a_thinking_block_left_out_between_others() -> None:
    history = mock_session("claude-fable-5-1")
    history[3] = assistant(*history[3]["content"][1:])
    assert mock_anthropic.request_error(body(*history, model="claude-fable-5-1", thinking=ADAPTIVE)) == f"messages.5.content.0: {mock_anthropic.BOUND_ELSEWHERE}"


def test_the_mock_takes_an_untouched_history_and_moved_cache_breakpoints() -> None:
    history = mock_session("claude-fable-5-1", turns=3)
    moved = copy.deepcopy(history)
    moved[2]["content"][0]["cache_control"] = {"type": "ephemeral"}  # Claude Code moves its breakpoints every turn
    assert mock_anthropic.request_error(body(*moved, model="claude-fable-5-1", thinking=ADAPTIVE)) is None
    forged = copy.deepcopy(history)
    forged[1]["content"][0]["thinking"] = "I will do something else."
    assert "Invalid `signature`" in (mock_anthropic.request_error(body(*forged, model="claude-fable-5-1", thinking=ADAPTIVE)) or "")


# ---- a Claude Code session through the proxy, pinch on with a small budget

# first sight off: it would fold the listings (numbers stepping evenly) far below the budget, and these
# tests need batches (first sight on a binding model: tests/stages/test_first_sight.py)
PINCH = {"enabled": True, "budget_tokens": 1500, "keep_last_turns": 1, "max_summarize_chars": 400, "first_sight": {"enabled": False}}
CHAIN = ["session-fingerprint", "pinch-prune", "capability-gate", "upstream-forward"]
HEADERS = {"x-api-key": "local-key", "content-type": "application/json", "anthropic-version": "2023-06-01", "X-Claude-Code-Session-Id": "5b2c7a51-9d7e-4e0b-8f1a-2c3d4e5f6a7b"}


def binding_config(url: str, cache_lifetime: float | None = None, fable_binding: bool | None = None, fable_window: int = 200000) -> Any:
    """``fable`` (``claude-fable-5-1``: binds, as documented) and ``claude-main`` (``claude-up``: does
    not) behind one ``api: anthropic`` provider on the mock; pinch with a small budget."""
    provider = {"base_url": url.removesuffix("/v1"), "api": "anthropic", "api_key_env": "MOCK_PROVIDER_KEY"}
    if cache_lifetime is not None:
        provider["cache_lifetime_seconds"] = cache_lifetime
    fable = model_entry("fable", provider="anth", upstream_model="claude-fable-5-1", supports=SUPPORTS, max_output_tokens=2000, context_window=fable_window)
    if fable_binding is not None:
        fable["thinking_binding"] = fable_binding
    other = model_entry("claude-main", provider="anth", upstream_model="claude-up", supports=SUPPORTS, max_output_tokens=64000, context_window=200000)
    return make_config(url, providers={"anth": provider}, models=[fable, other], server={"api_keys": ["local-key"]}, middlewares=CHAIN, pinch=PINCH)


def claude_code_request(model: str, history: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
    """What Claude Code sends: its system and tools, thinking on, the history as the API returned it,
    one cache breakpoint on the last block (moved every turn)."""
    messages = copy.deepcopy(history)
    last = messages[-1]["content"]
    last[-1] = {**last[-1], "cache_control": {"type": "ephemeral"}}
    return body(*messages, model=model, thinking=ADAPTIVE, stream=stream, max_tokens=32000)


async def run_session(client, model: str, stream: bool, turns: int = 4, refused: list[bytes] | None = None) -> list[Any]:
    """Claude Code's session, turn by turn: a tool round trip per user turn, large listings. The
    responses; the first refused request's body goes in ``refused`` (and ends it) when given, else fails."""
    history: list[dict[str, Any]] = []
    responses = []
    for turn in range(turns):
        history.append(user(text(f"task {turn}: look at the files")))
        while True:
            request = orjson.dumps(claude_code_request(model, history, stream))
            response = await client.post("/v1/messages?beta=true", data=request, headers=HEADERS)
            raw = await response.read()
            responses.append(response)
            if response.status != 200 and refused is not None:
                retried = await client.post("/v1/messages?beta=true", data=request, headers=HEADERS)
                refused += [raw, await retried.read()]
                return responses
            assert response.status == 200, raw
            answer = streamed_message(raw) if stream else orjson.loads(raw)
            history.append(assistant(*answer["content"]))
            if answer["stop_reason"] != "tool_use":
                break
            history.append(user(tool_result(answer["content"][-1]["id"], "\n".join(f"src/module_{turn}_{i}.py" for i in range(150)))))
    return responses


@pytest.fixture
def mock(mock_upstream, monkeypatch):
    monkeypatch.setenv("MOCK_PROVIDER_KEY", "provider-secret")
    return mock_upstream


async def decisions(client) -> list[dict[str, Any]]:
    return (await (await client.get("/v1/decisions", headers=HEADERS)).json())["data"][::-1]


@pytest.mark.parametrize(
    "setting",
    [{"cache_lifetime": 0.001}, {"cache_lifetime": 0}, {"fable_window": 4000}],
    ids=["cold cache every request", "no prompt cache", "window-bound, warm cache"],
)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_a_claude_code_session_on_a_binding_model_survives_pinch(proxy, mock, stream, setting) -> None:
    client = await proxy(binding_config(mock[1], **setting))
    responses = await run_session(client, "fable", stream)
    rows = await decisions(client)
    sent = [r.body for r in mock[0].received if r.path == "/v1/messages"]
    assert len(sent) == len(responses) == 8  # every request answered, none refused on the way
    batches = [i for i, row in enumerate(rows) if row["pinch_newly_compressed"]]
    assert batches and any(BINDING in r.headers.get("x-router-dropped", "") for r in responses)
    for i, row in enumerate(rows):
        assert (BINDING in row["wire_dropped"]) == (BINDING in responses[i].headers.get("x-router-dropped", ""))
    if "fable_window" not in setting:
        # only the budget calls for batches: they wait for the tool loop's end, so its thinking stays on
        assert all(THINKING_OFF_MID_TOOL_LOOP not in row["wire_dropped"] for row in rows)
        held = [i for i, row in enumerate(rows) if HOLD_FOR_LOOP_THINKING in row["pinch_reason"]]
        assert held and all(not rows[i]["pinch_newly_compressed"] and sent[i]["messages"][-1]["content"][0]["type"] == "tool_result" for i in held)
    # Between batches the upstream sees an append-only session: each request starts with the
    # previous one's messages, byte for byte but for the moving breakpoint — the prompt cache stays warm.
    for i in range(1, len(sent)):
        before, now = mock_anthropic.without_cache_control(sent[i - 1]["messages"]), mock_anthropic.without_cache_control(sent[i]["messages"])
        assert (now[: len(before)] == before) or i in batches, f"request {i} rewrote its prefix without a batch"


async def test_a_batch_the_window_forces_mid_loop_goes_with_thinking_off(proxy, mock) -> None:
    """The window wins over the loop's thinking: that request, and the rest of its loop, go without it."""
    client = await proxy(binding_config(mock[1], fable_window=4000))
    responses = await run_session(client, "fable", stream=False)
    sent = [r.body for r in mock[0].received if r.path == "/v1/messages"]
    off = [i for i, r in enumerate(responses) if THINKING_OFF_MID_TOOL_LOOP in r.headers.get("x-router-dropped", "")]
    assert off, [r.headers.get("x-router-dropped") for r in responses]
    for i in off:
        assert "thinking" not in sent[i]  # the model's thinking_off form (omit)
        last = [m for m in sent[i]["messages"] if m["role"] == "assistant"][-1]
        assert last["content"][0]["type"] == "tool_use"


async def test_with_thinking_binding_off_the_upstream_refuses_what_pinch_changed(proxy, mock) -> None:
    """What the session got before: the first request after a batch is refused, and so is its retry."""
    client = await proxy(binding_config(mock[1], cache_lifetime=0, fable_binding=False))
    refused: list[bytes] = []
    await run_session(client, "fable", stream=False, refused=refused)
    first, retry = (orjson.loads(raw)["error"] for raw in refused)
    assert first == retry and first["type"] == "invalid_request_error"
    assert first["message"].endswith(mock_anthropic.BOUND_ELSEWHERE)


async def test_a_model_that_does_not_bind_keeps_every_thinking_block(proxy, mock) -> None:
    client = await proxy(binding_config(mock[1], cache_lifetime=0))
    responses = await run_session(client, "claude-main", stream=False)
    assert all("x-router-dropped" not in r.headers for r in responses)
    last = [r.body for r in mock[0].received if r.path == "/v1/messages"][-1]
    assert sum(b["type"] == "thinking" for m in last["messages"] if m["role"] == "assistant" for b in m["content"]) == 7


async def test_explain_names_the_thinking_pinch_would_unbind(mock) -> None:
    history = mock_session("claude-fable-5-1", turns=3)
    for m in (2, 6):  # large old results, so pinch compresses them
        history[m] = user(tool_result(history[m]["content"][0]["tool_use_id"], "\n".join(f"src/m{m}_{i}.py" for i in range(300))))
    request = body(*history, model="fable", thinking=ADAPTIVE)
    config = binding_config(mock[1], cache_lifetime=0)
    ctx = await explain_request(config, request, CIMultiDictProxy(CIMultiDict(HEADERS)))
    assert ctx[PINCH_STATS] is not None and ctx[PINCH_STATS].stale is not None
    count = len(ctx[PINCH_STATS].stale.positions)
    assert f"would go to fable (anthropic-messages → anthropic-messages, passed through, dropped {BINDING} ({count} blocks)" in render_explanation(ctx, config)
