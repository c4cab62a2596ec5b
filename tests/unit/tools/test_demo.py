"""`pinch-router demo`: a shared session through the full chain to the mock upstream, its figures eval-pinch's."""

from __future__ import annotations

import asyncio
import fcntl
import io
import os
import re
import signal
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from router.cli import main
from router.config import load_config
from router.tools.demo import command_name, DEFAULT_TRANSCRIPT, SESSION_FILE, TurnView, configured_mode, format_summary, run_demo
from router.tools.eval_pinch import MODES, NO_PINCH, SCENARIOS, SHARED_TRANSCRIPTS, Turn, run_eval
from router.tools.transcripts import load_transcript

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = load_config(ROOT / "config.yaml")
COLD = next(s for s in SCENARIOS if s.name == "cold")
SMALL = SHARED_TRANSCRIPTS / "sweagent-gpt4__pydicom__pydicom-1458.json"


def test_the_demo_reports_what_eval_pinch_reports_for_the_same_transcript_and_settings(tmp_path: Path) -> None:
    transcript = load_transcript(DEFAULT_TRANSCRIPT)
    budget = SHIPPED.pinch.budget_tokens
    mode = configured_mode(SHIPPED)
    demo = asyncio.run(run_demo(SHIPPED, transcript, COLD, budget, tmp_path))
    report = io.StringIO()
    results = asyncio.run(run_eval(SHIPPED, [transcript], report, io.StringIO(), budgets=[budget], scenarios=[COLD], modes=[mode]))
    assert demo.ratios == results.ratios([transcript.name], COLD, budget, mode)
    assert demo.ratios.sent_ratio < 0.9 and demo.ratios.batches > 0  # pinch did something on this session
    # the same figures as printed: eval-pinch's row for the configured mode, and the demo's summary
    row = next(line for line in report.getvalue().splitlines() if line.strip().startswith(mode.name))
    summary = format_summary(demo, "config.yaml", tmp_path)
    sent = f"{demo.pinched.cost(COLD).tokens_sent:,}"
    assert sent in row and sent in summary
    for figure in (f"{demo.ratios.sent_ratio:.2f}", f"{demo.ratios.cost_ratio:.2f}", f"{demo.ratios.fresh_ratio:.2f}"):
        assert figure in row and f"{figure}×" in summary
    assert f"{demo.ratios.reported_cached_share:.1%}" in row and f"{demo.ratios.reported_cached_share:.1%}" in summary


def test_the_demo_runs_the_full_chain_and_each_turn_says_what_happened(tmp_path: Path) -> None:
    transcript = load_transcript(SMALL)
    demo = asyncio.run(run_demo(SHIPPED, transcript, COLD, 8_000, tmp_path))
    turns = demo.pinched.turns
    assert len(turns) == len(transcript.turn_requests()) and all(t.status == 200 for t in turns)
    models = {t.headers["x-router-model"] for t in turns}
    assert models <= {m.name for m in SHIPPED.models} and models  # the configured catalogue, not eval-pinch's replay model
    sources = [t.headers["x-router-source"] for t in turns]
    assert sources[0] == "classifier" and "cached" in sources[1:]  # the classifier and its session cache ran
    assert any(int(t.headers["x-router-pinch-saved"]) > 0 for t in turns)
    assert (tmp_path / SESSION_FILE).exists() and demo.explain_file is not None and demo.explain_file.exists()


def test_the_command_shows_every_turn_a_summary_and_commands_that_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--state-dir", str(tmp_path), "--transcript", str(SMALL), "--budget", "8000"]) == 0
    out = capsys.readouterr().out
    assert len(re.findall(r"^turn +\d+/12 ", out, re.M)) == 12
    assert "summary — sweagent-gpt4__pydicom__pydicom-1458" in out and "cost, input-token units" in out
    commands = [line.split("   #")[0].strip() for line in out.split("look closer:")[1].splitlines() if line.strip()]
    program = command_name()
    assert program != "pinch-router" or shutil.which("pinch-router")  # the hints name a command that runs as printed
    explain = next(c for c in commands if c.startswith(f"{program} explain"))
    done = subprocess.run(explain, shell=True, capture_output=True, text=True)  # the demo's explain command, as printed
    assert done.returncode == 0 and "pinch " in done.stdout, done.stderr
    query = next(c for c in commands if c.startswith("python3 -c"))
    rows = subprocess.run(query, shell=True, capture_output=True, text=True, check=True).stdout.splitlines()
    assert len(rows) == 12  # the decision log of the pinch replay: a row per turn
    assert any(c.startswith(f"{program} top") for c in commands) and any(c.startswith(f"{program} eval-pinch") for c in commands)
    version = subprocess.run(f"{program} eval-pinch --help", shell=True, capture_output=True, text=True)
    assert version.returncode == 0  # the eval-pinch hint's command is there too


def test_a_terminal_sees_a_progress_bar_under_the_lines() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    view = TurnView(stream, total=4, width=8)
    headers = {"x-router-model": "local-coder", "x-router-source": "cached", "x-router-pinch-saved": "1200"}
    view.turn(Turn(1, 4, 200, headers, 5_000, 3_800, 1_900))
    assert "turn   2/4  local-coder     cached      saved  1,200  cached  50%  (sent 3,800 of 5,000)\n" in stream.getvalue()
    assert stream.getvalue().endswith("[####----] 2/4 turns")
    view.turn(Turn(2, 4, 400, {}, 5_000, 0, 0, "no_capable_model"))
    assert "turn   3/4  refused: 400 no_capable_model" in stream.getvalue()


def test_the_packaged_demo_transcript_is_the_shared_one() -> None:
    assert DEFAULT_TRANSCRIPT.read_bytes() == (SHARED_TRANSCRIPTS / DEFAULT_TRANSCRIPT.name).read_bytes()
    meta = DEFAULT_TRANSCRIPT.with_suffix(".meta.json")
    assert meta.read_bytes() == (SHARED_TRANSCRIPTS / meta.name).read_bytes()  # its provenance and license travel with it


def test_the_configured_mode_is_eval_pinchs_row() -> None:
    assert configured_mode(SHIPPED) in MODES and configured_mode(SHIPPED).ledger == SHIPPED.pinch.ledger
    off = SHIPPED.model_copy(update={"pinch": SHIPPED.pinch.model_copy(update={"enabled": False})})
    assert configured_mode(off) is NO_PINCH


@pytest.mark.system
def test_ctrl_c_stops_the_demo_cleanly(tmp_path: Path) -> None:
    """Ctrl-C mid-replay. The replay takes well under a second, and a loaded machine delayed the test's
    signal past its end (the demo done, exit 0), so the demo is held mid-replay: its output goes to a
    pipe of one page that the test stops reading at the first turn, and a full pipe stops the demo at
    its next line, some 40 turns of 80 in at most."""
    read_end, write_end = os.pipe()
    if hasattr(fcntl, "F_SETPIPE_SZ"):  # Linux; elsewhere a pipe holds 64 KiB, the demo's output whole
        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    process = subprocess.Popen(
        [sys.executable, "-m", "router", "demo", "--state-dir", str(tmp_path)],
        stdout=write_end,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        # Ctrl-C as a terminal delivers it, however the suite was started: a process started in the
        # background by a script inherits SIGINT ignored, and a demo that ignores it runs to its end
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    os.close(write_end)
    seen = b""
    while not re.search(rb"(^|\n)turn [^\n]*\n", seen):  # mid-replay: both servers are up
        chunk = os.read(read_end, 256)
        assert chunk, seen.decode(errors="replace")
        seen += chunk
    process.send_signal(signal.SIGINT)
    with os.fdopen(read_end, "rb") as rest:
        out = (seen + rest.read()).decode()
    err = process.communicate(timeout=30)[1]
    assert process.returncode == 130, err
    assert "stopped (Ctrl-C)" in out and "summary" not in out
    assert "Traceback" not in err
