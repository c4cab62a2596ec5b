"""The session-state contract: TTL set by puts only, versions, per-space LRU bound, codecs. Time is passed in."""

from __future__ import annotations

import pytest

from router.core.session_cache import CachedClassification
from router.core.session_state import (
    UNREAD,
    MemorySessionState,
    SessionReads,
    SessionSnapshot,
    Space,
)


def text_space(name: str = "notes", version: int = 1, ttl: float = 60.0, max_entries: int = 100) -> Space[str]:
    return Space(name, version, ttl, max_entries, str.encode, bytes.decode)


def test_a_value_is_read_back_until_its_time_to_live_runs_out() -> None:
    state, space = MemorySessionState(), text_space(ttl=60.0)
    state.put(space, "s1", "hello", now=100.0)
    assert state.get(space, "s1", now=159.9) == "hello"
    assert state.get(space, "s1", now=160.0) is None
    assert state.size(space) == 0  # an expired value is dropped when found


def test_reads_never_extend_the_time_to_live_but_puts_do() -> None:
    state, space = MemorySessionState(), text_space(ttl=60.0)
    state.put(space, "s1", "v1", now=0.0)
    for second in range(10, 60, 10):
        assert state.get(space, "s1", now=float(second)) == "v1"
    assert state.get(space, "s1", now=60.0) is None
    state.put(space, "s1", "v2", now=61.0)
    assert state.get(space, "s1", now=120.0) == "v2"


def test_spaces_do_not_see_each_others_keys() -> None:
    state = MemorySessionState()
    notes, other = text_space("notes"), text_space("other")
    state.put(notes, "s1", "note", now=0.0)
    assert state.get(other, "s1", now=1.0) is None


def test_a_value_stored_under_another_schema_version_is_a_miss() -> None:
    state = MemorySessionState()
    state.put(text_space(version=1), "s1", "old shape", now=0.0)
    assert state.get(text_space(version=2), "s1", now=1.0) is None


def test_each_space_is_bounded_by_evicting_its_least_recently_used_key() -> None:
    state = MemorySessionState()
    small, big = text_space("small", max_entries=2), text_space("big", max_entries=10)
    state.put(big, "b", "stays", now=0.0)
    state.put(small, "old", "1", now=0.0)
    state.put(small, "mid", "2", now=1.0)
    assert state.get(small, "old", now=2.0) == "1"  # a read makes it the most recent
    state.put(small, "new", "3", now=3.0)
    assert [state.get(small, k, now=4.0) for k in ("old", "mid", "new")] == ["1", None, "3"]
    assert state.get(big, "b", now=4.0) == "stays"  # another space's bound is its own


@pytest.mark.parametrize("ttl, max_entries", [(0.0, 1), (-1.0, 1), (1.0, 0)])
def test_a_space_needs_a_positive_lifetime_and_bound(ttl: float, max_entries: int) -> None:
    with pytest.raises(ValueError, match="ttl_seconds > 0 and max_entries > 0"):
        text_space(ttl=ttl, max_entries=max_entries)


def test_a_cached_classification_survives_its_codec() -> None:
    value = CachedClassification("debugging", 3, 12.5)
    assert CachedClassification.decode(value.encode()) == value


def test_the_reads_stages_register_are_one_per_space_each_with_its_own_key() -> None:
    reads = SessionReads()
    reads.add(text_space("classification"), lambda session: f"v1:{session}")
    reads.add(text_space("pinch"))
    reads.add(text_space("pinch"))  # the gate and pinch both read the escalation record, say
    assert [(space.name, key) for space, key in reads.of("s1")] == [("classification", "v1:s1"), ("pinch", "s1")]
    assert SessionReads().of("s1") == []


def test_a_snapshot_tells_a_key_read_and_absent_from_a_key_not_read() -> None:
    notes, other = text_space("notes"), text_space("other")
    snapshot = SessionSnapshot.of([(notes, "s1"), (notes, "s2")], ["kept", None])
    assert snapshot.value(notes, "s1") == "kept"
    assert snapshot.value(notes, "s2") is None  # read: nothing there
    assert snapshot.value(notes, "s3") is UNREAD
    assert snapshot.value(other, "s1") is UNREAD
    assert snapshot.value(text_space("notes", version=2), "s1") is UNREAD  # another schema version was not read
