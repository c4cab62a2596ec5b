"""Benchmark: the latency pinch adds to a warm agent session, replayed turn by turn through ``serve``
with a streaming client (issue #44: added p50 ≤ 5 ms, p99 ≤ 50 ms).

Each transcript (the shared ones, or ``FILE…``) is replayed as its session: every turn's request,
in order, streamed (``stream: true``, the usage report asked for, as agents do), once straight to
the mock upstream (the baseline) and once through ``pinch-router serve`` on the shipped
``config.yaml``'s pinch settings (first sight with the cut and ``pinch_retrieve``, the ledger,
relevance deferred; eval-pinch's replay config: one model on the mock, a 1M-token window, a warm
cache), alternating per request so load hits both alike. The mock runs in this process and never
calls ``pinch_retrieve`` (the rounds would be upstream time, not the proxy's). ``serve`` gets a core
of its own (``taskset -c 1``); this process the other.

Printed per set of transcripts: requests, the baseline's and the proxy's time to the last byte
(p50, p99), the added time per request (proxy minus baseline of the same request: p50, p99), and the
proxy's own ``x-router-overhead-ms`` (p50, p99).

    .venv/bin/python -m bench.bench_session_latency [--budget 20000] [--save] [FILE ...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

from bench.harness import TRANSCRIPTS, free_port, percentile, print_table, spawn
from router.config import load_config
from router.tools.eval_pinch import MODES, SCENARIOS, replay_config, serve
from router.tools.mock_upstream import MockUpstream
from router.tools.transcripts import load_transcript

WARM = next(s for s in SCENARIOS if s.name == "warm")
RELEVANCE_LEDGER = next(m for m in MODES if m.pinch and m.relevance and m.ledger)


VARIANTS = {
    "forward only (pinch off)": lambda raw: (raw["pinch"].update(enabled=False), raw["pinch"]["relevance"].update(enabled=False)),
    "pinch, lossless first sight": lambda raw: raw["pinch"]["first_sight"].update(lossy=False),
    "pinch, cut + pinch_retrieve": lambda raw: None,
}


async def replay(files: list[Path], budget: int) -> list[str]:
    rows = [
        f"warm session replay through serve, streaming client, budget {budget:,} (ms; the proxy pinned to core 1)",
        f"{'variant':<30} {'requests':>8} {'direct p50':>10} {'direct p99':>10} {'proxy p50':>10} {'proxy p99':>10} {'added p50':>10} {'added p99':>10} {'own p50':>8} {'own p99':>8}",
    ]
    for name, change in VARIANTS.items():
        rows.append(await _variant(name, change, files, budget))
    return rows


async def _variant(name: str, change: Callable[[dict[str, Any]], None], files: list[Path], budget: int) -> str:
    mock = MockUpstream(retrieves=False, record=False)
    runner, mock_url = await serve(mock.app())
    port = free_port()
    config = replay_config(load_config(Path("config.yaml"), environ={}), WARM, RELEVANCE_LEDGER, budget, f"{mock_url}/v1", own_embeddings=False)
    raw = config.model_dump(mode="json", exclude_none=True)
    change(raw)
    raw["server"] = {**raw.get("server", {}), "port": port, "host": "127.0.0.1"}
    raw["decision_log"] = {**raw["decision_log"], "path": ":memory:"}
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "config.yaml"
        path.write_text(yaml.safe_dump(raw))
        pin = ["taskset", "-c", "1"] if shutil.which("taskset") and (os.cpu_count() or 1) > 1 else []
        with spawn([*pin, sys.executable, "-m", "router", "serve", "--config", str(path)], port, startup_seconds=90, log_path=Path(scratch) / "serve.log"):
            try:
                direct, proxied, added, overhead = await _drive(files, f"{mock_url}/v1/chat/completions", f"http://127.0.0.1:{port}/v1/chat/completions")
            finally:
                await runner.cleanup()
    ms = lambda values, p: f"{percentile(values, p):8.2f}"  # noqa: E731
    return (
        f"{name:<30} {len(added):>8} {ms(direct, 50):>10} {ms(direct, 99):>10} {ms(proxied, 50):>10} {ms(proxied, 99):>10} "
        f"{ms(added, 50):>10} {ms(added, 99):>10} {ms(overhead, 50)} {ms(overhead, 99)}"
    )


async def _drive(files: list[Path], direct_url: str, proxy_url: str) -> tuple[list[float], list[float], list[float], list[float]]:
    direct: list[float] = []
    proxied: list[float] = []
    added: list[float] = []
    overhead: list[float] = []
    async with aiohttp.ClientSession() as client:
        for file in files:
            transcript = load_transcript(file)
            headers = {"Content-Type": "application/json", "x-router-session": f"latency-{transcript.name}"}
            for messages in transcript.turn_requests():
                body = orjson.dumps({**transcript.body(messages), "stream": True, "stream_options": {"include_usage": True}})
                through, own = await _timed(client, proxy_url, body, headers)
                straight, _ = await _timed(client, direct_url, body, headers)
                direct.append(straight)
                proxied.append(through)
                added.append(through - straight)
                overhead.append(own)
    return direct, proxied, added, overhead


async def _timed(client: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str]) -> tuple[float, float]:
    """Milliseconds to the last byte of the streamed answer, and the proxy's own x-router-overhead-ms (0 without)."""
    started = time.perf_counter()
    async with client.post(url, data=body, headers=headers) as response:
        await response.read()
        if response.status != 200:
            raise RuntimeError(f"{url} answered {response.status}")
        own = float(response.headers.get("x-router-overhead-ms", "0"))
    return (time.perf_counter() - started) * 1000, own


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="transcripts (default: the shared ones)")
    parser.add_argument("--budget", type=int, default=20_000)
    parser.add_argument("--save", action="store_true", help="write the table to bench/results/")
    args = parser.parse_args()
    files = args.files or sorted(p for p in TRANSCRIPTS.glob("*.json") if not p.name.endswith(".meta.json"))
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {0})  # this process (client and mock) on the other core
    return print_table(__file__, asyncio.run(replay(files, args.budget)), args.save)


if __name__ == "__main__":
    raise SystemExit(main())
