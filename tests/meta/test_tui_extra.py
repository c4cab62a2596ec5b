"""`textual` is an optional extra: the server runs without it, and `top` says how to get it."""

from __future__ import annotations

import subprocess
import sys

from router.cli import TUI_MISSING, main


import pytest


@pytest.mark.parametrize("missing", ["textual", "rich"])  # a plain `pip install pinch-router` has neither
def test_top_without_the_tui_extra_says_how_to_install_it(monkeypatch, capsys, missing):
    monkeypatch.setitem(sys.modules, missing, None)  # importing it now fails as if not installed
    monkeypatch.delitem(sys.modules, "rich.text", raising=False)
    monkeypatch.delitem(sys.modules, "router.tools.top", raising=False)
    assert main(["top"]) == 1
    assert capsys.readouterr().err.strip() == TUI_MISSING
    assert "pip install 'pinch-router[tui]'" in TUI_MISSING


def test_the_server_and_its_chain_load_without_textual():
    check = "import sys; sys.modules['textual'] = None; import router.server.app, router.server.service, router.server.registry; print('ok')"
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
