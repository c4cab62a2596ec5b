"""Shared pieces of the benchmarks: loopback servers in subprocesses, a load driver, percentiles.

Everything listens on 127.0.0.1 and stops when the benchmark ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

from router.transcripts import load_transcript

ROOT = Path(__file__).resolve().parent.parent
TRANSCRIPTS = ROOT.parent / "shared" / "transcripts"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


@contextlib.contextmanager
def spawn(args: list[str], port: int, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """Run a server in a subprocess until the block ends."""
    process = subprocess.Popen(
        args, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        wait_for_port(port)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


def mock_upstream(port: int) -> list[str]:
    return [sys.executable, "-m", "router", "mock-upstream", "--port", str(port)]


def proxy(config_path: Path) -> list[str]:
    return [sys.executable, "-m", "router", "serve", "--config", str(config_path)]


def write_config(path: Path, port: int, upstream_url: str, **sections: Any) -> Path:
    config: dict[str, Any] = {
        "server": {"port": port},
        "middlewares": ["session-fingerprint", "capability-gate", "upstream-forward"],
        "providers": {"mock": {"base_url": upstream_url}},
        "models": [
            {
                "name": "bench-model",
                "provider": "mock",
                "upstream_model": "mock",
                "context_window": 2_000_000,
                "max_output_tokens": 8192,
                "supports": {"tools": True, "vision": True, "json_mode": True},
                "tiers": [1, 2, 3],
            }
        ],
    }
    config.update(sections)
    path.write_text(yaml.safe_dump(config))
    return path


SCALED_CHARS = 1_000_000


def transcript_body(name: str = "sweagent-gpt4__pydicom__pydicom-1458") -> dict[str, Any]:
    return load_bodies()[name]


def load_bodies(directory: Path = TRANSCRIPTS) -> dict[str, dict[str, Any]]:
    """Every transcript in ``directory`` as a chat body routed with ``auto``."""
    paths = sorted(p for p in directory.glob("*.json") if not p.name.endswith(".meta.json"))
    return {path.stem: load_transcript(path).body() for path in paths}


def scaled(body: dict[str, Any], target_chars: int) -> dict[str, Any]:
    """The body with its turns (everything after the first user message) repeated to ~target_chars.

    Each copy's tool-call ids get a suffix so calls and results stay paired.
    """
    messages = body["messages"]
    first_user = next(i for i, m in enumerate(messages) if m.get("role") == "user")
    opening, turns = messages[: first_user + 1], messages[first_user + 1 :]
    copies, grown = 0, list(opening)
    while len(orjson.dumps({**body, "messages": grown})) < target_chars:
        grown.extend(_renamed(turn, copies) for turn in turns)
        copies += 1
    return {**body, "messages": grown}


def _renamed(message: dict[str, Any], copy: int) -> dict[str, Any]:
    renamed = dict(message)
    if isinstance(message.get("tool_call_id"), str):
        renamed["tool_call_id"] = f"{message['tool_call_id']}_r{copy}"
    if isinstance(message.get("tool_calls"), list):
        renamed["tool_calls"] = [{**call, "id": f"{call['id']}_r{copy}"} for call in message["tool_calls"]]
    return renamed


def with_scaled(bodies: dict[str, dict[str, Any]], target_chars: int = SCALED_CHARS) -> dict[str, dict[str, Any]]:
    """``bodies`` plus the largest one scaled to about ``target_chars``."""
    largest = max(bodies, key=lambda name: len(orjson.dumps(bodies[name])))
    return {**bodies, f"{largest[:28]}… ×scaled": scaled(bodies[largest], target_chars)}


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[index]


@dataclass(frozen=True)
class LoadResult:
    latencies_ms: list[float]
    errors: int
    seconds: float

    @property
    def rps(self) -> float:
        return len(self.latencies_ms) / self.seconds if self.seconds else 0.0


async def drive(url: str, body: bytes, requests: int, concurrency: int, stream: bool) -> LoadResult:
    """Send ``requests`` POSTs with ``concurrency`` in flight; time each to its last byte."""
    latencies: list[float] = []
    errors = 0
    remaining = requests
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def worker() -> None:
            nonlocal remaining, errors
            while remaining > 0:
                remaining -= 1
                started = time.perf_counter()
                try:
                    async with http.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
                        data = await resp.read()
                        if resp.status != 200 or (stream and not data.endswith(b"data: [DONE]\n\n")):
                            errors += 1
                            continue
                except aiohttp.ClientError:
                    errors += 1
                    continue
                latencies.append((time.perf_counter() - started) * 1000)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return LoadResult(latencies, errors, time.perf_counter() - started)
