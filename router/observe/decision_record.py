"""One decision record per request: what was asked, decided and measured — never content.

Built once from the RequestContext when the response is done, then fed to the
decision log, the metrics and the request log line. It holds no message text,
no headers and no keys: only ids, names, numbers and the stage trace. Its fields
are the built-in stages' figures; any other stage's are its declared columns
(``stage_columns``, from the stage registry), each a key of the row like a field.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from time import perf_counter
from typing import Any

from router.core.results import CAPABILITIES, CLASSIFICATION, PINCH, RELEVANCE, ROUTE, SESSION, UPSTREAM, Attempt, Candidate, Rejection, Route, StageRecord, UpstreamResult

from router.contract.context import RequestContext
from router.core.errors import describe
from router.core.frozen import frozen
from router.core.redaction import clip
from router.core.results import round_ms

# Status recorded when the client went away before the answer was complete
# (nginx's convention; no HTTP response carried it).
CLIENT_CLOSED = 499

log = logging.getLogger("pinch_router.decision")

ColumnValue = int | float | str | bool | None
# A stage's decision column: what it reads of the finished request's context (its own slot, mostly).
Column = Callable[[RequestContext], ColumnValue]


@frozen
class Decision:
    request_id: str
    ts: float  # seconds since the epoch, when the request arrived
    status: int  # what the client got (499: it left first)
    duration_ms: float  # arrival to end of the answer
    error_code: str | None = None
    session: str | None = None  # already a hash (router/core/fingerprint.py)
    session_source: str | None = None
    client: str | None = None  # the name of the client key it came with (server.api_keys; never the key); None: no keys
    requested_model: str | None = None
    stream: bool = False
    category: str | None = None
    tier: int | None = None  # as classified
    source: str | None = None  # classifier | override | fallback | cached
    classifier_reason: str = ""  # the classifier's few words on why (its answer's optional `reason`)
    routed_tier: int | None = None
    escalation: str = ""
    model_family: str = ""  # the family the requested name matched and its tier hint (routing.model_families), empty when none
    model: str | None = None  # the model that answered; None when none did (candidates and attempts say who was tried)
    provider: str | None = None
    candidates: tuple[str, ...] = ()
    attempts: tuple[Attempt, ...] = ()
    # providers candidates were skipped on as down (no answer earlier in the request, or its breaker open)
    providers_down: tuple[str, ...] = ()
    rejected: tuple[Rejection, ...] = ()
    pinch_mode: str | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    pinch_compressed: int | None = None
    pinch_reapplied: int | None = None  # results sent as the session's ledger already had them
    pinch_newly_compressed: int | None = None  # results this request compressed for the first time
    pinch_restored: int | None = None  # results the ledger held compressed, sent verbatim again (a cold-cache moment)
    pinch_reason: str = ""  # why this request did or did not compress new results
    pinch_first_sight_new: int | None = None  # results this request sent reduced at first sight (their first time)
    pinch_first_sight_reapplied: int | None = None  # results sent as the first-sight text the ledger recorded
    pinch_first_sight_saved: int | None = None  # tokens first sight saved on this request (part of the pinch saving)
    retrieve_calls: int = 0  # pinch_retrieve calls the proxy answered itself (router.clients.retrieve)
    retrieve_tokens: int = 0  # the tokens their answers added to the rounds after them
    relevance_status: str | None = None
    relevance_reason: str = ""
    stages: tuple[StageRecord, ...] = ()
    upstream_status: int | None = None
    first_byte_ms: float | None = None
    upstream_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    cached_tokens: int | None = None  # prompt tokens the provider served from its prompt cache
    cache_write_tokens: int | None = None  # prompt tokens it wrote to its cache (Anthropic reports them)
    overhead_ms: float | None = None
    stream_error: str = ""
    requested_max_tokens: int | None = None  # the output limit the client asked for
    sent_max_tokens: int | None = None  # the limit sent to the model that answered (clamped to it)
    wire_in: str | None = None  # the client's wire format (openai-chat, anthropic-messages, openai-responses)
    wire_out: str | None = None  # the one the provider was spoken to in: the same ⇒ passed through, else translated
    wire_dropped: str = ""  # what the translation could not carry ("tool web_search, …"), as in x-router-dropped
    # messages (items, contents) taken from the body before, as sent again byte for byte (router.core.resent_prefix);
    # 0: parsed whole; None: the body was not kept (too small, written otherwise, refused)
    resumed_elements: int | None = None
    # the stages' declared columns (router.server.registry.StageRegistry.columns): (name, value) each
    stage_columns: tuple[tuple[str, ColumnValue], ...] = ()

    @property
    def pinch_saved(self) -> int:
        if self.tokens_before is None or self.tokens_after is None:
            return 0
        return self.tokens_before - self.tokens_after

    def as_json(self) -> dict[str, Any]:
        """The record as its row reads: the stages' declared columns are keys like the fields."""
        row = asdict(self)
        row.update(row.pop("stage_columns"))
        return row


def rejected_request(request_id: str, started: float, status: int, error_code: str, client: str | None = None) -> Decision:
    """The record of a request the edge refused before a context existed (``client``: its key's name)."""
    return Decision(
        request_id=request_id,
        ts=time.time() - (perf_counter() - started),
        status=status,
        duration_ms=round((perf_counter() - started) * 1000, 3),
        error_code=error_code,
        client=client,
    )


def decision_from_context(ctx: RequestContext, status: int, error_code: str | None, columns: Sequence[tuple[str, Column]] = ()) -> Decision:
    """The record of a served request; ``columns``: the stages' declared ones, read from ``ctx``."""
    classification, route, pinch, relevance, upstream = ctx[CLASSIFICATION], ctx[ROUTE], ctx[PINCH], ctx[RELEVANCE], ctx[UPSTREAM]
    session, needs = ctx[SESSION], ctx[CAPABILITIES]
    if pinch is not None and pinch.ranking is not None:  # a deferred ranking pinch awaited: what it came to
        relevance = pinch.ranking
    usage = upstream.usage if upstream is not None else None
    if upstream is not None and upstream.client_gone:
        status = CLIENT_CLOSED  # however the departure was noticed: a cancelled task or a failed write
    return Decision(
        request_id=ctx.request_id,
        ts=ctx.received_at,
        status=status,
        duration_ms=round((perf_counter() - ctx.started) * 1000, 3),
        error_code=error_code,
        session=session.key if session else None,
        session_source=session.source if session else None,
        client=ctx.client_id,
        requested_model=clip(ctx.view.model) if ctx.view.model else ctx.view.model,
        stream=ctx.view.stream,
        category=classification.task_category if classification else None,
        tier=classification.task_tier if classification else None,
        source=str(classification.source) if classification else None,
        classifier_reason=classification.reason if classification else "",
        routed_tier=route.tier if route else None,
        escalation=route.escalation if route else "",
        model_family=route.family if route else "",
        model=upstream.model if upstream else None,
        provider=upstream.provider if upstream else None,
        candidates=tuple(c.model for c in route.candidates) if route else (),
        attempts=tuple(upstream.attempts) if upstream else (),
        providers_down=tuple(upstream.providers_down) if upstream else (),
        retrieve_calls=upstream.retrieve_calls if upstream else 0,
        retrieve_tokens=upstream.retrieve_tokens if upstream else 0,
        rejected=route.rejected if route else (),
        pinch_mode=str(pinch.mode) if pinch else None,
        tokens_before=pinch.original_tokens if pinch else None,
        tokens_after=pinch.final_tokens if pinch else None,
        pinch_compressed=pinch.compressed if pinch else None,
        pinch_reapplied=pinch.reapplied if pinch else None,
        pinch_newly_compressed=pinch.newly_compressed if pinch else None,
        pinch_restored=pinch.restored if pinch else None,
        pinch_reason=pinch.reason if pinch else "",
        pinch_first_sight_new=pinch.first_sight_new if pinch else None,
        pinch_first_sight_reapplied=pinch.first_sight_reapplied if pinch else None,
        pinch_first_sight_saved=pinch.first_sight_saved if pinch else None,
        relevance_status=str(relevance.status) if relevance else None,
        relevance_reason=relevance.reason if relevance else "",
        stages=tuple(ctx.trace),
        upstream_status=upstream.status if upstream else None,
        first_byte_ms=_round(upstream.first_byte_ms) if upstream else None,
        upstream_ms=_round(upstream.total_ms) if upstream else None,
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
        total_tokens=usage.total_tokens if usage else None,
        cached_tokens=usage.cached_tokens if usage else None,
        cache_write_tokens=usage.cache_write_tokens if usage else None,
        overhead_ms=_round(ctx.overhead_ms),
        stream_error=upstream.stream_error if upstream else "",
        requested_max_tokens=needs.requested_output_tokens if needs else None,
        sent_max_tokens=answered.output_tokens if (answered := _answering_candidate(route, upstream)) else None,
        wire_in=ctx.view.wire,
        wire_out=upstream.wire_out if upstream else None,
        wire_dropped=clip(upstream.dropped_text, 1000) if upstream else "",
        resumed_elements=ctx.known_body.resumed if ctx.known_body is not None else None,
        stage_columns=tuple((name, _read(name, read, ctx)) for name, read in columns) if columns else (),
    )


def _read(name: str, read: Column, ctx: RequestContext) -> ColumnValue:
    """A stage's column of this request; None (and a warning) when its reader fails: the row is kept."""
    try:
        return read(ctx)
    except Exception as exc:  # a column a stage declared never costs the request its record
        log.warning("decision_column_failed", extra={"column": name, "detail": describe(exc), "request_id": ctx.request_id})
        return None


def wire_route(wire_in: str, wire_out: str | None, dropped: str = "") -> str:
    """The client's wire format and the provider's, for people (``top``, ``explain``):
    ``openai-responses → openai-chat, translated, dropped tool web_search``."""
    if wire_out is None:
        return f"{wire_in} → -"  # no provider was tried
    how = "passed through" if wire_out == wire_in else "translated"
    return f"{wire_in} → {wire_out}, {how}" + (f", dropped {dropped}" if dropped else "")


def _answering_candidate(route: Route | None, upstream: UpstreamResult | None) -> Candidate | None:
    return route.candidate(upstream.model) if route is not None and upstream is not None and upstream.model else None


def _round(value: float | None) -> float | None:
    return None if value is None else round_ms(value)
