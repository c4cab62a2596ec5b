"""The current turn's text, shared by classifier and relevance."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from router.core.turn_text import latest_turn_text
from router.wire.openai_chat.view import extract_turn_text
from tests.support.factories import assistant, system, tool, user


def test_task_is_the_head_of_the_last_user_message_and_step_the_latest_assistant_turn():
    messages = [
        system("sys"),
        user("first task"),
        assistant("old thinking", [("c0", "bash", '{"command": "ls"}')]),
        tool("c0", "files"),
        user("the real task " + "x" * 100),
        assistant("now I will grep for the symbol", [("c1", "grep", '{"pattern": "parse_header"}')]),
        tool("c1", "matches"),
    ]
    text = extract_turn_text(messages, max_chars=80)
    assert text.task == ("the real task " + "x" * 100)[:80]
    assert text.step.startswith('grep({"pattern": "parse_header"})\n')
    assert len(text.step) <= 80
    assert text.step.endswith("symbol")  # the tail of the assistant text


def test_tool_call_arguments_take_at_most_half_the_room():
    messages = [user("q"), assistant("tail text", [("c1", "bash", "y" * 500)])]
    text = extract_turn_text(messages, max_chars=40)
    assert text.step.startswith("bash(yyyyyyy")
    assert text.step.endswith("tail text") and len(text.step) <= 40


def test_text_parts_count_and_missing_parts_are_empty():
    messages = [user("x"), {"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "image_url"}]}]
    text = extract_turn_text(messages, 100)
    assert text.task == "part one"
    assert text.step == ""


def test_assistant_without_tool_calls_gives_its_text_tail():
    text = extract_turn_text([user("q"), assistant("a" * 50 + "END")], 10)
    assert text.step == ("a" * 50 + "END")[-10:]


def _eager_turn_text(pairs, task_of, step_of, max_chars):
    """The turn text as it was cut before RecentSteps: every step in one pass (the reference)."""
    from router.core.turn_text import RECENT_STEPS, TurnText, step_text

    task = step = ""
    recent = []
    for role, message in pairs:
        if role == "user" and not task:
            task = task_of(message)[:max_chars]
        elif role == "assistant" and len(recent) < RECENT_STEPS:
            calls, text = step_of(message)
            if not step:
                step = step_text(calls, text, max_chars)
            elif calls or text:
                recent.append(step_text(calls, text, max_chars))
        if task and len(recent) >= RECENT_STEPS:
            break
    return TurnText(task=task, step=step, recent=tuple(recent))


def test_recent_steps_are_cut_only_when_read_and_as_one_pass_cuts_them():
    from router.core.turn_text import latest_turn_text

    # newest first: steps with calls, one with nothing, user words between them
    pairs = [("assistant", ([], ""))] + [
        pair for n in range(30) for pair in (("assistant", ([f"bash({n})"], f"text {n}" * (n % 3))), ("user", "" if n % 7 else f"task {n}"))
    ]
    read = []

    def step_of(message):
        read.append(message)
        return message

    turn = latest_turn_text(lambda: iter(pairs), lambda words: words, step_of, 40)
    assert turn.step == "bash(0)" and turn.task == "task 0"
    assert len(read) == 2  # the empty step and the step: no recent step cut yet
    eager = _eager_turn_text(pairs, lambda words: words, lambda m: m, 40)
    assert turn == eager and turn.recent == eager.recent and tuple(turn.recent) == eager.recent
    assert len(turn.recent) == 16 and turn.recent[0] == "bash(1)\ntext 1" and hash(turn) == hash(eager)
    read.clear()
    assert list(turn.recent) == list(eager.recent) and not read  # cut once


def test_no_step_means_no_recent_steps():
    text = extract_turn_text([user("q"), assistant("")], 100)
    assert text.step == "" and tuple(text.recent) == ()


@given(
    roles=st.lists(st.sampled_from(["user", "assistant", "tool", "system"]), max_size=12),
    words=st.lists(st.sampled_from(["", "fix it", "and the tests"]), min_size=12, max_size=12),
    calls=st.lists(st.sampled_from([(), ("bash(ls)",)]), min_size=12, max_size=12),
)
@settings(max_examples=400, deadline=None)
def test_the_users_given_find_the_same_turn_text_as_the_walk(roles, words, calls):
    """A wire that knows its user messages (chat's check) hands them over: the same task and step."""
    messages = [(role, (words[i], calls[i])) for i, role in enumerate(roles)]
    newest = lambda: reversed(messages)  # noqa: E731
    users = [m for role, m in reversed(messages) if role == "user"]
    task_of, step_of = (lambda m: m[0]), (lambda m: (list(m[1]), m[0]))
    walked = latest_turn_text(newest, task_of, step_of, 30)
    given_users = latest_turn_text(newest, task_of, step_of, 30, users)
    assert (given_users.task, given_users.step, tuple(given_users.recent)) == (walked.task, walked.step, tuple(walked.recent))
