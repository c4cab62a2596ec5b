"""Validation of the configured middleware order: the check itself, and its one call at every entry point."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from bench.harness import ROOT, free_port
from router.cli import main
from router.config import parse_config
from router.contract.chain import ChainError, validate_order
from router.server import registry as registry_module
from router.server.app import create_app
from router.server.live import LIVE_KEY
from router.server.registry import REGISTRY as PROXY
from tests.support.config import chat_body
from tests.support.processes import router, write_config


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
    registry = PROXY.by_name
    assert PROXY.chain(["capability-gate", "upstream-forward"]) == (registry["capability-gate"], registry["upstream-forward"])
    assert [cls.__name__ for cls in PROXY.chain(["capability-gate", "upstream-forward"])] == ["CapabilityGate", "UpstreamForward"]


def test_the_real_registry_resolves_the_full_default_order_stage_by_stage():
    resolved = PROXY.chain(list(PROXY.default_chain))
    assert [cls.name for cls in resolved] == list(PROXY.default_chain)
    assert [cls.__name__ for cls in resolved] == [
        "SessionFingerprint", "ClassificationCache", "Classifier", "PinchRelevance", "PinchPrune", "CapabilityGate", "UpstreamForward"
    ]


def test_the_real_gate_cannot_come_after_forward():
    with pytest.raises(ChainError, match="requires 'route'"):
        PROXY.chain(["session-fingerprint", "upstream-forward"])


def test_each_order_is_checked_once_and_later_callers_trust_it(monkeypatch):
    checks: list[tuple[str, ...]] = []

    def counting(names, by_name):
        checks.append(tuple(names))
        return validate_order(names, by_name)

    monkeypatch.setattr(registry_module, "validate_order", counting)
    registry_module._checked.cache_clear()
    good = ["session-fingerprint", "capability-gate", "upstream-forward"]
    assert PROXY.chain(good) == PROXY.chain(tuple(good))
    for _ in range(2):  # a bad order is not remembered as good: every caller gets the error
        with pytest.raises(ChainError, match="must end with"):
            PROXY.chain(["capability-gate"])
    assert checks == [tuple(good), ("capability-gate",), ("capability-gate",)]
    registry_module._checked.cache_clear()


# --- a bad order at each entry point: one clear error naming the stage, nothing served ---

BAD_ORDER = ["classification-cache", "session-fingerprint", "capability-gate", "upstream-forward"]
BAD_ORDER_ERROR = (
    "middlewares: stage 'classification-cache' requires 'session'; 'session-fingerprint' provides it but comes later\n"
    "middlewares: stage 'classification-cache' reads 'session_state', but 'session-fingerprint', which provides it, comes after it"
)


def bad_order_config(tmp_path: Path) -> Path:
    return write_config(tmp_path, free_port(), free_port(), middlewares=BAD_ORDER)


def test_check_config_reports_a_bad_order_once_and_exits_2(tmp_path, capsys):
    path = bad_order_config(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(["check-config", "--config", str(path)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err == f"pinch-router: invalid configuration in {path}:\n{BAD_ORDER_ERROR}\n"


@pytest.mark.system  # starts a process
def test_serve_reports_a_bad_order_once_before_listening_and_exits_2(tmp_path):
    path = bad_order_config(tmp_path)
    process = router(["serve", "--config", str(path)])
    try:
        _, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    assert process.returncode == 2
    assert err.decode() == f"pinch-router: invalid configuration in {path}:\n{BAD_ORDER_ERROR}\n"


async def test_the_app_refuses_a_bad_order_given_to_it_directly():
    raw = yaml.safe_load((ROOT / "config.yaml").read_text())
    raw["middlewares"] = BAD_ORDER
    with pytest.raises(ChainError) as info:
        await create_app(parse_config(raw, environ={}))
    assert str(info.value) == BAD_ORDER_ERROR


async def test_a_reload_reports_a_bad_order_once_and_keeps_serving(proxy, mock_upstream, tmp_path):
    _, url = mock_upstream
    path = tmp_path / "config.yaml"
    raw = {
        "middlewares": ["session-fingerprint", "capability-gate", "upstream-forward"],
        "providers": {"mock": {"base_url": url}},
        "models": [{"name": "m", "provider": "mock", "upstream_model": "up", "context_window": 10_000, "max_output_tokens": 100, "tiers": [1, 2, 3]}],
        "decision_log": {"path": ":memory:"},
    }
    path.write_text(yaml.safe_dump(raw))
    client = await proxy(parse_config(raw, environ={}))
    path.write_text(yaml.safe_dump({**raw, "middlewares": BAD_ORDER}))
    result = client.server.app[LIVE_KEY].reload(path)
    assert not result.ok and result.error == BAD_ORDER_ERROR
    assert (await client.post("/v1/chat/completions", json=chat_body("hi"))).status == 200


def test_every_context_slot_has_one_writer_and_only_the_short_circuit_response_is_shared():
    writers: dict[str, list[str]] = {}
    for stage in PROXY.by_name.values():
        for slot in stage.provides:
            writers.setdefault(slot, []).append(stage.name)
    shared = {slot: names for slot, names in writers.items() if len(names) > 1}
    assert set(shared) == {"response"}  # a stage that may refuse declares it; the first to set it ends the chain
    assert sorted(shared["response"]) == ["capability-gate", "classifier", "upstream-forward"]
