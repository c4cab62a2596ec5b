"""`serve` the way deploy/Dockerfile runs it, without a Docker engine.

An unprivileged uid, a root-owned working directory it cannot write, the
image's ENV lines, its ENTRYPOINT and the compose file's command. What this does
not exercise: the build itself, the python:3.12-slim base, the volume's
ownership as Docker creates it (here the test makes it), and the healthcheck.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
import yaml

from bench.harness import ROOT, free_port
from tests.support.processes import running

DOCKERFILE = ROOT / "deploy" / "Dockerfile"
COMPOSE = ROOT / "deploy" / "compose.yaml"
IMAGE_UID = 10001  # useradd --uid in the Dockerfile


def image_env() -> dict[str, str]:
    return dict(re.findall(r"^ENV (\w+)=(\S+)$", DOCKERFILE.read_text(), re.MULTILINE))


def image_entrypoint() -> list[str]:
    import json

    (line,) = re.findall(r"^ENTRYPOINT (\[.*\])$", DOCKERFILE.read_text(), re.MULTILINE)
    return json.loads(line)


@pytest.fixture
def image_like_dirs() -> Iterator[tuple[Path, Path]]:
    """(a root-owned working directory like /app, a state directory owned by the image's uid like the volume)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run as the image's unprivileged uid")
    base = Path(tempfile.mkdtemp(prefix="pinch-image-", dir="/tmp"))
    try:
        base.chmod(0o755)
        workdir, state = base / "app", base / "state"
        workdir.mkdir(mode=0o755)
        state.mkdir(mode=0o700)
        os.chown(state, IMAGE_UID, IMAGE_UID)
        yield workdir, state
    finally:
        shutil.rmtree(base)


def test_the_image_runs_the_shipped_config_as_its_user():
    assert "USER router" in DOCKERFILE.read_text() and f"--uid {IMAGE_UID}" in DOCKERFILE.read_text()
    assert image_entrypoint() == ["pinch-router", "serve"]
    compose = yaml.safe_load(COMPOSE.read_text())["services"]["pinch-router"]
    assert any(v.endswith(":" + image_env()["PINCH_ROUTER_STATE_DIR"]) for v in compose["volumes"])


async def test_serve_as_the_images_unprivileged_user_in_a_root_owned_directory_answers_healthz(image_like_dirs):
    workdir, state = image_like_dirs
    env = image_env()
    assert env["PINCH_ROUTER_CONFIG"] == "/etc/pinch-router/config.yaml"
    port = free_port()
    env.update(
        PINCH_ROUTER_CONFIG=str(ROOT / "config.yaml"),  # what the image copies to /etc/pinch-router/config.yaml
        PINCH_ROUTER_STATE_DIR=str(state),  # the volume
        PINCH_ROUTER_HOST="127.0.0.1",  # the image says 0.0.0.0; a test listens on loopback only
        PINCH_ROUTER_PORT=str(port),
        OLLAMA_URL=f"http://127.0.0.1:{free_port()}/v1",
        PATH=os.environ["PATH"],
    )
    command = yaml.safe_load(COMPOSE.read_text())["services"]["pinch-router"]["command"]
    entry = [sys.executable, "-m", "router", *image_entrypoint()[1:], *command]
    as_user = ["setpriv", f"--reuid={IMAGE_UID}", f"--regid={IMAGE_UID}", "--clear-groups", *entry]
    process = subprocess.Popen(as_user, cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    with running(process, port):
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
                assert resp.status == 200, shlex.join(as_user)
    database = state / "decisions.sqlite3"
    assert database.stat().st_uid == IMAGE_UID and database.stat().st_mode & 0o777 == 0o600
    assert list(workdir.iterdir()) == []
