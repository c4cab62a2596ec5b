"""The retrieve rounds of one whole answer (issue #44): the originals come from the request itself, the
rounds are bounded, and a round that calls the client's tools too goes to the client without the call."""

from __future__ import annotations

from typing import Any

import orjson

from router.clients.retrieve import MAX_ROUNDS, RetrieveLoop
from router.core.results import UPSTREAM, UpstreamResult
from router.wire.openai_chat.retrieve import CHAT_RETRIEVE
from router.wire.openai_responses.retrieve import RESPONSES_RETRIEVE
from tests.support.factories import assistant, make_ctx, tool, user

ORIGINAL = "line\n" * 3000


class FakeResponse:
    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.released = False

    def release(self) -> None:
        self.released = True


def calling(*names: str) -> dict[str, Any]:
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": '{"id": "call_log"}'}} for i, name in enumerate(names)]
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": calls}, "finish_reason": "tool_calls"}]}


TEXT = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}]}


def loop_for() -> tuple[RetrieveLoop, list[dict[str, Any]]]:
    ctx = make_ctx(messages=[user("fix it"), assistant(calls=[("call_log", "bash", '{"command": "make"}')]), tool("call_log", ORIGINAL)])
    ctx[UPSTREAM] = UpstreamResult()
    sent: list[dict[str, Any]] = []
    return RetrieveLoop(ctx, CHAT_RETRIEVE, orjson.dumps({"model": "m", "messages": ctx.body["messages"][:2] + [tool("call_log", "cut")]})), sent


async def run(loop: RetrieveLoop, sent: list[dict[str, Any]], answers: list[dict[str, Any]]) -> dict[str, Any]:
    queue = list(answers)
    responses: list[FakeResponse] = []

    async def reopen(payload: bytes) -> Any:
        sent.append(orjson.loads(payload))
        responses.append(FakeResponse(queue.pop(0)))
        return responses[-1]

    async def read(response: Any) -> tuple[bytes, Any]:
        return orjson.dumps(response.answer), response.answer

    first = calling("pinch_retrieve")
    _, answer = await loop.whole(orjson.dumps(first), first, reopen, read)
    assert all(r.released for r in responses)
    return answer


async def test_a_call_is_answered_with_the_original_the_client_sent_and_the_request_continued() -> None:
    loop, sent = loop_for()
    answer = await run(loop, sent, [TEXT])
    assert answer == TEXT
    (continued,) = sent
    assert continued["messages"][-2]["tool_calls"][0]["function"]["name"] == "pinch_retrieve"
    assert continued["messages"][-1] == {"role": "tool", "tool_call_id": "c0", "content": ORIGINAL}
    assert loop.ctx[UPSTREAM] is not None and loop.ctx[UPSTREAM].retrieve_calls == 1 and loop.ctx[UPSTREAM].retrieve_tokens == len(ORIGINAL) // 4


async def test_the_rounds_are_bounded_and_the_last_answer_goes_without_its_calls() -> None:
    loop, sent = loop_for()
    answer = await run(loop, sent, [calling("pinch_retrieve")] * (MAX_ROUNDS + 2))
    assert len(sent) == MAX_ROUNDS
    assert answer["choices"][0]["message"]["tool_calls"] == []
    # each round appended to the one before: the body grows by one call and its answer a round
    assert [len(body["messages"]) for body in sent] == [3 + 2 * (i + 1) for i in range(MAX_ROUNDS)]


async def test_a_round_that_calls_the_clients_tool_too_goes_to_the_client_without_the_call() -> None:
    loop, sent = loop_for()
    mixed = calling("pinch_retrieve", "bash")

    async def never(payload: bytes) -> Any:
        raise AssertionError("not continued")

    _, answer = await loop.whole(orjson.dumps(mixed), mixed, never, never)  # type: ignore[arg-type]
    assert [c["function"]["name"] for c in answer["choices"][0]["message"]["tool_calls"]] == ["bash"]
    assert sent == []


async def test_a_responses_answer_goes_as_the_provider_wrote_it_unless_its_echo_holds_the_declaration() -> None:
    ctx = make_ctx(messages=[user("fix it")])
    bash = {"type": "function", "name": "bash", "parameters": {"type": "object"}}
    declared = {"type": "function", "name": "pinch_retrieve", "parameters": {"type": "object"}}

    async def never(payload: bytes) -> Any:
        raise AssertionError("not continued")

    own = {"id": "resp_1", "output": [{"type": "message", "content": []}], "tools": [bash]}
    written = orjson.dumps(own, option=orjson.OPT_INDENT_2)  # not orjson's compact writing: nothing rewrote it
    assert await RetrieveLoop(ctx, RESPONSES_RETRIEVE, b"{}").whole(written, own, never, never) == (written, own)  # type: ignore[arg-type]
    echoing = {**own, "tools": [bash, declared]}
    body, answer = await RetrieveLoop(ctx, RESPONSES_RETRIEVE, b"{}").whole(orjson.dumps(echoing, option=orjson.OPT_INDENT_2), echoing, never, never)  # type: ignore[arg-type]
    assert answer == own and body == orjson.dumps(own)
