"""`pinch-router serve` as a real process on the shipped config.yaml."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from bench.harness import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def served_shipped_config(tmp_path):
    """The shipped config.yaml, with Ollama pointed at a loopback port where nothing listens."""
    port = free_port()
    env = {**os.environ, "OLLAMA_URL": f"http://127.0.0.1:{free_port()}/v1", "PINCH_ROUTER_STATE_DIR": str(tmp_path)}
    process = subprocess.Popen(
        [sys.executable, "-m", "router", "serve", "--config", str(ROOT / "config.yaml"), "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, 30, process)
        yield port, process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)


async def test_shipped_config_serves_and_reports_ollama_down_as_502(served_shipped_config):
    port, process = served_shipped_config
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
            assert resp.status == 200
        async with http.get(f"http://127.0.0.1:{port}/v1/models") as resp:
            assert "local-coder" in [m["id"] for m in (await resp.json())["data"]]
        body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}
        async with http.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=aiohttp.ClientTimeout(total=30)) as resp:
            assert resp.status == 502
            error = (await resp.json())["error"]
            assert error["code"] == "upstream_unavailable"
            assert "via ollama" in error["message"]


def test_sigterm_stops_the_server_with_exit_code_0(served_shipped_config):
    _, process = served_shipped_config
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0


async def test_serving_freezes_the_start_up_objects_and_collects_young_objects_less_often():
    import gc

    from router.cli import GC_YOUNG_THRESHOLD, tune_gc_for_serving

    thresholds = gc.get_threshold()
    try:
        await tune_gc_for_serving(None)
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *thresholds[1:])
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
