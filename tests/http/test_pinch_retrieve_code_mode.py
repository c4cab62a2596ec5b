"""pinch_retrieve for Codex on its default model (issue #44): its tools come in an ``additional_tools``
input item (no ``tools``) and its outputs are ``custom_tool_call_output`` items of two text parts (a
header, then the command's output). The proxy offers the tool, cuts the output's long part at first
sight and answers the model's call itself, on every provider format, streamed or whole."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from router.core.retrieve import TOOL_NAME
from tests.http.test_pinch_retrieve import LOG, LOG_JSON, PROVIDERS, TASK, provider_paths, start  # noqa: F401 (start: the fixture)
from tests.support.wire_factories import input_message, responses_body, sse_events

EXEC = {"type": "custom", "name": "exec", "description": "Run JavaScript: `await tools.exec_command(...)`",
        "format": {"type": "grammar", "syntax": "lark", "definition": "start: SOURCE"}}  # fmt: skip
ADDITIONAL = {"type": "additional_tools", "role": "developer", "tools": [{"type": "namespace", "name": "functions", "tools": [EXEC]}]}
SCRIPT = 'const r = await tools.exec_command({cmd: "make"});\ntext(r.output);'
HEADER = "Script completed\nWall time 0.4 seconds\nOutput:\n"


def code_mode_request(stream: bool) -> dict[str, Any]:
    items = [
        ADDITIONAL,
        input_message("user", TASK),
        {"type": "custom_tool_call", "call_id": "call_make", "name": "exec", "input": SCRIPT},
        {"type": "custom_tool_call_output", "call_id": "call_make", "output": [{"type": "input_text", "text": HEADER}, {"type": "input_text", "text": LOG}]},
    ]
    body = responses_body(*items, stream=stream, store=False)
    body.pop("tools", None)  # as Codex sends it: its tools only in the additional_tools item
    return {**body, "model": "auto"}


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_codex_code_mode_gets_the_tool_its_output_cut_and_the_call_answered_by_the_proxy(start, provider: str, stream: bool) -> None:
    mock, client = await start(provider)
    response = await client.post("/v1/responses", json=code_mode_request(stream), headers={"x-router-session": f"code-mode-{provider}-{stream}"})
    raw = await response.read()
    assert response.status == 200, raw[:500]
    sent = [r.body for r in provider_paths(mock)]
    assert len(sent) == 2, [r.path for r in mock.received]
    first, second = sent
    # the first round: the output's long part cut, its marker naming the call; the header part kept;
    # the tool declared after Codex's own
    first_text = json.dumps(first)
    assert f'{TOOL_NAME}(\\"call_make\\")' in first_text and LOG_JSON not in first_text and json.dumps(HEADER)[1:-1] in first_text
    names = [d["name"] for t in first["tools"] for d in t.get("functionDeclarations") or [t.get("function") or t]]
    # a Responses provider gets Codex's tools where Codex put them, in the additional_tools item
    assert names == ([TOOL_NAME] if provider == "responses" else ["exec", TOOL_NAME])
    # the second: the proxy's answer, the whole output
    assert LOG_JSON in json.dumps(second) and second["tools"] == first["tools"]
    # Codex's answer: a well-formed Responses answer with no trace of the internal call (a mock's answer
    # may quote the cut output, whose first line names the tool: only a call would be a trace)
    assert f'"{TOOL_NAME}"'.encode() not in raw and b'_retrieve"' not in raw
    if stream:
        names = [name for name, _ in sse_events(raw)]
        assert names[0] == "response.created" and names[-1] == "response.completed" and names.count("response.completed") == 1
    else:
        answer = orjson.loads(raw)
        assert answer["output"] and all(item["type"] != "custom_tool_call" for item in answer["output"])
    rows = (await (await client.get("/v1/decisions")).json())["data"]
    assert rows[0]["retrieve_calls"] == 1 and rows[0]["pinch_first_sight_new"] == 1 and rows[0]["wire_in"] == "openai-responses"
