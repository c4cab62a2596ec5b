"""Run the real Claude Code, Codex and Gemini CLIs against the mock upstream and capture what they send.

Each agent gets a throw-away HOME and a workspace holding two files, is pointed
straight at ``pinch-router mock-upstream --record DIR`` (no proxy in between),
and is asked to list the files, then, continuing the same session, a follow-up
question (so the captured requests hold a history: earlier thinking/reasoning,
tool calls and results). The mock answers each first request of a prompt with a
call to the agent's own shell tool and the request carrying its result with
text quoting it, so a run passes when the agent exits 0 and prints, for both
prompts, an answer naming both files: proof that the tool call really ran.
Claude Code also runs in its terminal UI (on a pseudo-terminal, one prompt typed
in, first-run screens answered in advance), which sends more than ``-p``.
Nothing leaves the machine: the mock is on loopback, Claude Code runs with
``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``.

The agents are npm packages installed outside the repo (pinned versions: see
tests/data/agents/README.md)::

    mkdir -p ../agents-cc && cd ../agents-cc
    npm install --save-exact @anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0 @google/gemini-cli@0.61.0

then, from the repo::

    .venv/bin/python -m docs.capture_agents --agents ../agents-cc            # run, check, print a table
    .venv/bin/python -m docs.capture_agents --agents ../agents-cc --fixtures # also rewrite tests/data/agents/

``--fixtures`` writes the curated recordings: the temporary directory's path
replaced by ``/tmp/pinch-agents``, and texts, contents and descriptions longer than 500
characters (system prompts, tool descriptions) cut to their head and tail with a
marker, so the files keep every field, header and block but not 50 KB of prompt
each. It exits 1 (with the agent's stderr) when an agent fails or its tool did not run.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bench.harness import free_port, spawn
from docs.gemini_cli_e2e import gemini_environment

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "data" / "agents"
STABLE_TEMP = "/tmp/pinch-agents"
WORKSPACE_FILES = {"main.py": "print('hello')\n", "notes.txt": "remember the milk\n"}
MAX_KEPT_CHARS = 500
PROSE_KEYS = frozenset({"text", "description", "content"})  # system prompts, reminders, tool and parameter descriptions
AGENT_TIMEOUT_SECONDS = 180


@dataclass(frozen=True)
class Agent:
    name: str  # also the fixture folder
    binary: str  # under node_modules/.bin
    # "print" (claude -p), "tui" (claude's terminal UI, typed into), "exec" (codex exec, a custom
    # provider), "oss" (codex exec --oss: the mock standing in for Ollama), "gemini" (gemini -p, API-key auth)
    mode: str
    prompt: str

    @property
    def prompts(self) -> tuple[str, ...]:
        """The prompts run in one session: a follow-up continues it where the agent can (not the TUI; not
        Gemini CLI 0.61, whose ``--resume latest`` history answers the call twice, which Gemini refuses)."""
        return (self.prompt,) if self.mode in ("tui", "oss", "gemini") else (self.prompt, FOLLOW_UP)

    def command(self, binary: Path, prompt: str, follow_up: bool) -> list[str]:
        if self.mode == "tui":
            return [str(binary), "--allowedTools", "Bash"]
        if self.mode == "print":
            return [str(binary), "-p", *(["--continue"] if follow_up else []), prompt, "--allowedTools", "Bash"]
        if self.mode == "oss":
            return [str(binary), "exec", "--skip-git-repo-check", "--oss", "--local-provider", "ollama", "-m", "mock", prompt]
        if self.mode == "gemini":
            return [str(binary), "-p", prompt]
        return [str(binary), "exec", "--skip-git-repo-check", *(["resume", "--last"] if follow_up else []), prompt]

    def environment(self, home: Path, workspace: Path, port: int) -> dict[str, str]:
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8", "TERM": "dumb"}
        if self.mode == "gemini":
            return gemini_environment(home, f"http://127.0.0.1:{port}")
        if self.mode == "tui":
            # First-run screens answered in advance: onboarding done, the API key (its last 20
            # characters) approved, the workspace trusted. Else the TUI checks api.anthropic.com.
            approved = {"approved": ["test"], "rejected": []}
            trusted = {str(workspace): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}}
            settings = {"hasCompletedOnboarding": True, "theme": "dark", "customApiKeyResponses": approved, "projects": trusted}
            (home / ".claude.json").write_bytes(orjson.dumps(settings))
            base["TERM"] = "xterm-256color"
        if self.binary == "claude":
            return {
                **base,
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
                "ANTHROPIC_API_KEY": "test",
            }
        if self.mode == "oss":  # Codex's built-in Ollama provider, http://localhost:<port>/v1, no key
            return {**base, "CODEX_OSS_PORT": str(port)}
        codex_home = home / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(codex_config(port))
        return {**base, "MOCK_API_KEY": "test"}


FOLLOW_UP = "which of them is Python?"
AGENTS = (
    Agent("claude-code", "claude", "print", "list the files in this directory"),
    Agent("claude-code-tui", "claude", "tui", "list the files in this directory"),
    Agent("codex", "codex", "exec", "list the files"),
    Agent("codex-oss", "codex", "oss", "list the files"),
    Agent("gemini-cli", "gemini", "gemini", "list the files here"),
)


def codex_config(port: int) -> str:
    return f"""model = "mock-model"
model_provider = "mock"

[model_providers.mock]
name = "pinch-router mock upstream"
base_url = "http://127.0.0.1:{port}/v1"
wire_api = "responses"
env_key = "MOCK_API_KEY"
"""


@dataclass(frozen=True)
class Run:
    agent: Agent
    version: str
    exit_codes: tuple[int, ...]  # one per prompt
    stdouts: tuple[str, ...]
    stderr: str
    recordings: list[Path]

    @property
    def exit_code(self) -> int:
        return max(self.exit_codes)

    @property
    def tool_ran(self) -> bool:
        """Each prompt's final answer quotes the tool's output, and that output lists the workspace."""
        return all(_quotes_listing(stdout) for stdout in self.stdouts)


def _quotes_listing(stdout: str) -> bool:
    # compared without whitespace: the TUI lays its text out in cursor moves, not spaces
    _, said, output = "".join(stdout.split()).partition("toolsaid:")
    return bool(said) and all(name in output for name in WORKSPACE_FILES)


def run_agent(agent: Agent, agents_dir: Path, scratch: Path) -> Run:
    binary = agents_dir / "node_modules" / ".bin" / agent.binary
    if not binary.exists():
        raise SystemExit(f"{binary} not found: install the agents first (see this script's docstring)")
    home, workspace, recordings = scratch / agent.name / "home", scratch / agent.name / "work", scratch / agent.name / "requests"
    for directory in (home, workspace, recordings):
        directory.mkdir(parents=True)
    for name, text in WORKSPACE_FILES.items():
        (workspace / name).write_text(text)
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    port = free_port()
    mock = [sys.executable, "-m", "router", "mock-upstream", "--port", str(port), "--record", str(recordings)]
    runs = []
    with spawn(mock, port):
        env = agent.environment(home, workspace, port)
        if agent.mode == "tui":
            answered, screen = drive_tui(agent.command(binary, agent.prompt, False), workspace, env, agent.prompt)
            return Run(agent, version, (0 if answered else 1,), (screen,), "" if answered else screen, sorted(recordings.iterdir()))
        for n, prompt in enumerate(agent.prompts):
            command = agent.command(binary, prompt, follow_up=n > 0)
            done = subprocess.run(
                command, cwd=workspace, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=AGENT_TIMEOUT_SECONDS
            )
            runs.append(done)
    return Run(
        agent,
        version,
        tuple(r.returncode for r in runs),
        tuple(r.stdout for r in runs),
        "\n".join(r.stderr for r in runs),
        sorted(recordings.iterdir()),
    )


_TERMINAL_CONTROL = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\\\)|\x1b[()][0-9A-B]|\x1b[=>78]|\r")


def drive_tui(command: list[str], workspace: Path, env: dict[str, str], prompt: str) -> tuple[bool, str]:
    """Run a terminal UI on a pseudo-terminal, type ``prompt`` and Enter, and wait for the mock's answer;
    then run ``/context`` and wait for its table.

    Returns whether the answer (quoting the tool's output) appeared on the screen, and the screen's
    text. The UI is killed afterwards: it would wait for the next prompt forever.
    """
    pid, fd = pty.fork()
    if pid == 0:  # the child: becomes the agent
        os.chdir(workspace)
        os.execve(command[0], command, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    screen = bytearray()

    def read_until(done: Any, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if select.select([fd], [], [], 0.2)[0]:
                try:
                    screen.extend(os.read(fd, 65536))
                except OSError:  # the UI exited
                    return done()
            if done():
                return True
        return False

    try:
        read_until(lambda: "❯".encode() in screen, 30)  # the input box is drawn
        read_until(lambda: False, 1)
        os.write(fd, prompt.encode())
        read_until(lambda: False, 1)
        os.write(fd, b"\r")
        answered = read_until(lambda: _quotes_listing(_screen_text(screen)), AGENT_TIMEOUT_SECONDS)
        if answered:  # /context shows what fills the context: Claude Code counts it with count_tokens
            os.write(fd, b"/context")
            read_until(lambda: False, 1)
            os.write(fd, b"\r")
            read_until(lambda: "Freespace" in "".join(_screen_text(screen).split()), 60)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)
    return answered, _screen_text(screen)


def _screen_text(raw: bytes | bytearray) -> str:
    return _TERMINAL_CONTROL.sub("", raw.decode("utf-8", "replace"))


def curated(value: Any, temp_root: str, key: str = "", *, tool_results_whole: bool = False) -> Any:
    """A recording made stable and small: the temp root renamed, long prose (texts, descriptions) cut;
    structure, headers and metadata kept whole. ``tool_results_whole``: Anthropic ``tool_result`` blocks
    (their content is what pinch compresses) are kept as sent too. The same value is always cut alike,
    so what repeated from one request to the next still does."""
    if isinstance(value, dict):
        if tool_results_whole and value.get("type") == "tool_result":
            return renamed(value, temp_root)
        return {name: curated(item, temp_root, name, tool_results_whole=tool_results_whole) for name, item in value.items()}
    if isinstance(value, list):
        return [curated(item, temp_root, key, tool_results_whole=tool_results_whole) for item in value]
    if isinstance(value, str):
        value = value.replace(temp_root, STABLE_TEMP)
        if key in PROSE_KEYS and len(value) > MAX_KEPT_CHARS:
            cut = len(value) - 350
            return f"{value[:250]}[… {cut} characters cut by docs/capture_agents.py …]{value[-100:]}"
    return value


def renamed(value: Any, temp_root: str) -> Any:
    """``value`` with the temp root renamed in every string, nothing cut."""
    if isinstance(value, dict):
        return {name: renamed(item, temp_root) for name, item in value.items()}
    if isinstance(value, list):
        return [renamed(item, temp_root) for item in value]
    return value.replace(temp_root, STABLE_TEMP) if isinstance(value, str) else value


def kept_recordings(recordings: list[Path]) -> list[Path]:
    """Every request but the count_tokens burst of ``/context`` (one per system-prompt section and per
    tool group), of which the first and the largest (the most tools) stand for the rest."""
    counts = [p for p in recordings if p.name.endswith("-count-tokens.json")]
    kept = {*counts[:1], *sorted(counts, key=lambda p: p.stat().st_size)[-1:]}
    return [p for p in recordings if p not in counts or p in kept]


def write_fixtures(run: Run, temp_root: str) -> None:
    folder = FIXTURES / run.agent.name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for path in kept_recordings(run.recordings):
        record = curated(orjson.loads(path.read_bytes()), temp_root)
        (folder / path.name).write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2) + b"\n")
    if run.agent.mode == "tui":  # the screen's end: the prompt, the tool call, the answer, /context
        (folder / "screen.txt").write_text(curated(run.stdouts[0][-3000:], temp_root))
        return
    printed = "".join(f"$ {prompt!r}\n{stdout}\n" for prompt, stdout in zip(run.agent.prompts, run.stdouts, strict=True))
    (folder / "stdout.txt").write_text(curated(printed, temp_root))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=Path, required=True, help="the npm folder holding node_modules/.bin/{claude,codex}")
    parser.add_argument("--only", choices=[a.name for a in AGENTS], help="run one agent")
    parser.add_argument("--fixtures", action="store_true", help="rewrite tests/data/agents/<agent>/ from this run")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="pinch-agents-"))
    failed = False
    try:
        print(f"{'agent':16} {'version':24} {'exit':>4} {'requests':>8} {'tool ran':>8}  answer")
        for agent in AGENTS:
            if args.only and agent.name != args.only:
                continue
            run = run_agent(agent, args.agents.resolve(), scratch)
            last = run.stdouts[-1].strip()
            answer = "(on the screen)" if agent.mode == "tui" else last.splitlines()[0][:60] if last else "(none)"
            print(f"{agent.name:16} {run.version:24} {run.exit_code:>4} {len(run.recordings):>8} {'yes' if run.tool_ran else 'NO':>8}  {answer}")
            if run.exit_code != 0 or not run.tool_ran:
                failed = True
                print(f"--- {agent.name} stderr (last 40 lines) ---\n" + "\n".join(run.stderr.splitlines()[-40:]), file=sys.stderr)
            elif args.fixtures:
                write_fixtures(run, str(scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
