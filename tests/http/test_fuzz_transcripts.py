"""5,000+ mutations of real agent requests: none gets a 5xx, and a good request is served afterwards.

Unlike tests/test_fuzz_edge.py (hypothesis, generated from nothing), this
starts from the shared real transcripts and breaks them the way clients and
proxies in between do: values of the wrong type, keys dropped, renamed or
added, nesting up to 5,000 levels, unicode edge cases (lone surrogates, NUL,
BOM, invalid UTF-8 bytes), encodings (gzip, deflate, br, a wrong label),
and number edge cases (huge integers, -0, 1e-400, 1e400, NaN). A seeded
``random.Random`` makes every run the same. The proxy and its mock upstream
run in-process (aiohttp's test client), so the 5,000 requests take seconds.
"""

from __future__ import annotations

import gzip
import json
import random
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.config import chat_body, make_config
from tests.support.json_paths import paths_of, replaced, value_at
TRANSCRIPTS = Path(__file__).resolve().parents[1] / "data" / "transcripts"
REQUESTS = 5_000
URL = "/v1/chat/completions"

WEIRD_STRINGS = ["", "\u0000", "\ufeffbom", "\u202eevil", "😀" * 50, "\ud800", "a\udfffb", "\\", '"', "\n" * 100, "x" * 20_000]
WEIRD_NUMBERS = [b"123456789012345678901234567890", b"-0", b"1e-400", b"1e400", b"-1e400", b"NaN", b"Infinity", b"1.7976931348623157e308", b"0." + b"0" * 400 + b"1", b"9" * 5000, b"-", b"01", b"1.", b".5"]
DEPTHS = [10, 100, 127, 128, 129, 200, 254, 255, 1000, 1025, 5000]


def seed_bodies() -> list[dict[str, Any]]:
    """Small real requests: the opening of each transcript, and a later slice with tool calls and results."""
    bodies = []
    for path in sorted(TRANSCRIPTS.glob("*.json")):
        if path.name.endswith(".meta.json"):
            continue
        transcript = orjson.loads(path.read_bytes())
        messages = [{**m, "content": m["content"][:400]} if isinstance(m.get("content"), str) else m for m in transcript["messages"]]
        tools = transcript.get("tools") or None
        for window in (messages[:3], messages[:8], messages[2:12]):
            if window and window[0].get("role") != "tool":
                bodies.append({"model": "auto", "messages": window, **({"tools": tools} if tools else {})})
    return bodies


MARKER = "__FUZZ_MARKER__"


class Mutator:
    """One mutated request (raw body bytes + headers) per call."""

    def __init__(self, rng: random.Random, bodies: list[dict[str, Any]]) -> None:
        self.rng = rng
        self.bodies = bodies
        self.kinds: list[Callable[[dict[str, Any]], tuple[bytes, dict[str, str]]]] = [
            self.wrong_type, self.key_change, self.deep_nesting, self.weird_string, self.weird_number, self.encoding, self.byte_damage,
        ]

    def __call__(self) -> tuple[str, bytes, dict[str, str]]:
        kind = self.rng.choice(self.kinds)
        raw, headers = kind(self.rng.choice(self.bodies))
        return kind.__name__, raw, {"Content-Type": "application/json", **headers}

    def _at_random_path(self, body: dict[str, Any]) -> tuple[Any, ...]:
        return self.rng.choice(paths_of(body))

    def _with_raw(self, body: dict[str, Any], raw_value: bytes) -> bytes:
        """``body`` with a random node replaced by ``raw_value`` spliced in as JSON text."""
        return orjson.dumps(replaced(body, self._at_random_path(body), MARKER)).replace(f'"{MARKER}"'.encode(), raw_value, 1)

    def wrong_type(self, body: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
        value = self.rng.choice([None, True, False, 0, -1, 2**63, 3.5, "", "text", [], [None], {}, {"type": 1}])
        return orjson.dumps(replaced(body, self._at_random_path(body), value)), {}

    def key_change(self, body: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
        dicts = [p for p in paths_of(body) if isinstance(self._get(body, p), dict)]
        path = self.rng.choice(dicts)
        node = dict(self._get(body, path))
        action = self.rng.choice(["drop", "rename", "add"])
        if action == "drop" and node:
            node.pop(self.rng.choice(list(node)))
        elif action == "rename" and node:
            key = self.rng.choice(list(node))
            node[self.rng.choice(["", " ", key.upper(), key + "\u0000", "__proto__", "😀"])] = node.pop(key)
        else:
            node[self.rng.choice(["role", "content", "tool_calls", "tool_call_id", "stream", "max_tokens", "x" * 300])] = self.rng.choice([None, 1, "user", [], {}])
        return orjson.dumps(replaced(body, path, node)), {}

    def deep_nesting(self, body: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
        depth = self.rng.choice(DEPTHS)
        opener, closer = self.rng.choice([(b"[", b"]"), (b'{"k":', b"}")])
        return self._with_raw(body, opener * depth + b"1" + closer * depth), {}

    def weird_string(self, body: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
        text = self.rng.choice(WEIRD_STRINGS)
        return self._with_raw(body, json.dumps(text).encode()), {}  # json.dumps escapes lone surrogates as \\udXXX

    def weird_number(self, body: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
        return self._with_raw(body, self.rng.choice(WEIRD_NUMBERS)), {}

    def encoding(self, body: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
        raw = orjson.dumps(body)
        choice = self.rng.randrange(6)
        if choice == 0:
            return gzip.compress(raw), {"Content-Encoding": "gzip"}
        if choice == 1:
            return zlib.compress(raw), {"Content-Encoding": "deflate"}
        if choice == 2:
            return raw, {"Content-Encoding": self.rng.choice(["gzip", "deflate"])}  # a label that lies
        if choice == 3:
            return raw, {"Content-Encoding": self.rng.choice(["br", "zstd", "compress", "gzip, br"])}
        if choice == 4:
            return gzip.compress(raw)[: self.rng.randrange(1, 40)], {"Content-Encoding": "gzip"}  # cut short
        return raw.decode().encode("utf-16"), {"Content-Type": "application/json; charset=utf-16"}

    def byte_damage(self, body: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
        raw = bytearray(orjson.dumps(body))
        for _ in range(self.rng.randrange(1, 4)):
            at = self.rng.randrange(len(raw))
            raw[at : at + 1] = self.rng.choice([b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"", b"\x00", b"}", b'"'])
        return bytes(raw), {}

    @staticmethod
    def _get(node: Any, path: tuple[Any, ...]) -> Any:
        return value_at(node, path)


@pytest.fixture
async def served(proxy, mock_upstream):
    _, url = mock_upstream
    return await proxy(make_config(url))


async def test_mutated_real_requests_never_get_a_5xx(served):
    rng = random.Random(17)
    mutate = Mutator(rng, seed_bodies())
    statuses: Counter[int] = Counter()
    server_errors: list[tuple[str, int, bytes, bytes]] = []
    for _ in range(REQUESTS):
        kind, raw, headers = mutate()
        resp = await served.post(URL, data=raw, headers=headers)
        body = await resp.read()
        statuses[resp.status] += 1
        if resp.status >= 500:
            server_errors.append((kind, resp.status, raw, body[:300]))
        elif resp.status >= 400:
            assert orjson.loads(body)["error"]["code"], body  # every refusal is an OpenAI error object
    assert server_errors == [], [(k, s, r[-200:] if len(r) > 200 else r) for k, s, r, _ in server_errors[:3]]
    assert sum(statuses.values()) >= REQUESTS
    assert statuses[200] > 0 and sum(n for s, n in statuses.items() if 400 <= s < 500) > 0  # both kinds were produced
    good = await served.post(URL, json=chat_body("still fine?"))
    assert good.status == 200

