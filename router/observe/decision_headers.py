"""The x-router-* response headers (ARCHITECTURE §9), from one place.

Computed when the response head is sent: by upstream-forward just before a
stream is prepared, by the edge for every other response. Every value passes
:func:`~router.core.redaction.header_values` here: some carry what a client or a
provider wrote (the tools a translation dropped), and one control character in
a header makes the HTTP writer drop the connection instead of answering.
"""

from __future__ import annotations

from time import perf_counter

from router.contract.context import RequestContext
from router.core.redaction import header_values
from router.core.results import CLASSIFICATION, PINCH, ROUTE, SESSION, UPSTREAM


def overhead_ms(ctx: RequestContext) -> float:
    """Time spent in the proxy itself so far: elapsed minus time waiting on upstreams."""
    return max(0.0, (perf_counter() - ctx.started - ctx.upstream_wait) * 1000)


def decision_headers(ctx: RequestContext) -> dict[str, str]:
    """The headers for the response head; called once, as the head is sent (records the overhead)."""
    headers = {"x-router-request-id": ctx.request_id}
    session, classification, route, pinch = ctx[SESSION], ctx[CLASSIFICATION], ctx[ROUTE], ctx[PINCH]
    if session is not None:  # what GET /v1/decisions?session= finds this session's rows by
        headers["x-router-session"] = session.key
    upstream = ctx[UPSTREAM]
    if upstream is not None and upstream.attempts:
        headers["x-router-attempts"] = ", ".join(f"{a.model}:{a.status if a.status is not None else 'none'}" for a in upstream.attempts)
    if upstream is not None and upstream.model:  # only a model that answered is named
        headers["x-router-model"] = upstream.model
        answered = route.candidate(upstream.model) if route is not None else None
        if answered is not None and answered.output_tokens is not None:
            headers["x-router-max-tokens"] = str(answered.output_tokens)
    if classification is not None:
        headers["x-router-category"] = classification.task_category
        headers["x-router-source"] = str(classification.source)
        headers["x-router-tier"] = str(classification.task_tier)
    if route is not None:  # the tier actually routed on
        headers["x-router-tier"] = str(route.tier)
    if pinch is not None:
        headers["x-router-pinch-saved"] = str(pinch.saved_tokens)
        if pinch.first_sight_saved:
            headers["x-router-pinch-first-sight-saved"] = str(pinch.first_sight_saved)
    if upstream is not None and upstream.retrieve_calls:  # a whole answer's (a stream's head goes before any round)
        headers["x-router-retrieve-calls"] = str(upstream.retrieve_calls)
    if upstream is not None and upstream.wire_out is not None:  # e.g. anthropic-messages->openai-chat: translated
        headers["x-router-wire"] = f"{ctx.view.wire}->{upstream.wire_out}"
    if upstream is not None and upstream.dropped:  # what the translation left out, rather than failing
        headers["x-router-dropped"] = upstream.dropped_text
    ctx.overhead_ms = overhead_ms(ctx)
    headers["x-router-overhead-ms"] = f"{ctx.overhead_ms:.2f}"
    return header_values(headers)
