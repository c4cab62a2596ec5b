"""End-to-end: the real Codex CLI through `pinch-router serve`, translated and passed through.

What a user does (README "Use with Codex CLI"): Codex pointed at the proxy by a custom
provider in ``~/.codex/config.toml`` with model ``auto``. Codex speaks only the
Responses API. Two runs:

* ``chat``: `pinch-router serve` on the shipped config.yaml, its Ollama provider (OpenAI
  chat completions) standing in as `pinch-router mock-upstream` through ``OLLAMA_URL``:
  the proxy translates Codex's requests to chat and the answers back into Responses events;
* ``responses``: one model at a provider with ``wire: openai-responses`` (the mock's
  Responses API): the requests pass through.

Each run gives Codex a throw-away HOME and a workspace holding two files and runs
``codex exec "list the files"``, then ``codex exec resume --last "which of them is
Python?"``. The mock answers the first request of each prompt with a call to Codex's
shell tool (``exec_command {"cmd": "ls"}``) and the request carrying its output with
text, so a run passes when Codex exits 0 both times and prints the mock's final
message, and the requests the mock recorded carry the output of ``ls`` naming both
workspace files (a chat ``tool`` message, or a ``function_call_output`` item): the
tool call really ran and its result came back through the proxy. It also prints the
proxy's decision rows (wire formats in and out, model, tokens).

Needs Codex CLI installed outside the repo (pinned: tests/data/agents/README.md)::

    mkdir -p ../agents-cc && cd ../agents-cc && npm install --save-exact @openai/codex@0.171.0

then, from the repo: ``.venv/bin/python -m docs.codex_through_proxy --agents ../agents-cc``
(exit 1, with Codex's stderr, when a run fails). Nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson
import urllib.request

from bench.harness import free_port, spawn
from docs.capture_agents import WORKSPACE_FILES

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = (("list the files", False), ("which of them is Python?", True))
TIMEOUT_SECONDS = 180
FINAL_MESSAGE = "Hello from the mock upstream."


def codex_config(proxy_port: int) -> str:
    """The README's config.toml, with the proxy's port."""
    return f"""model = "auto"
model_provider = "pinch"

[model_providers.pinch]
name = "pinch-router"
base_url = "http://127.0.0.1:{proxy_port}/v1"
wire_api = "responses"
env_key = "PINCH_ROUTER_KEY"
"""


def passthrough_config(mock_port: int) -> dict:
    """One model at a provider that speaks the Responses API (`wire: openai-responses`): passed through."""
    return {
        "middlewares": ["session-fingerprint", "pinch-prune", "capability-gate", "upstream-forward"],
        "providers": {"mock": {"base_url": f"http://127.0.0.1:{mock_port}/v1", "wire": "openai-responses"}},
        "models": [
            {"name": "mock-responses", "provider": "mock", "upstream_model": "mock-model", "context_window": 128000,
             "max_output_tokens": 8192, "supports": {"tools": True}, "tiers": [1, 2, 3]},
        ],
    }  # fmt: skip


def run_codex(codex: Path, upstream: str) -> tuple[list[subprocess.CompletedProcess[str]], list[dict], list[str]]:
    """Codex's two prompts through the proxy to the mock; its runs, the proxy's decisions, and the
    tool outputs the mock received (chat ``tool`` messages, or ``function_call_output`` items)."""
    with tempfile.TemporaryDirectory(prefix="pinch-codex-") as scratch:
        home, workspace, state, recordings = (Path(scratch, name) for name in ("home", "work", "state", "requests"))
        for directory in (home / ".codex", workspace, state, recordings):
            directory.mkdir(parents=True)
        for name, text in WORKSPACE_FILES.items():
            (workspace / name).write_text(text)
        mock_port, proxy_port = free_port(), free_port()
        (home / ".codex" / "config.toml").write_text(codex_config(proxy_port))
        config = ROOT / "config.yaml"
        if upstream == "responses":
            config = Path(scratch, "config.yaml")
            config.write_bytes(orjson.dumps(passthrough_config(mock_port)))  # JSON is YAML
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8", "TERM": "dumb", "PINCH_ROUTER_KEY": "unused"}
        proxy_env = {"OLLAMA_URL": f"http://127.0.0.1:{mock_port}/v1", "PINCH_ROUTER_STATE_DIR": str(state)}
        serve = [sys.executable, "-m", "router", "serve", "--config", str(config), "--port", str(proxy_port)]
        mock = [sys.executable, "-m", "router", "mock-upstream", "--port", str(mock_port), "--record", str(recordings)]
        outcomes = []
        with spawn(mock, mock_port), spawn(serve, proxy_port, proxy_env):
            for prompt, follow_up in PROMPTS:
                command = [str(codex), "exec", "--skip-git-repo-check", *(["resume", "--last"] if follow_up else []), prompt]
                done = subprocess.run(command, cwd=workspace, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_SECONDS)
                outcomes.append(done)
            with urllib.request.urlopen(f"http://127.0.0.1:{proxy_port}/v1/decisions?limit=20") as answer:  # loopback only
                rows = list(reversed(orjson.loads(answer.read())["data"]))
        return outcomes, rows, _tool_outputs(recordings)


def _tool_outputs(recordings: Path) -> list[str]:
    """The distinct tool outputs in the requests the mock recorded (a later request repeats the earlier ones)."""
    outputs = set()
    for path in sorted(recordings.glob("*-POST-v1-*.json")):
        body = orjson.loads(path.read_bytes()).get("body") or {}
        for unit in (body.get("messages") or []) + (body.get("input") if isinstance(body.get("input"), list) else []):
            if isinstance(unit, dict) and (unit.get("role") == "tool" or unit.get("type") == "function_call_output"):
                text = unit.get("content") if unit.get("role") == "tool" else unit.get("output")
                if isinstance(text, str):
                    outputs.add(text)
    return sorted(outputs)


UPSTREAMS = {
    "chat": "the shipped config.yaml to a chat-completions mock (translated)",
    "responses": "a provider with wire: openai-responses, the Responses-format mock (passed through)",
}


def run(agents: Path) -> int:
    codex = agents / "node_modules" / ".bin" / "codex"
    if not codex.exists():
        raise SystemExit(f"{codex} not found: install Codex CLI first (see this script's docstring)")
    version = subprocess.run([str(codex), "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    failed = False
    for upstream, how in UPSTREAMS.items():
        outcomes, rows, tool_outputs = run_codex(codex, upstream)
        print(f"{version} through pinch-router serve, {how}\n")
        for (prompt, _), done in zip(PROMPTS, outcomes):
            print(f"$ codex exec {prompt!r}  → exit {done.returncode}, printed: {done.stdout.strip()!r}")
        listed = [o for o in tool_outputs if all(name in o for name in WORKSPACE_FILES)]
        print(f"distinct tool outputs the upstream received: {len(tool_outputs)}, listing the workspace: {len(listed)}")
        print("decisions (oldest first): status, wire in → out, model, tokens")
        for row in rows:
            print(f"  {row['status']}  {row['wire_in']} → {row['wire_out']}  {row['model']}  {row['prompt_tokens']}+{row['completion_tokens']}")
        print()
        if not (all(d.returncode == 0 and FINAL_MESSAGE in d.stdout for d in outcomes) and len(listed) >= len(PROMPTS)):
            failed = True
            print("\n".join(d.stderr for d in outcomes), file=sys.stderr)
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=Path, required=True, help="the npm folder holding node_modules/.bin/codex")
    return run(parser.parse_args().agents)


if __name__ == "__main__":
    sys.exit(main())
