"""matplotlib is an optional extra (`plot`): nothing the server loads imports it, and `eval-pinch --plot` says how to get it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from router.cli import main
from router.cli import PLOT_MISSING
from router.tools.eval_pinch import SHARED_TRANSCRIPTS


def test_the_server_its_chain_and_the_other_commands_load_without_matplotlib() -> None:
    check = (
        "import sys; sys.modules['matplotlib'] = None; "
        "import router.server.app, router.server.service, router.server.registry, router.cli, router.tools.eval_pinch, router.tools.demo; "
        "print('ok')"
    )
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def test_plot_without_the_extra_says_how_to_install_it_before_replaying(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # importing it now fails as if not installed
    monkeypatch.delitem(sys.modules, "router.tools.pinch_plot", raising=False)
    transcript = SHARED_TRANSCRIPTS / "sweagent-gpt4__pydicom__pydicom-1458.json"
    assert main(["eval-pinch", "--scenario", "cold", "--plot", str(tmp_path), str(transcript)]) == 1
    captured = capsys.readouterr()
    assert captured.err.strip() == PLOT_MISSING and captured.out == ""
    assert "pip install 'pinch-router[plot]'" in PLOT_MISSING and not list(tmp_path.iterdir())
