"""Every JSON field of a real body × every hostile value × every provider type (issue #42): no
answer ≥ 500, no dropped connection, every error small and in the wire's own format, and one
decision row per request.

Each client wire has one seed, a body a real agent sent with a tool round trip in it (opencode on
chat completions, Claude Code on the Messages API, Codex on the Responses API, Gemini CLI on the
Gemini API). For every path in it (``paths_of``: every value, the body itself included) the value
there is replaced, in the raw JSON, by each of 23 hostile values: 2⁶³ and 2⁶⁴−1 (no SQLite integer
holds them), 2⁶⁴+1, −2⁶⁴, a 401-digit integer, ``1e400``; the non-JSON ``NaN``, ``Infinity`` and
``-Infinity`` (which must be a 400); a value of each JSON type (string, integer, float, boolean,
null, object, array); nesting 1,100 deep and nesting as deep as ``server.max_json_depth`` allows at
that path (arrays and objects each); strings holding NUL, U+2028 and a lone surrogate as escapes.

Each (path, value) pair is sent once; the provider type turns with the path, offset by the value,
so every value meets every provider type that serves the wire, and every path does too across the
values; so does the framing: streamed or whole on every other round of the provider types (on the
Gemini wire, generateContent, the SSE stream and the JSON array in turn). The mock answers each
with a tool call (``upstream_url``), so every answer translated goes through the tool-call events of
its format. One test per wire and value (its own proxy, so its decision rows are its own), 16 requests at a
time (``tests/support/fuzz.py``): the full suite's (marked ``system``, ~80 s of CPU); the fast loop
(``-m "not system"``) sends the grid's diagonal, every path once with the values in turn
(docs/decisions.md, "The exhaustive grids run in the full suite").
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from router.tools.mock_answers import LIST_FILES
from router.tools.mock_upstream import Behaviour, MockUpstream
from tests.support.config import make_config
from tests.support.fuzz import CHAT, GEMINI_ACTIONS, MESSAGES, RESPONSES, SERVED_BY, assert_a_row_each, every_provider_config, faults, send_all
from tests.support.servers import loopback_server
from tests.support.json_paths import Path as JsonPath
from tests.support.json_paths import paths_of, replaced

AGENTS = Path(__file__).resolve().parents[1] / "data" / "agents"
MARKER = "__HOSTILE__"
DEPTH = 1_100
LIMIT = make_config().server.max_json_depth  # the body itself is level 1


def nested(levels: int, array: bool) -> bytes:
    """``levels`` containers one in another: ``[[…]]`` or ``{"a":{"a":…{}}}``."""
    if array:
        return b"[" * levels + b"]" * levels
    return b'{"a":' * (levels - 1) + b"{}" + b"}" * (levels - 1)


HOSTILE: dict[str, bytes | Callable[[JsonPath], bytes]] = {
    "2**63": str(2**63).encode(),
    "2**64-1": str(2**64 - 1).encode(),
    "2**64+1": str(2**64 + 1).encode(),
    "-(2**64)": str(-(2**64)).encode(),
    "10**400": str(10**400).encode(),
    "1e400": b"1e400",
    "NaN": b"NaN",
    "Infinity": b"Infinity",
    "-Infinity": b"-Infinity",
    "string": b'"x"',
    "integer": b"7",
    "float": b"0.5",
    "bool": b"true",
    "null": b"null",
    "object": b"{}",
    "array": b"[]",
    "deep-array": nested(DEPTH, array=True),
    "deep-object": nested(DEPTH, array=False),
    # as deep as the limit allows there: past the edge, into every stage and translation
    "array-at-limit": lambda path: nested(LIMIT - len(path), array=True),
    "object-at-limit": lambda path: nested(LIMIT - len(path), array=False),
    "NUL": b'"a\\u0000b"',
    "U+2028": b'"a\\u2028b"',
    "lone-surrogate": b'"a\\ud800b"',
}
NOT_JSON = {"NaN", "Infinity", "-Infinity"}
VALUES = list(HOSTILE)


@pytest.fixture
async def upstream_url() -> AsyncIterator[str]:
    """The mock upstream, keeping no copy of the requests, answering every seed's turn with one more
    tool call (8 commands a turn: more than any seed's turn has results), short in every format. Once
    a turn's commands have their results the mock quotes the last one: 2,000 characters streamed word
    by word, ~350 events, the same for nearly every path, which took 3-5x a streamed request's CPU
    (and 60 % of the grid's); an answer quoting a hostile string is the fuzz's
    (``test_fuzz_wires.py``: control characters in every string field, the default mock)."""
    async with loopback_server(MockUpstream(Behaviour(tool_commands=(LIST_FILES,) * 8), record=False).app()) as url:
        yield url


def _body(name: str, line: int | None = None) -> dict[str, Any]:
    if line is not None:
        return orjson.loads((AGENTS / name).read_bytes().splitlines()[line])["body"]
    return orjson.loads((AGENTS / name).read_bytes())["body"]


SEEDS = {
    "chat": _body("opencode.jsonl", 2),
    "messages": _body("claude-code-tool-turns/0002-POST-v1-messages.json"),
    "responses": _body("codex-tool-turns/0002-POST-v1-responses.json"),
    "gemini": _body("gemini-cli/0003-POST-v1beta-models-gemini-3-8-flash-streamGenerateContent.json"),
}


def cell(wire: str, index: int, path: JsonPath, value: str) -> tuple[tuple[JsonPath, str, str], str, bytes]:
    """The wire's seed with ``value`` at ``path`` (its ``index``-th): ``((path, model, value), URL path, raw body)``."""
    seed, models = SEEDS[wire], SERVED_BY[wire]
    model = models[(index + VALUES.index(value)) % len(models)]
    # streamed on every other round of the provider types (Gemini's framing is in its URL), and
    # where the value replaced is one of chat's stream_options
    streamed = index // len(models) % 2 or path[:1] == ("stream_options",)
    body = seed if wire == "gemini" else {**seed, "model": model} if streamed else unstreamed(seed) | {"model": model}
    # the standard library's JSON, as a client may write it (orjson refuses a lone surrogate)
    literal = hostile if isinstance(hostile := HOSTILE[value], bytes) else hostile(path)
    raw = json.dumps(replaced(body, path, MARKER), separators=(",", ":")).encode().replace(f'"{MARKER}"'.encode(), literal, 1)
    if wire == "gemini":
        url = f"/v1beta/models/{model}:{GEMINI_ACTIONS[index % len(GEMINI_ACTIONS)]}"
    else:
        url = {"chat": CHAT, "messages": MESSAGES, "responses": RESPONSES}[wire]
    return (path, model, value), url, raw


def grid(wire: str, value: str) -> Iterator[tuple[tuple[JsonPath, str, str], str, bytes]]:
    """Every path of the wire's seed with ``value`` there."""
    return (cell(wire, index, path, value) for index, path in enumerate(paths_of(SEEDS[wire])))


def diagonal(wire: str) -> Iterator[tuple[tuple[JsonPath, str, str], str, bytes]]:
    """Every path of the wire's seed once, the values in turn: the ``i``-th path with the ``i mod 23``-th value."""
    return (cell(wire, index, path, VALUES[index % len(VALUES)]) for index, path in enumerate(paths_of(SEEDS[wire])))


def unstreamed(body: dict[str, Any]) -> dict[str, Any]:
    """The body asking for a whole answer (chat's ``stream_options`` go with ``stream``)."""
    return {k: v for k, v in body.items() if k != "stream_options"} | {"stream": False}


# 28,911 requests, ~80 s of CPU: the full suite's (the system marker), the fast loop runs the diagonal below
@pytest.mark.system
@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("wire", list(SEEDS))
async def test_every_field_with_a_hostile_value_is_answered_below_500_in_the_wire_format_with_its_row(proxy, upstream_url, wire, value):
    """One hostile value at every path of the wire's seed, through every provider type: nothing ≥ 500
    or dropped, every error ≤ 4 KB and in the wire's format (a non-JSON literal a 400), every 200
    whole (a stream ends as its format ends), a row each."""
    client = await proxy(every_provider_config(upstream_url))
    answers = await send_all(client, grid(wire, value))
    bad = faults(wire, answers, only_400=value in NOT_JSON)
    assert bad == [], (len(bad), bad[:5])
    assert len(answers) == len(paths_of(SEEDS[wire]))
    assert {model for _, model, _ in (a.tag for a in answers)} == set(SERVED_BY[wire])  # every provider type met it
    rows = await assert_a_row_each(client, answers)
    print(f"{wire} × {value}: {len(answers)} requests → {dict(sorted(Counter(a.status for a in answers).items()))}, {rows} rows")


@pytest.mark.parametrize("wire", list(SEEDS))
async def test_every_field_with_one_hostile_value_in_turn_is_answered_below_500_in_the_wire_format_with_its_row(proxy, upstream_url, wire):
    """The grid's diagonal, the fast loop's: every path of the wire's seed once, the hostile values in
    turn (1,257 requests over the four wires, 1/23 of the grid), so every value meets 1/23 of the
    paths and every provider type; the grid's checks."""
    client = await proxy(every_provider_config(upstream_url))
    answers = await send_all(client, diagonal(wire))
    bad = [fault for value in VALUES for fault in faults(wire, [a for a in answers if a.tag[2] == value], only_400=value in NOT_JSON)]
    assert bad == [], (len(bad), bad[:5])
    assert len(answers) == len(paths_of(SEEDS[wire]))
    met = {(value, model) for _, model, value in (a.tag for a in answers)}
    assert met == {(value, model) for value in VALUES for model in SERVED_BY[wire]}  # every value met every provider type
    rows = await assert_a_row_each(client, answers)
    print(f"{wire} diagonal: {len(answers)} requests → {dict(sorted(Counter(a.status for a in answers).items()))}, {rows} rows")
