"""``@frozen`` makes the same frozen, slotted dataclass as ``dataclass(frozen=True, slots=True)``, with its own ``__init__``."""

from __future__ import annotations

import dataclasses
import inspect
import pickle

import pytest

from router.core.frozen import frozen
from router.core.results import Route, StageRecord


@frozen
class Reading:
    sensor: str
    value: float
    unit: str = "ms"
    tags: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, slots=True)
class GeneratedReading:
    sensor: str
    value: float
    unit: str = "ms"
    tags: list[str] = dataclasses.field(default_factory=list)


def test_the_init_is_not_the_generated_one_and_takes_the_same_parameters() -> None:
    assert "_set_sensor" in Reading.__init__.__code__.co_freevars  # through the slot's descriptor
    assert "_set_sensor" not in GeneratedReading.__init__.__code__.co_freevars
    ours = [(p.name, p.kind, p.default) for p in inspect.signature(Reading).parameters.values()]
    theirs = [(p.name, p.kind, p.default) for p in inspect.signature(GeneratedReading).parameters.values()]
    assert [p[:2] for p in ours] == [p[:2] for p in theirs]
    assert ours[2][2] == "ms" and ours[0][2] is inspect.Parameter.empty
    assert repr(ours[3][2]) == "<factory>"


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        (("a", 1.5), {}, ("a", 1.5, "ms", [])),
        (("a", 1.5, "s"), {}, ("a", 1.5, "s", [])),
        ((), {"value": 2.0, "sensor": "b", "tags": ["x"]}, ("b", 2.0, "ms", ["x"])),
    ],
)
def test_fields_are_set_from_arguments_and_defaults(args: tuple, kwargs: dict, expected: tuple) -> None:
    reading = Reading(*args, **kwargs)
    assert (reading.sensor, reading.value, reading.unit, reading.tags) == expected
    assert repr(reading) == repr(GeneratedReading(*args, **kwargs)).replace("GeneratedReading", "Reading")


def test_a_factory_gives_each_instance_its_own_value() -> None:
    first, second = Reading("a", 1.0), Reading("a", 1.0)
    assert first.tags == [] and first.tags is not second.tags


def test_missing_or_unknown_arguments_fail_as_with_dataclass() -> None:
    with pytest.raises(TypeError):
        Reading("a")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Reading("a", 1.0, colour="red")  # type: ignore[call-arg]


def test_instances_stay_immutable_hashable_comparable_and_picklable() -> None:
    reading = Reading("a", 1.5, "s", ())  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        reading.value = 2.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del reading.value  # type: ignore[misc]
    assert reading == Reading("a", 1.5, "s", ())  # type: ignore[arg-type]
    assert hash(reading) == hash(Reading("a", 1.5, "s", ()))  # type: ignore[arg-type]
    assert dataclasses.replace(reading, value=3.0) == Reading("a", 3.0, "s", ())  # type: ignore[arg-type]
    assert pickle.loads(pickle.dumps(reading)) == reading
    assert not hasattr(reading, "__dict__") and Reading.__slots__ == GeneratedReading.__slots__
    assert [f.name for f in dataclasses.fields(Reading)] == ["sensor", "value", "unit", "tags"]
    assert Reading.__match_args__ == ("sensor", "value", "unit", "tags")


def test_the_request_path_results_are_frozen_slotted_dataclasses() -> None:
    record = StageRecord("classifier", "ok", 0.5)  # type: ignore[arg-type]
    assert dataclasses.is_dataclass(record) and record.detail == ""
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.ms = 1.0  # type: ignore[misc]
    assert Route((), 1, False).rejected == ()


@pytest.mark.parametrize(
    "spec",
    [
        "post_init",
        "kw_only",
        "init_false",
    ],
)
def test_what_it_cannot_build_the_same_way_is_refused_when_the_class_is_made(spec: str) -> None:
    with pytest.raises(TypeError, match="use @dataclass"):
        if spec == "post_init":

            @frozen
            class WithPostInit:
                a: int

                def __post_init__(self) -> None: ...

        elif spec == "kw_only":

            @frozen
            class KeywordOnly:
                a: int = dataclasses.field(kw_only=True)

        else:

            @frozen
            class NotInInit:
                a: int = dataclasses.field(default=0, init=False)


def test_a_subclass_sets_the_fields_it_inherits_too() -> None:
    @frozen
    class Labelled(Reading):
        label: str = "p50"

    labelled = Labelled("loop", 1.5, label="p99")
    assert (labelled.sensor, labelled.value, labelled.unit, labelled.tags, labelled.label) == ("loop", 1.5, "ms", [], "p99")
    with pytest.raises(dataclasses.FrozenInstanceError):
        labelled.sensor = "other"  # type: ignore[misc]
