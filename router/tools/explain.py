"""`pinch-router explain`: what the proxy would decide for a saved request, without sending it.

The request (a body of any wire format the proxy serves, or a transcript ``{"messages", "tools"}``
without a model, which routes like ``auto``; a bare list of messages works
too) is read as the format its path is (``--path``, with the query: a Gemini request names its
model and stream there), else as the format the wire registry finds for the body
(:func:`router.wire.body_format`), sent to that format's usual path
(``ClientApi.saved_path``). It goes through the configured chain exactly as the proxy would run it —
the edge's :func:`router.http.edge.context_from_body`, the stages built by
:func:`router.contract.chain.build_chain`, each run by :func:`router.contract.stage.run_stage`
so timeouts and fallbacks behave as in the proxy — except ``upstream-forward``,
which never runs: nothing goes to the chat upstream. The classifier and the
embeddings endpoint ARE called as configured (an unreachable one falls back
at once on connection refused, a slow one after its timeout);
``--offline`` makes every network call fail immediately instead, so the
trace shows the fallbacks the proxy would take with those services down.

It prints the decision as the proxy would record it, rendered as ``top``
renders a recorded one (session, classification, candidates in the gate's
order, rejected models with reasons, pinch, relevance), then the needs, the
route and where the request would go, the stage trace, and what pinch
compressed: each rewritten tool result with its index, tool name, size before
and after and how (elided: head + marker + tail; placeholder), plus the token
totals. Exit status: 0 when the proxy would forward the request, 1 when a
stage would answer it with an error (e.g. 400 no_capable_model, printed), 2
when the file or the request is unusable (a message, never a traceback).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from time import perf_counter
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import time

import aiohttp
import orjson
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from router.contract.chain import TERMINAL_STAGE, build_chain
from router.server.registry import REGISTRY, stage_builder
from router.state.session_store import LocalStore
from router.config import Config
from router.contract.context import RequestContext
from router.core.content import content_text
from router.core.pinch import CompressionKind
from router.core.routing import describe_needs
from router.core.request_view import NO_TARGET, BodyChanges, RequestTarget
from router.core.tokens import TokenEstimator
from router.observe.decision_record import decision_from_context, wire_route
from router.http.edge import context_from_body
from router.core.errors import ApiError
from router.providers import provider_adapter
from router.contract.stage import run_stage
from router.tools.decision_text import decision_fields, field_lines, text_table, thousands, trace_lines
from router.tools.transcripts import RequestFileError, read_request_file
from router.wire import WireAdapter, adapters, body_format, chain_target
from router.core.results import CAPABILITIES, PINCH, REWRITES, ROUTE

EXPLAIN_REQUEST_ID = "explain"
OFFLINE_REASON = "explain --offline: no network calls"


class ExplainError(Exception):
    """The request file or body cannot be explained; the message says why."""


@dataclass(frozen=True, slots=True)
class CompressedMessage:
    """One tool result pinch rewrote."""

    index: int
    tool: str
    kind: CompressionKind
    chars_before: int
    chars_after: int
    tokens_before: int
    tokens_after: int


def parse_headers(lines: Sequence[str]) -> CIMultiDictProxy[str]:
    """``Name: value`` strings (as given to ``-H``) as request headers."""
    headers: CIMultiDict[str] = CIMultiDict()
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise ExplainError(f"header {line!r} is not 'Name: value'")
        headers.add(name.strip(), value.strip())
    return CIMultiDictProxy(headers)


def compressed_messages(ctx: RequestContext, estimator: TokenEstimator) -> list[CompressedMessage]:
    """The tool results pinch compressed, as it reported them (``ctx[PINCH].compressions``, by
    result position) with the rewrites it made (``ctx[REWRITES]``): nothing is re-derived here."""
    pinch = ctx[PINCH]
    if pinch is None or not pinch.compressions:
        return []
    conversation, rewrites = ctx.view.conversation, ctx[REWRITES] or {}
    results, units = conversation.tool_results(), conversation.units
    out = []
    for position, kind in pinch.compressions:
        result = results[position]
        before = units[result.unit]
        # where this wire format keeps the result in its unit (chat: content, Responses: output)
        key = next((k for k, v in before.items() if v is result.content), "content")
        after = {**before, key: rewrites[position]}
        out.append(
            CompressedMessage(
                index=result.unit,
                tool=conversation.tool_name(result.unit),
                kind=CompressionKind(kind),
                chars_before=len(content_text(before.get(key))),
                chars_after=len(content_text(after.get(key))),
                tokens_before=estimator.message_tokens(before),
                tokens_after=estimator.message_tokens(after),
            )
        )
    return out


async def _refuse_network(session: aiohttp.ClientSession, context: SimpleNamespace, params: aiohttp.TraceRequestStartParams) -> None:
    raise aiohttp.ClientConnectionError(OFFLINE_REASON)


def offline_trace() -> aiohttp.TraceConfig:
    """Makes every request of a session fail at once, as a connection error (for ``--offline``)."""
    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(_refuse_network)
    return trace


def request_target(body: Any, headers: CIMultiDictProxy[str], path: str | None = None) -> tuple[WireAdapter, RequestTarget]:
    """The format of a saved request and what its URL says beside the body: the format whose chain
    endpoint ``path`` is (its query included), else the one the body is (:func:`router.wire.body_format`),
    as sent to that format's usual path. ExplainError for a path no format serves through the chain."""
    if path is None:
        wire = body_format(body, headers)
        path = wire.api.saved_path
    url = urlsplit(path)
    found = chain_target(url.path)
    if found is None:
        served = ", ".join(p for a in adapters().values() for p in a.paths)
        raise ExplainError(f"--path {path}: not an endpoint the proxy serves through its chain ({served})")
    wire, parts = found
    query = dict(parse_qsl(url.query))
    return wire, RequestTarget(parts, query) if parts or query else NO_TARGET


async def explain_request(
    config: Config, body: Any, headers: CIMultiDictProxy[str] | None = None, *, offline: bool = False, path: str | None = None
) -> RequestContext:
    """Run every configured stage but ``upstream-forward`` on ``body``; the context tells the rest.

    ``path``: where the request was sent (its format, and for a format whose path says more than its
    body, the model and stream); None: the body's format, at its usual path. Stops after a stage that
    answers (``ctx.response``). Raises ExplainError for a body the proxy's edge would refuse.
    """
    headers = headers if headers is not None else CIMultiDictProxy(CIMultiDict())
    wire, target = request_target(body, headers, path)
    ctx = context_from_body(
        body,
        headers,
        request_id=EXPLAIN_REQUEST_ID,
        started=perf_counter(),
        turn_chars=config.classifier.max_input_chars,
        wire=wire,
        target=target,
    )
    if isinstance(ctx, ApiError):
        where = f" ({ctx.param})" if ctx.param else ""
        raise ExplainError(f"the proxy would refuse this request with {ctx.status} {ctx.code}{where}: {ctx.message}")
    async with aiohttp.ClientSession(trace_configs=[offline_trace()] if offline else None) as http:
        stages, _ = build_chain(REGISTRY.chain(config.middlewares), stage_builder(config, http=http, clock=time.monotonic, state=LocalStore()))
        for stage in stages:
            if stage.name == TERMINAL_STAGE:
                break
            await run_stage(stage, ctx)
            if ctx.response is not None:
                break
    return ctx


def refusal(response: web.StreamResponse) -> str:
    """``status code: message`` of the error a stage answered with."""
    body = response.body if isinstance(response, web.Response) else None
    error: Any = None
    if isinstance(body, bytes):
        try:
            error = orjson.loads(body).get("error")
        except (orjson.JSONDecodeError, AttributeError):
            error = None
    if isinstance(error, dict):
        return f"{response.status} {error.get('code')}: {error.get('message')}"
    return f"{response.status} {response.reason}"


def render_explanation(ctx: RequestContext, config: Config, source: str = "") -> str:
    """The decision as the proxy would record it, rendered by the renderer ``top`` uses
    (:mod:`router.tools.decision_text`), then what only a prediction has: what the request
    needs, the route and where it would go, the stages that would not run, and each result
    pinch compressed."""
    lines = [f"pinch-router explain: {source}", ""] if source else []
    tools = ctx.view.tools or []
    fields = [("request", f"{len(ctx.view.units)} messages, {len(tools)} tools{', stream' if ctx.view.stream else ''}")]
    refused = ctx.response
    # No answer was sent: the status is the refusal's, or 0 while the request would still go upstream.
    row = decision_from_context(ctx, refused.status if refused is not None else 0, None, REGISTRY.columns).as_json()
    fields += decision_fields(row)
    if (needs := ctx[CAPABILITIES]) is not None:
        fields.append(("needs", describe_needs(needs)))
    route = ctx[ROUTE]
    if route is not None:
        pinned = " (pinned)" if route.pinned else ""
        if route.candidates:
            chosen = route.chosen
            limit = f", max tokens {chosen.output_tokens}" if chosen.output_tokens is not None else ""
            fields.append(("route", f"tier {route.tier} → {chosen.model} via {chosen.provider} ({chosen.upstream_model}){pinned}{limit}"))
        else:
            fields.append(("route", f"tier {route.tier} → no capable model{pinned}"))
    if refused is not None:
        fields.append(("refused", refusal(refused)))
    elif route and route.candidates:
        provider = config.providers[route.chosen.provider]
        wire_out = provider_adapter(provider).chat_wire(provider)
        stale = pinch.stale if (pinch := ctx[PINCH]) is not None and route.chosen.thinking_binding else None
        changes = BodyChanges(route.chosen.upstream_model, stale=stale)
        dropped = ", ".join(ctx.wire.passthrough_dropped(ctx.view, changes)) if wire_out == ctx.view.wire else ""  # a translation's is known once it ran
        fields.append(("forward", f"would go to {route.chosen.model} ({wire_route(ctx.view.wire, wire_out, dropped)})"))
    else:
        fields.append(("forward", "(no route)"))
    lines += field_lines(fields)

    ran = {r.stage for r in ctx.trace}
    not_run = [(name, _why_not_run(name, ctx)) for name in config.middlewares if name not in ran]
    lines += ["", "trace", *trace_lines(row["stages"], not_run)]

    pinch = ctx[PINCH]
    if pinch is not None:
        compressed = compressed_messages(ctx, TokenEstimator(config.tokens.image_tokens, config.tokens.per_message_overhead))
        lines += ["", f"compressed messages ({len(compressed)})"]
        if compressed:
            table = [("index", "tool", "chars", "", "after", "tokens", "", "after", "how")]
            table += [
                (str(m.index), m.tool, f"{m.chars_before:,}", "→", f"{m.chars_after:,}", f"{m.tokens_before:,}", "→", f"{m.tokens_after:,}", str(m.kind))
                for m in compressed
            ]
            lines += text_table(table, right=(0, 2, 3, 4, 5, 6, 7))
            lines.append(
                f"  total: {thousands(pinch.original_tokens)} → {thousands(pinch.final_tokens)} tokens "
                f"({thousands(pinch.saved_tokens)} saved)"
            )
        else:
            lines.append("  (none)")
    return "\n".join(lines)


def _why_not_run(name: str, ctx: RequestContext) -> str:
    if name == TERMINAL_STAGE:
        return "explain never calls the chat upstream"
    return "an earlier stage answered the request" if ctx.response is not None else ""


def run_explain(
    config: Config, path: str, header_lines: Sequence[str] = (), *, offline: bool = False, request_path: str | None = None
) -> tuple[int, str]:
    """(exit status, text) for the CLI; ``request_path``: where the request was sent (``--path``);
    ExplainError for an unusable file or request."""
    headers = parse_headers(header_lines)
    try:
        body = read_request_file(path)
    except RequestFileError as error:
        raise ExplainError(str(error)) from None
    # The trace shows every stage failure; the proxy's warning lines would only repeat them.
    logging.getLogger("pinch_router").addHandler(logging.NullHandler())
    ctx = asyncio.run(explain_request(config, body, headers, offline=offline, path=request_path))
    return (1 if ctx.response is not None else 0), render_explanation(ctx, config, path)
