"""SIGTERM: stop accepting, let in-flight streams finish, flush the decision log, exit 0."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
import yaml

from bench.harness import ROOT, free_port, wait_for_port
from tests.support.processes import mock_upstream, router, running, write_config


def start(args: list[str], port: int) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-m", "router", *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for_port(port, 30, process)
    return process


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
async def test_sigterm_mid_stream_drains_the_stream_flushes_the_log_and_exits_0(tmp_path: Path, signum):
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
            proxy.send_signal(signum)
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
        stderr = proxy.stderr.read().decode()
        assert "draining 1 stream (up to 20 s; press Ctrl-C again to stop now)" in stderr
        assert "Traceback" not in stderr
        with sqlite3.connect(log_path) as conn:
            rows = conn.execute("SELECT status, stream, stream_error FROM decisions").fetchall()
        assert rows == [(200, 1, "")]
    finally:
        for process in (proxy, mock):
            if process.poll() is None:
                process.kill()
                process.wait(5)


# --- stopping with live streams: once, twice, past the drain timeout, with a blocked stderr ---


STREAM = {"model": "auto", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


async def open_streams(http: aiohttp.ClientSession, port: int, count: int) -> list[aiohttp.ClientResponse]:
    streams = []
    for _ in range(count):
        resp = await http.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=STREAM)
        assert b"assistant" in await resp.content.readuntil(b"\n\n")
        streams.append(resp)
    return streams


def logged_rows(path: Path) -> list[tuple[int, str, str | None]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT status, stream_error, error_code FROM decisions").fetchall()


@pytest.mark.parametrize(
    ("signals", "drain_timeout", "why"),
    [
        ([signal.SIGINT, signal.SIGINT], 30, "stopped by a second signal"),
        ([signal.SIGTERM], 2, "drain timeout reached"),
    ],
    ids=["second-ctrl-c", "drain-timeout"],
)
async def test_streams_cut_at_stop_end_with_an_error_event_and_done_and_rows_say_why(tmp_path: Path, signals, drain_timeout, why):
    with mock_upstream(event_delay=0.2, words=100) as upstream_port:  # a 20 s answer
        proxy_port = free_port()
        config = write_config(tmp_path, upstream_port, proxy_port, server={"drain_timeout_seconds": drain_timeout})
        with running(router(["serve", "--config", str(config)]), proxy_port) as proxy:
            async with aiohttp.ClientSession() as http:
                streams = await open_streams(http, proxy_port, 2)
                loop = asyncio.get_running_loop()
                signalled = loop.time()
                for signum in signals:
                    proxy.send_signal(signum)
                    await asyncio.sleep(0.3)
                bodies = [await resp.read() for resp in streams]
            code = await loop.run_in_executor(None, proxy.wait, 15)
            stopped_after = loop.time() - signalled
            stderr = proxy.stderr.read().decode()
    assert code == 0
    assert "draining 2 streams (up to " in stderr and "press Ctrl-C again to stop now)" in stderr
    assert "Traceback" not in stderr
    for body in bodies:
        assert body.endswith(b"data: [DONE]\n\n")
        assert b'"code":"server_shutting_down"' in body and b"w99" not in body
    assert stopped_after < drain_timeout + 1.0  # the drain keeps to its timeout (the rest is process exit)
    rows = logged_rows(tmp_path / "decisions.sqlite3")
    assert len(rows) == 2
    for status, stream_error, _ in rows:
        assert status == 200  # what the client got; not 499, the client did not leave
        assert why in stream_error


async def test_sigterm_with_a_stderr_nobody_reads_still_stops_with_exit_code_0(tmp_path: Path):
    with mock_upstream() as upstream_port:
        proxy_port = free_port()
        config = write_config(tmp_path, upstream_port, proxy_port)
        with running(router(["serve", "--config", str(config)]), proxy_port) as proxy:  # stderr: a pipe never read
            body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}
            async with aiohttp.ClientSession() as http:
                for _ in range(400):  # ~400 log lines: more than a pipe holds
                    async with http.post(f"http://127.0.0.1:{proxy_port}/v1/chat/completions", json=body) as resp:
                        assert resp.status == 200
            proxy.send_signal(signal.SIGTERM)
            code = await asyncio.get_running_loop().run_in_executor(None, proxy.wait, 15)
    assert code == 0
    assert len(logged_rows(tmp_path / "decisions.sqlite3")) == 400  # flushed before leaving


def test_a_request_the_proxy_cancels_while_stopping_is_recorded_as_cut_by_the_server_not_as_a_client_that_left():
    from router.observe.decision_record import CLIENT_CLOSED, Decision
    from router.observe.metrics import Metrics
    from router.observe.recorder import Recorder

    recorder = Recorder(Metrics(["m"], ["c"]), None, None, clock=lambda: 0.0, wall_clock=lambda: 0.0)
    recorder.record(Decision(request_id="left", ts=0.0, status=CLIENT_CLOSED, duration_ms=1.0))
    recorder.cutting_at_shutdown = True
    recorder.record(Decision(request_id="cut", ts=0.0, status=CLIENT_CLOSED, duration_ms=1.0))
    recorder.record(Decision(request_id="done", ts=0.0, status=200, duration_ms=1.0))
    text = recorder.metrics.render().decode()
    assert 'status="499"} 1.0' in text and 'status="503"} 1.0' in text and 'status="200"} 1.0' in text
