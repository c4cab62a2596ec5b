"""The decision log's promise on ``kill -9`` (issue #27, item 10): every row older than
``decision_log.flush_interval_seconds`` is on disk; only the rows of the last interval may be lost.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import aiohttp

from bench.harness import free_port
from tests.support.processes import mock_upstream, router, running, write_config

FLUSH_SECONDS = 0.5


async def test_a_process_killed_outright_keeps_every_row_older_than_the_flush_interval(tmp_path: Path) -> None:
    with mock_upstream() as upstream_port:
        port = free_port()
        config = write_config(tmp_path, upstream_port, port, decision_log={"path": str(tmp_path / "decisions.sqlite3"), "flush_interval_seconds": FLUSH_SECONDS})
        with running(router(["serve", "--config", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), port) as served:
            async with aiohttp.ClientSession() as http:
                for i in range(40):
                    async with http.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={"model": "auto", "messages": [{"role": "user", "content": f"hi {i}"}]}) as resp:
                        assert resp.status == 200
            time.sleep(FLUSH_SECONDS * 3)  # older than the interval now
            served.send_signal(signal.SIGKILL)
            served.wait(5)
    with sqlite3.connect(tmp_path / "decisions.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM decisions").fetchone()[0] == 40
