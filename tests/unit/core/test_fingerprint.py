"""Session keys: stable across the turns of one session, distinct across sessions."""

from __future__ import annotations

from router.core.fingerprint import (
    FingerprintCache,
    header_session_key,
    session_fingerprint,
    session_header,
)
from tests.support.factories import assistant, system, tool, user

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


def test_the_cache_gives_exactly_the_fingerprint_for_every_turn_and_session():
    cache = FingerprintCache()
    for task in ("fix parser.py", "write docs", "fix parser.py"):
        for turns in range(4):
            messages = session(task, turns)
            assert cache.fingerprint(messages) == session_fingerprint(messages)
    assert len(cache) == 2


def test_openings_alike_at_both_ends_but_not_in_the_middle_keep_their_own_keys():
    cache = FingerprintCache()
    a = [SYSTEM, user("x" * 100 + "A" + "y" * 100)]
    b = [SYSTEM, user("x" * 100 + "B" + "y" * 100)]
    for _ in range(2):
        assert cache.fingerprint(a) == session_fingerprint(a)
        assert cache.fingerprint(b) == session_fingerprint(b)
    assert session_fingerprint(a) != session_fingerprint(b)


def test_the_cache_keeps_only_the_most_recent_openings():
    cache = FingerprintCache(max_entries=2)
    for task in ("one", "two", "three"):
        cache.fingerprint([SYSTEM, user(task)])
    assert len(cache) == 2


def test_the_cache_holds_a_bounded_number_of_characters_and_hashes_huge_openings_every_time():
    cache = FingerprintCache(max_chars=16_000)  # openings up to 1,000 characters are filed
    for task in range(20):
        cache.fingerprint([SYSTEM, user(f"{task:03d}" * 300)])
    assert 0 < cache.chars <= 16_000 and len(cache) < 20
    huge = [SYSTEM, user("h" * 5000)]
    before = len(cache)
    assert cache.fingerprint(huge) == session_fingerprint(huge)
    assert len(cache) == before


# aider's real requests (tests/data/agents): one run asking one question, and three asked in one chat
# (--restore-chat-history), the first also the one in the history of the next two
def aider_session(name: str) -> list[list[dict]]:
    from tests.support.agent_captures import captured

    return [request.body["messages"] for request in captured(name)]


def test_every_turn_of_an_aider_chat_has_one_key_from_the_users_first_words():
    """aider opens every request with the same worked examples (a user asking to "Change the greeting to be
    more casual"); the key is the user's first question instead — the newest message on the first turn,
    aider's reminder appended, and the first of the history after it."""
    from router.core.fingerprint import opening_parts

    turns = aider_session("aider-turns")
    assert [len(m) for m in turns] == [8, 10, 12] and turns[0][1]["content"] == "Change the greeting to be more casual"
    assert {opening_parts(m)[-1] for m in turns} == {"what does part1.txt say?"}
    assert len({session_fingerprint(m) for m in turns}) == 1


def test_two_aider_chats_have_two_keys():
    (other,) = aider_session("aider")
    assert session_fingerprint(other) != session_fingerprint(aider_session("aider-turns")[0])


def test_aiders_context_messages_before_the_users_words_do_not_make_the_key():
    """The repo map, the files in the chat and aider's "Ok" replies come before the question on a first turn."""
    (messages,) = aider_session("aider")
    without_context = [m for m in messages if not m["content"].startswith(("Here are summaries", "I have *added", "Ok, "))]
    assert len(without_context) < len(messages)
    assert session_fingerprint(without_context) == session_fingerprint(messages)


def test_a_reminder_is_cut_only_where_the_text_ends_as_the_system_prompt_does():
    from router.core.fingerprint import AIDER_EXAMPLES_END, opening_parts

    opening = [system("Be brief.\nReply in English."), user("example"), assistant("Ok, done."), user(AIDER_EXAMPLES_END), assistant("Ok.")]
    assert opening_parts([*opening, user("fix it\n\nReply in English.")])[-1] == "fix it"
    assert opening_parts([*opening, user("fix it\n\nReply in French.")])[-1] == "fix it\n\nReply in French."
    assert opening_parts([*opening, user("fix it")])[-1] == "fix it"
