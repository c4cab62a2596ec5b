"""What real agents sent, captured from their real runs (tests/data/agents/README.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "agents"


@dataclass(frozen=True, slots=True)
class CapturedRequest:
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def offers_tools(self) -> bool:
        return bool(self.body.get("tools"))


def captured(agent: str) -> list[CapturedRequest]:
    """The chat requests one agent sent in one run, in order (``opencode``, ``pi``, ``aider``, ``continue``)."""
    lines = (CAPTURES / f"{agent}.jsonl").read_bytes().splitlines()
    return [CapturedRequest(row["headers"], row["body"]) for row in map(orjson.loads, lines)]


def client_headers(request: CapturedRequest) -> dict[str, str]:
    """The captured headers a test client can resend (its own framing headers are its own)."""
    return {k: v for k, v in request.headers.items() if k.lower() not in ("content-type", "user-agent")}
