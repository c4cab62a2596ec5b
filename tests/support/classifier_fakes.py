"""Small factories shared by the classifier and classification-cache tests.

The classifier provider lives at ``http://localhost:11434`` (mocked with
aioresponses, never contacted), while everything on ``http://127.0.0.1`` —
the proxy under test and the mock chat upstream — passes through for real:
aioresponses matches ``passthrough`` as a plain string prefix.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from aioresponses import aioresponses
from yarl import URL

from router.config import Config
from tests.support.config import make_config, model_entry
from tests.support.http_mocks import mocked_http

CLASSIFIER_BASE = "http://localhost:11434/v1"
OLLAMA_CHAT_URL = "http://localhost:11434/api/chat"
OPENAI_CHAT_URL = "http://localhost:11434/v1/chat/completions"
FULL_CHAIN = ["session-fingerprint", "classification-cache", "classifier", "capability-gate", "upstream-forward"]
CATEGORIES = {
    "coding_general": "writing or changing code",
    "debugging": "finding and fixing a failure",
    "docs_writing": "prose, docs, comments",
}


def classifier_config(
    upstream_url: str = "http://127.0.0.1:9/v1",
    *,
    api: str = "ollama",
    cache: bool = True,
    timeout_seconds: float = 5,
    **sections: Any,
) -> Config:
    """The full chain, a mock chat provider and a classifier provider of kind ``api``."""
    raw: dict[str, Any] = {
        "middlewares": FULL_CHAIN,
        "providers": {"mock": {"base_url": upstream_url}, "classifier": {"base_url": CLASSIFIER_BASE, "api": api}},
        "routing": {"categories": CATEGORIES, "tiers": [1, 2, 3], "fallback_category": "coding_general", "fallback_tier": 2},
        "classifier": {"provider": "classifier", "model": "tiny-classifier", "timeout_seconds": timeout_seconds, "num_ctx": 8192},
        "session_cache": {"enabled": cache, "staleness_minutes": 20},
    }
    raw.update(sections)
    return make_config(upstream_url, **raw)


def two_window_models() -> list[dict[str, Any]]:
    """A high-quality model with a small window and a weaker one with a large window."""
    return [
        model_entry("small-window", context_window=8_000, quality=0.9),
        model_entry("large-window", context_window=128_000, quality=0.3),
    ]


def verdict(category: str = "debugging", tier: int = 3, tokens: int | None = None) -> str:
    answer: dict[str, Any] = {"category": category, "tier": tier}
    if tokens is not None:
        answer["required_context_tokens"] = tokens
    return orjson.dumps(answer).decode()


def ollama_reply(content: str) -> dict[str, Any]:
    return {"model": "tiny-classifier", "message": {"role": "assistant", "content": content}, "done": True}


def openai_reply(content: str) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}


@contextmanager
def mocked_classifier() -> Iterator[aioresponses]:
    """aioresponses for the classifier only; loopback traffic (proxy, mock upstream) is real."""
    with mocked_http(passthrough=["http://127.0.0.1"]) as mock:
        yield mock


def classifier_payloads(mock: aioresponses, url: str = OLLAMA_CHAT_URL) -> list[dict[str, Any]]:
    """The JSON bodies the proxy sent to the classifier, in order."""
    calls = mock.requests.get(("POST", URL(url)), [])
    return [orjson.loads(call.kwargs["data"]) for call in calls]


def agent_turn(task: str, turn: int, *, system: str = "You are a coding agent.") -> list[dict[str, Any]]:
    """The messages of an agent session's ``turn``-th request: the task, then tool-call round trips."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": task}]
    for step in range(1, turn):
        call_id = f"call_{step}"
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {step}: looking around.",
                "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "bash", "arguments": f'{{"cmd": "ls {step}"}}'}}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": f"file_{step}.py"})
    return messages


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
