"""Escalation: N failed outcomes within the window move a session up one tier."""

from __future__ import annotations

from router.core.escalation import EscalationRecord
from router.state.escalation import SessionEscalation
from router.state.session_store import LocalStore

TIERS = [1, 2, 3]


def tracker() -> SessionEscalation:
    return SessionEscalation(LocalStore(), failures=3, window_seconds=100)


async def test_fewer_failures_than_the_threshold_do_nothing():
    t = tracker()
    await t.record_outcome("s", False, 0)
    await t.record_outcome("s", False, 1)
    assert await t.escalate("s", 1, TIERS, 2) is None


async def test_the_threshold_moves_the_session_up_one_tier_only():
    t = tracker()
    for now in (0, 1, 2, 3, 4):
        await t.record_outcome("s", False, now)
    escalation = await t.escalate("s", 1, TIERS, 5)
    assert (escalation.from_tier, escalation.to_tier) == (1, 2)
    assert "after 5 failed outcomes" in escalation.reason()


async def test_successes_do_not_count_and_other_sessions_are_untouched():
    t = tracker()
    for now in (0, 1):
        await t.record_outcome("s", False, now)
    await t.record_outcome("s", True, 2)
    assert await t.escalate("s", 1, TIERS, 3) is None
    await t.record_outcome("s", False, 3)
    assert await t.escalate("s", 1, TIERS, 4) is not None
    assert await t.escalate("other", 1, TIERS, 4) is None


async def test_failures_spread_beyond_the_window_do_not_escalate():
    t = tracker()
    for now in (0, 60, 120):
        await t.record_outcome("s", False, now)
    assert await t.escalate("s", 1, TIERS, 121) is None


async def test_escalation_holds_for_the_window_then_ends():
    t = tracker()
    for now in (0, 1, 2):
        await t.record_outcome("s", False, now)
    assert await t.escalate("s", 2, TIERS, 50) is not None
    assert await t.escalate("s", 2, TIERS, 101) is not None  # the window counts from the triggering failure
    assert await t.escalate("s", 2, TIERS, 102.5) is None


async def test_the_top_tier_cannot_escalate():
    t = tracker()
    for now in (0, 1, 2):
        await t.record_outcome("s", False, now)
    assert await t.escalate("s", 3, TIERS, 3) is None
    assert await t.escalate(None, 1, TIERS, 3) is None


async def test_the_tracker_is_bounded():
    t = SessionEscalation(LocalStore(), failures=1, window_seconds=100, max_sessions=2)
    for i, session in enumerate(("a", "b", "c")):
        await t.record_outcome(session, False, i)
    assert await t.escalate("a", 1, TIERS, 3) is None
    assert await t.escalate("c", 1, TIERS, 3) is not None


def test_a_record_survives_the_codec_a_shared_store_uses():
    record = EscalationRecord().after_failure(1.5, 3, 100).after_failure(2.5, 3, 100)
    assert EscalationRecord.decode(record.encode()) == record == EscalationRecord((1.5, 2.5), 0.0)
