"""The README's commands, run as a new user runs them: the proxy on the shipped config, and the demo."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
BIN = Path(sys.executable).parent  # the venv the set-up commands made: .venv/bin


def sh_blocks() -> list[str]:
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", README, re.S)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_proxy_command_serves_the_shipped_config(tmp_path: Path) -> None:
    setup = next(b for b in sh_blocks() if b.endswith("serve --config config.yaml"))
    assert setup.startswith("python3 -m venv .venv && .venv/bin/pip install -e . && ")
    command = setup.rsplit(" && ", 1)[1].split()  # the venv is this one; the serve part runs as written
    assert command[0] == ".venv/bin/pinch-router"
    port = free_port()
    env = {**os.environ, "PINCH_ROUTER_PORT": str(port), "PINCH_ROUTER_STATE_DIR": str(tmp_path), "OLLAMA_URL": f"http://127.0.0.1:{free_port()}/v1"}
    process = subprocess.Popen([str(BIN / "pinch-router"), *command[1:]], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
                    assert answer.status == 200
                    break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, "serve did not come up"
                time.sleep(0.2)
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_demo_command_runs_and_prints_what_the_readme_shows(tmp_path: Path) -> None:
    demo = next(b for b in sh_blocks() if b.endswith("pinch-router demo"))
    assert demo == ".venv/bin/pinch-router demo"
    env = {**os.environ, "PINCH_ROUTER_STATE_DIR": str(tmp_path)}
    result = subprocess.run([str(BIN / "pinch-router"), "demo"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    excerpt = README.split(".venv/bin/pinch-router demo\n```", 1)[1].split("```\n", 2)[1]
    shown = [line for line in excerpt.splitlines() if line.strip() and line.strip() != "..."]
    assert shown and [line for line in shown if line.rstrip() not in result.stdout] == []
    assert "Traceback" not in result.stderr
