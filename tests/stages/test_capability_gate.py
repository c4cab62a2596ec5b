"""The capability gate through the running proxy."""

from __future__ import annotations

import pytest

from router.core.tokens import TokenEstimator
from router.tools.mock_upstream import Behaviour
from tests.support.agent_captures import captured, client_headers
from tests.support.config import chat_body, make_config, model_entry
from tests.support.factories import image_part

URL = "/v1/chat/completions"


def catalogue(url: str):
    return make_config(
        url,
        models=[
            model_entry("text-only", supports={"tools": False, "vision": False, "json_mode": False}, quality=0.9),
            model_entry("tooler", supports={"tools": True, "vision": False, "json_mode": True}, quality=0.5),
            model_entry("seer", supports={"tools": True, "vision": True, "json_mode": True}, quality=0.3),
        ],
    )


async def test_needs_pick_a_capable_model(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(catalogue(url))
    plain = await client.post(URL, json=chat_body())
    assert plain.headers["x-router-model"] == "text-only"
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    with_tools = await client.post(URL, json=chat_body(tools=tools))
    assert with_tools.headers["x-router-model"] == "tooler"
    image = {"model": "auto", "messages": [{"role": "user", "content": [{"type": "text", "text": "what is this"}, image_part()]}]}
    with_image = await client.post(URL, json=image)
    assert with_image.headers["x-router-model"] == "seer"
    assert [r.body["model"] for r in mock.received] == ["up-text-only", "up-tooler", "up-seer"]


async def test_no_capable_model_is_a_400_naming_needs_and_rejections(proxy, mock_upstream):
    mock, url = mock_upstream
    config = catalogue(url)
    client = await proxy(config.model_copy(update={"routing": config.routing.model_copy(update={"output_limit": "reject"})}))
    body = chat_body(max_tokens=10_000)
    resp = await client.post(URL, json=body)
    assert resp.status == 400
    error = (await resp.json())["error"]
    assert error["code"] == "no_capable_model"
    assert "10000 output tokens" in error["message"]
    for name in ("text-only", "tooler", "seer"):
        assert f"{name}: max output 4000 is smaller than the requested 10000" in error["message"]
    assert mock.received == []


async def test_a_pinned_model_is_used_and_still_gated(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(catalogue(url))
    pinned = await client.post(URL, json=chat_body(model="seer"))
    assert pinned.headers["x-router-model"] == "seer"
    image = {"model": "tooler", "messages": [{"role": "user", "content": [image_part()]}]}
    refused = await client.post(URL, json=image)
    assert refused.status == 400
    error = (await refused.json())["error"]
    assert error["code"] == "no_capable_model" and "tooler: does not support images" in error["message"]


async def test_an_unknown_model_name_is_404_listing_what_exists(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(catalogue(url))
    resp = await client.post(URL, json=chat_body(model="gpt-17"))
    assert resp.status == 404
    error = (await resp.json())["error"]
    assert error["code"] == "model_not_found" and "text-only" in error["message"] and "auto" in error["message"]


async def test_configured_aliases_route(proxy, mock_upstream):
    _, url = mock_upstream
    config = make_config(url, routing={"aliases": ["auto", "gpt-4o"]})
    client = await proxy(config)
    resp = await client.post(URL, json=chat_body(model="gpt-4o"))
    assert resp.status == 200 and resp.headers["x-router-model"] == "main"


# --- output limits: clamped, not a reason to reject (routing.output_limit) ---------------


async def decision_rows(client) -> list[dict]:
    response = await client.get("/v1/decisions")
    assert response.status == 200
    return (await response.json())["data"]


@pytest.mark.parametrize(
    ("agent", "turn", "key", "requested"),
    [("opencode", 1, "max_tokens", 32_000), ("pi", 0, "max_completion_tokens", 16_384)],
)
async def test_an_agents_default_output_request_is_clamped_to_the_models_limit(proxy, mock_upstream, agent, turn, key, requested):
    mock, url = mock_upstream
    request = captured(agent)[turn]
    assert request.body[key] == requested  # what the agent really sends
    client = await proxy(make_config(url, models=[model_entry("main", max_output_tokens=4_000, context_window=128_000)]))
    response = await client.post(URL, json=request.body, headers=client_headers(request))
    assert response.status == 200, await response.text()
    await response.read()
    assert response.headers["x-router-max-tokens"] == "4000"
    sent = mock.received[0].body
    assert sent[key] == 4_000
    assert {k: v for k, v in sent.items() if k not in (key, "model", "messages")} == {
        k: v for k, v in request.body.items() if k not in (key, "model", "messages")
    }  # nothing else changed
    (row,) = await decision_rows(client)
    assert (row["requested_max_tokens"], row["sent_max_tokens"]) == (requested, 4_000)


async def test_the_output_is_clamped_to_what_the_window_leaves_after_the_prompt(proxy, mock_upstream):
    """The long-session case: prompt + max_tokens overflows the window, prompt + the minimum room does not."""
    mock, url = mock_upstream
    client = await proxy(make_config(url, models=[model_entry("main", context_window=40_960, max_output_tokens=32_000)]))
    body = chat_body("x" * 4 * 30_000, max_tokens=32_000)
    response = await client.post(URL, json=body)
    assert response.status == 200, await response.text()
    (row,) = await decision_rows(client)
    sent = mock.received[0].body["max_tokens"]
    assert sent == row["sent_max_tokens"] == int(response.headers["x-router-max-tokens"])
    assert sent == 40_960 - TokenEstimator().prompt_tokens(body["messages"], None)  # all the window leaves


async def test_each_candidate_gets_its_own_limit(proxy, mock_upstream):
    mock, url = mock_upstream
    models = [model_entry("first", max_output_tokens=2_000, quality=0.9), model_entry("second", max_output_tokens=3_000, quality=0.1)]
    mock.then(Behaviour(status=503))
    client = await proxy(make_config(url, models=models))
    response = await client.post(URL, json=chat_body(max_tokens=10_000))
    assert response.status == 200
    assert [r.body["max_tokens"] for r in mock.received] == [2_000, 3_000]
    assert response.headers["x-router-model"] == "second" and response.headers["x-router-max-tokens"] == "3000"


async def test_a_request_within_every_limit_is_sent_as_asked_and_none_is_added(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(make_config(url))
    asked = await client.post(URL, json=chat_body(max_tokens=100))
    unasked = await client.post(URL, json=chat_body())
    assert mock.received[0].body["max_tokens"] == 100 and asked.headers["x-router-max-tokens"] == "100"
    assert "max_tokens" not in mock.received[1].body and "x-router-max-tokens" not in unasked.headers


async def test_reject_mode_keeps_the_request_whole(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(make_config(url, routing={"output_limit": "reject"}))
    response = await client.post(URL, json=chat_body(max_tokens=32_000))
    assert response.status == 400
    message = (await response.json())["error"]["message"]
    assert "main: context window 32000 is smaller than the 32007 tokens needed, max output 4000 is smaller than the requested 32000" in message
    assert mock.received == []


async def test_when_no_window_holds_the_prompt_the_400_names_the_gap(proxy, mock_upstream):
    mock, url = mock_upstream
    models = [
        model_entry("small", context_window=8_000),
        model_entry("wide-no-tools", context_window=200_000, supports={"tools": False}),
        model_entry("widest-with-tools", context_window=20_000),
    ]
    client = await proxy(make_config(url, models=models, routing={"min_output_tokens": 2_000}))
    body = chat_body("x" * 4 * 30_000, max_tokens=32_000, tools=[{"type": "function", "function": {"name": "bash"}}])
    response = await client.post(URL, json=body)
    assert response.status == 400
    message = (await response.json())["error"]["message"]
    needed = int(message.split("needs tools, ")[1].split(" tokens of context")[0])
    assert f"of prompt + 2000 for the answer" in message
    assert f"is widest-with-tools's 20000 tokens: the request is {needed - 20_000} tokens over it" in message
    assert "wide-no-tools: does not support tools" in message
    assert mock.received == []
    (row,) = await decision_rows(client)
    assert {r["model"] for r in row["rejected"]} == {"small", "wide-no-tools", "widest-with-tools"}
    assert row["model"] is None and row["candidates"] == []


# --- model names agents hard-code ----------------------------------------------------------


async def test_an_unknown_model_name_says_how_to_route_it(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    response = await client.post(URL, json=chat_body(model="gpt-4o"))
    assert response.status == 404
    message = (await response.json())["error"]["message"]
    assert "add 'gpt-4o' to routing.aliases" in message and '"*"' in message


async def test_the_star_alias_routes_every_unknown_name_but_known_models_still_pin(proxy, mock_upstream):
    mock, url = mock_upstream
    models = [model_entry("main", quality=0.9), model_entry("other", quality=0.1)]
    client = await proxy(make_config(url, models=models, routing={"aliases": ["auto", "*"]}))
    routed = await client.post(URL, json=chat_body(model="claude-sonnet-4"))
    pinned = await client.post(URL, json=chat_body(model="other"))
    assert routed.status == 200 and routed.headers["x-router-model"] == "main"
    assert pinned.status == 200 and pinned.headers["x-router-model"] == "other"
    assert [r.body["model"] for r in mock.received] == ["up-main", "up-other"]
    listed = [m["id"] for m in (await (await client.get("/v1/models")).json())["data"]]
    assert listed == ["main", "other", "auto"]  # "*" is a rule, not a model to pick


# --- model families: the names agents send by default ----------------------------------------------------------

FAMILIES = {"claude-*haiku*": 1, "claude-*opus*": 3, "gpt-*": "auto"}


def tiered(url: str, **routing):
    """A cheap tier-1 model and a strong tier-3 one, and the families above."""
    models = [model_entry("small", tiers=[1], quality=0.3), model_entry("big", tiers=[3], quality=0.9)]
    return make_config(url, models=models, routing={"model_families": FAMILIES, **routing})


@pytest.mark.parametrize(
    ("requested", "model", "family"),
    [
        ("claude-haiku-4-5", "small", "claude-*haiku* → tier 1"),  # a side request: the cheap tier
        ("Claude-Opus-5-5", "big", "claude-*opus* → tier 3"),  # the top tier, whatever the case
        ("gpt-6.2-sol", "small", "gpt-* → the classified tier"),  # auto: the fallback tier 1 here
        ("big", "big", ""),  # a catalogue name still pins
        ("small", "small", ""),
    ],
)
async def test_a_model_family_routes_on_its_tier_hint_and_the_decision_says_which(proxy, mock_upstream, requested, model, family):
    _, url = mock_upstream
    client = await proxy(tiered(url, fallback_tier=1))
    response = await client.post(URL, json=chat_body(model=requested))
    assert response.status == 200 and response.headers["x-router-model"] == model
    (row,) = (await (await client.get("/v1/decisions")).json())["data"]
    assert row["model_family"] == family and row["requested_model"] == requested
    if family:
        gate = next(stage for stage in row["stages"] if stage["stage"] == "capability-gate")
        assert f"model family {family}" in gate["detail"]


async def test_a_tier_override_wins_over_the_family_hint_and_other_names_stay_unknown(proxy, mock_upstream):
    _, url = mock_upstream
    chain = ["session-fingerprint", "classifier", "capability-gate", "upstream-forward"]
    models = [model_entry("small", tiers=[1], quality=0.3), model_entry("big", tiers=[3], quality=0.9)]
    client = await proxy(make_config(url, models=models, routing={"model_families": FAMILIES}, middlewares=chain, classifier={"provider": "mock", "model": "m"}))
    overridden = await client.post(URL, json=chat_body(model="claude-opus-5-5"), headers={"x-router-tier": "1"})
    assert overridden.headers["x-router-model"] == "small"
    unknown = await client.post(URL, json=chat_body(model="llama3"))
    assert unknown.status == 404 and "routing.model_families" in (await unknown.json())["error"]["message"]


def test_a_family_hint_must_be_a_configured_tier_or_auto(tmp_path):
    from router.config import ConfigError, parse_config

    raw = {"providers": {"p": {"base_url": "http://127.0.0.1:9/v1"}}, "models": [model_entry("m")], "routing": {"model_families": {"claude-*": 7}}}
    with pytest.raises(ConfigError, match=r"model_families.claude-\*: tier 7 is not one of the tiers"):
        parse_config(raw, environ={})
    with pytest.raises(ConfigError, match="model_families"):
        parse_config({**raw, "routing": {"model_families": {"claude-*": "top"}}}, environ={})


@pytest.mark.parametrize(
    ("requested", "pattern", "tier"),
    [
        ("claude-opus-5-5", "claude-*opus*", 3),  # Claude Code's default
        ("claude-haiku-4-5", "claude-*haiku*", 1),  # its side requests
        ("claude-sonnet-4-5", "claude-*", None),
        ("gpt-6.2-sol", "gpt-*", None),  # Codex's default
        ("gpt-5.1-codex-mini", "gpt-*-mini*", 1),
        ("gemini-3-pro-preview", "gemini-*-pro*", 3),  # Gemini CLI's default
        ("gemini-2.5-flash-lite", "gemini-*flash-lite*", 1),  # its model-router call
        ("gemini-2.5-flash", "gemini-*", None),
        ("qwen3.7-max", "qwen*", None),  # Qwen Code's default: 404 before (#47)
    ],
)
def test_the_shipped_config_routes_the_names_agents_send_by_default(requested, pattern, tier):
    from pathlib import Path

    from router.config import load_config
    from router.core.model_families import FamilyHint, ModelFamilies

    config = load_config(Path(__file__).resolve().parents[2] / "config.yaml", environ={})
    families = ModelFamilies([m.name for m in config.models], config.routing.aliases, config.routing.model_families)
    assert families.resolve(requested).family == FamilyHint(pattern, tier)
    assert families.resolve("local-coder").pinned == "local-coder"  # a catalogue name still pins
