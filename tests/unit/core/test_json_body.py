"""json_shape: how deep a parsed body nests (the body itself is level 1) and whether a float may have been altered."""

from __future__ import annotations

from typing import Any

import pytest

from router.core.json_body import JsonShape, json_shape


def nested(levels: int, leaf: Any = 1) -> Any:
    """``levels`` containers, alternating lists and objects, around ``leaf``."""
    value = leaf
    for i in range(levels):
        value = [value] if i % 2 else {"k": value}
    return value


@pytest.mark.parametrize(
    ("value", "max_depth", "expected"),
    [
        ("a string", 8, JsonShape(False, False)),
        (nested(8), 8, JsonShape(False, False)),
        (nested(9), 8, JsonShape(True, False)),
        ({"messages": [{"role": "user", "content": "hi"}], "deep": nested(8)}, 8, JsonShape(True, False)),  # the body + 8 levels
        ({"messages": [{"role": "user", "content": "hi"}], "deep": nested(7)}, 8, JsonShape(False, False)),
        ({"temperature": 0.0}, 8, JsonShape(False, True)),  # may have been 1e-400
        ({"x": [1, 2, {"y": 1.2345678901234568e29}]}, 8, JsonShape(False, True)),  # may have been a big integer
        ({"x": [1, 2, {"y": 0.5, "z": -3}]}, 8, JsonShape(False, False)),
        (0.0, 8, JsonShape(False, True)),
        ([], 1, JsonShape(False, False)),
        ([[]], 1, JsonShape(True, False)),
    ],
)
def test_json_shape(value, max_depth, expected):
    assert json_shape(value, max_depth) == expected


def test_a_lone_surrogate_is_refused_as_orjson_refuses_it():
    import pytest

    from router.core.json_body import faithful_loads

    with pytest.raises(ValueError, match="lone surrogate"):
        faithful_loads(b'{"x": 1e400, "text": "\\ud800"}')  # the standard library alone would take it
    assert faithful_loads(b'{"x": 1e400, "text": "\\ud83d\\ude00"}')["text"] == "\U0001f600"  # a pair is a character

