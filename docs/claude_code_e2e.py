"""End-to-end: the real Claude Code CLI through ``pinch-router serve`` to both kinds of upstream.

Starts ``pinch-router mock-upstream`` (it speaks the Anthropic Messages API and
OpenAI chat on one port) and ``pinch-router serve`` with a config naming two models
on it: ``mock-claude`` behind an ``api: anthropic`` provider (the request is passed
through) and ``mock-chat`` behind an OpenAI-compatible one (the request and the
answer are translated). For each, Claude Code runs once with a throw-away HOME::

    HOME=<tmp> CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \\
    ANTHROPIC_BASE_URL=http://127.0.0.1:<proxy port> ANTHROPIC_API_KEY=test \\
    claude -p "list the files in this directory" --model <model> --allowedTools Bash

Through the Anthropic provider the mock answers the first request with a
``Bash {"command": "ls"}`` tool call and the request carrying its result with text
quoting it, so that run passes when Claude Code exits 0 and prints
``… (tool said: main.py\\nnotes.txt)``: its tool call ran in the workspace and its final
answer came back through the proxy. Through the OpenAI-compatible provider the chat
mock streams two interleaved tool calls (``{"n": 0}``, ``{"n": 1}``, which Claude Code
runs and answers with its input-validation error) and then text, so that run passes
when Claude Code exits 0, prints the mock's answer, and its second request carries one
``tool`` result per call (see :func:`model_passed`). The proxy's
decision log then shows each request's wire format in and out. Nothing leaves the
machine. Claude Code is the npm package pinned in tests/data/agents/README.md::

    .venv/bin/python -m docs.claude_code_e2e --agents ../agents-cc

It prints one line per model and exits 1 when a run fails. ``--event-delay 0.5 --keepalive 0.2``
makes the mock wait before every streamed event and the proxy send its keep-alives (Anthropic
``ping`` events) meanwhile, between Claude Code's events.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

from bench.harness import free_port, spawn

WORKSPACE_FILES = {"main.py": "print('hello')\n", "notes.txt": "remember the milk\n"}
PROMPT = "list the files in this directory"
MODELS = {"mock-claude": "anthropic (passed through)", "mock-chat": "openai (translated)", "auto": "the router's choice"}


def proxy_config(mock_port: int, keepalive: float | None = None) -> str:
    upstream = f"upstream: {{stream_keepalive_seconds: {keepalive:g}}}\n" if keepalive is not None else ""
    return upstream + f"""server: {{host: 127.0.0.1}}
providers:
  mock-anthropic: {{base_url: "http://127.0.0.1:{mock_port}", api: anthropic, api_key_env: MOCK_KEY}}
  mock-chat: {{base_url: "http://127.0.0.1:{mock_port}/v1", api: openai, api_key_env: MOCK_KEY}}
models:
  - {{name: mock-claude, provider: mock-anthropic, upstream_model: claude-mock, context_window: 200000, max_output_tokens: 64000,
     supports: {{tools: true, vision: true, json_mode: true}}, tiers: [1, 2, 3]}}
  - {{name: mock-chat, provider: mock-chat, upstream_model: chat-mock, context_window: 200000, max_output_tokens: 32000,
     supports: {{tools: true, vision: true, json_mode: true}}, tiers: [1, 2, 3]}}
middlewares: [session-fingerprint, capability-gate, upstream-forward]
"""


def model_passed(model: str, stdout: str, recorded: Path) -> bool:
    """``mock-claude``: the answer quotes ``ls``'s output (the Anthropic mock's Bash call ran).
    ``mock-chat``: the chat mock calls a shell tool when one is offered (Claude Code's ``Bash``)
    and answers its result with plain text, so the check is the final answer plus the upstream's
    last request with tool results carrying exactly one ``tool`` message per call its assistant
    message made (the translation kept the pairs)."""
    if model == "mock-claude":
        said = "".join(stdout.split()).partition("toolsaid:")[2]
        return all(name in said for name in WORKSPACE_FILES)
    if model == "auto":  # routed to either: the answer of one of the two
        return stdout.startswith("Hello from the mock upstream.")
    chats = [orjson.loads(p.read_bytes()).get("body") or {} for p in sorted(recorded.iterdir()) if p.name.endswith("chat-completions.json")]
    with_results = [c for c in chats if any(m.get("role") == "tool" for m in c.get("messages", []))]
    if not with_results or stdout.strip() != "Hello from the mock upstream.":
        return False
    messages = with_results[-1]["messages"]
    calls = [c["id"] for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    results = [m["tool_call_id"] for m in messages if m.get("role") == "tool"]
    for m in messages:
        if m.get("role") == "tool":
            print(f"  tool result sent back for {m['tool_call_id']}: {str(m.get('content'))[:120]!r}")
    return bool(calls) and sorted(results) == sorted(calls)


def run(agents: Path, event_delay: float = 0.0, keepalive: float | None = None) -> int:
    binary = agents / "node_modules" / ".bin" / "claude"
    if not binary.exists():
        raise SystemExit(f"{binary} not found: install Claude Code first (tests/data/agents/README.md)")
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    failed = 0
    with tempfile.TemporaryDirectory(prefix="pinch-cc-") as tmp:
        scratch = Path(tmp)
        mock_port, proxy_port = free_port(), free_port()
        config = scratch / "config.yaml"
        config.write_text(proxy_config(mock_port, keepalive))
        env = {**os.environ, "MOCK_KEY": "mock-provider-key"}
        recorded = scratch / "upstream-requests"
        mock = [sys.executable, "-m", "router", "mock-upstream", "--port", str(mock_port), "--record", str(recorded), "--event-delay", f"{event_delay:g}"]
        serve = [sys.executable, "-m", "router", "serve", "--config", str(config), "--port", str(proxy_port), "--state-dir", str(scratch / "state")]
        with spawn(mock, mock_port), spawn(serve, proxy_port, env=env):
            for model, how in MODELS.items():
                home, workspace = scratch / model / "home", scratch / model / "work"
                home.mkdir(parents=True)
                workspace.mkdir(parents=True)
                for name, text in WORKSPACE_FILES.items():
                    (workspace / name).write_text(text)
                agent_env = {
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "HOME": str(home),
                    "LANG": "C.UTF-8",
                    "TERM": "dumb",
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                    "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{proxy_port}",
                    "ANTHROPIC_API_KEY": "test",
                }
                done = subprocess.run(
                    [str(binary), "-p", PROMPT, "--model", model, "--allowedTools", "Bash"],
                    cwd=workspace, env=agent_env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180,
                )
                ok = done.returncode == 0 and model_passed(model, done.stdout, recorded)
                failed += not ok
                print(f"{version} → {model} via {how}: exit {done.returncode}, {'tool ran, answer printed' if ok else 'FAILED'}")
                print(f"  stdout: {done.stdout.strip()[:200]!r}")
                if not ok:
                    print(f"  stderr: {done.stderr.strip()[-2000:]}")
            for path in sorted(recorded.iterdir()) if recorded.exists() and failed else []:
                sent = orjson.loads(path.read_bytes())
                body = sent.get("body") or {}
                roles = [m.get("role") for m in body.get("messages", [])]
                print(f"  upstream got {sent['method']} {sent['path']}: model {body.get('model')}, {len(body.get('tools') or [])} tools, roles {roles}")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=Path, required=True, help="the npm folder holding node_modules/.bin/claude")
    parser.add_argument("--event-delay", type=float, default=0.0, help="the mock waits this long before each streamed event")
    parser.add_argument("--keepalive", type=float, default=None, help="upstream.stream_keepalive_seconds for the proxy (with --event-delay longer than it, every wait gets keep-alives)")
    args = parser.parse_args()
    return run(args.agents, args.event_delay, args.keepalive)


if __name__ == "__main__":
    sys.exit(main())
