"""The per-provider circuit breaker's state machine, with plain numbers for time."""

from __future__ import annotations

from router.core.breaker import BreakerState, Down, Pass, ProviderBreakers

WINDOW = 30.0
PROBE = 10.0


def opened(at: float = 100.0) -> ProviderBreakers:
    breakers = ProviderBreakers()
    assert breakers.failed("p", at, WINDOW, "no answer within 1s") is True
    return breakers


def test_a_provider_nothing_is_known_against_is_closed_and_let_through():
    breakers = ProviderBreakers()
    assert breakers.admit("p", 0.0, PROBE) is Pass.CLOSED
    assert breakers.state("p", 0.0) is BreakerState.CLOSED
    assert breakers.down(0.0) == []


def test_no_answer_opens_it_and_every_request_skips_it_until_the_window_ends():
    breakers = opened(at=100.0)
    for now in (100.0, 115.0, 129.99):
        assert breakers.admit("p", now, PROBE) == Down("p", "no answer within 1s", since=100.0, retry_at=130.0)
        assert breakers.state("p", now) is BreakerState.OPEN
    assert breakers.admit("other", 110.0, PROBE) is Pass.CLOSED  # per provider
    assert breakers.down(110.0) == [Down("p", "no answer within 1s", 100.0, 130.0)]


def test_after_the_window_one_request_probes_while_the_others_still_skip():
    breakers = opened(at=100.0)
    assert breakers.state("p", 130.0) is BreakerState.HALF_OPEN
    assert breakers.down(130.0) == []  # nobody is skipping it yet
    assert breakers.admit("p", 130.0, PROBE) is Pass.PROBE
    assert breakers.admit("p", 131.0, PROBE) == Down("p", "no answer within 1s", 100.0, retry_at=140.0, probing=True)
    assert [d.provider for d in breakers.down(131.0)] == ["p"]


def test_the_providers_answer_closes_it():
    breakers = opened(at=100.0)
    assert breakers.admit("p", 130.0, PROBE) is Pass.PROBE
    assert breakers.answered("p") is True
    assert breakers.state("p", 131.0) is BreakerState.CLOSED
    assert breakers.admit("p", 131.0, PROBE) is Pass.CLOSED
    assert breakers.answered("p") is False  # already closed: no transition


def test_a_probe_without_an_answer_opens_it_for_another_window():
    breakers = opened(at=100.0)
    assert breakers.admit("p", 130.0, PROBE) is Pass.PROBE
    assert breakers.failed("p", 131.0, WINDOW, "no answer again") is True  # half-open → open: a transition
    assert breakers.admit("p", 132.0, PROBE) == Down("p", "no answer again", 131.0, 161.0)


def test_another_failure_while_open_extends_the_window_without_counting_as_an_opening():
    breakers = opened(at=100.0)
    assert breakers.failed("p", 110.0, WINDOW, "still nothing") is False
    assert isinstance(breakers.admit("p", 135.0, PROBE), Down)  # open until 140 now, not 130


def test_an_abandoned_probe_hands_its_turn_to_the_next_request():
    breakers = opened(at=100.0)
    assert breakers.admit("p", 130.0, PROBE) is Pass.PROBE
    breakers.abandoned("p")
    assert breakers.admit("p", 131.0, PROBE) is Pass.PROBE


def test_a_probe_that_never_reports_holds_the_provider_only_for_probe_seconds():
    breakers = opened(at=100.0)
    assert breakers.admit("p", 130.0, PROBE) is Pass.PROBE
    assert isinstance(breakers.admit("p", 139.0, PROBE), Down)
    assert breakers.admit("p", 140.0, PROBE) is Pass.PROBE


def test_a_window_of_zero_never_opens_it():
    breakers = ProviderBreakers()
    assert breakers.failed("p", 100.0, 0.0, "no answer") is False
    assert breakers.admit("p", 100.0, PROBE) is Pass.CLOSED


def test_down_lists_the_skipped_providers_by_name():
    breakers = ProviderBreakers()
    for name in ("zeta", "alpha"):
        breakers.failed(name, 100.0, WINDOW, "no answer")
    breakers.failed("short", 100.0, 1.0, "no answer")
    assert [d.provider for d in breakers.down(110.0)] == ["alpha", "zeta"]
