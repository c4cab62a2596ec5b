"""A Responses request through the chain: pinch rewrites old outputs only, the gate sees what it needs, explain tells."""

from __future__ import annotations

from typing import Any

import pytest

from router.tools.explain import explain_request, render_explanation
from router.tools.mock_answers import seal
from tests.support.config import make_config, model_entry
from tests.http.test_agent_fixtures import load
from tests.support.wire_factories import EXEC_COMMAND, function_call, function_call_output, input_message, reasoning_item, responses_body

CHAIN = ["session-fingerprint", "pinch-prune", "capability-gate", "upstream-forward"]
LONG = "x" * 6000


def transcript() -> dict[str, Any]:
    """Three tool turns of Codex's shape, each output long, reasoning sealed (the mock verifies the seal);
    the last turn is protected."""
    items: list[dict[str, Any]] = [input_message("developer", "You are Codex."), input_message("user", "fix it")]
    for turn in range(3):
        items += [reasoning_item(f"step {turn}", seal(f"step {turn}")), function_call(f"call_{turn}", cmd="ls"), function_call_output(f"call_{turn}", f"{turn}: {LONG}")]
    return responses_body(*items, tools=[EXEC_COMMAND], store=False, stream=False, model="auto")


def pinch_config(url: str, wire: str, **models: Any):
    pinch = {"enabled": True, "budget_tokens": 1000, "keep_last_turns": 1, "max_summarize_chars": 400}
    return make_config(url, middlewares=CHAIN, pinch=pinch, providers={"mock": {"base_url": url, "wire": wire}}, models=[model_entry("main", **models)])


@pytest.mark.parametrize("wire", ["openai-responses", "openai-chat"])
async def test_pinch_compresses_old_outputs_and_never_touches_reasoning(proxy, mock_upstream, wire):
    mock, url = mock_upstream
    client = await proxy(pinch_config(url, wire, context_window=100_000))
    body = transcript()
    response = await client.post("/v1/responses", json=body)
    assert response.status == 200, await response.text()
    assert int(response.headers["x-router-pinch-saved"]) > 2000
    sent = mock.received[-1].body
    if wire == "openai-responses":
        changed = [i for i, (a, b) in enumerate(zip(body["input"], sent["input"], strict=True)) if a != b]
        assert changed == [4, 7]  # the two old outputs; the last turn's (10) is protected
        assert all(sent["input"][i]["call_id"] == body["input"][i]["call_id"] and len(sent["input"][i]["output"]) < 1000 for i in changed)
        assert [i for i in sent["input"] if i["type"] == "reasoning"] == [i for i in body["input"] if i["type"] == "reasoning"]
    else:
        outputs = [m["content"] for m in sent["messages"] if m["role"] == "tool"]
        assert [len(o) < 1000 for o in outputs] == [True, True, False] and outputs[2] == f"2: {LONG}"


async def test_json_output_asked_by_text_format_needs_a_json_model(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(make_config(url, models=[model_entry("main", supports={"tools": True, "vision": False, "json_mode": False})]))
    body = responses_body(text={"format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}}}, model="auto")
    response = await client.post("/v1/responses", json=body)
    assert response.status == 400
    assert "main: does not support JSON mode" in (await response.json())["error"]["message"]


async def test_tools_need_a_tool_model(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(make_config(url, models=[model_entry("main", supports={"tools": False, "vision": False, "json_mode": True})]))
    response = await client.post("/v1/responses", json=responses_body(tools=[EXEC_COMMAND], model="auto"))
    message = (await response.json())["error"]["message"]
    assert response.status == 400 and "(needs tools" in message and "main: does not support tools" in message


async def test_explain_reads_a_codex_request_and_names_the_translation():
    config = pinch_config("http://127.0.0.1:9/v1", "openai-chat", context_window=100_000)
    ctx = await explain_request(config, transcript())
    text = render_explanation(ctx, config)
    assert "would go to main (openai-responses → openai-chat, translated)" in text
    assert "compressed messages (2)" in text
    rows = [line.split() for line in text.splitlines() if line.strip().startswith(("4 ", "7 "))]
    assert [(r[0], r[1]) for r in rows] == [("4", "exec_command"), ("7", "exec_command")]


async def test_explain_of_a_captured_codex_request_passes_through_to_a_responses_provider():
    config = make_config("http://127.0.0.1:9/v1", providers={"mock": {"base_url": "http://127.0.0.1:9/v1", "wire": "openai-responses"}}, routing={"aliases": ["auto", "mock-model"]})
    ctx = await explain_request(config, load("codex/0004-POST-v1-responses.json")["body"])
    assert "(openai-responses → openai-responses, passed through)" in render_explanation(ctx, config)
