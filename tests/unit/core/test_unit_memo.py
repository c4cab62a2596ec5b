"""Each result's compression and call kept from one request of a conversation to the next (router.core.unit_memo)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from router.core.cache_timing import CacheState, CacheVerdict
from router.core.first_sight import FirstSightSettings
from router.core.pinch_ledger import EMPTY_LEDGER, PinchPolicy, pinch_conversation
from router.core.tokens import DEFAULT_ESTIMATOR, TokenEstimator
from router.core.unit_memo import UnitMemo
from router.wire.anthropic_messages.view import MessagesConversation
from router.wire.openai_chat.view import ChatConversation
from tests.support.anthropic_factories import assistant, text, tool_result, tool_use, user
from router.wire.ollama.view import OllamaConversation
from router.wire.openai_responses.view import ResponsesConversation
from tests.support.factories import user as chat_user
from tests.support.wire_factories import function_call, function_call_output, input_message

WARM = CacheState(CacheVerdict.WARM, "warm", requests=3)
COLD = CacheState(CacheVerdict.COLD, "cold", requests=3)


class Asked(MessagesConversation):
    """A Messages conversation that counts the units whose call or tool it was asked for."""

    __slots__ = ("asked",)

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        super().__init__([text("sys")], messages)
        self.asked: list[int] = []

    def tool_name(self, unit: int) -> str:
        self.asked.append(unit)
        return super().tool_name(unit)

    def tool_call(self, unit: int) -> tuple[str, str]:
        self.asked.append(unit)
        return super().tool_call(unit)


def turn(n: int, output: str, tool: str = "Bash") -> list[dict[str, Any]]:
    return [assistant(tool_use(f"t{n}", tool, command=f"cat f{n}.py")), user(tool_result(f"t{n}", output))]


def session_of(turns: int, output_chars: int = 3_000) -> list[dict[str, Any]]:
    messages = [user(text("fix the parser"))]
    for n in range(turns):
        messages += turn(n, f"line {n}\n" * (output_chars // 7))
    return messages


def units_of(messages: list[dict[str, Any]]) -> int:
    return len(MessagesConversation([text("sys")], messages).units)


def test_a_resumed_conversation_takes_the_calls_and_compressions_of_the_units_it_shares() -> None:
    first = session_of(6)
    before = Asked(first)
    memo = UnitMemo(before, 400, DEFAULT_ESTIMATOR)
    units = before.result_units()
    called = [memo.tool_call(u) for u in units]
    memo.keep_compression(units[0], ("elided", "kind", 9))
    nxt = first + turn(6, "new output")  # the same message objects, one turn more
    after = Asked(nxt)
    again = UnitMemo(after, 400, DEFAULT_ESTIMATOR, memo, units_of(first))
    assert [again.tool_call(u) for u in units] == called and after.asked == []  # taken, not asked again
    assert again.compression(units[0], None) == ("elided", "kind", 9)
    new_unit = after.result_units()[-1]
    assert again.tool_call(new_unit) == ("Bash", '{"command":"cat f6.py"}') and after.asked == [new_unit]
    assert memo.compression(new_unit, "absent") == "absent"  # the earlier memo is never changed


def test_a_memo_is_not_taken_past_the_shared_units_or_under_other_settings() -> None:
    first = session_of(4)
    memo = UnitMemo(Asked(first), 400, DEFAULT_ESTIMATOR)
    units = Asked(first).result_units()
    for u in units:
        memo.tool_call(u)
        memo.keep_compression(u, None)
    shared = units[2]  # the conversation resumed only up to the third result
    cases = [
        (400, DEFAULT_ESTIMATOR, shared, units[:2]),
        (401, DEFAULT_ESTIMATOR, units_of(first), []),  # another max_summarize_chars
        (400, TokenEstimator(per_message_overhead=9), units_of(first), []),  # another estimator
    ]
    for max_chars, estimator, shared_units, kept in cases:
        again = UnitMemo(Asked(first), max_chars, estimator, memo, shared_units)
        assert sorted(again.calls) == kept and sorted(again.compressions) == kept


def test_a_format_whose_names_may_read_later_units_keeps_them_for_one_request_only() -> None:
    # a Responses result is named by the first call with its call_id, which may come after it
    items = [input_message("user", "go"), function_call("c1", "exec_command", cmd="ls"), function_call_output("c1", "a.py")]
    conversation = ResponsesConversation(items)
    assert not conversation.names_from_earlier_units
    memo = UnitMemo(conversation, 400, DEFAULT_ESTIMATOR)
    memo.tool_call(2)
    assert memo.calls and UnitMemo(ResponsesConversation(items), 400, DEFAULT_ESTIMATOR, memo, 3).calls == {}
    # chat's and Ollama's, like Messages', read the nearest assistant message before the result
    assert ChatConversation([chat_user("go")]).names_from_earlier_units and OllamaConversation([chat_user("go")]).names_from_earlier_units


@st.composite
def growing_sessions(draw: Any) -> tuple[list[list[dict[str, Any]]], list[tuple[CacheState, int]]]:
    """A Claude Code session's requests, each resending the one before's messages (the same objects)
    plus a turn — or, now and then, rewound: its last two turns dropped, another taken — with outputs that
    repeat (first sight points at them) and long ones (elided)."""
    outputs = st.sampled_from(["ok\n", "line\n" * 400, "FAILED test_x\n" + "trace\n" * 300, "x = 1\n" * 900, "same output\n" * 200])
    messages = [user(text("fix the parser"))]
    requests, moments = [], []
    for n in range(draw(st.integers(2, 9))):
        if len(messages) > 5 and draw(st.integers(0, 3)) == 0:
            messages = messages[:-4]  # rewound two turns: the units they held now hold others
        messages = messages + turn(n, draw(outputs), draw(st.sampled_from(["Bash", "Read", "Grep"])))
        requests.append(messages)
        moments.append((draw(st.sampled_from([WARM, COLD, COLD])), draw(st.sampled_from([0, 0, 300, 3_000, 10**6]))))
    return requests, moments


@settings(max_examples=200, deadline=None)
@given(growing_sessions(), st.integers(1, 2))
def test_a_session_carrying_the_memos_decides_exactly_as_one_without_them(session: Any, keep: int) -> None:
    requests, moments = session
    plain_ledger = memo_ledger = EMPTY_LEDGER
    carried: tuple[Any, Any, Any] = (None, None, None)
    before: list[dict[str, Any]] | None = None
    for messages, (cache, budget) in zip(requests, moments, strict=True):
        policy = PinchPolicy(budget, keep, 400, first_sight=FirstSightSettings())
        plain = pinch_conversation(MessagesConversation([text("sys")], messages), plain_ledger, policy, cache)
        same = 0  # the leading messages that are the very objects of the request before
        while before is not None and same < min(len(before), len(messages)) and messages[same] is before[same]:
            same += 1
        shared = units_of(messages[:same])
        memo, earlier, units = carried
        resumed = pinch_conversation(
            MessagesConversation([text("sys")], messages), memo_ledger, policy, cache, memo=memo, shared_units=shared, earlier=earlier, unit_memo=units
        )
        assert resumed.rewrites == plain.rewrites and list(resumed.rewrites) == list(plain.rewrites)
        assert resumed.stats == plain.stats and resumed.ledger == plain.ledger
        plain_ledger, memo_ledger = plain.ledger, resumed.ledger
        carried, before = (resumed.memo, resumed.earlier, resumed.units), messages
