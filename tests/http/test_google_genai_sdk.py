"""End to end with the official ``google-genai`` SDK through the proxy: non-stream, stream, a function-calling
round trip and ``count_tokens``, with ``auto`` and with each pinned model.

One loopback mock speaks both APIs: ``gem-main`` sits behind an ``api: gemini`` provider (passed through:
the mock checks the thought signatures the SDK sends back), ``chat-main`` behind an OpenAI-compatible one
(request and answer translated, chunk by chunk when streamed). ``auto`` routes to the first of them.
"""

from __future__ import annotations

import pytest
from google import genai
from google.genai import types

from router.tools.mock_gemini import signature_bytes
from tests.support.gemini_factories import LIST_DIRECTORY, gemini_and_chat_config


def calls_signature(content: types.Content) -> bytes | None:
    return next(p.thought_signature for p in content.parts if p.function_call)

MODELS = ["auto", "gem-main", "chat-main"]
ANSWER = "Hello from the mock upstream."


@pytest.fixture
async def sdk(proxy, mock_upstream, monkeypatch):
    monkeypatch.setenv("MOCK_PROVIDER_KEY", "provider-secret")
    mock, url = mock_upstream
    client = await proxy(gemini_and_chat_config(url))
    base = str(client.make_url("")).rstrip("/")
    gemini = genai.Client(api_key="local-key", http_options=types.HttpOptions(base_url=base))
    yield gemini.aio, mock
    await gemini.aio.aclose()


@pytest.mark.parametrize("model", MODELS)
async def test_generate_content(sdk, model):
    client, mock = sdk
    answer = await client.models.generate_content(model=model, contents="say hello")
    assert answer.text == ANSWER and answer.usage_metadata.prompt_token_count > 0
    assert mock.received[-1].headers.get("x-goog-api-key", "") in ("provider-secret", "")  # never the client's key
    assert "local-key" not in str(mock.received[-1].headers)


@pytest.mark.parametrize("model", MODELS)
async def test_generate_content_stream(sdk, model):
    client, _ = sdk
    chunks = [chunk async for chunk in await client.models.generate_content_stream(model=model, contents="say hello")]
    assert "".join(c.text or "" for c in chunks).strip() == ANSWER
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    assert chunks[-1].usage_metadata.total_token_count > 0


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_function_calling_round_trip(sdk, model, stream):
    client, mock = sdk
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[types.FunctionDeclaration(name=LIST_DIRECTORY["name"], description="Lists a directory.",
                                                                          parameters_json_schema=LIST_DIRECTORY["parametersJsonSchema"])])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    history: list[types.Content] = [types.Content(role="user", parts=[types.Part(text="list the files")])]

    async def turn() -> types.Content:
        if not stream:
            return (await client.models.generate_content(model=model, contents=history, config=config)).candidates[0].content
        parts = [p for chunk in [c async for c in await client.models.generate_content_stream(model=model, contents=history, config=config)]
                 for p in chunk.candidates[0].content.parts or []]
        return types.Content(role="model", parts=parts)

    first = await turn()
    calls = [p.function_call for p in first.parts if p.function_call]
    assert [c.name for c in calls] == ["list_directory"]
    history += [first, types.Content(role="user", parts=[
        types.Part(function_response=types.FunctionResponse(id=calls[0].id, name=calls[0].name, response={"output": "main.py\nnotes.txt"}))
    ])]
    second = await turn()
    text = "".join(p.text or "" for p in second.parts if not p.thought)
    assert text.startswith(ANSWER)
    if model != "chat-main":  # passed through to the Gemini mock: its answer quotes the result it got
        assert "main.py" in text
        signed = [p for p in mock.received[-1].body["contents"][1]["parts"] if "functionCall" in p]
        assert signature_bytes(signed[0]["thoughtSignature"]) == calls_signature(first)  # the mock verified it too
    else:
        tool = [m for m in mock.received[-1].body["messages"] if m["role"] == "tool"]
        assert [(m["tool_call_id"], m["content"]) for m in tool] == [(calls[0].id, "main.py\nnotes.txt")]


@pytest.mark.parametrize("model", MODELS)
async def test_count_tokens_is_the_proxys_estimate(sdk, model):
    client, mock = sdk
    before = len(mock.received)
    counted = await client.models.count_tokens(model=model, contents="how many tokens is this sentence?")
    assert counted.total_tokens > 0 and len(mock.received) == before  # answered by the proxy, never forwarded
