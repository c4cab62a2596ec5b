"""Real agents through `pinch-router serve` to a mock that calls pinch_retrieve once: do they complete their turn? (#44)

Each case runs one agent non-interactively, streaming as it does by default, with a throw-away HOME
in a workspace holding ``big.txt`` (:func:`big_output`: a few hundred distinct, irregular lines,
past ``pinch.first_sight.long_output_chars``, which no lossless rule folds). ``pinch-router
mock-upstream --tool-command "cat big.txt"`` has the agent read it; the proxy, pinch on, cuts the
new output at first sight and offers ``pinch_retrieve``; the mock, seeing the cut marker among the
latest tool results, calls the tool once; the proxy answers the call from the request itself,
continues the upstream call, and the mock, now seeing the whole output, ends the turn with text
quoting it. The cases:

* ``claude-code``: Claude Code on ``--model mock-claude``, an ``api: anthropic`` provider on the
  mock (Messages in, Messages out);
* ``claude-code-chat``: Claude Code on its default model, which the shipped config routes to the
  Ollama provider (chat): Messages translated to chat and back;
* ``codex``: Codex CLI on its default model, Responses translated to the shipped chat provider
  (``wire_api = "responses"``, as docs/agents.md sets it up);
* ``opencode``: opencode on ``auto`` (chat in, chat out).

Per case it prints the agent's exit code and final text; the decision rows (status, wires, model,
``retrieve_calls``, ``retrieve_tokens``); the requests the mock received: how many, which of them
carried the cut output (the marker), and the **retrieve round** — a request whose last message
answers a ``pinch_retrieve`` call with the whole file; and every trace of the internal call in what
the agent printed (the tool's name, the cut marker ``[pinch-router:``) or stored under its HOME or
workspace (its session store: the name as a JSON string, a call's or a tool list's, or the marker),
which must be none. The name inside the model's own words — the Anthropic mock's thinking says "I
will call pinch_retrieve", which the proxy relays as it relays any thinking — is listed apart. Every
base URL is loopback, update checks and telemetry off (the environments of docs/agents_pinch_check.py).

Needs the agents installed outside the repo (versions: docs/agents.md)::

    mkdir -p ../agents && cd ../agents
    npm install --save-exact @anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0 opencode-ai@1.18.33
    # npm 11 leaves the packages' install scripts unrun; they copy the native binaries into place:
    (cd node_modules/@anthropic-ai/claude-code && node install.cjs) && (cd node_modules/opencode-ai && node postinstall.mjs)

then, from the repo::

    .venv/bin/python -m docs.agents_retrieve_check --agents ../agents [--case claude-code]... [--keep DIR]

Exits 1 when a case fails: a non-zero exit, not exactly one retrieve call answered by the proxy, no
retrieve round upstream, or a trace of the tool in what the agent printed or stored.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from bench.harness import free_port, spawn
from docs.agents_pinch_check import AGENTS, KNOWN_AGENT_WARNINGS, LOOP_PATHS

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "read big.txt with cat and summarise it"
AGENT_TIMEOUT_SECONDS = 300
TOOL = "pinch_retrieve"
# A trace of the internal call: the tool's name as a JSON string (a call's, a tool list's) or the marker of a
# cut output. The name inside a longer string is the model's own words (its thinking may say it will call
# the tool: the proxy relays a model's words as they come, signed thinking most of all): counted apart.
TRACES = (f'"{TOOL}"'.encode(), b"[pinch-router:")


def big_output(lines: int = 400, seed: int = 44) -> str:
    """``lines`` distinct lines of an inventory-like listing (about 45 characters each): words, ids and
    figures drawn at random, so no run repeats and no numbers step evenly (nothing a lossless rule folds)."""
    draw = random.Random(seed)
    places = ("north", "harbour", "mill", "quarry", "orchard", "station", "ridge", "depot", "canal", "market")
    things = ("crates", "barrels", "lamps", "ropes", "sacks of flour", "copper pipes", "tiles", "nails", "bolts of cloth", "anchors")
    states = ("checked", "counted twice", "moved to shed", "on order", "set aside", "labelled", "weighed", "returned")
    out = []
    for n in range(lines):
        place, thing, state = draw.choice(places), draw.choice(things), draw.choice(states)
        ref = "".join(draw.choice("abcdefghjkmnpqrstuvwxyz") for _ in range(draw.randint(3, 6)))
        out.append(f"{place}-{ref}: {draw.randint(2, 9999)} {thing} {state}" + (f", shelf {draw.randint(1, 88)}" if n % 3 else ""))
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class Case:
    name: str
    agent: str  # its key in docs.agents_pinch_check.AGENTS (environment and settings files)
    command: Callable[[Path], list[str]]  # given the npm folder
    model: str  # the model its settings files name (codex: none, its default)
    anthropic: bool = False  # the agent's model on an api: anthropic provider on the mock (else the shipped chat provider)


CASES = {
    case.name: case
    for case in (
        Case("claude-code", "claude-code", lambda npm: [str(npm / ".bin" / "claude"), "--model", "mock-claude", "--allowedTools", "Bash", "-p", PROMPT],
             "mock-claude", anthropic=True),
        Case("claude-code-chat", "claude-code", lambda npm: [str(npm / ".bin" / "claude"), "--allowedTools", "Bash", "-p", PROMPT], ""),
        Case("codex", "codex", lambda npm: [str(npm / ".bin" / "codex"), "exec", "--skip-git-repo-check", PROMPT], ""),
        Case("opencode", "opencode", lambda npm: [str(npm / ".bin" / "opencode"), "run", PROMPT], "auto"),
    )
}  # fmt: skip


def settings_files(case: Case, port: int) -> dict[str, str]:
    """The agent's settings files (relative to HOME, or ``work/…``): docs/agents_pinch_check.py's, Codex's without a model line (its default)."""
    if case.agent == "codex":
        return {".codex/config.toml": f'model_provider = "pinch"\n\n[model_providers.pinch]\nname = "pinch-router"\n'
                                      f'base_url = "http://127.0.0.1:{port}/v1"\nwire_api = "responses"\nenv_key = "PINCH_ROUTER_KEY"\n'}  # fmt: skip
    return AGENTS[case.agent].files(port, case.model)


def proxy_config(case: Case, mock_port: int, state: Path) -> dict[str, Any]:
    """The shipped config.yaml, pinch on, its Ollama provider on the mock; for an ``anthropic`` case an
    ``api: anthropic`` provider on the mock too, with the model the agent pins (``mock-claude``)."""
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["providers"]["ollama"]["base_url"] = f"http://127.0.0.1:{mock_port}/v1"
    if case.anthropic:
        config["providers"]["mock-anthropic"] = {"base_url": f"http://127.0.0.1:{mock_port}", "api": "anthropic", "api_key_env": "MOCK_KEY"}
        config["models"].append({"name": "mock-claude", "provider": "mock-anthropic", "upstream_model": "mock", "max_output_tokens": 64000,
                                 "context_window": 200000, "supports": {"tools": True, "vision": True, "json_mode": True}, "tiers": [3]})  # fmt: skip
    config["pinch"]["enabled"] = True
    config["pinch"]["relevance"]["base_url"] = f"http://127.0.0.1:{mock_port}/v1"
    config["decision_log"]["path"] = str(state / "decisions.sqlite3")
    return config


@dataclass
class Upstream:
    """What the mock received of the agent's loop (requests offering tools, on its loop's paths)."""

    requests: int = 0
    cut: list[int] = field(default_factory=list)  # 1-based numbers of the requests carrying a cut output
    offered: int = 0  # requests offering pinch_retrieve
    rounds: list[tuple[int, int, bool]] = field(default_factory=list)  # retrieve rounds: number, characters answered, the whole output?


@dataclass
class Result:
    case: str
    exit_code: int
    final_text: str
    rows: list[dict[str, Any]]
    upstream: Upstream
    traces: list[str]  # where the agent printed the tool's name, or stored a call of it or the cut marker
    mentions: list[str]  # where it stored the name inside the model's own words (not a call)
    warnings: list[str]

    @property
    def retrieve_calls(self) -> int:
        return sum(row.get("retrieve_calls") or 0 for row in self.rows)

    @property
    def problems(self) -> list[str]:
        return [
            *([f"exit {self.exit_code}"] if self.exit_code else []),
            *([f"{self.retrieve_calls} retrieve calls answered (not 1)"] if self.retrieve_calls != 1 else []),
            *(["no retrieve round upstream with the whole output"] if not any(whole for _, _, whole in self.upstream.rounds) else []),
            *([f"{len(self.upstream.rounds)} retrieve rounds upstream (not 1)"] if len(self.upstream.rounds) != 1 else []),
            *([f"traces of the tool: {', '.join(self.traces)}"] if self.traces else []),
            *([f"{len(self.warnings)} warnings"] if self.warnings else []),
        ]


def _text(content: Any) -> str:
    """A tool result's text, in either format: a string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _tool_names(body: dict[str, Any]) -> list[str]:
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    return [str(t.get("name") or (t.get("function") or {}).get("name")) for t in tools if isinstance(t, dict)]


def _last_result(messages: list[Any]) -> tuple[str, str] | None:
    """The conversation's last tool result and the name of the tool it answers, in chat's or Messages' form; None when it does not end with one."""
    if not messages or not isinstance(messages[-1], dict):
        return None
    last = messages[-1]
    calls: dict[str, str] = {}
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                calls[str(call.get("id"))] = str((call.get("function") or {}).get("name"))
            for block in message.get("content") if isinstance(message.get("content"), list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    calls[str(block.get("id"))] = str(block.get("name"))
    if last.get("role") == "tool":
        return _text(last.get("content")), calls.get(str(last.get("tool_call_id")), "")
    results = [b for b in last.get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_result"] if last.get("role") == "user" else []
    if results and isinstance(last.get("content"), list):
        return _text(results[-1].get("content")), calls.get(str(results[-1].get("tool_use_id")), "")
    return None


def upstream_of(records: list[dict[str, Any]], file_text: str) -> Upstream:
    seen = Upstream()
    for number, record in enumerate(records, start=1):
        body = record["body"]
        seen.requests += 1
        seen.offered += TOOL in _tool_names(body)
        if b"[pinch-router:" in orjson.dumps(body.get("messages")) and b'") returns the whole output' in orjson.dumps(body.get("messages")):
            seen.cut.append(number)
        last = _last_result(body.get("messages") or [])
        if last is not None and last[1] == TOOL:
            answered = last[0]
            seen.rounds.append((number, len(answered), answered.strip() == file_text.strip()))
    return seen


def traces_in(places: list[Path], printed: str) -> tuple[list[str], list[str]]:
    """Where the tool shows: ``output`` when the agent printed its name or the cut marker, a file's path when
    it stored a trace (:data:`TRACES`); and apart, the files holding the name only in the model's words."""
    found = ["output"] if TOOL in printed or "[pinch-router:" in printed else []
    mentions = []
    for place in places:
        for path in sorted(p for p in place.rglob("*") if p.is_file() and not p.is_symlink()):
            try:
                data = path.read_bytes()
            except OSError:
                continue
            where = str(path.relative_to(place.parent))
            if any(trace in data for trace in TRACES):
                found.append(where)
            elif TOOL.encode() in data:
                mentions.append(where)
    return found, mentions


def run_case(case: Case, npm: Path, lines: int, keep: Path | None = None) -> Result:
    with tempfile.TemporaryDirectory(prefix=f"retrieve-{case.name}-") as scratch_name:
        scratch = Path(scratch_name)
        home, work, state, recorded = (scratch / name for name in ("home", "work", "state", "requests"))
        for directory in (home, work, state):
            directory.mkdir()
        file_text = big_output(lines)
        (work / "big.txt").write_text(file_text)
        mock_port, proxy_port = free_port(), free_port()
        for relative, text in settings_files(case, proxy_port).items():
            path = work / relative.removeprefix("work/") if relative.startswith("work/") else home / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        config = scratch / "config.yaml"
        config.write_bytes(orjson.dumps(proxy_config(case, mock_port, state)))  # JSON is YAML
        mock = [sys.executable, "-m", "router", "mock-upstream", "--port", str(mock_port), "--record", str(recorded), "--tool-command", "cat big.txt"]
        serve = [sys.executable, "-m", "router", "serve", "--config", str(config), "--port", str(proxy_port)]
        proxy_log = scratch / "proxy.log"
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8", "TERM": "dumb"}
        with spawn(mock, mock_port, log_path=scratch / "mock.log"), spawn(serve, proxy_port, {"MOCK_KEY": "mock-key"}, log_path=proxy_log):
            done = subprocess.run(case.command(npm), cwd=work, env={**env, **AGENTS[case.agent].env(proxy_port, case.model)},
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=AGENT_TIMEOUT_SECONDS)  # fmt: skip
            with urllib.request.urlopen(f"http://127.0.0.1:{proxy_port}/v1/decisions?limit=1000") as answer:  # loopback only
                rows = list(reversed(orjson.loads(answer.read())["data"]))
        records = [orjson.loads(path.read_bytes()) for path in sorted(recorded.glob("*.json"))] if recorded.exists() else []
        loop = [r for r in records if r.get("path") in LOOP_PATHS and isinstance(r.get("body"), dict) and r["body"].get("tools")]
        printed = done.stdout + done.stderr
        said = [line.strip() for line in printed.splitlines() if _is_warning(line)]
        warnings = [line[:300] for line in said if not any(k.search(line) for k in KNOWN_AGENT_WARNINGS)]
        warnings += [f"proxy: {line[:300]}" for line in proxy_log.read_text().splitlines() if _proxy_warning(line)]
        (work / "big.txt").unlink()  # the agent's own files only
        traces, mentions = traces_in([home, work], printed)
        if keep is not None:
            shutil.copytree(scratch, keep / case.name, dirs_exist_ok=True, symlinks=True)
        return Result(case.name, done.returncode, done.stdout.strip(), rows, upstream_of(loop, file_text), traces, mentions, warnings)


def _is_warning(line: str) -> bool:
    from docs.agents_pinch_check import WARNING_LINE

    return bool(WARNING_LINE.search(line))


def _proxy_warning(line: str) -> bool:
    from docs.agents_pinch_check import _is_warning as proxy_warning

    return proxy_warning(line)


def describe(result: Result) -> str:
    seen = result.upstream
    final = result.final_text if len(result.final_text) <= 240 else result.final_text[:160] + " … " + result.final_text[-60:]
    lines = [
        f"{result.case}: exit {result.exit_code}; retrieve_calls {result.retrieve_calls}; "
        f"{seen.requests} loop requests upstream, {seen.offered} offering {TOOL}, the cut output in requests {seen.cut}",
        "  retrieve rounds upstream: "
        + (", ".join(f"request {n}: {chars} characters answered, {'the whole output' if whole else 'NOT the whole output'}" for n, chars, whole in seen.rounds) or "none"),
        f"  traces of the call in what the agent printed or stored: {', '.join(result.traces) or 'none'}"
        + (f"; the name in the model's own words in {', '.join(result.mentions)}" if result.mentions else ""),
        f"  final text: {final!r}",
    ]
    for row in result.rows:
        lines.append(
            f"    {row.get('status')} {row.get('wire_in')}→{row.get('wire_out')} {row.get('requested_model') or ''}→{row.get('model')} "
            f"stream {row.get('stream')}; retrieve_calls {row.get('retrieve_calls')}, retrieve_tokens {row.get('retrieve_tokens')}; "
            f"first sight new {row.get('pinch_first_sight_new')}, saved {row.get('pinch_first_sight_saved')}"
        )
    lines += [f"  ! {warning}" for warning in result.warnings]
    lines.append(f"=> {result.case}: {'ok' if not result.problems else 'FAILED: ' + '; '.join(result.problems)}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=Path, required=True, help="the npm folder holding Claude Code, Codex and opencode")
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="run only these (repeatable; default all)")
    parser.add_argument("--lines", type=int, default=400, help="lines of big.txt (default 400)")
    parser.add_argument("--keep", type=Path, help="copy each case's recordings, logs, config, HOME and workspace here")
    args = parser.parse_args()
    failed = False
    for name in args.case or list(CASES):
        result = run_case(CASES[name], args.agents / "node_modules", args.lines, args.keep)
        print(describe(result), end="\n\n", flush=True)
        failed |= bool(result.problems)
    return 1 if failed else 0


if __name__ == "__main__":
    shutil.which("node") or print("node is not on PATH: the npm agents need it", file=sys.stderr)
    sys.exit(main())
