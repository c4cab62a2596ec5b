"""Factories shared by the pinch-relevance and eval-pinch tests.

The embeddings endpoint lives on a loopback port nobody listens on, so only
aioresponses answers it; the proxy and the mock chat upstream pass through for
real (``passthrough`` is a plain string prefix, hence the trailing slash). The
fake model turns a text into counts of a few topic words, so a test can say
which old result is relevant to the turn.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
from aioresponses import CallbackResult, aioresponses
from yarl import URL

from router.config import Config
from router.core.tokens import TokenEstimator
from tests.support.config import make_config
from tests.support.factories import assistant, system, tool, user
from tests.support.http_mocks import MockedResponse, mocked_http

EMBED_BASE = "http://127.0.0.1:9/v1"  # a loopback port nobody listens on: only aioresponses answers
EMBED_URL = {"openai": f"{EMBED_BASE}/embeddings", "ollama": "http://127.0.0.1:9/api/embed"}
CHAIN = ["session-fingerprint", "pinch-relevance", "pinch-prune", "capability-gate", "upstream-forward"]
TOPICS = ("migration", "stylesheet", "weather", "network")
TASK = "Fix the crash in the migration that renames an index"
ESTIMATOR = TokenEstimator()


def topic_vector(text: str) -> list[float]:
    """The fake model: how often each topic word occurs."""
    lowered = text.lower()
    return [float(lowered.count(topic)) for topic in TOPICS]


def result_text(topic: str, chars: int = 2000) -> str:
    line = f"{topic} detail line\n"
    return (line * (chars // len(line) + 1))[:chars]


def call(step: int, command: str) -> dict[str, Any]:
    return assistant(f"Step {step}.", [(f"call_{step}", "bash", orjson.dumps({"cmd": command}).decode())])


# The session: an old result about the task's topic, two newer unrelated ones,
# then the current step (protected with keep_last_turns = 1) edits the migration.
OLD_RESULTS = [("call_1", "migration"), ("call_2", "stylesheet"), ("call_3", "weather")]


def session(turn: int = 1) -> list[dict[str, Any]]:
    """Turn 1: three old results and an in-progress edit; turn 2 adds one more round trip."""
    messages = [system("You are a coding agent."), user(TASK)]
    for step, (call_id, topic) in enumerate(OLD_RESULTS, start=1):
        messages += [call(step, f"cat {topic}.txt"), tool(call_id, result_text(topic))]
    messages += [call(4, "sed -i s/old/new/ migration.py"), tool("call_4", result_text("network"))]
    if turn >= 2:
        messages += [call(5, "pytest tests/test_migration.py"), tool("call_5", "1 passed")]
    return messages


# Compressing two of the three old results covers the deficit, so a batch that stops at the
# budget (low_watermark 1) keeps one verbatim: the most relevant with an order, else the newest.
BUDGET = ESTIMATOR.prompt_tokens(session()) - 600
LOW_WATERMARK = 1.0
WITHOUT_ORDER_VERBATIM = {"call_3"}  # no relevance order: the oldest are compressed first


def relevance_config(upstream_url: str = "http://127.0.0.1:9/v1", *, api: str = "openai", ledger: bool = True, **relevance: Any) -> Config:
    settings: dict[str, Any] = {"enabled": True, "model": "fake-embed", "base_url": EMBED_BASE, "api": api, "min_candidates": 2}
    settings.update(relevance)
    # first sight off: it would fold these results' repeated lines before relevance had anything to rank
    pinch = {
        "enabled": True, "ledger": ledger, "budget_tokens": BUDGET, "low_watermark": LOW_WATERMARK, "keep_last_turns": 1,
        "max_summarize_chars": 400, "relevance": settings, "first_sight": {"enabled": False},
    }
    return make_config(upstream_url, middlewares=CHAIN, pinch=pinch)


@dataclass
class FakeEmbedder:
    """An embeddings endpoint of kind ``api`` that records the texts of each call."""

    api: str
    calls: list[list[str]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def answer(self, url: URL, **kwargs: Any) -> CallbackResult:
        body = orjson.loads(kwargs["data"])
        assert body["model"] == "fake-embed"
        texts = body["input"]
        self.calls.append(texts)
        self.headers.append(dict(kwargs.get("headers") or {}))
        vectors = [topic_vector(text) for text in texts]
        if self.api == "ollama":
            payload: dict[str, Any] = {"model": "fake-embed", "embeddings": vectors}
        else:  # out of order on purpose: clients must sort by index
            data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
            payload = {"object": "list", "model": "fake-embed", "data": data[::-1]}
        return CallbackResult(payload=payload, response_class=MockedResponse)


@contextmanager
def mocked_embeddings(*loopback_urls: Any) -> Iterator[aioresponses]:
    """aioresponses for the embeddings port only; the given loopback servers pass through for real."""
    prefixes = [f"{URL(str(url)).origin()}/" for url in loopback_urls]
    with mocked_http(passthrough=prefixes) as mock:
        yield mock
