"""SIGTERM: stop accepting, let in-flight streams finish, flush the decision log, exit 0."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import aiohttp
import yaml

from bench.harness import ROOT, free_port, wait_for_port


def start(args: list[str], port: int) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-m", "router", *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for_port(port, 30, process)
    return process


async def test_sigterm_mid_stream_drains_the_stream_flushes_the_log_and_exits_0(tmp_path: Path):
    upstream_port, proxy_port = free_port(), free_port()
    words = " ".join(f"w{i}" for i in range(10))
    mock = start(["mock-upstream", "--port", str(upstream_port), "--event-delay", "0.15", "--text", words], upstream_port)
    log_path = tmp_path / "decisions.sqlite3"
    config = {
        "server": {"port": proxy_port, "drain_timeout_seconds": 20},
        "middlewares": ["session-fingerprint", "capability-gate", "upstream-forward"],
        "providers": {"mock": {"base_url": f"http://127.0.0.1:{upstream_port}/v1"}},
        "models": [{"name": "m", "provider": "mock", "upstream_model": "m", "context_window": 10_000, "max_output_tokens": 100, "tiers": [1, 2, 3]}],
        "decision_log": {"path": str(log_path)},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    proxy = start(["serve", "--config", str(tmp_path / "config.yaml")], proxy_port)
    try:
        async with aiohttp.ClientSession() as http:
            body = {"model": "auto", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
            resp = await http.post(f"http://127.0.0.1:{proxy_port}/v1/chat/completions", json=body)
            assert b"assistant" in await resp.content.readuntil(b"\n\n")
            proxy.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.3)
            # no new connections while draining
            try:
                await http.get(f"http://127.0.0.1:{proxy_port}/healthz", timeout=aiohttp.ClientTimeout(total=2))
                accepted = True
            except aiohttp.ClientError:
                accepted = False
            assert not accepted
            rest = await resp.read()
        assert rest.endswith(b"data: [DONE]\n\n")
        assert b"w9" in rest and b"error" not in rest  # the whole answer, not an interruption
        assert proxy.wait(30) == 0
        with sqlite3.connect(log_path) as conn:
            rows = conn.execute("SELECT status, stream FROM decisions").fetchall()
        assert rows == [(200, 1)]
    finally:
        for process in (proxy, mock):
            if process.poll() is None:
                process.kill()
                process.wait(5)
