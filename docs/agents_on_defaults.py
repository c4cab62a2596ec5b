"""Every agent on its defaults, through `pinch-router serve` on the shipped config.yaml to `pinch-router mock-upstream`.

For each agent this makes a throw-away HOME and a workspace holding ``main.py`` and ``notes.txt``,
writes the agent's set-up as docs/agents.md shows it (base URL on loopback, no ``--model`` for
Claude Code and Codex: their default model names route through ``routing.model_families``),
and runs it non-interactively, stdin closed, twice:

1. **through the proxy**: ``pinch-router mock-upstream --record UP`` standing in for Ollama and
   ``pinch-router serve --config config.yaml`` pointed at it (``OLLAMA_URL``). The run passes when
   the agent exits 0 and the upstream received a tool result listing the workspace (the mock's
   call of the agent's shell tool really ran: a tool round trip; aider, which has no tools, an
   answer). The proxy's decisions say which model each request got and why;
2. **for the fixtures**: straight against ``mock-upstream --record DIR``, so DIR holds what the agent
   itself sent; with ``--fixtures`` those requests are written to tests/data/agents/on-defaults/<agent>/
   (curated as docs/capture_agents.py curates: the temp dir renamed, long prose cut), which CI
   replays through the shipped config (tests/system/test_agents_on_shipped_config.py).

Nothing leaves the machine: every base URL is loopback, update checks and telemetry are off
(``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``, ``OPENCODE_DISABLE_*``, ``PI_OFFLINE``, aider's
``--no-check-update --analytics-disable``). Agents installed outside the repo (versions: docs/agents.md)::

    mkdir -p ../agents-28 && cd ../agents-28 && npm install --save-exact @anthropic-ai/claude-code@2.1.332 \\
        @openai/codex@0.171.0 opencode-ai@1.18.33 @mariozechner/pi-coding-agent@0.73.1 @qwen-code/qwen-code@0.24.4 \\
        @continuedev/cli@1.5.47 cline@3.0.65 @google/gemini-cli@0.61.0
    mkdir kilo && (cd kilo && npm install --save-exact @kilocode/cli@7.7.7)
    python3 -m venv aider-venv && aider-venv/bin/pip install aider-chat==0.86.2
    python3 -m venv mini-venv && mini-venv/bin/pip install mini-swe-agent==2.4.6

then, from the repo::

    .venv/bin/python -m docs.agents_on_defaults --agents ../agents-28 [--only NAME]... [--fixtures]

It prints one line per agent (version, exit code, requests, tool round trip, the models chosen)
and exits 1 when one fails (with the end of its output).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from bench.harness import free_port, spawn
from docs.capture_agents import FIXTURES, WORKSPACE_FILES, curated

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "list the files here"
TIMEOUT_SECONDS = 240
Files = dict[str, str]  # path under the scratch dir ("home/..." or "work/...") → text


@dataclass(frozen=True)
class Agent:
    name: str
    binary: str  # under the agents dir
    command: Callable[[Path], list[str]]  # the binary's path → the command line
    env: Callable[[str], dict[str, str]]  # base URL root (http://127.0.0.1:PORT) → environment
    files: Callable[[str], Files]  # base URL root → set-up files
    tools: bool = True  # aider has none: its run is one answer
    version: tuple[str, ...] = ("--version",)


def _opencode_json(root: str, schema: str = "https://opencode.ai/config.json") -> str:
    provider = {"npm": "@ai-sdk/openai-compatible", "name": "pinch-router", "options": {"baseURL": f"{root}/v1"},
                "models": {"auto": {"limit": {"context": 40960, "output": 16384}}}}  # fmt: skip
    return json.dumps({"$schema": schema, "provider": {"pinch-router": provider}, "model": "pinch-router/auto"}, indent=2)


OPENCODE_QUIET = {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_SHARE": "1",
                  "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1"}  # fmt: skip
CODEX_TOML = """model_provider = "pinch"

[model_providers.pinch]
name = "pinch-router"
base_url = "{root}/v1"
wire_api = "responses"
env_key = "PINCH_ROUTER_KEY"
"""
CONTINUE_YAML = """name: pinch-router
version: 1.0.0
schema: v1
models:
  - name: pinch-router
    provider: openai
    model: auto
    apiBase: {root}/v1
    apiKey: unused
    roles: [chat, edit, apply]
    capabilities: [tool_use]
"""
AIDER_METADATA = json.dumps({"openai/auto": {"max_input_tokens": 40960, "max_output_tokens": 16384, "litellm_provider": "openai",
                                             "mode": "chat", "input_cost_per_token": 0, "output_cost_per_token": 0}})  # fmt: skip

# Gemini CLI's ~/.gemini/settings.json: API-key auth, nothing sent to Google but the requests (docs/gemini_cli_e2e.py).
GEMINI_SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
}

AGENTS = (
    Agent("claude-code", "node_modules/.bin/claude", lambda b: [str(b), "-p", PROMPT, "--allowedTools", "Bash"],
          lambda root: {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "ANTHROPIC_BASE_URL": root, "ANTHROPIC_API_KEY": "unused"},
          lambda root: {}),
    Agent("codex", "node_modules/.bin/codex", lambda b: [str(b), "exec", "--skip-git-repo-check", PROMPT],
          lambda root: {"PINCH_ROUTER_KEY": "unused"}, lambda root: {"home/.codex/config.toml": CODEX_TOML.format(root=root)}),
    Agent("opencode", "node_modules/.bin/opencode", lambda b: [str(b), "run", PROMPT],
          lambda root: OPENCODE_QUIET, lambda root: {"work/opencode.json": _opencode_json(root)}),
    Agent("pi", "node_modules/.bin/pi", lambda b: [str(b), "--provider", "pinch-router", "--model", "auto", "-p", PROMPT],
          lambda root: {"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"},
          lambda root: {"home/.pi/agent/models.json": json.dumps({"providers": {"pinch-router": {
              "baseUrl": f"{root}/v1", "api": "openai-completions", "apiKey": "unused", "models": [{"id": "auto"}]}}})}),
    Agent("continue", "node_modules/.bin/cn", lambda b: [str(b), "--config", "~/.continue/config.yaml", "--auto", "-p", PROMPT],
          lambda root: {}, lambda root: {"home/.continue/config.yaml": CONTINUE_YAML.format(root=root)}),
    Agent("qwen-code", "node_modules/.bin/qwen", lambda b: [str(b), "-p", PROMPT, "--yolo"],
          lambda root: {"OPENAI_BASE_URL": f"{root}/v1", "OPENAI_API_KEY": "unused", "OPENAI_MODEL": "auto", "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1"},
          lambda root: {}),
    Agent("cline", "node_modules/.bin/cline", lambda b: [str(b), PROMPT], lambda root: {}, lambda root: {}),  # set up by `cline auth` (below)
    Agent("kilo", "kilo/node_modules/.bin/kilo", lambda b: [str(b), "run", PROMPT],
          lambda root: OPENCODE_QUIET, lambda root: {"work/kilo.json": _opencode_json(root, "https://kilo.ai/config.json")}),
    Agent("aider", "aider-venv/bin/aider",
          lambda b: [str(b), "--model", "openai/auto", "--no-show-model-warnings", "--no-check-update", "--analytics-disable",
                     "--no-git", "--yes", "--message", "what does main.py do?", "main.py"],
          lambda root: {"OPENAI_API_BASE": f"{root}/v1", "OPENAI_API_KEY": "unused"},
          lambda root: {"home/.aider.model.metadata.json": AIDER_METADATA}, tools=False),
    Agent("gemini-cli", "node_modules/.bin/gemini", lambda b: [str(b), "-p", PROMPT],
          lambda root: {"GEMINI_API_KEY": "unused", "GOOGLE_GEMINI_BASE_URL": root, "GEMINI_CLI_TRUST_WORKSPACE": "true"},
          lambda root: {"home/.gemini/settings.json": json.dumps(GEMINI_SETTINGS)}),
    Agent("mini-swe-agent", "mini-venv/bin/mini",
          lambda b: [str(b), "--model", "openai/auto", "--yolo", "--exit-immediately", "--cost-limit", "0", "-t", PROMPT, "-o", "trajectory.json"],
          lambda root: {"OPENAI_API_BASE": f"{root}/v1", "OPENAI_API_KEY": "unused", "MSWEA_CONFIGURED": "true",
                        "MSWEA_COST_TRACKING": "ignore_errors", "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
          lambda root: {}, version=("--help",)),
)  # fmt: skip


@dataclass
class Run:
    agent: Agent
    version: str
    code: int
    output: str
    requests: list[Path]  # what the mock recorded, in order
    decisions: list[dict]

    def round_trip(self) -> bool:
        """The upstream got a tool result that lists the workspace (aider: an answer was asked for)."""
        for path in self.requests:
            record = orjson.loads(path.read_bytes())
            if not self.agent.tools:
                if record["path"].endswith("/chat/completions"):
                    return True
                continue
            body = record.get("body", {})
            text = json.dumps(body.get("messages") or body.get("input") or body.get("contents") or [])
            # chat, Anthropic, Responses, Gemini
            results = ('"role": "tool"', '"tool_result"', '"function_call_output"', '"custom_tool_call_output"', '"functionResponse"')
            if any(marker in text for marker in results) and all(name in text for name in WORKSPACE_FILES):
                return True
        return False


def _prepare(agent: Agent, scratch: Path, root: str) -> tuple[Path, Path, dict[str, str]]:
    home, work = scratch / "home", scratch / "work"
    shutil.rmtree(scratch, ignore_errors=True)
    home.mkdir(parents=True)
    work.mkdir()
    for name, text in WORKSPACE_FILES.items():
        (work / name).write_text(text)
    for relative, text in agent.files(root).items():
        target = scratch / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8", "TERM": "dumb", **agent.env(root)}
    return home, work, env


def run_agent(agent: Agent, agents_dir: Path, scratch: Path, root: str) -> tuple[str, int, str]:
    binary = agents_dir / agent.binary
    if not binary.exists():
        raise SystemExit(f"{binary} not found: install the agents first (see this script's docstring)")
    home, work, env = _prepare(agent, scratch, root)
    if agent.name == "cline":  # its provider is set up by its own command, as docs/agents.md shows
        subprocess.run([str(binary), "auth", "-p", "openai", "-k", "unused", "-m", "auto", "-b", f"{root}/v1"], env=env, cwd=work,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=True)  # fmt: skip
    said = subprocess.run([str(binary), *agent.version], env=env, capture_output=True, text=True, timeout=60)
    version = (said.stdout.strip() or said.stderr.strip()).splitlines()  # pi says it on stderr
    command = [part.replace("~", str(home)) for part in agent.command(binary)]
    done = subprocess.run(command, cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_SECONDS)
    said = version[0].removeprefix("This is mini-swe-agent version ").rstrip(".") if version else "?"
    return said, done.returncode, (done.stdout + done.stderr).replace(str(scratch), "/tmp/pinch-agents")


def through_proxy(agent: Agent, agents_dir: Path, scratch: Path) -> Run:
    mock_port, proxy_port = free_port(), free_port()
    upstream = scratch / "upstream"
    upstream.mkdir(parents=True)
    mock = [sys.executable, "-m", "router", "mock-upstream", "--port", str(mock_port), "--record", str(upstream)]
    env = {"OLLAMA_URL": f"http://127.0.0.1:{mock_port}/v1", "PINCH_ROUTER_STATE_DIR": str(scratch / "state")}
    serve = [sys.executable, "-m", "router", "serve", "--config", str(ROOT / "config.yaml"), "--port", str(proxy_port)]
    with spawn(mock, mock_port), spawn(serve, proxy_port, env=env, log_path=scratch / "proxy.log"):
        root = f"http://127.0.0.1:{proxy_port}"
        version, code, output = run_agent(agent, agents_dir, scratch / "agent", root)
        with urllib.request.urlopen(f"{root}/v1/decisions?limit=100", timeout=10) as answer:
            decisions = list(reversed(orjson.loads(answer.read())["data"]))
    return Run(agent, version, code, output, sorted(upstream.iterdir()), decisions)


def captured_directly(agent: Agent, agents_dir: Path, scratch: Path) -> Run:
    port = free_port()
    recordings = scratch / "requests"
    recordings.mkdir(parents=True)
    with spawn([sys.executable, "-m", "router", "mock-upstream", "--port", str(port), "--record", str(recordings)], port):
        version, code, output = run_agent(agent, agents_dir, scratch / "agent", f"http://127.0.0.1:{port}")
    return Run(agent, version, code, output, sorted(recordings.iterdir()), [])


def write_fixtures(run: Run, temp_root: str) -> None:
    folder = FIXTURES / "on-defaults" / run.agent.name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for path in run.requests:
        record = curated(orjson.loads(path.read_bytes()), temp_root)
        (folder / path.name).write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2) + b"\n")
    (folder / "version.txt").write_text(run.version + "\n")


def _models(decisions: list[dict]) -> str:
    seen = []
    for row in decisions:
        said = f"{row.get('requested_model')}→{row.get('model')}" + (f" ({row['model_family']})" if row.get("model_family") else "")
        if said not in seen:
            seen.append(said)
    return "; ".join(seen)


def _resumed(decisions: list[dict]) -> str:
    """Each request's messages taken from the body before it (router.core.resent_prefix): ``-`` not kept
    (under 8 KB, or written otherwise than orjson writes), ``0`` parsed whole."""
    return ",".join("-" if row.get("resumed_elements") is None else str(row["resumed_elements"]) for row in decisions)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=Path, required=True, help="where the agents are installed (see the docstring)")
    parser.add_argument("--only", action="append", choices=[a.name for a in AGENTS], help="run these agents only (repeatable)")
    parser.add_argument("--fixtures", action="store_true", help="write each agent's own requests to tests/data/agents/on-defaults/")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="pinch-agents-"))
    failed = False
    try:
        print(f"{'agent':16} {'version':28} {'exit':>4} {'requests':>8} {'round trip':>10}  models (requested→chosen); messages resumed, request by request")
        for agent in AGENTS:
            if args.only and agent.name not in args.only:
                continue
            run = through_proxy(agent, args.agents.resolve(), scratch / agent.name / "proxy")
            ok = run.code == 0 and run.round_trip()
            trip = ("yes" if agent.tools else "answer") if ok else "NO"
            print(f"{agent.name:16} {run.version[:28]:28} {run.code:>4} {len(run.requests):>8} {trip:>10}  {_models(run.decisions)}; resumed {_resumed(run.decisions)}", flush=True)
            if not ok:
                failed = True
                print(f"--- {agent.name} output (last 30 lines) ---\n" + "\n".join(run.output.splitlines()[-30:]), file=sys.stderr)
                continue
            if args.fixtures:
                direct = captured_directly(agent, args.agents.resolve(), scratch / agent.name / "direct")
                if direct.code != 0 or not direct.round_trip():
                    failed = True
                    print(f"--- {agent.name}, straight to the mock: exit {direct.code} ---\n{direct.output[-3000:]}", file=sys.stderr)
                    continue
                write_fixtures(direct, str(scratch / agent.name / "direct" / "agent"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
