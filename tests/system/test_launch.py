"""``pinch-router launch`` end to end (#47): it starts the proxy when none answers, runs the agent
wired through its environment, returns the agent's exit code, stops the proxy it started, and leaves
the user's own files as they were.

The agent is a stand-in on PATH named ``claude``: a script that does what Claude Code does with the
environment launch gives it (a Messages request to ``$ANTHROPIC_BASE_URL/v1/messages`` with
``x-api-key: $ANTHROPIC_API_KEY``), prints the answer's text and exits with the code it was told to.
The real agents' runs are in docs/agents.md.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness import ROOT, free_port
from router.tools.launch import answering
from tests.support.processes import mock_upstream, write_config

FAKE_CLAUDE = """#!{python}
import json, os, sys, urllib.error, urllib.request
body = json.dumps({{"model": "claude-opus-5-5", "max_tokens": 64, "messages": [{{"role": "user", "content": " ".join(sys.argv[1:])}}]}}).encode()
request = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", body, {{"x-api-key": os.environ["ANTHROPIC_API_KEY"], "content-type": "application/json", "x-claude-code-session-id": "launch-test"}})
try:
    with urllib.request.urlopen(request, timeout=30) as answer:
        print(json.load(answer)["content"][0]["text"])
except urllib.error.HTTPError as error:  # what the proxy said, for the test's message
    sys.exit(f"HTTP {{error.code}}: {{error.read().decode(errors='replace')}}")
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
"""


def tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def world(tmp_path: Path):
    """A mock upstream, a config for a proxy not yet running (a client key named ``dev``), a HOME with
    the user's own Claude settings, and the stand-in ``claude`` on PATH."""
    bin_dir, home = tmp_path / "bin", tmp_path / "home"
    bin_dir.mkdir()
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text('{"model": "opus"}')
    fake = bin_dir / "claude"
    fake.write_text(FAKE_CLAUDE.format(python=sys.executable))
    fake.chmod(0o755)
    with mock_upstream() as upstream:
        port = free_port()
        config = write_config(tmp_path, upstream, port, model="local", server={"port": port, "api_keys": [{"name": "dev", "key": "k-dev-1"}]},
                              routing={"model_families": {"claude-*": "auto"}})  # fmt: skip
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(home), "PINCH_ROUTER_STATE_DIR": str(tmp_path / "state")}
        env.pop("PINCH_ROUTER_KEY", None)
        yield config, env, port, home


def run_launch(config: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "router", "launch", "--config", str(config), *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_launch_starts_the_proxy_runs_the_agent_through_it_and_returns_its_exit_code(world) -> None:
    config, env, port, home = world
    before = tree_digest(home)
    done = run_launch(config, {**env, "FAKE_EXIT": "3"}, "claude", "list", "the", "files")
    assert done.returncode == 3, done.stderr  # the agent's own exit code
    assert f"starting the proxy on {config}" in done.stderr and done.stdout.strip()  # the mock's answer, through the proxy
    assert not answering(f"http://127.0.0.1:{port}")  # the proxy launch started is stopped again
    assert tree_digest(home) == before  # the user's own files: unchanged
    rows = sqlite3.connect(config.parent / "decisions.sqlite3").execute("select client, session_source, status from decisions").fetchall()
    assert rows == [("dev", "header", 200)]  # the agent's session, with the config's key


def test_a_proxy_that_answers_already_is_used_and_keep_proxy_leaves_the_one_launch_started(world) -> None:
    config, env, port, _ = world
    first = run_launch(config, env, "--keep-proxy", "claude", "hi")
    assert first.returncode == 0, first.stderr
    try:
        second = run_launch(config, env, "claude", "again")
        assert second.returncode == 0 and "starting the proxy" not in second.stderr  # the running one, left running
        assert answering(f"http://127.0.0.1:{port}")
    finally:
        subprocess.run(["pkill", "-f", f"serve --config {config}"], check=False)
