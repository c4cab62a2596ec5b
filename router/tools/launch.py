"""``pinch-router launch <agent> [agent args…]``: run a coding agent through the proxy, wired for that
process only.

Each agent is wired the way its own docs page (docs/agents.md) says, but never in the user's files:
through its environment, its command-line flags, or a config file in a temporary folder that the
agent is pointed at (:func:`wiring`, pure: the URL, the key and the folder in, the command line,
environment and files out). Cline, which keeps its provider in its own settings folder, is set up by
``cline auth --config`` in a temporary one; with ``--persist`` launch writes ``~/.cline`` instead (its
sessions then stay where Cline keeps them), and says what it wrote and how to undo it.

:func:`launch` starts the proxy on the user's config (or the shipped one) when nothing answers at
its address, waits for ``/healthz``, runs the agent with the user's arguments after launch's own,
stops the proxy it started (``--keep-proxy`` leaves it running), and returns the agent's exit code.
The key the agent sends is ``$PINCH_ROUTER_KEY``, else the config's first client key, else
``unused`` (a proxy without ``server.api_keys`` takes any).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import orjson
import yaml

from router.config import Config
from router.server.locations import state_dir

KEY_ENV = "PINCH_ROUTER_KEY"
SERVE_LOG = "launch-serve.log"  # in the state directory: the output of a proxy launch started
MODEL = "auto"


@dataclass(frozen=True)
class Wiring:
    """How one agent runs through the proxy: its command line before the user's arguments, the
    environment it gets besides the user's, the files written for it (relative to the temporary
    folder), a command run first that writes settings there (``setup``), and the command that writes the
    agent's own settings instead, with ``--persist`` (then the agent runs as ``persisted_argv``)."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    setup: list[str] | None = None
    persist: list[str] | None = None
    persisted_argv: list[str] | None = None
    undo: str = ""


@dataclass(frozen=True)
class Agent:
    name: str
    program: str
    how: str  # one line for --list
    wire: Callable[[str, str, Path], Wiring]  # (the proxy's root URL, the key, the temporary folder)
    # the variable that tells the agent the context window it may fill before it compacts its session, set to
    # the largest window of the config's models (:func:`context_window`) unless the user set it, when that is
    # at least ``window_floor`` (Claude Code 2.1.332 reads a smaller one as its 100k minimum, and says so)
    window_env: str | None = None
    window_floor: int = 0


def _claude(root: str, key: str, scratch: Path) -> Wiring:
    return Wiring(["claude"], {"ANTHROPIC_BASE_URL": root, "ANTHROPIC_API_KEY": key})


def _codex(root: str, key: str, scratch: Path) -> Wiring:
    provider = {"name": '"pinch-router"', "base_url": f'"{root}/v1"', "wire_api": '"responses"', "env_key": f'"{KEY_ENV}"'}
    flags = ["-c", 'model_provider="pinch"'] + [arg for k, v in provider.items() for arg in ("-c", f"model_providers.pinch.{k}={v}")]
    return Wiring(["codex", *flags], {KEY_ENV: key})


def _gemini(root: str, key: str, scratch: Path) -> Wiring:
    # With GOOGLE_GEMINI_BASE_URL set and no auth type in its settings, Gemini CLI 0.61.0 picks "gateway"
    # auth and refuses to run ("Invalid auth method selected.", exit 41): a system settings file of launch's
    # (the layer above the user's own) selects API-key auth for this run.
    settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
    env = {"GOOGLE_GEMINI_BASE_URL": root, "GEMINI_API_KEY": key, "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(scratch / "gemini-settings.json")}
    return Wiring(["gemini"], env, {"gemini-settings.json": orjson.dumps(settings).decode()})


def _opencode(root: str, key: str, scratch: Path) -> Wiring:
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "pinch-router",
        "options": {"baseURL": f"{root}/v1", "apiKey": key},
        "models": {MODEL: {"limit": {"context": 40960, "output": 16384}}},
    }
    config = {"provider": {"pinch-router": provider}, "model": f"pinch-router/{MODEL}"}
    return Wiring(["opencode"], {"OPENCODE_CONFIG": str(scratch / "opencode.json")}, {"opencode.json": orjson.dumps(config, option=orjson.OPT_INDENT_2).decode()})


def _qwen(root: str, key: str, scratch: Path) -> Wiring:
    return Wiring(["qwen"], {"OPENAI_BASE_URL": f"{root}/v1", "OPENAI_API_KEY": key, "OPENAI_MODEL": MODEL})


def _pi(root: str, key: str, scratch: Path) -> Wiring:
    models = {"providers": {"pinch-router": {"baseUrl": f"{root}/v1", "api": "openai-completions", "apiKey": key, "models": [{"id": MODEL}]}}}
    return Wiring(
        ["pi", "--provider", "pinch-router", "--model", MODEL],
        {"PI_CODING_AGENT_DIR": str(scratch / "pi-agent")},
        {"pi-agent/models.json": orjson.dumps(models).decode()},
    )


def _aider(root: str, key: str, scratch: Path) -> Wiring:
    return Wiring(["aider", "--model", f"openai/{MODEL}"], {"OPENAI_API_BASE": f"{root}/v1", "OPENAI_API_KEY": key})


def _continue(root: str, key: str, scratch: Path) -> Wiring:
    model = {
        "name": "pinch-router", "provider": "openai", "model": MODEL, "apiBase": f"{root}/v1", "apiKey": key,
        "roles": ["chat", "edit", "apply"], "capabilities": ["tool_use"],
    }  # fmt: skip
    config = {"name": "pinch-router", "version": "1.0.0", "schema": "v1", "models": [model]}
    path = scratch / "continue.yaml"
    return Wiring(["cn", "--config", str(path)], files={"continue.yaml": yaml.safe_dump(config, sort_keys=False)})


def _cline(root: str, key: str, scratch: Path) -> Wiring:
    auth = ["cline", "auth", "-p", "openai", "-k", key, "-m", MODEL, "-b", f"{root}/v1"]
    folder = str(scratch / "cline")  # Cline 3.0.65's --config: its settings (and sessions) folder, ~/.cline by default
    return Wiring(
        ["cline", "--config", folder],
        setup=[*auth, "--config", folder],
        persist=auth,
        persisted_argv=["cline"],
        undo="run `cline auth` again with your own provider (launch wrote its provider settings in ~/.cline)",
    )


AGENTS: dict[str, Agent] = {
    agent.name: agent
    for agent in (
        Agent(
            "claude", "claude", "ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY in its environment; CLAUDE_CODE_AUTO_COMPACT_WINDOW the largest context window of the config's models (from 100k up)",
            _claude, window_env="CLAUDE_CODE_AUTO_COMPACT_WINDOW", window_floor=100_000,
        ),
        Agent("codex", "codex", "a `pinch` model provider given with -c flags, its key in $PINCH_ROUTER_KEY", _codex),
        Agent("gemini", "gemini", "GOOGLE_GEMINI_BASE_URL and GEMINI_API_KEY in its environment, API-key auth in a temporary system settings file ($GEMINI_CLI_SYSTEM_SETTINGS_PATH)", _gemini),
        Agent("opencode", "opencode", "a temporary opencode.json ($OPENCODE_CONFIG) with a pinch-router provider, model pinch-router/auto", _opencode),
        Agent("qwen", "qwen", "OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL=auto in its environment", _qwen),
        Agent("pi", "pi", "a temporary agent folder ($PI_CODING_AGENT_DIR) whose models.json names the proxy; --provider pinch-router --model auto", _pi),
        Agent("aider", "aider", "OPENAI_API_BASE and OPENAI_API_KEY in its environment, --model openai/auto", _aider),
        Agent("continue", "cn", "a temporary config.yaml given with --config", _continue),
        Agent("cline", "cline", "`cline auth` writes the proxy into a temporary settings folder given with --config (with --persist: into ~/.cline)", _cline),
    )
}


@dataclass(frozen=True)
class Proxy:
    """Where the proxy answers: its root URL, and the key an agent sends it."""

    root: str
    key: str


def proxy_of(config: Config, environ: Mapping[str, str]) -> Proxy:
    """The address the config serves on (``$PINCH_ROUTER_HOST``/``_PORT`` win, as for ``serve``) and the key to send."""
    host = environ.get("PINCH_ROUTER_HOST") or config.server.host
    port = environ.get("PINCH_ROUTER_PORT") or str(config.server.port)
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"  # listening everywhere: reached on loopback
    shown = f"[{host}]" if ":" in host else host
    key = environ.get(KEY_ENV) or next((secret for _, secret in _client_keys(config)), None) or "unused"
    return Proxy(f"http://{shown}:{port}", key)


def _client_keys(config: Config) -> list[tuple[object, str]]:
    try:
        return list(config.server.client_keys())
    except Exception:  # a key_env unset: the agent gets none of them; the proxy will say which
        return []


def context_window(config: Config) -> int | None:
    """The largest context window of the config's models: past it no model can take the session (below it the
    proxy moves a prompt that outgrows a model's window to one it fits, docs/routing.md), so an agent that
    assumes a window for a model name it does not know (Claude Code: 200k) should compact before it."""
    return max((model.context_window for model in config.models), default=None)


def answering(root: str, timeout: float = 1.0) -> bool:
    """Whether a pinch-router answers ``/healthz`` at ``root``."""
    try:
        with urllib.request.urlopen(f"{root}/healthz", timeout=timeout) as response:  # noqa: S310 - loopback, the user's config
            return response.status == 200 and b'"status"' in response.read(4096)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def list_agents(out: TextIO) -> int:
    """``--list``: each agent, whether it is installed (found on PATH) and how it is wired."""
    width = max(len(name) for name in AGENTS)
    for agent in AGENTS.values():
        found = shutil.which(agent.program)
        out.write(f"{agent.name:<{width}}  {('installed: ' + found) if found else f'not found ({agent.program} is not on PATH)'}\n")
        out.write(f"{'':<{width}}  {agent.how}\n")
    return 0


def launch(
    name: str,
    args: list[str],
    config: Config,
    config_path: Path,
    *,
    persist: bool = False,
    keep_proxy: bool = False,
    out: TextIO = sys.stderr,
    environ: Mapping[str, str] | None = None,
    startup_seconds: float = 30.0,
) -> int:
    """Run agent ``name`` with ``args`` through the proxy (module doc); the agent's exit code (2 when
    launch itself cannot: an unknown agent, a proxy that does not start;
    127 when the agent is not installed)."""
    environ = dict(os.environ if environ is None else environ)
    agent = AGENTS.get(name)
    if agent is None:
        out.write(f"pinch-router launch: no agent {name!r}; one of {', '.join(AGENTS)} (--list shows how each is wired)\n")
        return 2
    program = shutil.which(agent.program, path=environ.get("PATH"))
    if program is None:
        out.write(f"pinch-router launch: {agent.program} is not installed (not on PATH); see docs/agents.md for its package\n")
        return 127
    proxy = proxy_of(config, environ)
    started = None
    if not answering(proxy.root):
        folder = state_dir(None, environ)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        log = folder / SERVE_LOG
        out.write(f"pinch-router launch: starting the proxy on {config_path} at {proxy.root} (its log: {log})\n")
        with open(log, "ab") as sink:  # its own session and output: a kept proxy outlives launch and holds no pipe of it
            started = subprocess.Popen(
                [sys.executable, "-m", "router", "serve", "--config", str(config_path)], env=environ, stdout=sink, stderr=sink, start_new_session=True
            )
        deadline = time.monotonic() + startup_seconds
        while not answering(proxy.root):
            if started.poll() is not None or time.monotonic() > deadline:
                out.write(f"pinch-router launch: the proxy did not start at {proxy.root} (try `pinch-router serve --config {config_path}`)\n")
                _stop(started)
                return 2
            time.sleep(0.1)
    try:
        folder_root = state_dir(None, environ)  # the user's own (0700), not /tmp: Gemini CLI refuses a settings file below a world-writable folder
        folder_root.mkdir(mode=0o700, parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="launch-", dir=folder_root) as folder:
            scratch = Path(folder)
            wiring = agent.wire(proxy.root, proxy.key, scratch)
            for relative, content in wiring.files.items():
                path = scratch / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content, encoding="utf-8")
                path.chmod(0o600)  # it may hold the key
            env = {**environ, **wiring.env}
            window = context_window(config)
            if agent.window_env is not None and window is not None and window >= agent.window_floor and agent.window_env not in environ:
                env[agent.window_env] = str(window)
            argv, first = wiring.argv, wiring.setup
            if persist and wiring.persist is not None:
                shown = " ".join("<key>" if part == proxy.key and proxy.key != "unused" else part for part in wiring.persist)
                out.write(f"pinch-router launch: --persist: running `{shown}`; to undo, {wiring.undo}\n")
                argv, first = wiring.persisted_argv or argv, wiring.persist
            if first is not None:
                done = subprocess.run([program, *first[1:]], env=env, stdout=subprocess.DEVNULL)
                if done.returncode != 0:
                    out.write(f"pinch-router launch: setting up {agent.name} failed (exit {done.returncode})\n")
                    return done.returncode
            return subprocess.run([program, *argv[1:], *args], env=env).returncode
    finally:
        if started is not None and not keep_proxy:
            _stop(started)


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
