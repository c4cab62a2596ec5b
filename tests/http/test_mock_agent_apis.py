"""The mock upstream's Anthropic Messages and OpenAI Responses endpoints, driven by the official SDKs."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from aiohttp.test_utils import TestClient, TestServer

from bench.harness import free_port, spawn
from router.tools.mock_upstream import Behaviour, MockUpstream
from router.wire.openai_responses.compaction import compaction_item
from tests.support.wire_factories import BASH, EXEC_COMMAND, NAMESPACE_TOOL, READ, WEB_SEARCH_TOOL, input_message

TEXT = "Hello from the mock upstream."


@pytest.fixture
def served(mock_upstream: tuple[MockUpstream, str]) -> tuple[MockUpstream, str]:
    """The shared loopback mock, with its root URL (the Anthropic SDK adds ``/v1`` itself)."""
    mock, url = mock_upstream
    return mock, url.removesuffix("/v1")


@pytest.fixture
async def claude(served: tuple[MockUpstream, str]) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(base_url=served[1], api_key="test", max_retries=0) as client:
        yield client


@pytest.fixture
async def responses_client(served: tuple[MockUpstream, str]) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=served[1] + "/v1", api_key="test", max_retries=0) as client:
        yield client


async def test_anthropic_non_streamed_message(claude: anthropic.AsyncAnthropic) -> None:
    message = await claude.messages.create(model="claude-mock", max_tokens=100, messages=[{"role": "user", "content": "hi"}])
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == TEXT  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens > 0


async def test_anthropic_streamed_tool_round_trip_with_thinking(claude: anthropic.AsyncAnthropic, served: tuple[MockUpstream, str]) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "list the files"}]
    ask: dict[str, Any] = {"model": "claude-mock", "max_tokens": 2000, "tools": [READ, BASH], "thinking": {"type": "enabled", "budget_tokens": 1024}}
    async with claude.messages.stream(messages=messages, **ask) as stream:  # type: ignore[arg-type]
        first = await stream.get_final_message()
    assert first.stop_reason == "tool_use"
    thinking, call = first.content
    assert thinking.type == "thinking" and thinking.signature  # type: ignore[union-attr]
    assert call.type == "tool_use" and call.name == "Bash" and call.input == {"command": "ls"}  # rebuilt from input_json_delta
    messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]})
    messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "a.py\nb.py"}]})
    second = await claude.messages.create(messages=messages, stream=True, **ask)  # type: ignore[arg-type]
    text = "".join([event.delta.text async for event in second if event.type == "content_block_delta" and event.delta.type == "text_delta"])
    assert text == f"{TEXT} (tool said: a.py\nb.py)"
    mock, _ = served
    assert [r.path for r in mock.received] == ["/v1/messages", "/v1/messages"]


async def test_anthropic_beta_messages_with_the_query_claude_code_sends(claude: anthropic.AsyncAnthropic, served: tuple[MockUpstream, str]) -> None:
    message = await claude.beta.messages.create(
        model="claude-mock",
        max_tokens=100,
        messages=[{"role": "user", "content": "hi"}],
        betas=["interleaved-thinking-2025-05-14"],
        extra_query={"beta": "true"},  # Claude Code's own SDK adds it; the Python SDK 2.x does not
    )
    assert message.content[0].text == TEXT  # type: ignore[union-attr]
    [received] = served[0].received
    assert received.query == {"beta": "true"}
    assert received.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"


async def test_anthropic_count_tokens(claude: anthropic.AsyncAnthropic) -> None:
    counted = await claude.messages.count_tokens(model="claude-mock", messages=[{"role": "user", "content": "hi " * 1000}], tools=[BASH])  # type: ignore[list-item]
    assert counted.input_tokens > 750


async def test_a_changed_thinking_signature_is_an_anthropic_400(claude: anthropic.AsyncAnthropic) -> None:
    forged = {"type": "thinking", "thinking": "I will call Bash.", "signature": "forged"}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [forged, {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
    ]
    with pytest.raises(anthropic.BadRequestError) as raised:
        await claude.messages.create(model="claude-mock", max_tokens=100, messages=messages)  # type: ignore[arg-type]
    body = raised.value.body
    assert isinstance(body, dict) and body["error"] == {"type": "invalid_request_error", "message": "messages.1.content.0: Invalid `signature` in `thinking` block"}
    assert body["request_id"] == raised.value.request_id  # the body's id is the request-id header the SDK reads


@pytest.mark.parametrize(("status", "error"), [(529, anthropic.InternalServerError), (429, anthropic.RateLimitError)])
async def test_a_scripted_failure_reaches_the_anthropic_client_in_its_shape(
    claude: anthropic.AsyncAnthropic, served: tuple[MockUpstream, str], status: int, error: type[Exception]
) -> None:
    served[0].then(Behaviour(status=status))
    with pytest.raises(error) as raised:
        await claude.messages.create(model="claude-mock", max_tokens=100, messages=[{"role": "user", "content": "hi"}])
    assert raised.value.body["type"] == "error"  # type: ignore[attr-defined]


async def test_a_body_that_is_not_json_gets_an_anthropic_400(served: tuple[MockUpstream, str]) -> None:
    async with TestClient(TestServer(MockUpstream().app(), host="127.0.0.1")) as client:
        for path in ("/v1/messages", "/v1/messages/count_tokens"):
            resp = await client.post(path, data=b"{not json", headers={"Content-Type": "application/json"})
            assert resp.status == 400
            assert (await resp.json())["error"]["type"] == "invalid_request_error"
        resp = await client.post("/v1/responses", data=b"[1]")
        assert resp.status == 400 and "JSON object" in (await resp.json())["error"]["message"]


async def test_responses_non_streamed(responses_client: openai.AsyncOpenAI) -> None:
    response = await responses_client.responses.create(model="mock-model", input="hi")
    assert response.output_text == TEXT
    assert response.status == "completed"
    assert response.usage is not None and response.usage.input_tokens > 0


async def test_responses_streamed_function_call_round_trip(responses_client: openai.AsyncOpenAI) -> None:
    tools: Any = [EXEC_COMMAND, NAMESPACE_TOOL, WEB_SEARCH_TOOL]
    conversation: list[Any] = [input_message("developer", "be brief"), input_message("user", "list the files")]
    ask: dict[str, Any] = {"model": "mock-model", "tools": tools, "store": False, "reasoning": {"summary": "auto"}, "include": ["reasoning.encrypted_content"]}
    stream = await responses_client.responses.create(input=conversation, stream=True, **ask)
    events = [event async for event in stream]
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    arguments = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert json.loads(arguments) == {"cmd": "ls"}
    done_items = [e.item for e in events if e.type == "response.output_item.done"]
    assert [i.type for i in done_items] == ["reasoning", "function_call"]
    call = done_items[1]
    # as Codex does: the reasoning item and the call go back with the call's output
    conversation += [i.model_dump(exclude_none=True) for i in done_items]
    conversation.append({"type": "function_call_output", "call_id": call.call_id, "output": "a.py\nb.py"})  # type: ignore[union-attr]
    final = await responses_client.responses.create(input=conversation, **ask)
    assert final.output_text == f"{TEXT} (tool said: a.py\nb.py)"


async def test_responses_compaction_is_the_mocks_own_sealed_item_and_one_it_cannot_read_is_refused(served: tuple[MockUpstream, str]) -> None:
    """A compaction_trigger gets one compaction item the mock alone reads; sent back, the turn is answered, not run
    again. One it did not make — another provider's, or the proxy's readable one — is a 400, as OpenAI refuses
    encrypted content it cannot decrypt (what a proxy passing the client's items on unread runs into, #47)."""
    conversation: list[Any] = [input_message("user", "list the files")]
    ask: dict[str, Any] = {"model": "mock-model", "tools": [EXEC_COMMAND], "store": False}
    async with TestClient(TestServer(served[0].app(), host="127.0.0.1")) as http:
        made = await (await http.post("/v1/responses", json={**ask, "input": [*conversation, {"type": "compaction_trigger"}]})).json()
        (item,) = made["output"]
        assert item["type"] == "compaction" and "Summary by the mock upstream" not in item["encrypted_content"]
        again = await http.post("/v1/responses", json={**ask, "input": [*conversation, item]})
        assert again.status == 200 and [i["type"] for i in (await again.json())["output"]] == ["message"]
        for foreign in (compaction_item("cmp_1", "a summary"), {**item, "encrypted_content": "gAAAAB-opaque"}):
            refused = await http.post("/v1/responses", json={**ask, "input": [*conversation, foreign]})
            assert refused.status == 400
            assert (await refused.json())["error"]["message"] == "input[1]: the encrypted content of this compaction item could not be verified"


async def test_responses_refuse_previous_response_id_naming_it(responses_client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        await responses_client.responses.create(model="mock-model", input="hi", previous_response_id="resp_1")
    assert "previous_response_id" in raised.value.message


async def test_a_scripted_cut_breaks_a_responses_stream_after_n_events(responses_client: openai.AsyncOpenAI, served: tuple[MockUpstream, str]) -> None:
    served[0].then(Behaviour(cut_after_events=3))
    stream = await responses_client.responses.create(model="mock-model", input="hi", stream=True)
    seen = []
    with pytest.raises(openai.APIError):
        async for event in stream:
            seen.append(event.type)
    assert seen == ["response.created", "response.in_progress", "response.output_item.added"]


async def test_the_base_url_answers_the_probe_claude_code_may_send(served: tuple[MockUpstream, str]) -> None:
    async with TestClient(TestServer(MockUpstream().app(), host="127.0.0.1")) as client:
        assert (await client.head("/")).status == 200
        assert (await client.get("/")).status == 200


async def test_recording_writes_each_request_to_a_numbered_file_with_credentials_redacted(tmp_path: Path) -> None:
    mock = MockUpstream(record=False, record_dir=tmp_path)
    async with TestClient(TestServer(mock.app(), host="127.0.0.1")) as client:
        await client.head("/")
        await client.post("/v1/messages?beta=true", json={"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}, headers={"x-api-key": "sk-ant-secret", "anthropic-beta": "a,b"})
        await client.post("/v1/responses", json={"model": "m", "input": "hi"}, headers={"Authorization": "Bearer sk-secret", "session-id": "s1"})
        await client.post("/v1/unknown", data=b"not json")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["0001-HEAD-root.json", "0002-POST-v1-messages.json", "0003-POST-v1-responses.json", "0004-POST-v1-unknown.json"]
    messages = json.loads((tmp_path / names[1]).read_text())
    assert (messages["method"], messages["path"], messages["query"]) == ("POST", "/v1/messages", {"beta": "true"})
    assert messages["headers"]["x-api-key"] == "[redacted]" and messages["headers"]["anthropic-beta"] == "a,b"
    assert messages["body"]["max_tokens"] == 5
    responses = json.loads((tmp_path / names[2]).read_text())
    assert responses["headers"]["Authorization"] == "Bearer [redacted]" and responses["headers"]["session-id"] == "s1"
    assert json.loads((tmp_path / names[3]).read_text())["body_text"] == "not json"
    assert "secret" not in "".join(p.read_text() for p in tmp_path.iterdir())
    assert mock.received == []  # recording to files keeps nothing in memory


@pytest.mark.system  # starts a process
async def test_the_command_records_what_an_agent_sends_into_a_directory_it_creates(tmp_path: Path) -> None:
    port, record_dir = free_port(), tmp_path / "new" / "requests"
    command = [sys.executable, "-m", "router", "mock-upstream", "--port", str(port), "--record", str(record_dir)]
    with spawn(command, port):
        async with anthropic.AsyncAnthropic(base_url=f"http://127.0.0.1:{port}", api_key="sk-ant-secret", max_retries=0) as client:
            message = await client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert message.content[0].text == TEXT  # type: ignore[union-attr]
    [path] = list(record_dir.iterdir())
    assert path.name == "0001-POST-v1-messages.json"
    record = json.loads(path.read_text())
    assert record["headers"]["Authorization"] == "Bearer [redacted]"  # the anthropic SDK 2.x sends its key so
    assert record["body"]["messages"] == [{"role": "user", "content": "hi"}]
    assert "sk-ant-secret" not in path.read_text()


async def test_codex_oss_finds_an_ollama_version_a_model_list_and_pulls_any_model() -> None:
    async with TestClient(TestServer(MockUpstream().app(), host="127.0.0.1")) as client:
        version = (await (await client.get("/api/version")).json())["version"]
        assert tuple(int(n) for n in version.split(".")) >= (0, 13, 4)  # serves /v1/responses
        tags = await (await client.get("/api/tags")).json()
        assert [m["name"] for m in tags["models"]] == ["mock:latest"]
        pull = await client.post("/api/pull", json={"model": "gpt-oss:20b", "stream": True})
        assert pull.content_type == "application/x-ndjson"
        lines = [json.loads(line) for line in (await pull.read()).splitlines()]
        assert lines[0] == {"status": "pulling manifest"} and lines[-1] == {"status": "success"}
        assert await (await client.post("/api/pull", json={"model": "m", "stream": False})).json() == {"status": "success"}
        bad = await client.post("/api/pull", data=b"{")
        assert bad.status == 400 and isinstance((await bad.json())["error"], str)  # Ollama's error shape
