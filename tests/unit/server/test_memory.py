"""When the process gives memory back: after a burst of large bodies, once it is over — never for usual traffic."""

from __future__ import annotations

from typing import Any

from router.core.resent_prefix import ResentBodies
from router.http.request_body import LARGE_BODY_BYTES, BodyBudget
from router.server.memory import MemoryReturn, malloc_trim
from router.translate.element_memo import ElementMemo

MB = 1024 * 1024


class Request:
    def __init__(self, size: int) -> None:
        self.content_length = size


def watched(budget: BodyBudget) -> tuple[MemoryReturn, list[int]]:
    memory = MemoryReturn(budget, after_bytes=64 * MB, quiet_bytes=LARGE_BODY_BYTES, idle_checks=3)
    trims: list[int] = []
    memory.trim = lambda: trims.append(1)
    return memory, trims


def served(budget: BodyBudget, size: int) -> None:
    reserved = budget.reserve(Request(size))
    assert isinstance(reserved, int)
    budget.release(reserved)


def test_a_burst_of_large_bodies_is_trimmed_once_it_is_over():
    budget = BodyBudget(256 * MB, 32 * MB)
    memory, trims = watched(budget)
    held = [budget.reserve(Request(30 * MB)) for _ in range(3)]
    for reserved in held[:2]:
        budget.release(reserved)
    assert not memory.check() and trims == []  # 60 MB back, and one still in flight
    budget.release(held[2])
    assert memory.check() and trims == [1]
    assert memory.check() and trims == [1, 1]  # once more, the process found idle: what lived past the release
    assert memory.check() and trims == [1, 1, 1]  # idle for 3 checks in a row: the idle spell's
    assert not memory.check() and trims == [1, 1, 1]  # nothing new since


def test_a_burst_trim_while_requests_still_come_waits_for_the_first_idle_check():
    budget = BodyBudget(256 * MB, 32 * MB)
    memory, trims = watched(budget)
    for _ in range(3):
        served(budget, 30 * MB)
    assert memory.check() and trims == [1]
    for _ in range(5):  # small requests go on: the process is not idle, so no second trim yet
        served(budget, 1024)
        assert not memory.check()
    assert memory.check() and trims == [1, 1]


def test_usual_traffic_never_trims():
    budget = BodyBudget(256 * MB, 32 * MB)
    memory, trims = watched(budget)
    for _ in range(2000):
        served(budget, 900 * 1024)  # 1.8 GB of agent-sized bodies
    assert not memory.check() and trims == []


def kept_bodies(budget: BodyBudget) -> ResentBodies:
    kept = ResentBodies(32 * MB, min_bytes=0)
    budget.kept.add(kept)
    body = {"messages": [{"role": "user", "content": "x" * 1000}]}
    assert kept.keep(b'{"messages":[{"role":"user","content":"' + b"x" * 1000 + b'"}]}', body, "messages", 64, None, None) is not None
    return kept


def test_kept_bodies_are_forgotten_and_trimmed_once_the_process_is_idle():
    budget = BodyBudget(256 * MB, 32 * MB)
    memory, trims = watched(budget)
    kept = kept_bodies(budget)
    served(budget, 2 * MB)
    assert not memory.check()  # a request since the last check: not idle
    assert not memory.check() and not memory.check() and len(kept) == 1 and trims == []
    assert memory.check() and len(kept) == 0 and kept.held == 0 and trims == [1]  # idle for 3 checks in a row
    assert not memory.check() and trims == [1]  # nothing left to forget


def test_a_request_in_flight_or_admitted_keeps_the_bodies():
    budget = BodyBudget(256 * MB, 32 * MB)
    memory, trims = watched(budget)
    kept = kept_bodies(budget)
    for _ in range(2):
        memory.check()
    served(budget, 1 * MB)  # the idle count starts again
    for _ in range(3):
        memory.check()
    assert len(kept) == 1
    reserved = budget.reserve(Request(1 * MB))  # a long answer streaming: in flight for many checks
    assert isinstance(reserved, int)
    for _ in range(10):
        memory.check()
    assert len(kept) == 1 and trims == []
    budget.release(reserved)
    for _ in range(4):
        memory.check()
    assert len(kept) == 0 and trims == [1]


def test_going_idle_trims_once_a_spell_even_with_nothing_kept():
    """What large upstream answers left in the heap goes back too: one trim as each idle spell starts."""
    budget = BodyBudget(256 * MB, 32 * MB)
    memory, trims = watched(budget)
    served(budget, 1024)
    for _ in range(10):
        memory.check()
    assert trims == [1]
    served(budget, 1024)
    for _ in range(10):
        memory.check()
    assert trims == [1, 1]


def test_glibc_has_the_trim():
    assert malloc_trim() is not None  # the machine CI runs on: Linux with glibc


def test_going_idle_forgets_what_the_translations_keep_of_the_conversations():
    budget = BodyBudget(256 * MB, 32 * MB)
    memory, _ = watched(budget)
    views: ElementMemo[Any] = ElementMemo()
    made: list[Any] = []
    conversation = [{"role": "user", "content": "fix the bug"}, {"role": "assistant", "content": "done"}]
    views.map(conversation, made.append)
    served(budget, 2 * MB)
    assert not memory.check()  # a request since the last check: not idle
    assert not memory.check() and not memory.check()
    views.map(conversation, made.append)
    assert len(made) == 2  # still kept: not yet idle for 3 checks in a row
    assert memory.check()  # idle for 3 checks in a row
    views.map(conversation, made.append)
    assert len(made) == 4  # forgotten: made again


def test_an_idle_spell_trims_at_its_second_check_when_the_process_grew_since_the_last_trim():
    """What no body budget sees (large upstream answers: 38 of 50 MB left 205 MiB of an idle 82) goes
    back as the process goes idle, not at the idle spell's trim 30 s later; usual growth does not trim."""
    budget = BodyBudget(256 * MB, 32 * MB)
    memory, trims = watched(budget)
    memory.idle_checks = 30
    resident = [80 * MB]
    memory.resident = lambda: resident[0]
    memory.trimmed_at = 80 * MB

    def trim() -> None:  # gives back what is free
        trims.append(1)
        resident[0] = 82 * MB

    memory.trim = trim
    served(budget, 1024)
    resident[0] = 140 * MB  # grown by less than a burst's 64 MB: kept
    for _ in range(5):
        memory.check()
    assert trims == []
    served(budget, 1024)
    resident[0] = 205 * MB  # answers that grew it by more
    assert not memory.check()  # the request's own check: not idle
    assert not memory.check()  # the spell's first idle check: what the answers held may live still
    assert memory.check() and trims == [1]  # its second
    assert memory.trimmed_at == 82 * MB
    for _ in range(10):
        memory.check()
    assert trims == [1]  # once: nothing grew since


def test_the_resident_size_is_read_where_proc_has_it():
    from router.server.memory import resident_bytes

    size = resident_bytes()
    assert size is None or 1 * MB < size < 64 * 1024 * MB
