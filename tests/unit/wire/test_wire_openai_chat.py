"""The OpenAI chat wire adapter: the neutral view it builds and the body it sends back upstream."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from middlewares.capability_gate import CapabilityGate
from router.contract.stage import run_stage
from router.core.errors import ApiError, ErrorAnswer, invalid_request
from router.core.pinch import prune_results
from router.core.request_view import BodyChanges, ToolResult, start_of_last_turns
from router.core.sse import SseRelay
from router.core.tokens import DEFAULT_ESTIMATOR as DEFAULT
from router.wire import adapters
from router.wire.openai_chat.adapter import OPENAI_CHAT_ADAPTER
from tests.support.config import make_config
from tests.support.factories import (
    assistant,
    chat_request_view,
    image_part,
    make_ctx,
    system,
    tool,
    user,
)
from tests.support.stages import build_stage

WIRE = OPENAI_CHAT_ADAPTER


def agent_body(**extra: Any) -> dict[str, Any]:
    return {
        "model": "auto",
        "messages": [
            system("you are a coder"),
            user("fix the bug"),
            assistant(None, [("call_1", "read_file", '{"path": "a.py"}')]),
            tool("call_1", "x" * 9000),
            assistant(None, [("call_2", "bash", '{"cmd": "ls"}')]),
            tool("call_2", "a.py\n" * 40),
            assistant("done"),
        ],
        **extra,
    }


def test_the_registry_serves_chat_completions_with_the_chat_adapter():
    assert adapters()["openai-chat"] is WIRE and WIRE.paths == ("/v1/chat/completions",)


def test_the_view_says_what_the_stages_need_without_the_body():
    body = agent_body(
        tools=[{"type": "function", "function": {"name": "bash"}}],
        response_format={"type": "json_object"},
        max_tokens=500,
        stream=True,
    )
    body["messages"][1] = user([{"type": "text", "text": "fix the bug"}, image_part()])
    view = chat_request_view(body)
    assert (view.wire, view.model, view.stream) == ("openai-chat", "auto", True)
    assert view.offers_tools and view.tools_present and view.has_images and view.json_output
    assert view.output_limit == 500 and not view.usage_requested
    assert view.opening == ("system", "you are a coder", "user", "fix the bug")
    assert view.units is body["messages"]
    assert view.conversation.turn_starts() == [2, 4, 6]
    assert [r[:2] for r in view.conversation.tool_results()] == [(3, "call_1"), (5, "call_2")]
    assert view.conversation.tool_name(view.conversation.result_units()[0]) == "read_file"


@pytest.mark.parametrize(
    ("extra", "needs"),
    [
        ({}, (True, False, False, None, True)),  # tool history alone means tools
        ({"stream": True, "stream_options": {"include_usage": True}}, (True, False, False, None, True)),
        ({"stream": True}, (True, False, False, None, False)),
        ({"response_format": {"type": "text"}, "max_completion_tokens": 7, "max_tokens": 9}, (True, False, False, 7, True)),
    ],
)
def test_view_needs(extra, needs):
    view = chat_request_view(agent_body(**extra))
    assert (view.tools_present, view.has_images, view.json_output, view.output_limit, view.usage_requested) == needs


def test_the_upstream_body_changes_only_what_the_chain_changed():
    body = agent_body(max_tokens=64000, temperature=0.2, x_vendor={"keep": [1, 2]}, stream=True)
    view = chat_request_view(body)
    rewrites, _ = prune_results(view.conversation, 10, 1, 1000)
    assert set(rewrites) == {0, 1}
    sent = orjson.loads(WIRE.upstream_body(body, view, BodyChanges("qwen:7b", rewrites, 8192, True, "sess")))
    assert sent["model"] == "qwen:7b" and sent["max_tokens"] == 8192
    assert sent["stream_options"] == {"include_usage": True} and sent["prompt_cache_key"] == "sess"
    assert sent["temperature"] == 0.2 and sent["x_vendor"] == {"keep": [1, 2]}
    changed = [i for i, (a, b) in enumerate(zip(body["messages"], sent["messages"], strict=True)) if a != b]
    assert changed == [3, 5] and sent["messages"][3]["tool_call_id"] == "call_1"
    assert body["messages"][3]["content"] == "x" * 9000  # the client's body is never mutated


def test_no_change_sends_the_clients_body_with_only_the_model_replaced():
    body = agent_body()
    view = chat_request_view(body)
    sent = orjson.loads(WIRE.upstream_body(body, view, BodyChanges("m")))
    assert sent == {**body, "model": "m"}


def test_a_bad_body_is_an_openai_error_naming_the_field():
    error = WIRE.parse({"messages": [{"role": "robot"}]}, 100)
    assert isinstance(error, ApiError) and error.param == "messages[0].role"
    answer = WIRE.render_error(invalid_request("nope", code="x"))
    assert answer.status == 400 and orjson.loads(answer.body)["error"]["code"] == "x"


class BlocksConversation:
    """A conversation in another shape: several results in one message, each its own unit."""

    def __init__(self, units: list[dict[str, Any]]) -> None:
        self.units = units

    def turn_starts(self) -> list[int]:
        return [i for i, u in enumerate(self.units) if u.get("role") == "assistant"]

    def last_turns_start(self, count: int) -> int:
        return start_of_last_turns(self.turn_starts(), count)

    result_key, result_id_key = "content", "tool_use_id"

    def result_units(self) -> list[int]:
        return [i for i, u in enumerate(self.units) if u.get("type") == "tool_result"]

    def tool_results(self) -> list[ToolResult]:
        return [ToolResult(i, self.units[i]["tool_use_id"], self.units[i]["content"]) for i in self.result_units()]

    def tool_name(self, unit: int) -> str:
        return "Read"


def test_pinch_compresses_any_formats_results_by_position():
    units = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "reading"},
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "y" * 6000}, {"type": "image"}]},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "short but not tiny: " + "z" * 80},
        {"role": "assistant", "content": "ok"},
        {"type": "tool_result", "tool_use_id": "toolu_3", "content": "w" * 6000},
    ]
    rewrites, stats = prune_results(BlocksConversation(units), 10, 1, 1000)
    assert set(rewrites) == {0, 1}  # the last turn's result is protected
    assert rewrites[0][1] == {"type": "image"} and "removed" in rewrites[0][0]["text"]
    assert rewrites[1].startswith("[pinch-router: old Read result omitted")
    assert stats.compressed == 2 and stats.elided == 1 and stats.placeholders == 1


class ShapedErrors(type(WIRE)):
    """The chat adapter with another error shape, as an Anthropic adapter would render errors."""

    def render_error(self, error, request_id=None):
        return ErrorAnswer(error.status, orjson.dumps({"type": "error", "error": {"type": error.type, "message": error.message}, "request_id": request_id}))


async def test_a_stage_refuses_in_the_clients_wire_format(http):
    ctx = make_ctx({"model": "no-such-model", "messages": [user("hi")]})
    ctx.wire = ShapedErrors()
    await run_stage(build_stage(CapabilityGate, make_config(), http=http, estimator=DEFAULT), ctx)
    assert ctx.response is not None and ctx.response.status == 404
    error = orjson.loads(ctx.response.body)
    assert error["type"] == "error" and "neither a configured model, a routing alias nor a model family" in error["error"]["message"]
    assert error["request_id"] == ctx.request_id  # the request's own id, where the format carries one


def test_the_relay_knows_a_streams_end_by_the_wire_adapters_rule():
    class AnthropicEnd(type(WIRE)):
        def is_stream_end(self, data):
            return data == b'{"type":"message_stop"}'  # as an Anthropic adapter would say

    relay = SseRelay(AnthropicEnd())
    relay.feed(b'event: message_delta\ndata: {"type":"message_delta"}\n\n')
    assert not relay.done
    relay.feed(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    assert relay.done
    chat = SseRelay(WIRE)
    chat.feed(b'data: {"choices":[]}\n\ndata: [DONE]\n\n')
    assert chat.done
