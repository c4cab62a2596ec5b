"""The session classification store: staleness, no renewal on read, LRU bound. Time is passed in."""

from __future__ import annotations

import pytest

from router.core.session_cache import CachedClassification, classification_space, fresh
from router.core.session_state import MemorySessionState

STALE_AFTER = 1200.0  # 20 minutes


class Store:
    """The classification space in an in-memory session state, read and written as the stage does."""

    def __init__(self, max_entries: int) -> None:
        self.state, self.space = MemorySessionState(), classification_space(max_entries)

    def put(self, key: str, category: str, tier: int, now: float) -> None:
        self.state.put(self.space, key, CachedClassification(category, tier, now), now)

    def get(self, key: str, now: float, staleness_seconds: float) -> CachedClassification | None:
        return fresh(self.state.get(self.space, key, now), now, staleness_seconds)

    def __len__(self) -> int:
        return self.state.size(self.space)


def store(max_entries: int = 100) -> Store:
    return Store(max_entries)


def test_unknown_session_is_a_miss() -> None:
    assert store().get("s1", now=0.0, staleness_seconds=STALE_AFTER) is None


def test_stored_classification_is_a_hit_within_the_window() -> None:
    cache = store()
    cache.put("s1", "debugging", 3, now=100.0)
    assert cache.get("s1", now=100.0 + STALE_AFTER, staleness_seconds=STALE_AFTER) == CachedClassification("debugging", 3, 100.0)


def test_sessions_do_not_share_entries() -> None:
    cache = store()
    cache.put("s1", "debugging", 3, now=0.0)
    assert cache.get("s2", now=1.0, staleness_seconds=STALE_AFTER) is None


@pytest.mark.parametrize("age", [STALE_AFTER + 0.001, STALE_AFTER * 10])
def test_entry_older_than_the_window_is_a_miss(age: float) -> None:
    cache = store()
    cache.put("s1", "debugging", 3, now=0.0)
    assert cache.get("s1", now=age, staleness_seconds=STALE_AFTER) is None


def test_reads_never_renew_an_entry() -> None:
    cache = store()
    cache.put("s1", "debugging", 3, now=0.0)
    for minute in range(1, 20):  # a busy session reads every minute
        assert cache.get("s1", now=minute * 60.0, staleness_seconds=STALE_AFTER) is not None
    assert cache.get("s1", now=STALE_AFTER + 1, staleness_seconds=STALE_AFTER) is None


def test_next_put_overwrites_a_stale_entry_and_restarts_its_window() -> None:
    cache = store()
    cache.put("s1", "debugging", 3, now=0.0)
    cache.put("s1", "docs_writing", 1, now=STALE_AFTER + 5)
    assert cache.get("s1", now=STALE_AFTER + 6, staleness_seconds=STALE_AFTER) == CachedClassification(
        "docs_writing", 1, STALE_AFTER + 5
    )
    assert len(cache) == 1


def test_size_is_bounded_by_evicting_the_least_recently_used() -> None:
    cache = store(max_entries=2)
    cache.put("old", "debugging", 1, now=0.0)
    cache.put("mid", "debugging", 2, now=1.0)
    assert cache.get("old", now=2.0, staleness_seconds=STALE_AFTER) is not None  # "old" is now the most recent
    cache.put("new", "debugging", 3, now=3.0)
    assert len(cache) == 2
    assert cache.get("mid", now=4.0, staleness_seconds=STALE_AFTER) is None
    assert cache.get("old", now=4.0, staleness_seconds=STALE_AFTER) is not None
    assert cache.get("new", now=4.0, staleness_seconds=STALE_AFTER) is not None


def test_overwriting_a_key_does_not_grow_the_store() -> None:
    cache = store(max_entries=2)
    for now in range(5):
        cache.put("s1", "debugging", 1, now=float(now))
    cache.put("s2", "debugging", 1, now=5.0)
    assert len(cache) == 2


@pytest.mark.parametrize("max_entries", [0, -1])
def test_store_must_hold_at_least_one_entry(max_entries: int) -> None:
    with pytest.raises(ValueError, match="max_entries"):
        classification_space(max_entries)
