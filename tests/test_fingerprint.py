"""Session keys: stable across the turns of one session, distinct across sessions."""

from __future__ import annotations

from router.core.fingerprint import (
    header_session_key,
    session_fingerprint,
    session_header,
)
from tests.factories import assistant, system, tool, user

SYSTEM = system("You are a coding agent.")


def session(task: str, turns: int) -> list[dict]:
    messages = [SYSTEM, user(task)]
    for i in range(turns):
        messages += [assistant(f"step {i}", [(f"c{i}", "bash", f'{{"command": "ls {i}"}}')]), tool(f"c{i}", f"out {i}")]
    return messages


def test_every_turn_of_a_session_has_the_same_key():
    keys = {session_fingerprint(session("fix the bug in parser.py", n)) for n in range(10)}
    assert len(keys) == 1


def test_sessions_with_different_tasks_differ():
    assert session_fingerprint(session("fix parser.py", 3)) != session_fingerprint(session("write docs", 3))


def test_sessions_with_different_system_prompts_differ():
    a = [system("agent A"), user("task")]
    b = [system("agent B"), user("task")]
    assert session_fingerprint(a) != session_fingerprint(b)


def test_cache_markers_on_the_opening_do_not_change_the_key():
    plain = [SYSTEM, user("task")]
    marked = [
        {"role": "system", "content": [{"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}}]},
        user("task"),
    ]
    assert session_fingerprint(plain) == session_fingerprint(marked)


def test_boundaries_between_parts_matter():
    assert session_fingerprint([system("ab"), user("c")]) != session_fingerprint([system("a"), user("bc")])


def test_later_user_messages_do_not_change_the_key():
    first = [SYSTEM, user("task")]
    later = [*first, assistant("ok"), user("now do more")]
    assert session_fingerprint(first) == session_fingerprint(later)


def test_header_keys_are_namespaced_apart_from_fingerprints():
    assert header_session_key("abc") != session_fingerprint([user("abc")])
    assert header_session_key("abc") == header_session_key("abc")


def test_first_configured_nonempty_header_wins():
    headers = {"x-session-id": "second", "x-router-session": "  "}
    assert session_header(headers, ["x-router-session", "x-session-id"]) == "second"
    assert session_header({}, ["x-router-session"]) is None
