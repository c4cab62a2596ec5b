"""pinch-relevance: which old tool results matter to the current turn? (ARCHITECTURE §6)

Ranks pinch's trim candidates (:func:`router.core.turns.candidate_results`, the
very list pinch compresses) by what keeping each verbatim is worth per token it
costs (:func:`router.core.relevance.rank_with_evidence`): the lexical evidence of the
names the task and the agent's recent steps use (``ctx.view.turn_text``), the
cosine similarity to the turn's queries — the task, the current step and the
steps just before it — and age. Writes the order, least worth keeping first, and
each candidate's evidence (the ledger weighs it against what each step of its
batch really saves: a result first sight reduced saves less than its original),
to ``ctx[RELEVANCE]`` for pinch-prune.

Skipped (``ctx[RELEVANCE]`` = skipped with the reason, no embeddings call) when
pinch or relevance is disabled, when the request is already within
``pinch.budget_tokens`` (pinch would change nothing, so the order is not
needed), when there are fewer than ``relevance.min_candidates`` candidates,
or when the turn has no query text.

Texts are embedded in ONE batched request: the queries and every candidate
(cut to ``max_candidate_chars``) whose embedding is not in the cache. Queries
go through the cache too: the task part repeats on every turn of a tool loop,
so in steady state a turn embeds its new step query and its new tool results.
With a shared session state (``state.backend: redis``) what this process's cache
lacks is looked up there first (one round trip) and what is embedded is written
there (not waited for): a session that moves to another replica or worker does
not embed its old tool results again.
Blank texts are never sent (some endpoints reject them); they count as zero
vectors, similarity 0.

Fails open: a timeout (``relevance.timeout_seconds``) or any failure of the
endpoint or its answer ⇒ ``ctx[RELEVANCE]`` = unavailable with the reason, a
``relevance_unavailable`` warning, and pinch-prune compresses uniformly.

Deferred with the ledger: a session's request over the budget is usually one whose ledger compresses
nothing new (the cache is warm, the rewrite does not pay), and its order would decide nothing. So
with ``pinch.ledger`` and a session key the ranking is not made here but handed to pinch-prune
(``ctx[RELEVANCE]`` = deferred, with ``rank``), which awaits it only when its plan makes a batch or
re-plans the ledger at a cold moment — bounded by the same timeout, failing open the same way. A warm
request embeds nothing (before: ~190 ms of the in-process embedder on every request over the budget).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial
from typing import ClassVar

import aiohttp
import numpy as np

from router.config import Catalogue, PinchSettings
from router.core.results import Outcome, RELEVANCE, Relevance, RelevanceStatus, SESSION
from router.contract.context import RequestContext
from router.core.embedding_cache import (
    SHARED_TTL_SECONDS,
    EmbeddingCache,
    Vector,
    decode_vector,
    encode_vector,
    shared_key,
)
from router.core.content import content_text
from router.core.errors import describe
from router.core.evidence import TermCache
from router.core.relevance import rank_with_evidence, similarities
from router.core.session_state import Space
from router.core.tokens import TokenEstimator
from router.core.turns import candidate_results
from router.clients.embeddings import EmbeddingsClient, EmbeddingsError
from router.clients.local_embeddings import LocalEmbedder
from router.clients.local_embeddings import missing as local_missing
from router.state.session_store import SessionStore
from router.contract.stage import FailMode, StageReport

log = logging.getLogger("pinch_router.pinch_relevance")

# The recent steps (besides the current one) joined into the third query: what the agent has just been doing.
QUERY_STEPS = 3
DEFERRED = "ranked only if pinch makes a batch or re-plans the ledger"


class PinchRelevance:
    name: ClassVar[str] = "pinch-relevance"
    section: ClassVar[str] = "pinch"
    requires: ClassVar[frozenset[str]] = frozenset({"view"})
    reads: ClassVar[frozenset[str]] = frozenset()
    provides: ClassVar[frozenset[str]] = frozenset({RELEVANCE.name})
    fail_mode: ClassVar[FailMode] = FailMode.OPEN

    def __init__(
        self,
        *,
        settings: PinchSettings,
        catalogue: Catalogue,
        http: aiohttp.ClientSession,
        estimator: TokenEstimator,
        state: SessionStore,
        clock: Callable[[], float],
    ) -> None:
        self.pinch = settings
        self.settings = self.pinch.relevance
        self.timeout_seconds: float | None = self.settings.timeout_seconds
        self.estimator = estimator
        self.client: EmbeddingsClient | LocalEmbedder
        # api local without its extra: relevance is skipped with the reason (doctor warns once at start-up)
        self.missing: str | None = None
        if self.settings.api == "local" and self.settings.provider is None:
            self.client = LocalEmbedder(self.settings.local_model_path, self.settings.local_model)
            self.model = self.client.model
            self.missing = local_missing(self.settings.local_model_path, self.settings.local_model)
        else:
            self.client = EmbeddingsClient(http, self.settings, catalogue.max_response_bytes, catalogue.embeddings_provider)
            self.model = self.settings.model
        self.cache = EmbeddingCache(self.settings.cache_entries)
        self.terms = TermCache(self.settings.cache_entries)
        self.state, self.clock = state, clock
        self.space = Space("embedding", 1, SHARED_TTL_SECONDS, self.settings.cache_entries, encode_vector, decode_vector)

    def carry_over(self, previous: PinchRelevance) -> None:
        """On reload: keep the embeddings (keyed by model and text, so a new model simply misses), and a
        loaded local model when the new settings name the same one."""
        if isinstance(self.client, LocalEmbedder) and isinstance(previous.client, LocalEmbedder) and previous.client.model == self.client.model:
            self.client = previous.client
        if previous.cache.max_entries == self.cache.max_entries:
            self.cache = previous.cache
            self.terms = previous.terms

    async def run(self, ctx: RequestContext) -> StageReport:
        candidates, skip = self._candidates(ctx)
        if skip:
            ctx[RELEVANCE] = Relevance(RelevanceStatus.SKIPPED, reason=skip)
            return StageReport(Outcome.SKIPPED, skip)
        if self.pinch.ledger and ctx[SESSION] is not None:
            ctx[RELEVANCE] = Relevance(RelevanceStatus.DEFERRED, reason=DEFERRED, rank=partial(self._deferred, ctx, candidates))
            return StageReport(detail=f"{len(candidates)} candidates; {DEFERRED}")
        relevance = ctx[RELEVANCE] = await self._rank(ctx, candidates)
        return StageReport(*ranking_report(relevance, len(candidates)))

    async def _deferred(self, ctx: RequestContext, candidates: list[int]) -> Relevance:
        """The ranking pinch-prune awaits when it needs the order: bounded, and unavailable (never raised) on failure."""
        try:
            async with asyncio.timeout(self.timeout_seconds):
                return await self._rank(ctx, candidates)
        except TimeoutError:
            return self._unavailable(ctx, f"timed out after {self.timeout_seconds}s")
        except Exception as exc:  # fails open, as the adapter makes the stage's own run
            return self._unavailable(ctx, describe(exc))

    async def _rank(self, ctx: RequestContext, candidates: list[int]) -> Relevance:
        """The candidates' order (ok), or why there is none (unavailable, logged)."""
        turn = ctx.view.turn_text
        queries = [part for part in (turn.task, turn.step, "\n".join(turn.recent[:QUERY_STEPS])) if part.strip()]
        results = ctx.view.conversation.tool_results()
        full = [content_text(results[p].content) for p in candidates]
        texts = [text[: self.settings.max_candidate_chars] for text in full]
        model = self.model
        lookup = self.cache.lookup(model, [t for t in queries + texts if t.strip()])
        if lookup.missing and self.state.shared:
            reads = [(self.space, shared_key(model, text)) for text in lookup.missing]
            lookup = self.cache.learn(model, lookup, lookup.missing, await self.state.get_many(reads, self.clock()))
        embedded, cached = len(lookup.missing), len(lookup.found)
        vectors = dict(lookup.found)
        if lookup.missing:
            try:
                fresh = await self.client.embed(lookup.missing)
            except EmbeddingsError as exc:
                return self._unavailable(ctx, exc.reason, cached)
            self.cache.put_many(model, lookup.missing, list(fresh))
            if self.state.shared:
                now = self.clock()
                for text, vector in zip(lookup.missing, fresh, strict=True):
                    self.state.put_later(self.space, shared_key(model, text), vector, now)
            vectors.update(zip(lookup.missing, fresh, strict=True))
        try:
            similarity = _similarity(queries, texts, vectors)
        except ValueError as exc:  # e.g. cached vectors of another dimension after a model swap
            return self._unavailable(ctx, str(exc), cached)
        chosen = set(candidates)
        others = [content_text(result.content) for i, result in enumerate(results) if i not in chosen]
        ranking = rank_with_evidence(full, others, turn, self.pinch.max_summarize_chars, similarity, self.terms.terms)
        return Relevance(RelevanceStatus.OK, ranking.order, embedded=embedded, cached=cached, evidence=ranking.evidence)

    def _candidates(self, ctx: RequestContext) -> tuple[list[int], str]:
        """The trim candidates, or why relevance does not apply to this request."""
        if not self.pinch.enabled:
            return [], "pinch disabled"
        if not self.settings.enabled:
            return [], "relevance disabled"
        if self.missing is not None:
            return [], self.missing
        tokens = ctx.measured_prompt(self.estimator).tokens
        if tokens <= self.pinch.budget_tokens:
            return [], f"within budget ({tokens} <= {self.pinch.budget_tokens} tokens)"
        candidates = candidate_results(ctx.view.conversation, self.pinch.keep_last_turns)
        if len(candidates) < self.settings.min_candidates:
            return [], f"{len(candidates)} candidates, fewer than min_candidates {self.settings.min_candidates}"
        if not (ctx.view.turn_text.task.strip() or ctx.view.turn_text.step.strip() or any(s.strip() for s in ctx.view.turn_text.recent)):
            return [], "no query text in the turn"
        return candidates, ""

    def _unavailable(self, ctx: RequestContext, reason: str, cached: int = 0) -> Relevance:
        log.warning("relevance_unavailable", extra={"reason": reason, "request_id": ctx.request_id, "stage": self.name})
        return Relevance(RelevanceStatus.UNAVAILABLE, None, reason, embedded=0, cached=cached)

    def fallback(self, ctx: RequestContext, reason: str) -> None:
        """Relevance unavailable ⇒ no order ⇒ pinch-prune compresses uniformly."""
        ctx[RELEVANCE] = self._unavailable(ctx, reason)


def ranking_report(relevance: Relevance, candidates: int) -> tuple[Outcome, str]:
    """A ranking's outcome and detail for the trace (this stage's, or pinch-prune's when it was deferred)."""
    if relevance.status is RelevanceStatus.OK:
        return Outcome.OK, f"{candidates} candidates ranked; {relevance.embedded} embedded, {relevance.cached} cached"
    return Outcome.FALLBACK, f"unavailable: {relevance.reason}; {relevance.cached} cached"


def _similarity(queries: list[str], texts: list[str], vectors: dict[str, Vector]) -> list[float]:
    """Each candidate text's best similarity to the queries; blank texts (never embedded) are zero vectors."""
    query_matrix = np.stack([vectors[q] for q in queries])
    blank: Vector = np.zeros(query_matrix.shape[1])
    return [float(x) for x in similarities(query_matrix, np.stack([vectors.get(t, blank) for t in texts]))]
