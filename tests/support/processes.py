"""Real `pinch-router` processes for the service tests: a config on disk, a mock upstream, the proxy."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from bench.harness import ROOT, free_port, wait_for_port


def write_config(directory: Path, upstream_port: int, proxy_port: int, model: str = "m", **sections: Any) -> Path:
    """A small config (no classifier) for ``model`` on a mock provider; sections replace or add keys."""
    config: dict[str, Any] = {
        "server": {"port": proxy_port},
        "middlewares": ["session-fingerprint", "capability-gate", "upstream-forward"],
        "providers": {"mock": {"base_url": f"http://127.0.0.1:{upstream_port}/v1"}},
        # a loopback connect to the mock took past the default 5 s on a loaded machine (two suites at
        # once): a 502 none of these tests is about; a test of the timeouts sets its own
        "upstream": {"connect_timeout_seconds": 60},
        "models": [{"name": model, "provider": "mock", "upstream_model": "up", "context_window": 10_000, "max_output_tokens": 100, "tiers": [1, 2, 3]}],
        "decision_log": {"path": str(directory / "decisions.sqlite3")},
    }
    for key, value in sections.items():
        config[key] = {**config.get(key, {}), **value} if isinstance(value, dict) else value
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def router(args: list[str], *, env: dict[str, str] | None = None, cwd: Path = ROOT, **popen: Any) -> subprocess.Popen[bytes]:
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([sys.executable, "-m", "router", *args], cwd=cwd, env={**os.environ, **(env or {})}, **popen)


@contextlib.contextmanager
def running(process: subprocess.Popen[bytes], port: int | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """Wait until ``process`` listens on ``port``; kill it when the block ends, however it ends."""
    try:
        if port is not None:
            wait_for_port(port, 30, process)
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait(5)


@contextlib.contextmanager
def mock_upstream(event_delay: float = 0.0, words: int = 10) -> Iterator[int]:
    """`pinch-router mock-upstream` streaming ``words`` words, one every ``event_delay`` seconds; yields its port."""
    port = free_port()
    text = " ".join(f"w{i}" for i in range(words))
    args = ["mock-upstream", "--port", str(port), "--event-delay", str(event_delay), "--text", text]
    with running(router(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), port):
        yield port


def redis_server_binary() -> str | None:
    """``redis-server`` on PATH (``.ci/run`` installs it), else None."""
    return shutil.which("redis-server")


def start_redis(port: int) -> subprocess.Popen[bytes]:
    """A throwaway ``redis-server`` on loopback ``port``: no persistence, no config file."""
    binary = redis_server_binary()
    assert binary is not None, "redis-server is not installed (apt-get install -y redis-server)"
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "no"]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@contextlib.contextmanager
def redis_running() -> Iterator[int]:
    """A throwaway ``redis-server`` on a free loopback port for the block; yields the port."""
    port = free_port()
    with running(start_redis(port), port):
        yield port
