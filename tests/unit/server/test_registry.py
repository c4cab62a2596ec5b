"""The stage registry builds each stage with the dependencies its constructor names, and only those."""

from __future__ import annotations

import time
from typing import Any, ClassVar

import pytest

from router.server.registry import STAGES, OFFERED_NAMES, stage_builder, wanted
from router.state.session_store import LocalStore
from tests.support.config import make_config


@pytest.mark.parametrize("stage", STAGES, ids=[s.name for s in STAGES])
def test_every_stage_names_only_offered_dependencies_and_never_takes_them_all(stage: Any) -> None:
    names = set(wanted(stage))
    assert names <= OFFERED_NAMES
    assert names < OFFERED_NAMES  # a stage that took every dependency would be the old bag again


class Probe:
    """A stage that records what it was built with."""

    name: ClassVar[str] = "probe"
    section: ClassVar[str | None] = "pinch"
    built: ClassVar[dict[str, Any]] = {}

    def __init__(self, *, settings: Any, clock: Any) -> None:
        Probe.built = {"settings": settings, "clock": clock}


def test_a_stage_gets_its_section_as_settings_and_nothing_it_did_not_name() -> None:
    config = make_config()
    build = stage_builder(config, http=None, clock=time.monotonic, state=LocalStore())  # type: ignore[arg-type]
    build(Probe)  # type: ignore[arg-type]
    assert Probe.built == {"settings": config.pinch, "clock": time.monotonic}


def test_a_stage_asking_for_what_is_not_offered_is_refused_by_name() -> None:
    class Greedy(Probe):
        name: ClassVar[str] = "greedy"

        def __init__(self, *, settings: Any, config: Any) -> None: ...

    build = stage_builder(make_config(), http=None, clock=time.monotonic, state=LocalStore())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="stage 'greedy' asks for config: not offered"):
        build(Greedy)  # type: ignore[arg-type]
