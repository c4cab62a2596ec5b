"""Real agents through `pinch-router serve` with pinch on a small budget: is the prompt cache kept warm?

For each agent (Claude Code, Codex CLI, opencode, pi, the Continue CLI, aider), twice — pinch off, then pinch
on with ``--pinch-budget`` — this starts ``pinch-router mock-upstream`` with one
``--tool-command "cat partN.txt"`` per report part (so the agent runs several tool turns in
one session and the results pile up) and ``pinch-router serve`` on a config derived from the
shipped ``config.yaml``: its Ollama provider on the mock, plus an ``api: anthropic`` provider
(Claude Code's requests pass through, ``cache_control`` breakpoints and all) and a ``wire:
openai-responses`` one (Codex's Responses items pass through); opencode, pi and aider route
``auto`` over the shipped catalogue (OpenAI chat). ``pinch.keep_last_turns`` is 1 so pinch has
old results to work on after two tool turns. Each agent runs non-interactively with a
throw-away HOME in a workspace holding the parts; aider, which has no tools, asks three
questions in one chat (``--restore-chat-history``). Every base URL is loopback, every
agent's update checks and telemetry are off (``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``,
``OPENCODE_DISABLE_*``, ``PI_OFFLINE``, aider's ``--no-check-update --analytics-disable``).

Per run it prints what went upstream, from the mock's recordings and the proxy's decisions:

* the exit code, and every warning or error line of the agent's output and the proxy's log
  (an agent's remarks about its own setup, such as Codex's on its sandbox, are listed as known);
* the **unchanged prefix share**: of the tokens of the session's loop requests after the first
  (those offering tools: not its title request), the share that repeated the previous request
  from its start (:func:`router.tools.pinch_measures.unchanged_prefix_tokens`), over the units a
  prefix cache reads in order (:func:`~router.tools.pinch_measures.prompt_units`: tools, system,
  messages or items) in the form a cache compares (:func:`~router.tools.pinch_measures.as_cached`:
  ``cache_control`` breakpoints left out, as Claude Code moves its breakpoint to the newest
  message every turn, and a string content as the text block it stands for); the lowest per
  request; how many requests changed nothing the previous one sent (*appends*) and how many
  changed it first at a result compressed for the first time (*batches*), with the first
  changed unit of each that is not an append;
* the **session keys** the proxy gave the run's requests (one, from which source) — several
  would split the ledger and the classification cache;
* pinch's decisions: tokens before → after (cached tokens as the mock's simulated cache
  reported them), results reapplied from the ledger / newly compressed, and the reason (as
  ``explain`` shows them); then one summary line per agent.

Needs the agents installed outside the repo (versions: README "Use with your agent")::

    .venv/bin/python -m docs.agents_pinch_check --agents ../agents --agents-cc ../agents-cc \\
        [--agent claude-code]... [--pinch-budget 8000] [--parts 6] [--model local-reasoner] \\
        [--window 18000] [--cache-lifetime 0] [--native-chat] [--keep DIR]

``--window`` makes every model's window that small (window-bound: batches on a warm cache);
``--model`` makes every agent ask for that model (``local-reasoner``: Claude Code's and Codex's
requests translated to chat); ``--native-chat`` puts the Ollama provider on Ollama's native
``/api/chat`` (``native_chat: true``: with ``--model local-reasoner`` every agent's requests are
translated to it, tool calls and all, and the mock thinks before each answer); ``--fixtures`` runs the agents straight against the mock and
writes their requests to tests/data/agents/ instead. Exits 1 when a run fails: an agent's exit
code, a warning, a session split, or, with pinch on, a request that changed what the previous
one sent other than by compressing a result anew where pinch off did not change it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from bench.harness import free_port, spawn
from docs.capture_agents import FIXTURES, curated, renamed
from router.tools.pinch_measures import as_cached, prompt_units, results_by_call, unchanged_prefix_tokens
from router.core.tokens import TokenEstimator

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "read the report parts part1.txt, part2.txt, ... one by one with cat and summarise them"
# the same session continued by a second run of the agent: the mock reads the parts again, and the
# session key, the ledger and the prefix must carry over from the first run
FOLLOW_UP = "read them once more and compare"
# --native-chat: the mock thinks before every answer, as a thinking model (local-reasoner's qwen3) does on a recent Ollama
NATIVE_THINKING = "The user wants the next part read, so I call the shell tool."
AGENT_TIMEOUT_SECONDS = 300
LOOP_PATHS = ("/v1/messages", "/v1/responses", "/v1/chat/completions")
# What the agents print that is worth a look (the proxy's own warnings come as JSON log lines)
WARNING_LINE = re.compile(r"\b(warn(ing)?|error|exception|traceback|failed)\b", re.IGNORECASE)


def report_part(n: int, chars: int = 6000) -> str:
    """A report part of about ``chars`` characters whose lines are all different (a tool result worth compressing)."""
    lines, i = [], 0
    while sum(len(line) + 1 for line in lines) < chars:
        i += 1
        lines.append(f"part {n} line {i}: measured value {n * 1000 + i}, status ok, see section {n}.{i % 7}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Agent:
    name: str
    model: str  # what the agent asks for by default: a catalogue name (pinned) or auto
    # its command lines, given the binary folders, the proxy port and the model; each runs in the workspace
    commands: Callable[[Path, Path, int, str], list[list[str]]]
    # its environment (over a minimal PATH/HOME/LANG), given the proxy port and the model
    env: Callable[[int, str], dict[str, str]]
    # files it reads its settings from, relative to HOME (or to the workspace, "work/…"), given the proxy port and the model
    files: Callable[[int, str], dict[str, str]]
    # its loop's requests offer tools (its title requests do not); aider has none: every request is its loop
    offers_tools: bool = True


def _claude(npm: Path, npm_cc: Path, port: int, model: str) -> list[list[str]]:
    claude = [str(npm_cc / ".bin" / "claude"), "--model", model, "--allowedTools", "Bash"]
    return [[*claude, "-p", PROMPT], [*claude, "-p", "--continue", FOLLOW_UP]]


def _codex(npm: Path, npm_cc: Path, port: int, model: str) -> list[list[str]]:
    codex = [str(npm_cc / ".bin" / "codex"), "exec", "--skip-git-repo-check"]
    return [[*codex, PROMPT], [*codex, "resume", "--last", FOLLOW_UP]]


def _opencode(npm: Path, npm_cc: Path, port: int, model: str) -> list[list[str]]:
    opencode = [str(npm / ".bin" / "opencode"), "run"]
    return [[*opencode, PROMPT], [*opencode, "--continue", FOLLOW_UP]]


def _pi(npm: Path, npm_cc: Path, port: int, model: str) -> list[list[str]]:
    pi = [str(npm / ".bin" / "pi"), "--provider", "pinch-router", "--model", model]
    return [[*pi, "-p", PROMPT], [*pi, "--continue", "-p", FOLLOW_UP]]


def _continue(npm: Path, npm_cc: Path, port: int, model: str) -> list[list[str]]:
    cn = [str(npm / ".bin" / "cn"), "--config", "config.yaml", "--auto"]
    return [[*cn, "-p", PROMPT], [*cn, "--resume", "-p", FOLLOW_UP]]


def _aider(npm: Path, npm_cc: Path, port: int, model: str) -> list[list[str]]:
    aider = npm.parent / "aider-venv" / "bin" / "aider"
    common = [str(aider), "--model", f"openai/{model}", "--no-show-model-warnings", "--yes", "--no-git", "--no-check-update",
              "--analytics-disable", "--no-show-release-notes", "--no-pretty", "--no-stream", "--restore-chat-history"]  # fmt: skip
    questions = ("what does part1.txt say?", "and part2.txt?", "which part is longest?")
    return [[*common, "--message", question, "part1.txt", "part2.txt"] for question in questions]


AGENTS = {
    agent.name: agent
    for agent in (
        Agent(
            "claude-code", "mock-claude", _claude,
            lambda port, model: {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
                          "ANTHROPIC_API_KEY": "test"},
            lambda port, model: {},
        ),
        Agent(
            "codex", "mock-responses", _codex,
            lambda port, model: {"PINCH_ROUTER_KEY": "unused"},
            lambda port, model: {".codex/config.toml": f'model = "{model}"\nmodel_provider = "pinch"\n\n[model_providers.pinch]\n'
                          f'name = "pinch-router"\nbase_url = "http://127.0.0.1:{port}/v1"\nwire_api = "responses"\nenv_key = "PINCH_ROUTER_KEY"\n'},
        ),
        Agent(
            "opencode", "auto", _opencode,
            lambda port, model: {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_SHARE": "1",
                          "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1"},
            lambda port, model: {"work/opencode.json": json.dumps({
                "$schema": "https://opencode.ai/config.json", "model": f"pinch-router/{model}",
                "provider": {"pinch-router": {"npm": "@ai-sdk/openai-compatible", "name": "pinch-router",
                                              "options": {"baseURL": f"http://127.0.0.1:{port}/v1"},
                                              "models": {model: {"limit": {"context": 40960, "output": 16384}}}}}})},
        ),
        Agent(
            "pi", "auto", _pi,
            lambda port, model: {"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"},
            lambda port, model: {".pi/agent/models.json": json.dumps({"providers": {"pinch-router": {
                "baseUrl": f"http://127.0.0.1:{port}/v1", "api": "openai-completions", "apiKey": "unused", "models": [{"id": model}]}}})},
        ),
        Agent(
            "continue", "auto", _continue,
            lambda port, model: {"CONTINUE_CLI_ENABLE_TELEMETRY": "0", "CONTINUE_METRICS_ENABLED": "0", "CONTINUE_CLI_DISABLE_COMMIT_SIGNATURE": "1", "CONTINUE_CLI_AUTO_UPDATED": "1"},
            lambda port, model: {"work/config.yaml": "name: pinch-router\nversion: 1.0.0\nschema: v1\nmodels:\n  - name: pinch-router\n"
                                 f"    provider: openai\n    model: {model}\n    apiBase: http://127.0.0.1:{port}/v1\n    apiKey: unused\n"
                                 "    roles: [chat, edit, apply]\n    capabilities: [tool_use]\n"},
        ),
        Agent(
            "aider", "auto", _aider,
            lambda port, model: {"OPENAI_API_BASE": f"http://127.0.0.1:{port}/v1", "OPENAI_API_KEY": "unused", "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
            # the model described, else aider fetches litellm's model list from raw.githubusercontent.com at start
            lambda port, model: {".aider.model.metadata.json": json.dumps({f"openai/{model}": {
                "max_input_tokens": 40960, "max_output_tokens": 16384, "litellm_provider": "openai", "mode": "chat",
                "input_cost_per_token": 0, "output_cost_per_token": 0}})},
            offers_tools=False,
        ),
    )
}  # fmt: skip


@dataclass(frozen=True)
class Scenario:
    """What the pinch-on run changes besides the budget: every model's window (None: as configured) and
    every provider's cache lifetime (None: the default per api, 300 s)."""

    window: int | None = None
    cache_lifetime: float | None = None
    native_chat: bool = False  # the Ollama provider on Ollama's native /api/chat (native_chat: true)


def proxy_config(mock_port: int, budget: int | None, state: Path, scenario: Scenario = Scenario()) -> dict[str, Any]:
    """The shipped config.yaml with its Ollama provider on the mock, two pass-through providers beside it,
    and pinch at ``budget`` (None: off) in ``scenario``."""
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["providers"]["ollama"]["base_url"] = f"http://127.0.0.1:{mock_port}/v1"
    config["providers"]["ollama"]["native_chat"] = scenario.native_chat
    config["providers"]["mock-anthropic"] = {"base_url": f"http://127.0.0.1:{mock_port}", "api": "anthropic", "api_key_env": "MOCK_KEY"}
    config["providers"]["mock-responses"] = {"base_url": f"http://127.0.0.1:{mock_port}/v1", "wire": "openai-responses", "api_key_env": "MOCK_KEY"}
    big = {"context_window": 200000, "supports": {"tools": True, "vision": True, "json_mode": True}, "tiers": [1, 2, 3]}
    config["models"] += [
        {"name": "mock-claude", "provider": "mock-anthropic", "upstream_model": "mock", "max_output_tokens": 64000, **big},
        {"name": "mock-responses", "provider": "mock-responses", "upstream_model": "mock", "max_output_tokens": 32000, **big},
    ]
    config["pinch"]["enabled"] = budget is not None
    config["pinch"]["budget_tokens"] = budget or config["pinch"]["budget_tokens"]
    config["pinch"]["keep_last_turns"] = 1
    config["pinch"]["relevance"]["base_url"] = f"http://127.0.0.1:{mock_port}/v1"
    config["decision_log"]["path"] = str(state / "decisions.sqlite3")
    for model in config["models"] if scenario.window is not None else []:
        model["context_window"] = scenario.window
        model["max_output_tokens"] = min(model["max_output_tokens"], scenario.window // 4)
    for provider in config["providers"].values() if scenario.cache_lifetime is not None else []:
        provider["cache_lifetime_seconds"] = scenario.cache_lifetime
    return config


@dataclass
class Run:
    exit_codes: list[int]
    warnings: list[str]
    known_warnings: list[str]  # KNOWN_AGENT_WARNINGS it printed
    requests: list[dict[str, Any]]  # the agent loop's upstream request bodies, in order
    rows: list[dict[str, Any]]  # the proxy's decisions, oldest first
    stdout: str


def run_agent(
    agent: Agent, npm: Path, npm_cc: Path, budget: int | None, parts: int, scenario: Scenario, keep: Path | None = None,
    fixtures: bool = False, model: str | None = None,
) -> Run:
    """One run through the proxy; ``fixtures``: straight to the mock instead (no proxy, no decisions), and its
    requests as the agent sent them written to tests/data/agents/<agent>-tool-turns/."""
    with tempfile.TemporaryDirectory(prefix=f"pinch-{agent.name}-") as scratch_name:
        scratch = Path(scratch_name)
        home, work, state, recorded = (scratch / name for name in ("home", "work", "state", "requests"))
        for directory in (home, work, state):
            directory.mkdir()
        for n in range(1, parts + 1):
            (work / f"part{n}.txt").write_text(report_part(n))
        mock_port, proxy_port = free_port(), free_port()
        agent_port = mock_port if fixtures else proxy_port  # for fixtures the agent talks to the mock itself
        for relative, text in agent.files(agent_port, model or agent.model).items():
            path = work / relative.removeprefix("work/") if relative.startswith("work/") else home / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        config = scratch / "config.yaml"
        config.write_bytes(orjson.dumps(proxy_config(mock_port, budget, state, scenario)))  # JSON is YAML
        commands = [arg for n in range(1, parts + 1) for arg in ("--tool-command", f"cat part{n}.txt")]
        # its chat answers report cached_tokens as a 300 s prefix cache would: the proxy's cache accounting, seen
        mock = [sys.executable, "-m", "router", "mock-upstream", "--port", str(mock_port), "--record", str(recorded), "--prompt-cache-seconds", "300", *commands,
                *(["--thinking", NATIVE_THINKING] if scenario.native_chat else [])]
        serve = [sys.executable, "-m", "router", "serve", "--config", str(config), "--port", str(proxy_port)]
        proxy_log = scratch / "proxy.log"
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8", "TERM": "dumb"}
        exit_codes, warnings, known, stdout = [], [], [], []
        proxy_log.write_text("")
        with spawn(mock, mock_port, log_path=scratch / "mock.log"), (
            contextlib.nullcontext() if fixtures else spawn(serve, proxy_port, {"MOCK_KEY": "mock-key"}, log_path=proxy_log)
        ):
            for command in agent.commands(npm, npm_cc, agent_port, model or agent.model):
                done = subprocess.run(command, cwd=work, env={**env, **agent.env(agent_port, model or agent.model)}, stdin=subprocess.DEVNULL,
                                      capture_output=True, text=True, timeout=AGENT_TIMEOUT_SECONDS)  # fmt: skip
                exit_codes.append(done.returncode)
                stdout.append(done.stdout)
                said = [line.strip() for line in (done.stdout + done.stderr).splitlines() if WARNING_LINE.search(line)]
                warnings += [f"{agent.name}: {line[:300]}" for line in said if not any(k.search(line) for k in KNOWN_AGENT_WARNINGS)]
                known += [f"{agent.name}: {line[:200]}" for line in said if any(k.search(line) for k in KNOWN_AGENT_WARNINGS)]
            rows = []
            if not fixtures:
                with urllib.request.urlopen(f"http://127.0.0.1:{proxy_port}/v1/decisions?limit=1000") as answer:  # loopback only
                    rows = list(reversed(orjson.loads(answer.read())["data"]))
        warnings += [f"proxy: {line[:300]}" for line in proxy_log.read_text().splitlines() if _is_warning(line)]
        if fixtures:
            write_fixtures(agent, recorded, scratch_name)
        requests = []
        for path in sorted(recorded.glob("*.json")) if recorded.exists() else []:
            sent = orjson.loads(path.read_bytes())
            body = sent.get("body") or {}
            if not isinstance(body, dict) or not (body.get("tools") or not agent.offers_tools):
                continue
            # --native-chat: the loop's requests on /api/chat too, beside the classifier's (format: json)
            if sent.get("path") in LOOP_PATHS or (scenario.native_chat and sent.get("path") == "/api/chat" and "format" not in body):
                requests.append(body)
        if keep is not None:  # the recordings, the logs and the config, for a closer look
            shutil.copytree(scratch, keep / f"{agent.name}-pinch-{'off' if budget is None else 'on'}", ignore=shutil.ignore_patterns("home", "work"), dirs_exist_ok=True)
        return Run(exit_codes, warnings, sorted(set(known)), requests, rows, "\n".join(stdout))


# What an agent says about its own setup, not about the proxy: shown as known, not failed on
KNOWN_AGENT_WARNINGS = (
    re.compile(r"could not create PATH aliases: Refusing to create helper binaries under temporary dir"),  # codex: HOME in /tmp
    re.compile(r"Codex could not find bubblewrap on PATH"),  # codex: this machine's sandbox tool
    re.compile(r"Model metadata for `[\w-]+` not found. Defaulting to fallback metadata"),  # codex: a model name it does not know
)

# The proxy's own lines that are not log records: start and stop
PROXY_LIFECYCLE = re.compile(r"^pinch-router(:| listening on )")


def write_fixtures(agent: Agent, recorded: Path, temp_root: str) -> None:
    """The agent's loop requests as it sent them: an agent with tools (Claude Code, Codex) to
    ``<agent>-tool-turns/``, one file per request as ``mock-upstream --record`` writes them, prose cut as
    docs/capture_agents.py cuts it but tool results whole (what pinch compresses); aider to
    ``aider-turns.jsonl`` as the other chat captures are kept, whole (its fingerprint reads its messages to
    their end)."""
    records = [orjson.loads(path.read_bytes()) for path in sorted(recorded.glob("*.json"))]
    records = [record for record in records if record.get("path") in LOOP_PATHS]
    if not agent.offers_tools:
        lines = (orjson.dumps({"path": r["path"], "headers": r["headers"], "body": renamed(r["body"], temp_root)}) for r in records)
        (FIXTURES / f"{agent.name}-turns.jsonl").write_bytes(b"\n".join(lines) + b"\n")
        return
    folder = FIXTURES / f"{agent.name}-tool-turns"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for number, record in enumerate(records, start=1):
        name = f"{number:04d}-{record['method']}-{record['path'].strip('/').replace('/', '-')}.json"
        (folder / name).write_bytes(orjson.dumps(curated(record, temp_root, tool_results_whole=True), option=orjson.OPT_INDENT_2) + b"\n")


def _is_warning(line: str) -> bool:
    """A proxy log line worth a look: a warning or error record, or anything not a record (a traceback).
    Not: doctor's start-up finding that the shipped models are not pulled — the mock lists only its own."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return bool(line.strip()) and not PROXY_LIFECYCLE.match(line)
    if not isinstance(record, dict) or str(record.get("level", "")).lower() in ("info", "debug"):
        return False
    return not (record.get("event") == "doctor_problem" and str(record.get("detail", "")).startswith("not pulled into Ollama"))


@dataclass(frozen=True)
class Pair:
    """Two consecutive requests of the session, the later one measured against the earlier one in the form
    a cache compares: its tokens, those that repeat the earlier one from the start, the first unit it changed
    among those the earlier one sent (None: an append), what that unit is, and whether it changed by being
    compressed (a pinch marker in it now and none before, or a shorter form of it: a batch)."""

    tokens: int
    prefix_tokens: int
    first_change: int | None
    units: int
    what: str
    compressed: bool

    @property
    def share(self) -> float:
        return self.prefix_tokens / self.tokens if self.tokens else 0.0


PINCH_MARKER = b"pinch-router"  # in both forms pinch sends: "[... pinch-router removed N characters ...]" and the placeholder


def prefix_shares(requests: list[dict[str, Any]]) -> list[Pair]:
    estimator, pairs = TokenEstimator(), []
    units = [as_cached(prompt_units(body)) for body in requests]
    for before, now in zip(units, units[1:]):
        change = next((i for i, (a, b) in enumerate(zip(before, now)) if a != b), None)
        if change is None and len(now) < len(before):
            change = len(now)
        changed = now[change] if change is not None and change < len(now) else None
        # compressed anew, or further: an elided result turned into a placeholder (the window forced it)
        was, now_sent = orjson.dumps(before[change]) if change is not None else b"", orjson.dumps(changed) if changed is not None else b""
        compressed = PINCH_MARKER in now_sent and (PINCH_MARKER not in was or len(now_sent) < len(was))
        tokens = sum(estimator.message_tokens(unit) for unit in now)
        what = "" if change is None else _unit_kind(changed if changed is not None else before[change])
        pairs.append(Pair(tokens, unchanged_prefix_tokens(before, now, estimator), change, len(before), what, compressed))
    return pairs


@dataclass(frozen=True)
class LedgerKept:
    """Over a session, each compressed result in the next request that still holds it: sent as the same
    bytes, compressed further (shorter, a marker still in it), or otherwise changed (back uncompressed)."""

    same: int
    further: int
    lost: int


def ledger_kept(requests: list[dict[str, Any]]) -> LedgerKept:
    same = further = lost = 0
    sent = [results_by_call(prompt_units(body)) for body in requests]
    for before, now in zip(sent, sent[1:]):
        for call, content in before.items():
            if PINCH_MARKER not in content or call not in now:
                continue
            if now[call] == content:
                same += 1
            elif PINCH_MARKER in now[call] and len(now[call]) < len(content):
                further += 1
            else:
                lost += 1
    return LedgerKept(same, further, lost)


def session_share(pairs: list[Pair]) -> float:
    """The session's unchanged prefix: of all tokens sent after its first request, the share that repeated the previous request."""
    sent = sum(pair.tokens for pair in pairs)
    return sum(pair.prefix_tokens for pair in pairs) / sent if sent else 0.0


def _unit_kind(unit: dict[str, Any]) -> str:
    """A unit in a few words: role or type, and its block types."""
    kind = str(unit.get("role") or unit.get("type") or unit.get("name") or next(iter(unit), "?"))
    content = unit.get("content")
    if isinstance(content, list):
        kind += "[" + ",".join(str(b.get("type")) for b in content if isinstance(b, dict)) + "]"
    return kind


def describe(name: str, budget: int | None, run: Run, scenario: str = "") -> str:
    """A run's report: exit codes, requests, session keys, the prefix figures, each decision, each warning."""
    pairs = prefix_shares(run.requests)
    values = [pair.share for pair in pairs]
    sessions = sorted({(str(row.get("session")), str(row.get("session_source"))) for row in run.rows})
    lines = [
        f"{name}, pinch {'off' if budget is None else f'on, budget {budget}{scenario}'}: exit {run.exit_codes}, "
        f"{len(run.requests)} loop requests upstream, {len(run.rows)} decisions, "
        f"sessions {len(sessions)} ({', '.join(f'{key[:8]}…/{source}' for key, source in sessions)})",
        f"  unchanged prefix: {session_share(pairs):.1%} of the tokens sent after the first request; per request lowest "
        f"{min(values, default=0):.1%}; appends {sum(p.first_change is None for p in pairs)} of {len(pairs)}, "
        f"batches {sum(p.compressed for p in pairs)}",
    ]
    for n, pair in enumerate(pairs, start=1):
        if pair.first_change is not None:
            how = "newly compressed" if pair.compressed else "changed"
            lines.append(f"    request {n + 1}: {pair.share:.1%} unchanged, unit {pair.first_change} of {pair.units} {how} ({pair.what})")
    for row in run.rows:
        pinch = "" if row.get("pinch_mode") is None else (
            f"  pinch {row['pinch_mode']}: {row.get('tokens_before')} → {row.get('tokens_after')}, "
            f"{row.get('pinch_reapplied')} reapplied, {row.get('pinch_newly_compressed')} new; {row.get('pinch_reason')}"
        )  # fmt: skip
        cached = f" ({row['cached_tokens']} cached)" if row.get("cached_tokens") is not None else ""
        lines.append(f"    {row.get('status')} {row.get('wire_in')}→{row.get('wire_out')} {row.get('model')} {row.get('prompt_tokens')}{cached}+{row.get('completion_tokens')}{pinch}")
    lines += [f"  ! {warning}" for warning in run.warnings]
    lines += [f"  (known: {warning})" for warning in run.known_warnings]
    lines.append(f"  stdout: {run.stdout.strip()[-160:]!r}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=Path, required=True, help="the npm folder of opencode and pi (its parent holds aider-venv)")
    parser.add_argument("--agents-cc", type=Path, required=True, help="the npm folder of Claude Code and Codex")
    parser.add_argument("--agent", action="append", choices=sorted(AGENTS), help="run only these (repeatable; default all)")
    parser.add_argument("--pinch-budget", type=int, default=8000, help="pinch.budget_tokens of the pinch-on run (default 8000)")
    parser.add_argument("--parts", type=int, default=6, help="report parts, one tool turn each (default 6)")
    parser.add_argument("--window", type=int, help="pinch on: every model's context_window (window-bound: the hard limit forces batches on a warm cache)")
    parser.add_argument("--cache-lifetime", type=float, help="pinch on: every provider's cache_lifetime_seconds (0: caches nothing)")
    parser.add_argument("--model", help="the model every agent asks for (default: claude-code mock-claude, codex mock-responses — passed through; the others auto); e.g. local-reasoner: translated to chat")
    parser.add_argument("--native-chat", action="store_true", help="the Ollama provider on its native /api/chat (native_chat: true), in both runs; with --model local-reasoner every agent's requests go there")
    parser.add_argument("--fixtures", action="store_true", help="instead: run each agent straight against the mock and write its requests to tests/data/agents/<agent>-tool-turns/")
    parser.add_argument("--keep", type=Path, help="copy each run's upstream recordings, logs and config here")
    args = parser.parse_args()
    npm, npm_cc = args.agents / "node_modules", args.agents_cc / "node_modules"
    failed = False
    if args.fixtures:
        for name in args.agent or list(AGENTS):
            run = run_agent(AGENTS[name], npm, npm_cc, None, args.parts, Scenario(), args.keep, fixtures=True)
            print(f"{name}: exit {run.exit_codes}, {len(run.requests)} loop requests written", *run.warnings, sep="\n  ")
        return 0
    for name in args.agent or list(AGENTS):
        scenario = Scenario(args.window, args.cache_lifetime, args.native_chat)
        off = run_agent(AGENTS[name], npm, npm_cc, None, args.parts, Scenario(native_chat=args.native_chat), args.keep, model=args.model)
        on = run_agent(AGENTS[name], npm, npm_cc, args.pinch_budget, args.parts, scenario, args.keep, model=args.model)
        settings = "".join(f", {key} {value:g}" for key, value in (("window", args.window), ("cache lifetime", args.cache_lifetime)) if value is not None)
        for budget, run in ((None, off), (args.pinch_budget, on)):
            print(describe(name, budget, run, settings))
        # pinch may change what an earlier request sent only by compressing a result anew (a batch)
        pairs_off, pairs_on, kept = prefix_shares(off.requests), prefix_shares(on.requests), ledger_kept(on.requests)
        worse = [
            n + 2 for n, pair in enumerate(pairs_on)
            if pair.first_change is not None and not pair.compressed and (n >= len(pairs_off) or pairs_off[n].first_change is None)
        ]  # fmt: skip
        split = [run for run in (off, on) if len({row.get("session") for row in run.rows}) > 1]
        problems = [
            *(["an agent exited non-zero"] if any(off.exit_codes + on.exit_codes) else []),
            *(["warnings"] if off.warnings or on.warnings else []),
            *(["more than one session key in a run"] if split else []),
            *([f"pinch on changed what the previous request sent without a batch at requests {worse}"] if worse else []),
            *([f"{kept.lost} compressed results changed back in a later request"] if kept.lost else []),
        ]
        figures = (
            f"{len(on.requests)} requests, {len({row.get('session') for row in on.rows})} session; unchanged prefix off "
            f"{session_share(pairs_off):.1%}, on {session_share(pairs_on):.1%}; appends {sum(p.first_change is None for p in pairs_off)}/{len(pairs_off)} "
            f"off, {sum(p.first_change is None for p in pairs_on)}/{len(pairs_on)} on; batches {sum(p.compressed for p in pairs_on)}; "
            f"ledger resent {sum(row.get('pinch_reapplied') or 0 for row in on.rows)} results; compressed results in the next request: "
            f"{kept.same} the same bytes, {kept.further} compressed further, {kept.lost} changed back"
        )
        print(f"=> {name}: {'ok' if not problems else 'FAILED: ' + '; '.join(problems)} — {figures}\n")
        failed |= bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    shutil.which("node") or print("node is not on PATH: the npm agents need it", file=sys.stderr)
    sys.exit(main())
