"""Capability detection and model selection: fail closed, prefer the tier, rank by quality and cost."""

from __future__ import annotations

import pytest

from router.config import ModelSettings
from router.core.results import Capabilities
from router.core.routing import (
    NoRoute,
    detect_capabilities,
    output_tokens_to_send,
    select_route,
)
from router.core.tokens import TokenEstimator
from tests.support.config import model_entry
from tests.support.factories import assistant, chat_request_view, image_part, tool, user

ESTIMATOR = TokenEstimator()


def model(name: str, **overrides) -> ModelSettings:
    return ModelSettings.model_validate(model_entry(name, **overrides))


def needs(**overrides) -> Capabilities:
    values = dict(
        tools_present=False,
        has_images=False,
        require_json_mode=False,
        prompt_tokens=100,
        requested_output_tokens=None,
        required_context_tokens=100,
    )
    values.update(overrides)
    return Capabilities(**values)


def test_detects_tools_images_json_and_tokens():
    body = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "see"}, image_part()]}],
        "tools": [{"type": "function", "function": {"name": "bash"}}],
        "response_format": {"type": "json_schema", "json_schema": {}},
        "max_tokens": 500,
    }
    caps = detect_capabilities(chat_request_view(body), ESTIMATOR)
    assert caps.tools_present and caps.has_images and caps.require_json_mode
    assert caps.requested_output_tokens == 500
    assert caps.required_context_tokens == caps.prompt_tokens + 500
    assert caps.prompt_tokens > 1000  # the image alone counts 1000


def test_tool_history_without_tools_still_needs_tools():
    messages = [user("x"), assistant(None, [("c1", "bash", "{}")]), tool("c1", "ok")]
    assert detect_capabilities(chat_request_view({"messages": messages}), ESTIMATOR).tools_present


def test_plain_text_needs_nothing_special():
    messages = [user("x")]
    caps = detect_capabilities(chat_request_view({"messages": messages, "response_format": {"type": "text"}}), ESTIMATOR)
    assert not (caps.tools_present or caps.has_images or caps.require_json_mode)


def test_classifier_estimate_raises_the_context_need_but_never_lowers_it():
    messages = [user("x" * 4000)]
    measured = detect_capabilities(chat_request_view({"messages": messages}), ESTIMATOR).required_context_tokens
    assert detect_capabilities(chat_request_view({"messages": messages}), ESTIMATOR, 50_000).required_context_tokens == 50_000
    assert detect_capabilities(chat_request_view({"messages": messages}), ESTIMATOR, 1).required_context_tokens == measured


@pytest.mark.parametrize(
    ("model_overrides", "need", "reason"),
    [
        ({"supports": {"tools": False}}, {"tools_present": True}, "does not support tools"),
        ({"supports": {"tools": True, "vision": False}}, {"has_images": True}, "does not support images"),
        ({"supports": {"json_mode": False}}, {"require_json_mode": True}, "does not support JSON mode"),
        ({"context_window": 1000}, {"required_context_tokens": 1001}, "context window 1000 is smaller than the 1001 tokens needed"),
        # routing.output_limit: reject makes the requested output a need
        ({"max_output_tokens": 100}, {"required_output_tokens": 101}, "max output 100 is smaller than the requested 101"),
    ],
)
def test_each_unmet_need_rejects_with_its_reason(model_overrides, need, reason):
    result = select_route([model("m", **model_overrides)], needs(**need), tier=2)
    assert isinstance(result, NoRoute)
    assert result.rejected[0].model == "m"
    assert reason in result.rejected[0].reasons
    assert reason in result.message()


def test_tool_proficiency_below_the_minimum_rejects_only_when_tools_are_needed():
    weak = model("weak", tool_proficiency=0.2)
    assert isinstance(select_route([weak], needs(tools_present=True), 2, min_tool_proficiency=0.5), NoRoute)
    assert not isinstance(select_route([weak], needs(), 2, min_tool_proficiency=0.5), NoRoute)


def test_undeclared_capabilities_fail_closed():
    bare = ModelSettings.model_validate(
        {"name": "bare", "provider": "p", "upstream_model": "x", "context_window": 10_000, "max_output_tokens": 100, "tiers": [1]}
    )
    result = select_route([bare], needs(tools_present=True), 1)
    assert isinstance(result, NoRoute)


def test_prefers_the_tier_then_quality_then_cost():
    models = [
        model("cheap-t1", tiers=[1], quality=0.9),
        model("good-t2", tiers=[2], quality=0.8, cost_per_mtok={"input": 5, "output": 5}),
        model("same-t2-cheaper", tiers=[2], quality=0.8, cost_per_mtok={"input": 1, "output": 1}),
        model("best-t3", tiers=[3], quality=0.95),
    ]
    route = select_route(models, needs(), tier=2)
    assert [c.model for c in route.candidates] == ["same-t2-cheaper", "good-t2", "best-t3", "cheap-t1"]
    assert route.chosen.model == "same-t2-cheaper"


def test_out_of_tier_models_serve_when_the_tier_has_none_capable():
    models = [model("t1-no-tools", tiers=[1], supports={"tools": False}), model("t3", tiers=[3])]
    route = select_route(models, needs(tools_present=True), tier=1)
    assert route.chosen.model == "t3"
    assert route.rejected[0].model == "t1-no-tools"


def test_a_pinned_model_is_the_only_candidate_and_still_gated():
    models = [model("a"), model("b", supports={"tools": False})]
    route = select_route(models, needs(), tier=2, pinned="b")
    assert [c.model for c in route.candidates] == ["b"] and route.pinned
    refused = select_route(models, needs(tools_present=True), tier=2, pinned="b")
    assert isinstance(refused, NoRoute)
    assert [r.model for r in refused.rejected] == ["b"]


# --- output limits -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "clamp", "room", "required_output"),
    [
        (32_000, True, 1_024, None),  # opencode's default: only the minimum room is a need
        (100, True, 100, None),  # a small request needs only itself
        (None, True, 1_024, None),  # nothing asked: the minimum room
        (32_000, False, 32_000, 32_000),  # reject mode: the whole request is a need
    ],
)
def test_the_context_need_is_the_prompt_plus_room_for_the_answer(requested, clamp, room, required_output):
    messages = [user("x" * 4000)]
    body = {"messages": messages, **({"max_tokens": requested} if requested else {})}
    caps = detect_capabilities(chat_request_view(body), ESTIMATOR, min_output_tokens=1_024, clamp_output=clamp)
    assert caps.output_room == room
    assert caps.required_context_tokens == caps.prompt_tokens + room
    assert caps.required_output_tokens == required_output
    assert caps.requested_output_tokens == requested


@pytest.mark.parametrize(
    ("window", "max_output", "prompt", "requested", "sent"),
    [
        (128_000, 8_192, 1_000, 32_000, 8_192),  # the model's output limit
        (40_960, 32_000, 35_000, 32_000, 5_960),  # what the window leaves after the prompt
        (128_000, 8_192, 1_000, 500, 500),  # within both: as asked
        (128_000, 8_192, 1_000, None, None),  # nothing asked, nothing sent
    ],
)
def test_the_output_sent_is_clamped_to_the_model(window, max_output, prompt, requested, sent):
    m = model("m", context_window=window, max_output_tokens=max_output)
    caps = needs(prompt_tokens=prompt, requested_output_tokens=requested, required_context_tokens=prompt + 1_024, output_room=1_024)
    assert output_tokens_to_send(m, caps) == sent
    route = select_route([m], caps, tier=2)
    assert not isinstance(route, NoRoute) and route.chosen.output_tokens == sent


def test_no_route_names_the_largest_window_that_only_lacks_room():
    models = [model("small", context_window=8_000), model("large", context_window=20_000), model("no-tools", context_window=99_000, supports={"tools": False})]
    caps = needs(tools_present=True, prompt_tokens=29_000, required_context_tokens=30_024, output_room=1_024)
    refused = select_route(models, caps, tier=2)
    assert isinstance(refused, NoRoute)
    assert refused.largest_fitting_window == ("large", 20_000)
    assert "large's 20000 tokens: the request is 10024 tokens over it" in refused.message()
    assert "(29000 of prompt + 1024 for the answer)" in refused.message()
    other_need = select_route([model("no-tools", supports={"tools": False})], needs(tools_present=True), tier=2)
    assert isinstance(other_need, NoRoute) and other_need.largest_fitting_window is None
