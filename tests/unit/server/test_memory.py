"""When the process gives memory back: after a burst of large bodies, once it is over — never for usual traffic."""

from __future__ import annotations

from router.http.request_body import LARGE_BODY_BYTES, BodyBudget
from router.server.memory import MemoryReturn, malloc_trim

MB = 1024 * 1024


class Request:
    def __init__(self, size: int) -> None:
        self.content_length = size


def watched(budget: BodyBudget) -> tuple[MemoryReturn, list[int]]:
    memory = MemoryReturn(budget, after_bytes=64 * MB, quiet_bytes=LARGE_BODY_BYTES)
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
    assert not memory.check() and trims == [1]  # nothing new since


def test_usual_traffic_never_trims():
    budget = BodyBudget(256 * MB, 32 * MB)
    memory, trims = watched(budget)
    for _ in range(2000):
        served(budget, 900 * 1024)  # 1.8 GB of agent-sized bodies
    assert not memory.check() and trims == []


def test_glibc_has_the_trim():
    assert malloc_trim() is not None  # the machine CI runs on: Linux with glibc
