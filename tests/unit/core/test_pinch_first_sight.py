"""First sight in the session ledger (router.core.pinch_first_sight, router.core.pinch_ledger): plain data, no proxy.

A session replayed request by request (each request every message up to a tool result, that
result the in-progress turn): a result is reduced the first time it is sent, resent as the very
same bytes ever after, and no byte an earlier request sent changes — 0 cache breaks.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from xxhash import xxh3_64_hexdigest

from router.core.cache_timing import CacheState, CacheVerdict
from router.core.first_sight import FirstSightSettings
from router.core.pinch import RelevanceOrderError, is_compressed
from router.core.pinch_first_sight import FirstSightEntry, content_digest, text_of
from router.core.pinch_ledger import EMPTY_LEDGER, Ledger, PinchPolicy, PinchSession, SessionPinch, WindowLimit, pinch_conversation
from router.core.relevance import rank_with_evidence
from router.core.tokens import DEFAULT_ESTIMATOR
from router.core.turn_text import TurnText
from router.wire.openai_chat.pinch import pinch_session
from router.wire.openai_chat.view import ChatConversation
from tests.support.factories import assistant, system, tool, user

WARM = CacheState(CacheVerdict.WARM, "warm cache (idle 20s <= 300s)", requests=3)
COLD = CacheState(CacheVerdict.COLD, "cache cold (idle 412s > 300s)", requests=3)
SETTINGS = FirstSightSettings()
KEEP, MAX_CHARS = 2, 400
SAME_OUTPUT = "[pinch-router: same output as the earlier call bash "

# A file of distinct lines (nothing in it repeats), and what a test run prints.
SOURCE = "\n".join(f"def handler_{i}(request_{i}):\n    return respond(request_{i}, status={200 + i})" for i in range(30))
OTHER = "\n".join(f"OPTION_{word.upper()} = {(i * i * 31 + 7) % 1009}  # the {word} setting" for i, word in enumerate("cache retry limit timeout region proxy token queue shard batch".split() * 3))
LISTING = "src/app.py\nsrc/models.py\nsrc/views.py\ntests/test_app.py"


def command(text: str) -> str:
    return orjson.dumps({"command": text}).decode()


def conversation(steps: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """A system prompt, the task, then per step (command, output) a bash call ``call_<i>`` and its result."""
    messages = [system("You are a coding agent."), user("Fix the handler in src/app.py.")]
    for i, (cmd, output) in enumerate(steps):
        messages += [assistant(f"Step {i}.", [(f"call_{i}", "bash", command(cmd))]), tool(f"call_{i}", output)]
    return messages


READS = [("cat src/app.py", SOURCE), ("ls src tests", LISTING), ("cat src/config.py", OTHER), ("cat src/app.py", SOURCE), ("cat src/config.py", OTHER)]


def pinch(messages: list[dict[str, Any]], ledger: Ledger = EMPTY_LEDGER, *, budget: int = 10**9, cache: CacheState = WARM, **options: Any) -> SessionPinch:
    options.setdefault("first_sight", SETTINGS)
    return pinch_session(messages, ledger, budget_tokens=budget, keep_last_turns=KEEP, max_summarize_chars=MAX_CHARS, cache=cache, **options)


def replay(steps: list[tuple[str, str]], ledger: Ledger = EMPTY_LEDGER, **options: Any) -> list[SessionPinch]:
    """Each request of the session in turn, the ledger carried from one to the next."""
    messages = conversation(steps)
    done = []
    for end in range(4, len(messages) + 1, 2):
        done.append(pinch(messages[:end], ledger, **options))
        ledger = done[-1].ledger
    return done


def content_of(sent: SessionPinch, call_id: str) -> Any:
    return next(m["content"] for m in sent.messages if m.get("tool_call_id") == call_id)


def appended_only(before: list[dict[str, Any]], now: list[dict[str, Any]]) -> bool:
    """``now`` begins with ``before``, byte for byte: a prefix cache serves all of it."""
    return [orjson.dumps(m) for m in now[: len(before)]] == [orjson.dumps(m) for m in before]


def tokens(messages: list[dict[str, Any]]) -> int:
    return DEFAULT_ESTIMATOR.prompt_tokens(messages)


# --- a result reduced once, resent as the same bytes ----------------------------------------------


def test_a_file_read_twice_is_sent_as_a_pointer_from_its_first_sight_on_and_no_earlier_byte_changes() -> None:
    done = replay(READS)
    second_read = done[3]  # call_3, the same file again, in progress
    assert content_of(second_read, "call_3") == f'{SAME_OUTPUT}{command("cat src/app.py")}]'
    assert second_read.stats.first_sight_new == 1 and second_read.stats.first_sight_saved > 0
    assert content_of(second_read, "call_0") == SOURCE  # what it points at stays as it was
    # on every later request the same bytes, the protected last turns included; nothing earlier changes
    for before, now in zip(done, done[1:]):
        assert appended_only(before.messages, now.messages)
    assert content_of(done[4], "call_3") == content_of(second_read, "call_3")
    assert content_of(done[4], "call_4") == f'{SAME_OUTPUT}{command("cat src/config.py")}]'
    assert (done[4].stats.first_sight_new, done[4].stats.first_sight_reapplied, done[4].stats.compressed) == (1, 1, 0)
    # exact stats: what was saved is what was sent less
    for request in done:
        assert request.stats.final_tokens == tokens(request.messages)
        assert request.stats.saved_tokens == request.stats.first_sight_saved
    # the text is recorded, not made again: the ledger holds it by the result's id and content
    assert done[4].ledger.first_sight["call_3"][content_digest(SOURCE)].text == content_of(second_read, "call_3")


def test_a_file_re_read_after_an_edit_points_at_the_first_read_and_a_multi_turn_replay_breaks_no_cache() -> None:
    edited = SOURCE.replace("status=215", "status=404")
    steps = [*READS[:3], ("sed -i s/215/404/ src/app.py", ""), ("cat src/app.py", edited), ("pytest -q", "4 passed in 0.1s")]
    done = replay(steps)
    reduced = content_of(done[4], "call_4")  # what the first read shows already, pointed at; the changed line in place
    assert f'of the earlier call bash {command("cat src/app.py")}' in reduced and "    return respond(request_15, status=404)" in reduced
    assert "status=215" not in reduced and len(reduced) < len(edited) // 4
    assert all(appended_only(before.messages, now.messages) for before, now in zip(done, done[1:]))
    assert content_of(done[-1], "call_4") == reduced


def test_the_ledger_text_is_resent_even_when_first_sight_is_switched_off() -> None:
    done = replay(READS)
    later = pinch(conversation(READS), done[3].ledger, first_sight=None)
    assert content_of(later, "call_3") == content_of(done[3], "call_3") and later.stats.first_sight_reapplied == 1


def test_a_list_of_parts_with_one_text_part_keeps_its_other_parts() -> None:
    messages = conversation(READS[:4])
    messages[-1] = tool("call_3", [{"type": "text", "text": SOURCE, "cache_control": {"type": "ephemeral"}}])
    done = pinch(messages, replay(READS[:3])[-1].ledger)
    assert content_of(done, "call_3") == [{"type": "text", "text": f'{SAME_OUTPUT}{command("cat src/app.py")}]', "cache_control": {"type": "ephemeral"}}]
    assert done.stats.final_tokens == tokens(done.messages)


def test_a_list_of_several_text_parts_has_its_longest_reduced_and_the_others_kept() -> None:
    # Codex's code-mode exec: a short header part, then the command's output (issue #44)
    header = {"type": "input_text", "text": "Script completed\nWall time 0.1 seconds\nOutput:\n"}
    messages = conversation(READS[:4])
    messages[-1] = tool("call_3", [header, {"type": "input_text", "text": SOURCE}])
    done = pinch(messages, replay(READS[:3])[-1].ledger)
    assert content_of(done, "call_3") == [header, {"type": "input_text", "text": f'{SAME_OUTPUT}{command("cat src/app.py")}]'}]
    assert done.stats.final_tokens == tokens(done.messages)
    # resent as the same bytes on the next request, from the ledger
    later = pinch(messages, done.ledger)
    assert content_of(later, "call_3") == content_of(done, "call_3") and later.stats.first_sight_reapplied == 1


def test_text_of_reads_the_longest_text_part_the_first_of_equals() -> None:
    assert text_of("plain") == ("plain", -1)
    assert text_of([{"type": "text", "text": "ab"}, {"type": "image_url"}, {"type": "text", "text": "abcd"}, {"type": "text", "text": "wxyz"}]) == ("abcd", 2)
    assert text_of([{"type": "image_url"}]) is None and text_of({"text": "x"}) is None


# --- only what was never sent ---------------------------------------------------------------------


def test_a_result_seen_before_without_a_ledger_entry_is_not_reduced() -> None:
    # the session's requests made while first sight was off: the second read went out verbatim
    earlier = replay(READS[:4], first_sight=None)
    assert content_of(earlier[-1], "call_3") == SOURCE and not earlier[-1].ledger.first_sight
    # on every later request it is an old result: never reduced, though it repeats the first read
    later = pinch(conversation(READS), earlier[-1].ledger)
    assert content_of(later, "call_3") == SOURCE
    assert content_of(later, "call_4") == f'{SAME_OUTPUT}{command("cat src/config.py")}]'  # the new one is
    assert (later.stats.first_sight_new, later.stats.first_sight_reapplied) == (1, 0)


def test_an_in_progress_result_the_previous_request_sent_verbatim_is_not_reduced_when_it_comes_again() -> None:
    # the second read in progress, with settings under which it is not worth reducing (a reload changes them)
    strict = FirstSightSettings(min_saved_tokens=10**6)
    verbatim = replay(READS[:4], first_sight=strict)[-1]
    assert content_of(verbatim, "call_3") == SOURCE and verbatim.ledger.first_seen == ("call_3",)
    # the same turn again (a retry) under the usual settings: it went out verbatim, so it stays so
    retry = pinch(conversation(READS[:4]), verbatim.ledger)
    assert content_of(retry, "call_3") == SOURCE and retry.stats.first_sight_new == 0 and appended_only(verbatim.messages, retry.messages)


def test_after_a_lost_ledger_the_older_results_are_left_as_they_are() -> None:
    done = replay(READS)
    lost = pinch(conversation(READS), EMPTY_LEDGER)  # evicted, restarted: as a new session
    assert content_of(lost, "call_3") == SOURCE  # once reduced, but nothing says so now: left alone
    assert content_of(lost, "call_4") == content_of(done[4], "call_4")  # the in-progress one was never sent
    assert lost.stats.first_sight_new == 1 and lost.stats.first_sight_reapplied == 0


def test_a_changed_result_under_the_same_id_is_not_mistaken_for_the_one_reduced() -> None:
    done = replay(READS)
    messages = conversation(READS)
    messages[9] = tool("call_3", SOURCE + "\n# edited by the client")
    again = pinch(messages, done[-1].ledger)
    assert content_of(again, "call_3") == messages[9]["content"]


# --- pointers never name what is not there ----------------------------------------------------------


def test_client_compaction_removing_a_pointed_at_result_sends_the_original_from_then_on() -> None:
    done = replay(READS)
    compacted = conversation(READS)
    compacted[3] = tool("call_0", "[output cleared by the client]")  # its own compaction of the first read
    after = pinch(compacted, done[-1].ledger)
    assert content_of(after, "call_3") == SOURCE  # the pointer would name what is gone
    assert content_of(after, "call_4") == content_of(done[-1], "call_4")  # what still points at what is there stays
    assert after.stats.first_sight_reapplied == 1 and "call_3" not in after.ledger.first_sight
    again = pinch(compacted, after.ledger)  # and so on every later request: the original, as just sent
    assert content_of(again, "call_3") == SOURCE and appended_only(after.messages, again.messages)


def pointers_all_name_visible_results(done: SessionPinch) -> bool:
    """Every first-sight text sent that points at a result: that result is sent, not compressed."""
    sent = {m.get("tool_call_id"): m["content"] for m in done.messages if m.get("role") == "tool"}
    for rid, entries in done.ledger.first_sight.items():
        for entry in entries.values():
            if sent.get(rid) == entry.text and any(is_compressed(sent[pid]) for pid, _ in entry.points_at):
                return False
    return True


@pytest.mark.parametrize("cache", [WARM, COLD], ids=["warm", "cold"])
def test_a_batch_that_compresses_a_pointed_at_result_sends_its_pointers_as_their_originals(cache: CacheState) -> None:
    steps = [*READS, *((f"echo step {i}", f"line {i} of a note that is long enough to be worth a placeholder " * 4) for i in range(6))]
    done = replay(steps)
    messages = conversation(steps)
    assert content_of(done[-1], "call_3").startswith(SAME_OUTPUT)
    # a window only compressing every old result fits: the first read too, though its second read points at it
    fits = pinch(messages, done[-1].ledger, budget=1, cache=COLD).stats.final_tokens
    window = WindowLimit("small", "p", fits + 1024, fits + 10)
    batch = pinch(messages, done[-1].ledger, cache=cache, windows=(window,))
    assert is_compressed(content_of(batch, "call_0"))
    assert content_of(batch, "call_3") == SOURCE or is_compressed(content_of(batch, "call_3"))  # never a pointer to a compressed result
    assert pointers_all_name_visible_results(batch)
    assert batch.stats.final_tokens == tokens(batch.messages) <= window.prompt_limit
    # from the batch on, the session is append-only again, and the pointer does not come back
    later = pinch(messages, batch.ledger, budget=10**9)
    assert appended_only(batch.messages, later.messages) and content_of(later, "call_3") == content_of(batch, "call_3")


def test_a_soft_batch_counts_the_first_sight_savings_it_would_give_back() -> None:
    """Compressing the first read would send its second read whole again: a batch only the budget calls
    for that reaches its target without it leaves both as they are."""
    steps = [*READS, *((f"echo step {i}", f"line {i} of a note that is long enough to be worth a placeholder " * 4) for i in range(6))]
    done = replay(steps)
    messages = conversation(steps)
    # a budget the notes alone can meet: the first read (whose compression saves nothing net) is passed over
    current = done[-1].stats.final_tokens
    batch = pinch(messages, done[-1].ledger, budget=current - 10, cache=COLD, low_watermark=1.0)
    assert batch.stats.newly_compressed > 0 and batch.stats.final_tokens <= current - 10
    assert content_of(batch, "call_0") == SOURCE and content_of(batch, "call_3") == content_of(done[-1], "call_3")
    assert pointers_all_name_visible_results(batch) and batch.stats.final_tokens == tokens(batch.messages)


def test_the_budget_sees_the_reduced_sizes() -> None:
    done = replay(READS)
    messages = conversation(READS)
    # over the budget as the client sent it, within it as first sight sends it: no batch
    within = pinch(messages, done[3].ledger, budget=tokens(messages) - 100, cache=COLD)
    assert within.stats.newly_compressed == 0 and within.stats.reason == "within budget"


def test_a_batch_may_compress_a_first_sight_result_further_from_its_original() -> None:
    steps = [*READS, *((f"echo step {i}", f"line {i} of a note that is long enough to be worth a placeholder " * 4) for i in range(6))]
    done = replay(steps)
    messages = conversation(steps)
    squeezed = pinch(messages, done[-1].ledger, budget=1, cache=COLD)  # everything old compressed
    third = content_of(squeezed, "call_3")
    assert third.startswith("[pinch-router: old bash result omitted (") and f"({len(SOURCE)} characters)" in third  # from the original
    assert "call_3" not in squeezed.ledger.first_sight and squeezed.ledger.compressed["call_3"][content_digest(SOURCE)] == third
    assert squeezed.stats.final_tokens == tokens(squeezed.messages)


# --- what is stored ---------------------------------------------------------------------------------


def test_a_pinch_session_with_first_sight_survives_its_codec_and_an_earlier_versions_value_reads() -> None:
    ledger = replay(READS)[-1].ledger
    assert ledger.first_sight and ledger.first_seen == ()
    session = PinchSession(ledger, 12.5, "openai", 7, ("k1",))
    assert PinchSession.decode(session.encode()) == session
    written_before = orjson.dumps({"ledger": {"call_0": {"abc": None}}, "last_seen": 1.0, "provider": "p", "requests": 3, "unbound": []})
    old = PinchSession.decode(written_before)
    assert old.ledger == Ledger({"call_0": {"abc": None}}) and old.ledger.first_sight == {} and old.ledger.first_seen == ()


def test_a_first_sight_entry_records_what_it_points_at() -> None:
    ledger = replay(READS)[3].ledger
    assert ledger.first_sight["call_3"][content_digest(SOURCE)] == FirstSightEntry(
        f'{SAME_OUTPUT}{command("cat src/app.py")}]', (("call_0", content_digest(SOURCE)),)
    )


LONG_LOG = "\n".join(f"[{i:04d}] worker {i * 7919 % 1000:03d} handled job {i * 104729 % 99991}" for i in range(600))


def test_the_lossy_cut_is_made_only_where_the_model_can_retrieve_and_the_settings_allow_it() -> None:
    messages = conversation([("make", LONG_LOG)])
    lossy = FirstSightSettings(lossy=True)
    cut = pinch(messages, first_sight=lossy, retrieve=True).messages[-1]["content"]
    assert cut.startswith('[pinch-router: ') and 'pinch_retrieve("call_0") returns the whole output]' in cut.split("\n")[0]
    assert len(cut) < len(LONG_LOG) // 3
    # no tool to fetch it back, or the settings refuse it: the output goes whole
    assert pinch(messages, first_sight=lossy, retrieve=False).messages[-1]["content"] == LONG_LOG
    assert pinch(messages, first_sight=FirstSightSettings(lossy=False), retrieve=True).messages[-1]["content"] == LONG_LOG


def test_a_cut_is_resent_byte_for_byte_on_every_later_request() -> None:
    lossy = FirstSightSettings(lossy=True)
    steps = [("make", LONG_LOG), ("ls src tests", LISTING), ("cat src/app.py", SOURCE)]
    messages = conversation(steps)
    first = pinch(messages[:4], first_sight=lossy, retrieve=True)
    cut = first.messages[-1]["content"]
    ledger = first.ledger
    for end in (6, 8):
        later = pinch(messages[:end], ledger, first_sight=lossy, retrieve=True)
        assert later.messages[3]["content"] == cut and later.messages[:4] == first.messages
        ledger = later.ledger


# --- the index of earlier results, carried from one request to the next ---------------------------


def _requests(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [messages[:end] for end in range(4, len(messages) + 1, 2)]


def _with_and_without_earlier(requests: list[list[dict[str, Any]]]) -> list[tuple[Any, Any, Any]]:
    """Each request pinched twice, the ledgers carried: once given the previous answer's index, once
    without; (with it, without it, the index it was given)."""
    policy = PinchPolicy(budget_tokens=10**9, keep_last_turns=KEEP, max_summarize_chars=MAX_CHARS, first_sight=SETTINGS)
    ledger_with = ledger_without = EMPTY_LEDGER
    earlier = None
    done = []
    for messages in requests:
        given = earlier
        with_it = pinch_conversation(ChatConversation(messages), ledger_with, policy, WARM, earlier=given)
        without_it = pinch_conversation(ChatConversation(messages), ledger_without, policy, WARM)
        done.append((with_it, without_it, given))
        ledger_with, ledger_without, earlier = with_it.ledger, without_it.ledger, with_it.earlier
    return done


def test_the_next_request_extends_the_index_it_is_given_and_reduces_as_one_built_anew() -> None:
    done = _with_and_without_earlier(_requests(conversation(READS)))
    assert any(with_it.earlier is not None and with_it.earlier is given for with_it, _, given in done)  # extended, not rebuilt
    for with_it, without_it, _ in done:
        assert with_it.rewrites == without_it.rewrites and with_it.ledger == without_it.ledger and with_it.stats == without_it.stats


def test_an_index_another_request_extended_is_not_taken_and_the_reductions_are_the_same() -> None:
    policy = PinchPolicy(budget_tokens=10**9, keep_last_turns=KEEP, max_summarize_chars=MAX_CHARS, first_sight=SETTINGS)
    requests = _requests(conversation(READS))
    first = pinch_conversation(ChatConversation(requests[2]), EMPTY_LEDGER, policy, WARM)
    onward = pinch_conversation(ChatConversation(requests[3]), first.ledger, policy, WARM, earlier=first.earlier)
    assert onward.earlier is first.earlier  # extended in place, past what requests[3]'s retry begins with
    retried = pinch_conversation(ChatConversation(requests[3]), first.ledger, policy, WARM, earlier=onward.earlier)
    assert retried.earlier is not onward.earlier
    assert retried.rewrites == onward.rewrites and retried.ledger == onward.ledger


# --- a batch in relevance order weighs what each step really saves (#49) ---------------------------

# distinct lines: no lossless rule shortens them
NOTES = ["\n".join(xxh3_64_hexdigest(f"{i}.{j}".encode()) * 4 for j in range(60)) for i in range(4)]


def test_a_relevance_batch_weighs_a_cut_output_by_what_compressing_it_still_saves() -> None:
    """Relevance ranks by the saving of the original: the long build log first. First sight sends it cut
    already, so compressing it saves a fraction of that; weighed by its real saving (the evidence is
    equal), the notes, which save more each, go first and the log is still sent cut. Ranked by the
    original, a batch that needs more than a note's saving spends a step on the log for a fraction of
    one; one that needs less than a note's leaves the log out once the note is compressed, as a step
    the batch did not need (``_Rewrites.needed``)."""
    lossy = FirstSightSettings(lossy=True)
    steps = [("make", LONG_LOG), *((f"cat notes/{i}.txt", note) for i, note in enumerate(NOTES)), ("ls src tests", LISTING), ("pytest -q", "4 passed")]
    messages = conversation(steps)
    ledger = EMPTY_LEDGER
    for end in range(4, len(messages) + 1, 2):
        ledger = pinch(messages[:end], ledger, first_sight=lossy, retrieve=True).ledger
    sent = pinch(messages, ledger, first_sight=lossy, retrieve=True)
    cut = content_of(sent, "call_0")
    assert "pinch_retrieve" in cut.split("\n")[0] and len(NOTES[0]) > len(cut) > MAX_CHARS
    texts = [m["content"] for m in messages if m.get("role") == "tool"][:5]  # the candidates, as the client sent them
    ranking = rank_with_evidence(texts, [], TurnText(task="fix it", step="go"), MAX_CHARS)
    assert ranking.order[0] == 0 and len(set(ranking.evidence)) == 1  # the log first, no evidence either way
    compressed = lambda done: [f"call_{i}" for i in range(5) if is_compressed(content_of(done, f"call_{i}"))]  # noqa: E731
    # the batch needs more than a note saves, less than two
    options: dict[str, Any] = dict(budget=sent.stats.final_tokens - 1000, cache=COLD, low_watermark=1.0, first_sight=lossy, retrieve=True)
    by_original = pinch(messages, ledger, relevance_order=ranking.order, **options)
    weighed = pinch(messages, ledger, relevance_order=ranking.order, relevance_evidence=ranking.evidence, **options)
    assert compressed(by_original) == ["call_0", "call_1"]
    assert compressed(weighed) == ["call_1", "call_2"] and content_of(weighed, "call_0") == cut
    assert weighed.stats.final_tokens == tokens(weighed.messages) <= options["budget"]
    # it needs less than a note saves, more than the log: ranked by the original, the log's step is taken, then
    # the note's, which alone was enough, so the log is sent cut
    options["budget"] = sent.stats.final_tokens - 800
    by_original = pinch(messages, ledger, relevance_order=ranking.order, **options)
    assert compressed(by_original) == ["call_1"] and content_of(by_original, "call_0") == cut
    assert by_original.stats.final_tokens == tokens(by_original.messages) <= options["budget"]


def test_a_relevance_batch_keeps_a_step_it_did_not_need_when_first_sight_texts_point_at_its_result() -> None:
    """The file's first read, then a note, then the file's head read again: first sight sends the head
    as a pointer to the first read. Compressing the first read releases the pointer (the head goes as
    its original), so that step saves the read's compression less the pointer's saving, still a saving
    here (the pointer covers only part of the file; an exact repeat's gives back all of it). The batch
    takes the read's step, then the note's, which alone was enough: its slack covers the read's step,
    yet that one stays (``_Rewrites.needed``). Were it left out, the pointer would stay, and a later
    step that compresses the head, counted from its original (the pointer released), would save less
    than counted: the batch would miss its budget."""
    head = "\n".join(SOURCE.split("\n")[:40])
    steps = [("cat src/app.py", SOURCE), ("cat notes/0.txt", NOTES[0]), ("head -n 40 src/app.py", head), ("ls src tests", LISTING), ("pytest -q", "4 passed")]
    messages = conversation(steps)
    ledger = EMPTY_LEDGER
    for end in range(4, len(messages) + 1, 2):
        ledger = pinch(messages[:end], ledger).ledger
    sent = pinch(messages, ledger)
    pointer = content_of(sent, "call_2")
    assert pointer.startswith("[pinch-router: 40 lines omitted here, the same as lines 1–40 of the earlier call bash ")
    assert ledger.first_sight["call_2"][content_digest(head)].points_at == (("call_0", content_digest(SOURCE)),)
    options: dict[str, Any] = dict(cache=COLD, low_watermark=1.0, relevance_order=[0, 1, 2])
    compressed = lambda done: [p for p, _ in done.stats.compressions]  # noqa: E731
    # what each step saves alone: the first read's (net of the pointer it releases), the note's
    read_first = pinch(messages, ledger, budget=sent.stats.final_tokens - 1, **options)
    note_first = pinch(messages, ledger, budget=sent.stats.final_tokens - 1, **{**options, "relevance_order": [1, 0, 2]})
    assert compressed(read_first) == [0] and content_of(read_first, "call_2") == head
    assert compressed(note_first) == [1] and content_of(note_first, "call_2") == pointer
    read_saves = sent.stats.final_tokens - read_first.stats.final_tokens
    note_saves = sent.stats.final_tokens - note_first.stats.final_tokens
    assert 0 < read_saves < note_saves
    # the batch needs more than the read's step saves, no more than the note's: the note's step leaves a slack
    # (read_saves + note_saves less what it needs) that covers the read's, but the read's releases a pointer
    budget = sent.stats.final_tokens - (read_saves + note_saves) // 2
    batch = pinch(messages, ledger, budget=budget, **options)
    assert compressed(batch) == [0, 1], "the first read's step stays, though the note's alone was enough"
    assert is_compressed(content_of(batch, "call_0")) and content_of(batch, "call_2") == head, "its pointer is released: sent as its original"
    assert "call_2" not in batch.ledger.first_sight
    assert batch.stats.final_tokens == tokens(batch.messages) == sent.stats.final_tokens - read_saves - note_saves <= budget
    # it needs a token more than the two save: the head's step, counted from its original, reaches the target
    # with a slack that covers the read's step; left out, the head would be compressed from its pointer
    budget = sent.stats.final_tokens - read_saves - note_saves - 1
    batch = pinch(messages, ledger, budget=budget, **options)
    assert compressed(batch) == [0, 1, 2], "the first read's step stays, though the slack covers it"
    assert budget - batch.stats.final_tokens >= read_saves, "the slack covers the read's step"
    assert all(is_compressed(content_of(batch, f"call_{i}")) for i in range(3)) and "call_2" not in batch.ledger.first_sight
    assert batch.stats.final_tokens == tokens(batch.messages) <= budget, "the batch reaches its budget"


def test_without_first_sight_texts_the_evidence_leaves_relevance_order_as_it_is() -> None:
    steps = [*((f"cat notes/{i}.txt", note) for i, note in enumerate(NOTES)), ("ls src tests", LISTING), ("pytest -q", "4 passed")]
    messages = conversation(steps)
    texts = [m["content"] for m in messages if m.get("role") == "tool"][:4]
    ranking = rank_with_evidence(texts, [], TurnText(task="fix notes/2.txt", step="cat notes/3.txt"), MAX_CHARS)
    options: dict[str, Any] = dict(budget=tokens(messages) - 1500, cache=COLD, low_watermark=1.0, first_sight=None, relevance_order=ranking.order)
    assert pinch(messages, **options).messages == pinch(messages, relevance_evidence=ranking.evidence, **options).messages
    with pytest.raises(RelevanceOrderError, match="2 values for 4 candidates"):
        pinch(messages, relevance_evidence=ranking.evidence[:2], **options)
