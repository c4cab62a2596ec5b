"""End-to-end: the real Gemini CLI through ``pinch-router serve``, to four kinds of upstream.

Starts ``pinch-router mock-upstream`` (it speaks OpenAI chat, Ollama's API, the Anthropic Messages
API and the Gemini API on one port) and, for each run, ``pinch-router serve``; then Gemini CLI runs
once, non-interactively, in a workspace holding two files, with a throw-away HOME whose
``~/.gemini/settings.json`` selects API-key auth (:data:`SETTINGS`)::

    HOME=<tmp> GEMINI_API_KEY=unused GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:<proxy port> \\
    GEMINI_CLI_TRUST_WORKSPACE=true gemini [-m <model>] -p "list the files here"

The runs (:data:`RUNS`):

* ``shipped``: the shipped ``config.yaml``, the mock standing in for Ollama (``OLLAMA_URL``),
  ``-m local-reasoner`` (a catalogue name: Gemini CLI then sends no model-router call). Translated
  Gemini → OpenAI chat; the chat mock calls Gemini CLI's first two tools (``{"n": i}``), which it
  runs and answers, then text.
* ``shipped-auto``: the same config with ``routing.aliases: [auto, "*"]`` (issue #28 ships
  aliases for Gemini CLI's default names) and Gemini CLI's own defaults: its model-router side
  request to a flash-lite model (JSON out, no tools), then the turns.
* ``anthropic``, ``openai``: a config whose one model is behind an ``api: anthropic`` /
  ``api: openai`` provider on the mock: Gemini → Anthropic Messages (through chat), Gemini → chat.
* ``gemini``: an ``api: gemini`` provider: passed through, the mock's thought signatures checked
  on every request (a missing or altered one is a 400), its ``list_directory`` call run in the
  workspace and quoted in the answer.

A run passes when Gemini CLI exits 0, prints the mock's answer, and the upstream got a request
carrying the tool's result: one ``tool`` message per call (chat), one ``tool_result`` per
``tool_use`` (Anthropic), one ``functionResponse`` per ``functionCall`` (Gemini). The proxy's
decisions are printed (status, wire in → out, model, source). Nothing leaves the machine::

    .venv/bin/python -m docs.gemini_cli_e2e --agents ../agents-25

Gemini CLI is the npm package ``@google/gemini-cli`` (pinned: tests/data/agents/README.md).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bench.harness import free_port, spawn

ROOT = Path(__file__).resolve().parent.parent
WORKSPACE_FILES = {"main.py": "print('hello')\n", "notes.txt": "remember the milk\n"}
PROMPT = "list the files here"
# ~/.gemini/settings.json: API-key auth (the key from GEMINI_API_KEY), and nothing sent to Google
# besides the requests (no usage statistics, no telemetry, no update check).
SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
}
ANSWER = "Hello from the mock upstream."


def gemini_environment(home: Path, base_url: str) -> dict[str, str]:
    """Gemini CLI's environment for one run: a fresh HOME with :data:`SETTINGS`, pointed at ``base_url``."""
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_bytes(orjson.dumps(SETTINGS, option=orjson.OPT_INDENT_2))
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "GEMINI_API_KEY": "unused",
        "GOOGLE_GEMINI_BASE_URL": base_url,
        "GEMINI_CLI_TRUST_WORKSPACE": "true",  # headless runs need a trusted workspace
    }


@dataclass(frozen=True)
class Run:
    name: str
    how: str
    model: str | None  # Gemini CLI's -m; None: its defaults (the model-router call, then its choice)


RUNS = (
    Run("shipped", "shipped config.yaml, mock as Ollama (gemini → openai-chat)", "local-reasoner"),
    Run("shipped-auto", "shipped config.yaml + aliases [auto, \"*\"], Gemini CLI's own model names", None),
    Run("anthropic", "an api: anthropic provider (gemini → anthropic-messages, through chat)", None),
    Run("openai", "an api: openai provider (gemini → openai-chat)", None),
    Run("gemini", "an api: gemini provider (passed through, signatures checked)", None),
)


def run_config(run: Run, mock_port: int, scratch: Path) -> Path:
    """The config file of one run."""
    shipped = (ROOT / "config.yaml").read_text()
    if run.name == "shipped":
        return ROOT / "config.yaml"
    path = scratch / f"{run.name}.yaml"
    if run.name == "shipped-auto":
        path.write_text(shipped.replace("  aliases: [auto]  ", '  aliases: [auto, "*"]  '))
        return path
    api = {"anthropic": f'{{base_url: "http://127.0.0.1:{mock_port}", api: anthropic}}', "openai": f'{{base_url: "http://127.0.0.1:{mock_port}/v1"}}',
           "gemini": f'{{base_url: "http://127.0.0.1:{mock_port}", api: gemini, api_key_env: MOCK_KEY}}'}[run.name]
    path.write_text(f"""server: {{host: 127.0.0.1}}
providers:
  mock: {api}
models:
  - {{name: mock-{run.name}, provider: mock, upstream_model: mock, context_window: 200000, max_output_tokens: 32000,
     supports: {{tools: true, vision: true, json_mode: true}}, tiers: [1, 2, 3]}}
routing: {{aliases: [auto, "*"]}}
middlewares: [session-fingerprint, classification-cache, pinch-prune, capability-gate, upstream-forward]
""")
    return path


def upstream_got_results(recorded: Path, since: int) -> bool:
    """The upstream's last request with tool results answers every call of the turn before it, once."""
    bodies = [orjson.loads(p.read_bytes()).get("body") or {} for p in sorted(recorded.iterdir())[since:]]
    for body in reversed(bodies):
        messages = body.get("messages")
        if isinstance(messages, list) and any(m.get("role") == "tool" for m in messages):  # chat
            calls = [c["id"] for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
            return bool(calls) and sorted(m["tool_call_id"] for m in messages if m.get("role") == "tool") == sorted(calls)
        if isinstance(messages, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for m in messages for b in m.get("content") or [] if isinstance(m.get("content"), list)):
            blocks = [b for m in messages if isinstance(m.get("content"), list) for b in m["content"] if isinstance(b, dict)]
            return sorted(b["id"] for b in blocks if b.get("type") == "tool_use") == sorted(b["tool_use_id"] for b in blocks if b.get("type") == "tool_result")
        contents = body.get("contents")
        if isinstance(contents, list) and any("functionResponse" in p for c in contents for p in c.get("parts", [])):
            calls = [p["functionCall"]["id"] for c in contents for p in c.get("parts", []) if "functionCall" in p]
            answers = [p["functionResponse"]["id"] for c in contents for p in c.get("parts", []) if "functionResponse" in p]
            return bool(calls) and sorted(calls) == sorted(answers)
    return False


def decisions(port: int) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/decisions?limit=50", timeout=10) as response:
        return list(reversed(orjson.loads(response.read())["data"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=Path, required=True, help="the npm folder holding node_modules/.bin/gemini")
    parser.add_argument("--only", choices=[r.name for r in RUNS], help="one run")
    args = parser.parse_args()
    binary = args.agents.resolve() / "node_modules" / ".bin" / "gemini"
    if not binary.exists():
        raise SystemExit(f"{binary} not found: npm install --save-exact @google/gemini-cli@0.61.0 there first")
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": tempfile.mkdtemp()}).stdout.strip()
    failed = 0
    with tempfile.TemporaryDirectory(prefix="pinch-gemini-") as tmp:
        scratch = Path(tmp)
        mock_port = free_port()
        recorded = scratch / "upstream-requests"
        mock = [sys.executable, "-m", "router", "mock-upstream", "--port", str(mock_port), "--record", str(recorded)]
        with spawn(mock, mock_port):
            for run in RUNS:
                if args.only and run.name != args.only:
                    continue
                proxy_port = free_port()
                config = run_config(run, mock_port, scratch)
                env = {**os.environ, "MOCK_KEY": "mock-provider-key", "OLLAMA_URL": f"http://127.0.0.1:{mock_port}/v1"}
                serve = [sys.executable, "-m", "router", "serve", "--config", str(config), "--port", str(proxy_port), "--state-dir", str(scratch / run.name / "state")]
                home, workspace = scratch / run.name / "home", scratch / run.name / "work"
                workspace.mkdir(parents=True)
                for name, text in WORKSPACE_FILES.items():
                    (workspace / name).write_text(text)
                since = len(list(recorded.iterdir())) if recorded.exists() else 0
                with spawn(serve, proxy_port, env=env):
                    command = [str(binary), *(["-m", run.model] if run.model else []), "-p", PROMPT]
                    done = subprocess.run(
                        command, cwd=workspace, env=gemini_environment(home, f"http://127.0.0.1:{proxy_port}"),
                        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240,
                    )
                    rows = decisions(proxy_port)
                ok = done.returncode == 0 and ANSWER in done.stdout and upstream_got_results(recorded, since)
                failed += not ok
                print(f"gemini {version}, {run.name}: {run.how}: exit {done.returncode}, {'tool ran, answer printed' if ok else 'FAILED'}")
                print(f"  $ gemini {' '.join(command[1:])}")
                print(f"  stdout: {done.stdout.strip()[:240]!r}")
                for row in rows:
                    print(f"  {row['status']}  {row['wire_in']} → {row['wire_out']}  {row['requested_model']} → {row['model']}  {row['source'] or '-'}  session {row['session_source']}")
                if not ok:
                    print(f"  stderr: {done.stderr.strip()[-3000:]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
