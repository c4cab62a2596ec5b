"""Classifier calls and latency per agent session, classification cache on vs off.

Replays each shared transcript (tests/data/transcripts/*.json, or --transcripts
DIR) turn by turn as one session through the running proxy: turn k sends every
message before the transcript's k-th assistant reply, with its tools, exactly
as the agent did.
The chat upstream is the in-process MockUpstream (answers at once); the
classifier is a mock Ollama ``/api/chat`` that waits ``--classifier-delay``
seconds before answering, like a small local model. Both proxies (cache off,
cache on) run the same replay in the same process; everything is on loopback.

    .venv/bin/python -m bench.bench_classifier_cache [--turns 8] [--classifier-delay 0.3] [--transcripts DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from aiohttp.test_utils import TestServer

from bench.harness import TRANSCRIPTS
from router.server.app import create_app
from router.config import Config, parse_config
from router.tools.mock_upstream import MockUpstream
from router.tools.transcripts import load_transcript

CHAIN = ["session-fingerprint", "classification-cache", "classifier", "capability-gate", "upstream-forward"]


class MockClassifier:
    """Ollama's native /api/chat, answering one fixed classification after a delay."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.calls = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/api/chat", self.chat)
        return app

    async def chat(self, request: web.Request) -> web.Response:
        await request.read()
        self.calls += 1
        await asyncio.sleep(self.delay)
        answer = {"category": "debugging", "tier": 2, "required_context_tokens": None}
        return web.json_response({"model": "qwen2.5:3b", "message": {"role": "assistant", "content": json.dumps(answer)}, "done": True})


def bench_config(upstream_url: str, classifier_url: str, cache: bool) -> Config:
    return parse_config(
        {
            "middlewares": CHAIN,
            "providers": {"mock": {"base_url": upstream_url}, "local": {"base_url": classifier_url, "api": "ollama"}},
            "models": [
                {
                    "name": "big",
                    "provider": "mock",
                    "upstream_model": "mock-big",
                    "context_window": 400_000,
                    "max_output_tokens": 8_000,
                    "supports": {"tools": True, "vision": False, "json_mode": True},
                    "tiers": [1, 2, 3],
                }
            ],
            "classifier": {"provider": "local", "model": "qwen2.5:3b", "timeout_seconds": 10},
            "session_cache": {"enabled": cache, "staleness_minutes": 20},
        },
        environ={},
    )


def session_requests(path: Path, turns: int) -> list[dict[str, Any]]:
    """The first ``turns`` requests of a transcript: the messages before each assistant reply."""
    transcript = load_transcript(path)
    return [transcript.body(messages) for messages in transcript.turn_requests()[:turns]]


@dataclass
class SessionRun:
    calls: int
    latencies_ms: list[float]


async def replay(url: str, requests: list[dict[str, Any]], classifier: MockClassifier, http: aiohttp.ClientSession) -> SessionRun:
    before = classifier.calls
    latencies = []
    for body in requests:
        started = perf_counter()
        async with http.post(url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}) as response:
            await response.read()
            if response.status != 200:
                raise RuntimeError(f"proxy answered {response.status}")
        latencies.append((perf_counter() - started) * 1000)
    return SessionRun(classifier.calls - before, latencies)


async def run_proxy(config: Config, sessions: dict[str, list[dict[str, Any]]], classifier: MockClassifier) -> dict[str, SessionRun]:
    server = TestServer(await create_app(config), host="127.0.0.1")
    await server.start_server()
    try:
        url = str(server.make_url("/v1/chat/completions"))
        async with aiohttp.ClientSession() as http:
            return {name: await replay(url, requests, classifier, http) for name, requests in sessions.items()}
    finally:
        await server.close()


async def main(transcripts: Path, turns: int, delay: float) -> None:
    sessions = {
        path.stem: session_requests(path, turns)
        for path in sorted(transcripts.glob("*.json"))
        if not path.name.endswith(".meta.json")
    }
    upstream = TestServer(MockUpstream().app(), host="127.0.0.1")
    classifier = MockClassifier(delay)
    classifier_server = TestServer(classifier.app(), host="127.0.0.1")
    await upstream.start_server()
    await classifier_server.start_server()
    try:
        upstream_url = str(upstream.make_url("/v1"))
        classifier_url = str(classifier_server.make_url("/v1"))
        off = await run_proxy(bench_config(upstream_url, classifier_url, cache=False), sessions, classifier)
        on = await run_proxy(bench_config(upstream_url, classifier_url, cache=True), sessions, classifier)
    finally:
        await upstream.close()
        await classifier_server.close()
    print_table(sessions, off, on, turns, delay)


def print_table(sessions: dict[str, list[dict[str, Any]]], off: dict[str, SessionRun], on: dict[str, SessionRun], turns: int, delay: float) -> None:
    print(f"classifier delay {delay * 1000:.0f} ms, up to {turns} turns per session; latency = client-side, per request\n")
    header = f"{'session':<46} {'turns':>5} {'calls off':>9} {'calls on':>8} {'total off ms':>12} {'total on ms':>11} {'mean off':>8} {'mean on':>7} {'saved ms':>8}"
    print(header)
    print("-" * len(header))
    rows = [(name, off[name], on[name], len(sessions[name])) for name in sessions]
    for name, o, c, n in rows:
        _row(name, n, o, c)
    _row(
        "ALL",
        sum(n for *_, n in rows),
        SessionRun(sum(o.calls for _, o, _, _ in rows), [x for _, o, _, _ in rows for x in o.latencies_ms]),
        SessionRun(sum(c.calls for _, _, c, _ in rows), [x for _, _, c, _ in rows for x in c.latencies_ms]),
    )


def _row(name: str, turns: int, off: SessionRun, on: SessionRun) -> None:
    total_off, total_on = sum(off.latencies_ms), sum(on.latencies_ms)
    print(
        f"{name[:46]:<46} {turns:>5} {off.calls:>9} {on.calls:>8} {total_off:>12.0f} {total_on:>11.0f} "
        f"{statistics.mean(off.latencies_ms):>8.0f} {statistics.mean(on.latencies_ms):>7.0f} {total_off - total_on:>8.0f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=8, help="turns replayed per transcript (default 8)")
    parser.add_argument("--classifier-delay", type=float, default=0.3, help="seconds the mock classifier takes (default 0.3)")
    parser.add_argument("--transcripts", type=Path, default=TRANSCRIPTS, help="folder of transcript JSON files")
    args = parser.parse_args()
    asyncio.run(main(args.transcripts, args.turns, args.classifier_delay))
