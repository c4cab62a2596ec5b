"""The `pinch-router` command: serve, check-config, mock-upstream."""

from __future__ import annotations

import argparse
import ipaddress
import sys
from collections.abc import Sequence

from router.chain import ChainError, stage_registry, validate_order
from router.config import Config, ConfigError, load_config

DEFAULT_CONFIG = "config.yaml"


def _load(path: str) -> Config:
    try:
        config = load_config(path)
        validate_order(config.middlewares, stage_registry())
    except (ConfigError, ChainError) as error:
        print(f"pinch-router: invalid configuration in {path}:\n{error}", file=sys.stderr)
        raise SystemExit(2) from None
    return config


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
    config = _load(args.config)
    print(f"{args.config}: ok")
    print(describe_config(config))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from aiohttp import web

    from router.app import create_app
    from router.logs import configure_logging

    config = _load(args.config)
    host = args.host or config.server.host
    port = args.port if args.port is not None else config.server.port
    allow_remote = config.server.allow_unauthenticated_remote or args.allow_unauthenticated_remote
    if not is_loopback(host) and not config.server.api_keys and not allow_remote:
        print(
            f"pinch-router: refusing to listen on {host} without server.api_keys "
            "(set api_keys, or server.allow_unauthenticated_remote: true / --allow-unauthenticated-remote)",
            file=sys.stderr,
        )
        return 2
    configure_logging()
    print(f"pinch-router listening on http://{host}:{port} (config {args.config})", file=sys.stderr, flush=True)
    web.run_app(
        create_app(config),
        host=host,
        port=port,
        handler_cancellation=True,  # a client that goes away cancels its upstream request
        shutdown_timeout=config.server.drain_timeout_seconds,
        access_log=None,
        print=None,
    )
    return 0


def cmd_mock_upstream(args: argparse.Namespace) -> int:
    from aiohttp import web

    from router.mock_upstream import MockUpstream

    print(f"mock OpenAI upstream on http://{args.host}:{args.port}/v1", file=sys.stderr, flush=True)
    web.run_app(MockUpstream().app(), host=args.host, port=args.port, print=None, access_log=None)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pinch-router", description="LLM routing proxy for coding agents")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the proxy")
    serve.add_argument("--config", default=DEFAULT_CONFIG)
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument(
        "--allow-unauthenticated-remote",
        action="store_true",
        help="listen on a non-loopback host without server.api_keys (e.g. in a container published on loopback)",
    )
    serve.set_defaults(func=cmd_serve)

    check = sub.add_parser("check-config", help="validate a config and print the chain and catalogue")
    check.add_argument("--config", default=DEFAULT_CONFIG)
    check.set_defaults(func=cmd_check_config)

    mock = sub.add_parser("mock-upstream", help="run a local fake OpenAI-compatible upstream (for trying the proxy)")
    mock.add_argument("--host", default="127.0.0.1")
    mock.add_argument("--port", type=int, default=8788)
    mock.set_defaults(func=cmd_mock_upstream)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
