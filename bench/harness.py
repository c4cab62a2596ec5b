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


def transcript_body(name: str = "sweagent-gpt4__pydicom__pydicom-1458") -> dict[str, Any]:
    data = orjson.loads((TRANSCRIPTS / f"{name}.json").read_bytes())
    return {"model": "auto", "messages": data["messages"], "tools": data["tools"]}


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
