"""Start-up validation of the configured middleware order."""

from __future__ import annotations

import pytest

from router.chain import ChainError, validate_order
from router.config import DEFAULT_CHAIN
from router.registry import stage_registry


def fake_stage(stage_name: str, requires=(), reads=(), provides=()):
    """A stage class carrying only the metadata order validation reads."""
    return type(
        stage_name,
        (),
        {
            "name": stage_name,
            "requires": frozenset(requires),
            "reads": frozenset(reads),
            "provides": frozenset(provides),
        },
    )


REGISTRY = {
    "session-fingerprint": fake_stage("session-fingerprint", requires={"view"}, provides={"session"}),
    "classification-cache": fake_stage("classification-cache", requires={"session"}, provides={"classification"}),
    "pinch-prune": fake_stage("pinch-prune", provides={"pinch", "rewrites"}),
    "capability-gate": fake_stage("capability-gate", reads={"classification", "pinch"}, provides={"route"}),
    "upstream-forward": fake_stage("upstream-forward", requires={"route"}, provides={"response"}),
}


def test_a_sound_order_returns_the_stage_classes_in_order():
    order = ["session-fingerprint", "classification-cache", "pinch-prune", "capability-gate", "upstream-forward"]
    assert [s.name for s in validate_order(order, REGISTRY)] == order


@pytest.mark.parametrize(
    ("order", "message"),
    [
        (["nonsense", "capability-gate", "upstream-forward"], "middlewares[0]: unknown stage 'nonsense'"),
        (["capability-gate", "capability-gate", "upstream-forward"], "middlewares[1]: stage 'capability-gate' appears more than once"),
        (["capability-gate"], "must end with 'upstream-forward', but it is missing"),
        (["upstream-forward", "capability-gate"], "must end with 'upstream-forward', but it is at middlewares[0]"),
        (
            ["classification-cache", "session-fingerprint", "capability-gate", "upstream-forward"],
            "stage 'classification-cache' requires 'session'; 'session-fingerprint' provides it but comes later",
        ),
        (["classification-cache", "capability-gate", "upstream-forward"], "requires 'session'; no stage in the chain provides it"),
        (["upstream-forward"], "stage 'upstream-forward' requires 'route'"),
        (
            ["capability-gate", "pinch-prune", "upstream-forward"],
            "stage 'capability-gate' reads 'pinch', but 'pinch-prune', which provides it, comes after it",
        ),
    ],
)
def test_a_broken_order_is_rejected_naming_the_stage_and_field(order, message):
    with pytest.raises(ChainError) as info:
        validate_order(order, REGISTRY)
    assert message in str(info.value)


def test_the_real_registry_resolves_the_minimal_chain_to_the_gate_and_forward():
    registry = stage_registry()
    assert validate_order(["capability-gate", "upstream-forward"], registry) == [registry["capability-gate"], registry["upstream-forward"]]
    assert [cls.__name__ for cls in validate_order(["capability-gate", "upstream-forward"], registry)] == ["CapabilityGate", "UpstreamForward"]


def test_the_real_registry_resolves_the_full_default_order_stage_by_stage():
    resolved = validate_order(list(DEFAULT_CHAIN), stage_registry())
    assert [cls.name for cls in resolved] == list(DEFAULT_CHAIN)
    assert [cls.__name__ for cls in resolved] == [
        "SessionFingerprint", "ClassificationCache", "Classifier", "PinchRelevance", "PinchPrune", "CapabilityGate", "UpstreamForward"
    ]


def test_the_real_gate_cannot_come_after_forward():
    with pytest.raises(ChainError, match="requires 'route'"):
        validate_order(["session-fingerprint", "upstream-forward"], stage_registry())


def test_every_context_slot_has_one_writer_and_only_the_short_circuit_response_is_shared():
    writers: dict[str, list[str]] = {}
    for stage in stage_registry().values():
        for slot in stage.provides:
            writers.setdefault(slot, []).append(stage.name)
    shared = {slot: names for slot, names in writers.items() if len(names) > 1}
    assert set(shared) == {"response"}  # a stage that may refuse declares it; the first to set it ends the chain
    assert sorted(shared["response"]) == ["capability-gate", "classifier", "upstream-forward"]
