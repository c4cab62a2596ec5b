"""The `pinch-router` command: init, serve, doctor, check-config, mock-upstream, eval-pinch, top, keys, explain."""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.metadata
import importlib.resources
import ipaddress
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

from router.contract.chain import ChainError
from router.config import Config, ConfigError, providers_looping_back
from router.server.live import load_serving_config
from router.server.locations import CONFIG_NAME, LocationError, find_config, place_state, prepare_state, state_dir

HOST_ENV = "PINCH_ROUTER_HOST"
PORT_ENV = "PINCH_ROUTER_PORT"
# The port the shipped config's Ollama provider uses, so `mock-upstream` stands in for it as-is.
MOCK_UPSTREAM_PORT = 11434
STARTER_CONFIG = "starter_config.yaml"  # packaged copy of the repository's config.yaml


def _fail(message: str) -> SystemExit:
    print(f"pinch-router: {message}", file=sys.stderr, flush=True)
    return SystemExit(2)


def _config_path(args: argparse.Namespace) -> Path:
    try:
        return find_config(args.config, os.environ, Path.cwd())
    except LocationError as error:
        raise _fail(str(error)) from None


def _load(path: str | Path) -> Config:
    try:
        return load_serving_config(path)
    except (ConfigError, ChainError) as error:
        print(f"pinch-router: invalid configuration in {path}:\n{error}", file=sys.stderr)
        raise SystemExit(2) from None


def _load_found(args: argparse.Namespace) -> Config:
    return _load(_config_path(args))


def _state(args: argparse.Namespace) -> Path:
    return state_dir(getattr(args, "state_dir", None), os.environ)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def describe_config(config: Config) -> str:
    lines = ["chain:"]
    lines += [f"  {i + 1}. {name}" for i, name in enumerate(config.middlewares)]
    lines.append("models:")
    header = f"  {'name':<20} {'provider':<12} {'upstream model':<28} {'context':>8} {'output':>7}  {'tiers':<8} supports"
    lines.append(header)
    for m in config.models:
        supports = ",".join(k for k, v in m.supports.model_dump().items() if v) or "-"
        tiers = ",".join(map(str, m.tiers))
        lines.append(
            f"  {m.name:<20} {m.provider:<12} {m.upstream_model:<28} {m.context_window:>8} {m.max_output_tokens:>7}  {tiers:<8} {supports}"
        )
    lines.append("providers:")
    lines += [f"  {name:<12} {p.api:<7} {p.url}" for name, p in config.providers.items()]
    lines.append(f"aliases: {', '.join(config.routing.aliases) or '-'}")
    return "\n".join(lines)


def cmd_check_config(args: argparse.Namespace) -> int:
    """Validate the config, the decision log's location and the key variables; exit 2 on an error."""
    from router.server.doctor import key_findings

    path = _config_path(args)
    directory = _state(args)
    config = place_state(_load(path), directory)
    try:
        prepare_state(config, directory, probe_only=True)
    except LocationError as error:
        raise _fail(f"{path}: {error}") from None
    for finding in key_findings(config):
        if not finding.ok:
            print(f"pinch-router: warning: {finding.detail}", file=sys.stderr)
    print(f"{path}: ok")
    print(describe_config(config))
    if config.decision_log.enabled:
        print(f"decision log: {config.decision_log.path}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    """Check providers, models, keys, the classifier and embeddings, and the state directory; exit 1 on any problem."""
    from router.server.doctor import render, run_doctor

    path = _config_path(args)
    directory = _state(args)
    config = place_state(_load(path), directory)
    findings = asyncio.run(run_doctor(config, directory, args.timeout))
    print(f"config: {path}")
    print(render(findings))
    problems = sum(not f.ok for f in findings)
    print(f"\n{problems} problem{'' if problems == 1 else 's'}" if problems else "\nall checks passed")
    return 1 if problems else 0


def starter_config() -> str:
    """The commented starter config shipped with the package (the repository's config.yaml)."""
    return importlib.resources.files("router").joinpath(STARTER_CONFIG).read_text(encoding="utf-8")


def cmd_init(args: argparse.Namespace) -> int:
    """Write the starter config and say what to pull; never overwrites without --force."""
    import yaml

    from router.server.registry import REGISTRY
    from router.server.doctor import pull_commands

    target = Path(args.path)
    if target.is_dir():
        target = target / CONFIG_NAME
    if target.exists() and not args.force:
        print(f"pinch-router init: {target} already exists; not overwriting it (--force replaces it)", file=sys.stderr)
        return 1
    text = starter_config()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as error:
        raise _fail(f"cannot write {target}: {error.strerror or error}") from None
    config = REGISTRY.parse_config(yaml.safe_load(text), environ={})
    flag = "" if target.resolve() == (Path.cwd() / CONFIG_NAME).resolve() else f" --config {target}"
    print(f"wrote {target}")
    print("the models it expects, with Ollama (https://ollama.com) on localhost:")
    for command in pull_commands(config):
        print(f"  {command}")
    print("then check everything and start:")
    print(f"  pinch-router doctor{flag}")
    print(f"  pinch-router serve{flag}")
    return 0


# Collections of the youngest generation, as a multiple of Python's default (700 allocations).
GC_YOUNG_THRESHOLD = 7000


async def tune_gc_for_serving(_: object) -> None:
    """Take the cyclic garbage collector off the request path of a serving process.

    A request leaves no cyclic garbage behind (the edge unlinks the context from the
    request), so collections find almost nothing; yet at concurrency 16 they ran every
    ~6 requests and walked the requests in flight, and each full collection walked the
    ~60,000 objects built at start-up (~29 ms, a pause some request waits out).
    Freezing what exists once the app has started (modules, config, chain, registry)
    takes those objects out of every later collection, and a 10x young-generation
    threshold makes collections rare: measured at concurrency 16, GC time fell from
    ~58 µs to ~3 µs a request. Cycles are still collected, only less often.
    """
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


def _port(args: argparse.Namespace, config: Config) -> int:
    if args.port is not None:
        return args.port
    raw = os.environ.get(PORT_ENV)
    if not raw:
        return config.server.port
    if not raw.isdigit() or int(raw) > 65535:
        raise _fail(f"${PORT_ENV} must be a port number from 0 to 65535, not {raw!r}")
    return int(raw)


def cmd_serve(args: argparse.Namespace) -> int:
    from router.server.doctor import warn_at_startup
    from router.observe.logs import configure_logging
    from router.server.service import ServeOptions, serve
    from router.server.workers import is_worker, report_ready, split_state_refusal, stop_when_orphaned, supervise

    path = _config_path(args)
    directory = _state(args)
    prepare = partial(place_state, directory=directory)
    config = prepare(_load(path))
    host = args.host or os.environ.get(HOST_ENV) or config.server.host
    port = _port(args, config)
    loops = providers_looping_back(host, port, config.providers)
    if loops:
        raise _fail(loops[0])
    allow_remote = config.server.allow_unauthenticated_remote or args.allow_unauthenticated_remote
    if not is_loopback(host) and not config.server.api_keys and not allow_remote:
        print(
            f"pinch-router: refusing to listen on {host} without server.api_keys "
            "(set api_keys, or server.allow_unauthenticated_remote: true / --allow-unauthenticated-remote)",
            file=sys.stderr,
        )
        return 2
    try:
        prepare_state(config, directory)
    except LocationError as error:
        raise _fail(str(error)) from None
    if args.workers > 1 and not is_worker():
        refusal = split_state_refusal(config.state.backend, args.workers, args.allow_split_state)
        if refusal is None and port == 0:
            refusal = f"--workers {args.workers} needs a fixed port (they share it), not 0"
        if refusal is not None:
            raise _fail(refusal)
        return supervise(args.argv, args.workers, port, run=main)
    log_writer = configure_logging(config.logging.level)
    options = ServeOptions(
        config_path=path,
        host=host,
        port=port,
        prepare=prepare,
        on_startup=(tune_gc_for_serving,),  # last: after the app's own start-up hooks
        after_listening=(report_ready, warn_at_startup, stop_when_orphaned) if is_worker() else (warn_at_startup,),
        reuse_port=is_worker(),
    )
    code = serve(config, options, log_writer)
    if not log_writer.stop(timeout=2.0):
        # stderr takes no more lines (a pipe nobody reads): everything that matters is
        # already on disk, and waiting for it, or for the interpreter to flush it, would hang.
        os._exit(code)
    return code


def cmd_mock_upstream(args: argparse.Namespace) -> int:
    from aiohttp import web

    from router.server.service import cannot_listen
    from router.tools.mock_upstream import Behaviour, MockUpstream, SimulatedPromptCache

    commands = tuple(args.tool_command) if args.tool_command else Behaviour().tool_commands
    default = Behaviour(event_delay=args.event_delay, tool_commands=commands)
    if args.text:
        default = replace(default, text=args.text)
    if args.thinking:
        default = replace(default, thinking=args.thinking)
    cache = SimulatedPromptCache(args.prompt_cache_seconds) if args.prompt_cache_seconds else None
    if args.record is not None:
        args.record.mkdir(parents=True, exist_ok=True)
    mock = MockUpstream(default, record=False, record_dir=args.record, prompt_cache=cache)

    def listening(_: str) -> None:  # run_app's line once the port is bound: the banner is said only then
        print(mock_banner(args.host, args.port), file=sys.stderr, flush=True)
        if args.record is not None:
            print(f"recording every request to {args.record}/ (credentials redacted)", file=sys.stderr, flush=True)

    try:
        web.run_app(mock.app(), host=args.host, port=args.port, print=listening, access_log=None)
    except OSError as error:  # a busy port: one line and exit 2, as serve does
        raise _fail(f"mock-upstream: {cannot_listen(args.host, args.port, error)} (choose another with --port)") from None
    return 0


def mock_banner(host: str, port: int) -> str:
    """What ``mock-upstream`` says once it listens: every API it serves, where."""
    root = f"http://{host}:{port}"
    return (
        f"pinch-router mock upstream on {root}: OpenAI chat completions and Responses at {root}/v1, "
        f"the Anthropic Messages API at {root}/v1/messages, Ollama (/api/chat, /api/tags, /api/embed) at {root}, "
        "embeddings at /v1/embeddings; its classifier answers from the turn's words"
    )


PLOT_MISSING = "pinch-router eval-pinch --plot needs the plot extra: pip install 'pinch-router[plot]' (it adds matplotlib)"


def cmd_eval_pinch(args: argparse.Namespace) -> int:
    from router.tools.eval_pinch import DEFAULT_BUDGETS, Results, eval_pinch

    plot = None
    if args.plot is not None:  # said before any replay, not after a minute of it
        try:
            from router.tools.pinch_plot import write_plots
        except ModuleNotFoundError as error:
            if error.name is None or error.name.split(".")[0] != "matplotlib":
                raise
            print(PLOT_MISSING, file=sys.stderr)
            return 1

        def plot(results: Results) -> list[Path]:
            return write_plots(results, args.plot)

    return eval_pinch(
        _load_found(args),
        args.files,
        budgets=args.budget or DEFAULT_BUDGETS,
        scenarios=args.scenario,
        keep_last_turns=args.keep_last_turns,
        own_embeddings=args.embeddings_from_config,
        per_transcript=args.per_transcript,
        stream=args.stream,
        plot=plot,
    )


def cmd_demo(args: argparse.Namespace) -> int:
    from router.tools.demo import demo

    # the shipped config.yaml (its packaged copy) unless one is named: the demo needs no model server
    path = Path(args.config) if args.config else Path(str(importlib.resources.files("router").joinpath(STARTER_CONFIG)))
    return demo(
        _load(path),
        str(path),
        _state(args) / "demo",
        transcript_file=args.transcript,
        scenario=args.scenario,
        budget=args.budget,
        keep=args.keep,
    )


TUI_MISSING = "pinch-router top needs the terminal UI extra: pip install 'pinch-router[tui]' (it adds textual)"
# What the extra brings: textual, and rich, which textual is built on and top imports itself
# (a plain `pip install pinch-router` has neither: rich is no dependency of the server).
TUI_MODULES = frozenset({"textual", "rich"})


def cmd_top(args: argparse.Namespace) -> int:
    try:
        from router.tools.top import run_top
    except ModuleNotFoundError as error:
        if error.name is None or error.name.split(".")[0] not in TUI_MODULES:
            raise
        print(TUI_MISSING, file=sys.stderr)
        return 1
    return run_top(args.url, args.api_key, args.interval, args.limit)


def cmd_keys(args: argparse.Namespace) -> int:
    from router.tools.keys_report import run_keys

    return run_keys(args.url, args.api_key, args.json, sys.stdout, sys.stderr)


def cmd_launch(args: argparse.Namespace) -> int:
    from router.tools.launch import launch, list_agents

    if args.list:
        return list_agents(sys.stdout)
    if not args.agent:
        raise _fail("launch: name an agent (pinch-router launch --list shows them)")
    try:
        path = find_config(args.config, os.environ, Path.cwd())
    except LocationError:
        if args.config:
            raise
        path = Path(str(importlib.resources.files("router").joinpath(STARTER_CONFIG)))  # the shipped one
    return launch(args.agent, args.args, _load(path), path, persist=args.persist, keep_proxy=args.keep_proxy)


def cmd_explain(args: argparse.Namespace) -> int:
    from router.tools.explain import ExplainError, run_explain

    config = _load_found(args)
    try:
        status, text = run_explain(config, args.request, args.header, offline=args.offline, request_path=args.path)
    except ExplainError as error:
        print(f"pinch-router explain: {error}", file=sys.stderr)
        return 2
    print(text)
    return status


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pinch-router", description="LLM routing proxy for coding agents")
    parser.add_argument("--version", action="version", version=f"pinch-router {importlib.metadata.version('pinch-router')}")
    sub = parser.add_subparsers(dest="command", required=True)
    config_help = f"the config file (default: ${'{'}PINCH_ROUTER_CONFIG{'}'}, ./{CONFIG_NAME}, then ~/.config/pinch-router/{CONFIG_NAME})"
    state_help = "where the decision log lives (default: $PINCH_ROUTER_STATE_DIR, else $XDG_STATE_HOME/pinch-router or ~/.local/state/pinch-router)"

    init = sub.add_parser("init", help="write the commented starter config and say which models to pull")
    init.add_argument("path", nargs="?", default=CONFIG_NAME, metavar="PATH", help=f"file or directory (default ./{CONFIG_NAME})")
    init.add_argument("--force", action="store_true", help="replace an existing file")
    init.set_defaults(func=cmd_init)

    serve = sub.add_parser("serve", help="run the proxy")
    serve.add_argument("--config", help=config_help)
    serve.add_argument("--state-dir", help=state_help)
    serve.add_argument("--host", help=f"default ${HOST_ENV}, else server.host")
    serve.add_argument("--port", type=int, help=f"default ${PORT_ENV}, else server.port")
    serve.add_argument(
        "--allow-unauthenticated-remote",
        action="store_true",
        help="listen on a non-loopback host without server.api_keys (e.g. in a container published on loopback)",
    )
    serve.add_argument(
        "--workers", type=positive_int, default=1, help="serving processes sharing the port (SO_REUSEPORT); more than 1 needs state.backend: redis"
    )
    serve.add_argument(
        "--allow-split-state", action="store_true", help="allow --workers > 1 on the memory backend (each worker keeps its own session state)"
    )
    serve.set_defaults(func=cmd_serve)

    check = sub.add_parser("check-config", help="validate a config and the decision log's location, print the chain and catalogue")
    check.add_argument("--config", help=config_help)
    check.add_argument("--state-dir", help=state_help)
    check.set_defaults(func=cmd_check_config)

    doctor = sub.add_parser("doctor", help="check providers, models, keys, classifier, embeddings and state; exit 1 on a problem")
    doctor.add_argument("--config", help=config_help)
    doctor.add_argument("--state-dir", help=state_help)
    doctor.add_argument("--timeout", type=positive_float, default=60.0, help="seconds for each real model call (default 60: a first call loads the model)")
    doctor.set_defaults(func=cmd_doctor)

    mock = sub.add_parser("mock-upstream", help="run a local fake upstream: OpenAI chat, Ollama, Anthropic Messages, OpenAI Responses (for trying the proxy)")
    mock.add_argument("--host", default="127.0.0.1")
    mock.add_argument("--port", type=int, default=MOCK_UPSTREAM_PORT, help=f"default {MOCK_UPSTREAM_PORT}, where the shipped config expects Ollama")
    mock.add_argument("--event-delay", type=float, default=0.0, help="seconds before each streamed event")
    mock.add_argument("--text", help="the answer text (streamed word by word)")
    mock.add_argument(
        "--tool-command",
        action="append",
        metavar="CMD",
        help="each user turn, call the agent's shell tool with these commands one after another (repeatable; default: one ls), then answer",
    )
    mock.add_argument("--thinking", help="native /api/chat: the thinking sent before each answer, as a thinking model's on a recent Ollama")
    mock.add_argument("--record", type=Path, metavar="DIR", help="write each request received to a numbered JSON file in DIR")
    mock.add_argument(
        "--prompt-cache-seconds",
        type=positive_float,
        help="report cached_tokens as a prefix cache with this lifetime would (for one session at a time)",
    )
    mock.set_defaults(func=cmd_mock_upstream)

    evaluate = sub.add_parser(
        "eval-pinch",
        help="replay transcripts as sessions through the proxy: tokens, prompt-cache prefix, cost and quality per pinch mode",
    )
    evaluate.add_argument("--config", help=config_help)
    evaluate.add_argument(
        "--budget", type=positive_int, action="append", help="pinch.budget_tokens to replay at (repeatable; default 20000 and 40000)"
    )
    evaluate.add_argument(
        "--scenario", action="append", choices=["warm", "cold", "nocache", "window", "gemini"], help="replay only these (repeatable; default all)"
    )
    evaluate.add_argument("--keep-last-turns", type=positive_int, help="override pinch.keep_last_turns")
    evaluate.add_argument(
        "--embeddings-from-config",
        action="store_true",
        help="rank with pinch.relevance's endpoint instead of the mock's hashed bag-of-words embeddings",
    )
    evaluate.add_argument("--per-transcript", action="store_true", help="a table per transcript too, under each total")
    evaluate.add_argument("--stream", action="store_true", help="the client streams its requests, as agents do (default: whole answers)")
    evaluate.add_argument(
        "--plot", type=Path, metavar="DIR", help="write PNG charts of each replay to DIR: cumulative cost, tokens sent and cached, batches (extra [plot])"
    )
    evaluate.add_argument(
        "files", nargs="*", metavar="FILE", help='transcripts: {"messages": [...], "tools": [...]} JSON (default: the shared ones)'
    )
    evaluate.set_defaults(func=cmd_eval_pinch)

    show = sub.add_parser(
        "demo", help="no model server, no agent: replay a shared agent session through the proxy to the mock upstream and show what routing and pinch did"
    )
    show.add_argument("--config", help="the config to derive the demo's from (default: the shipped config.yaml)")
    show.add_argument("--state-dir", help=state_help + "; the demo writes to its demo/ folder")
    show.add_argument("--transcript", metavar="FILE", help="a transcript to replay (default: a shared 80-turn SWE-bench session)")
    show.add_argument(
        "--scenario", default="cold", choices=["warm", "cold", "nocache", "window", "gemini"], help="how time passes and what the provider caches (default cold)"
    )
    show.add_argument("--budget", type=positive_int, help="pinch.budget_tokens (default: the config's)")
    show.add_argument("--keep", action="store_true", help="after the summary, keep a proxy up on the demo's decision log and print its dashboard's URL (until Ctrl-C)")
    show.set_defaults(func=cmd_demo)

    top = sub.add_parser("top", help="follow a running proxy's routing decisions live (terminal UI)")
    top.add_argument("--url", default="http://127.0.0.1:8787", help="the proxy (default http://127.0.0.1:8787)")
    top.add_argument(
        "--api-key", default=os.environ.get("PINCH_ROUTER_API_KEY"), help="a server.api_keys key (default: $PINCH_ROUTER_API_KEY)"
    )
    top.add_argument("--interval", type=positive_float, default=1.0, help="seconds between polls (default 1)")
    top.add_argument("--limit", type=positive_int, default=200, help="decisions shown (default 200, at most 1000)")
    top.set_defaults(func=cmd_top)

    keys = sub.add_parser("keys", help="a running proxy's client keys by name and role, with their usage against their limits")
    keys.add_argument("--url", default="http://127.0.0.1:8787", help="the proxy (default http://127.0.0.1:8787)")
    keys.add_argument(
        "--api-key", default=os.environ.get("PINCH_ROUTER_API_KEY"), help="a server.api_keys key: an admin's lists every key, a user's its own (default: $PINCH_ROUTER_API_KEY)"
    )
    keys.add_argument("--json", action="store_true", help="the proxy's answer (GET /v1/keys) as JSON")
    keys.set_defaults(func=cmd_keys)

    launch = sub.add_parser(
        "launch", help="run a coding agent through the proxy (started if none answers), wired for that run only"
    )
    launch.add_argument("--config", help=config_help + "; else the shipped one")
    launch.add_argument("--list", action="store_true", help="the agents launch knows, whether each is installed and how it is wired")
    launch.add_argument("--persist", action="store_true", help="write the agent's own settings instead of a temporary folder's (Cline: ~/.cline); launch says what and how to undo")
    launch.add_argument("--keep-proxy", action="store_true", help="leave running the proxy launch started")
    launch.add_argument("agent", nargs="?", help="claude, codex, gemini, opencode, qwen, pi, aider, continue or cline")
    launch.add_argument("args", nargs=argparse.REMAINDER, help="passed to the agent as given")
    launch.set_defaults(func=cmd_launch)

    explain = sub.add_parser(
        "explain", help="run the chain on a saved request without calling the chat upstream, and print the decision"
    )
    explain.add_argument("--config", help=config_help)
    explain.add_argument(
        "-H", "--header", action="append", default=[], metavar="'NAME: VALUE'", help="a client header, e.g. 'x-router-tier: 3' (repeatable)"
    )
    explain.add_argument("--offline", action="store_true", help="no classifier or embeddings calls: show the fallbacks instead")
    explain.add_argument(
        "--path",
        metavar="PATH",
        help="where the request was sent, query included, e.g. '/v1beta/models/auto:streamGenerateContent?alt=sse' "
        "(default: the usual path of the wire format the body is)",
    )
    explain.add_argument("request", metavar="REQUEST.json", help='a request body of any wire format the proxy serves, a transcript {"messages", "tools"}, or a list of messages')
    explain.set_defaults(func=cmd_explain)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])  # what `serve --workers` gives each worker
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:  # Ctrl-C before serving began (or in a one-shot command): no traceback
        print("pinch-router: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
