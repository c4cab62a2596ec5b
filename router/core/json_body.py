"""What the proxy accepts as a JSON body, and how numbers stay as the client wrote them. Pure.

Two problems the fast parser (orjson) leaves to us:

* **Nesting.** orjson reads up to 1024 levels but writes at most 254, and the
  body is written again (to the upstream, to hash it). So the edge refuses
  anything deeper than ``server.max_json_depth`` (the body itself is level 1):
  every body accepted can be serialised again.
* **Numbers.** orjson turns an integer beyond 64 bits into a float
  (``123456789012345678901234567890`` → ``1.2345678901234568e+29``), an
  underflowing literal into ``0.0`` (``1e-400``) and refuses one that overflows
  (``1e400``). The proxy must pass numbers through untouched, so a body with a
  value that *might* have been changed is parsed again, by the standard
  library, keeping such literals as ``orjson.Fragment`` (their exact bytes,
  written back verbatim). Only suspicious bodies pay for the second parse: the
  depth walk, which visits every container anyway, flags floats of 0.0 or of
  a magnitude beyond 64-bit integers.

Left as is: an integer ``-0`` goes out as ``0`` (the same integer; telling it
apart would cost a scan of every body for a rare literal).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

import orjson

from router.core.frozen import frozen

# Floats this large may be integers orjson could not hold (it converts those to float).
_INT_RANGE = 2.0**63


@frozen
class JsonShape:
    too_deep: bool
    numbers_suspect: bool


def json_shape(value: Any, max_depth: int) -> JsonShape:
    """Walk the containers once: deeper than ``max_depth``? any float orjson may have altered?

    Level by level: one list per nesting level instead of a (node, depth) tuple
    per container, and strings (most of a chat body's values) are passed over
    first; ~30 % fewer instructions on an agent transcript than a stack of tuples.
    """
    if type(value) is not dict and type(value) is not list:
        return JsonShape(False, type(value) is float and (value == 0.0 or not -_INT_RANGE < value < _INT_RANGE))
    suspect = False
    level, depth = [value], 1
    while level:
        if depth > max_depth:
            return JsonShape(True, suspect)
        below: list[Any] = []
        push = below.append
        for node in level:
            for child in node.values() if type(node) is dict else node:
                kind = type(child)
                if kind is str:
                    continue
                if kind is dict or kind is list:
                    push(child)
                elif kind is float and (child == 0.0 or not -_INT_RANGE < child < _INT_RANGE):
                    suspect = True
        level, depth = below, depth + 1
    return JsonShape(False, suspect)


def _faithful_int(literal: str) -> int | orjson.Fragment:
    if len(literal) <= 18:  # always within 64 bits
        return int(literal)
    if len(literal) <= 20 and -(2**63) <= (value := int(literal)) < 2**64:
        return value
    return orjson.Fragment(literal.encode())


def _faithful_float(literal: str) -> float | orjson.Fragment:
    value = float(literal)
    mantissa = literal.lower().partition("e")[0]
    if value in (float("inf"), float("-inf")) or (value == 0.0 and mantissa.strip("-+0.")):
        return orjson.Fragment(literal.encode())
    return value


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def faithful_loads(raw: bytes | str) -> Any:
    """Parse JSON keeping every number orjson would alter as its original literal (an ``orjson.Fragment``).

    Raises ``ValueError`` for what orjson refuses too: invalid JSON, NaN and Infinity, and a lone
    surrogate (``"\\ud800"``), which the standard library reads but orjson cannot write again — a
    body the proxy accepts must be one it can send on.
    """
    value = json.loads(raw, parse_int=_faithful_int, parse_float=_faithful_float, parse_constant=_no_constants)
    try:
        orjson.dumps(value)
    except TypeError as exc:  # "str is not valid UTF-8: surrogates not allowed"
        raise ValueError(f"a string holds a lone surrogate ({exc})") from None
    return value


def loads(raw: bytes | str) -> Any:
    """JSON the proxy wrote itself from a client's body (an upstream body, a translated event that
    echoes the request), read back: orjson's parse, or — when the body held a number no double
    holds, which orjson refuses (``1e400``) — :func:`faithful_loads`. ``orjson.JSONDecodeError`` (a
    ``ValueError``) for what is no JSON."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "infinity" not in str(exc):
            raise
        return faithful_loads(raw)


def json_object(raw: bytes | str) -> dict[str, Any] | None:
    """``raw`` read as a JSON object; None for what is no JSON or JSON of another kind (an event, a
    field that may hold an object)."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def nests_within(container: dict[str, Any] | list[Any], levels: int) -> bool:
    """``container`` (a dict or list) nests at most ``levels`` levels (itself the first) and holds no float.

    What a wire's fused check (:data:`BodyCheck`) proves of a part of the body it leaves out of
    the depth walk: such a part cannot change the walk's answer (too deep? a number to parse
    again?). Any float at all makes it unproven (the walk then judges it), not just a suspect one.
    """
    for child in container.values() if type(container) is dict else container:
        kind = type(child)
        if kind is str or kind is int or kind is bool or child is None:
            continue
        if (kind is dict or kind is list) and levels > 1 and nests_within(child, levels - 1):
            continue
        return False
    return True


class Checked(Protocol):
    """What a wire's check of a parsed body found (``walk``: what the depth walk must still cover;
    ``facts``: what a later body that resends this one's elements resumes its check from, None: nothing)."""

    @property
    def walk(self) -> Any: ...

    @property
    def facts(self) -> Any: ...


# check(body, max_depth, resumed): resumed is a router.core.resent_prefix.Resumed, or None
BodyCheck = Callable[[Any, int, Any], Checked]
