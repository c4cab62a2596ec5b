"""pinch-prune: compress old tool results so the prompt fits ``pinch.budget_tokens`` (ARCHITECTURE §5).

Reads ``ctx.messages`` (never changed) and, when pinch-relevance ran before it,
``ctx.relevance``; writes ``ctx.send_messages`` (what goes upstream) and
``ctx.pinch`` (the stats behind ``x-router-pinch-saved``). The budget covers
the whole prompt the gate measures: messages plus the request's tool schemas.

* ``pinch.enabled: false`` ⇒ recorded as skipped; the original messages go
  upstream and ``ctx.pinch`` stays None (no pinch header).
* A relevance order ⇒ relevance mode; none (relevance skipped, unavailable or
  absent) ⇒ uniform mode. An order that does not fit the candidate list is a
  bug upstream of us: pinch prunes uniformly instead and records a fallback.
* Any error ⇒ fail open: the adapter calls :meth:`PinchPrune.fallback`, which
  forwards the original messages untouched and leaves ``ctx.pinch`` None; the
  trace records the error.
"""

from __future__ import annotations

from typing import ClassVar

from router.chain import StageDeps
from router.config import PinchSettings
from router.context import Message, Outcome, PinchStats, RequestContext
from router.core.pinch import RelevanceOrderError, prune_context
from router.core.tokens import TokenEstimator
from router.stage import FailMode, StageReport


class PinchPrune:
    name: ClassVar[str] = "pinch-prune"
    requires: ClassVar[frozenset[str]] = frozenset({"messages", "body"})
    reads: ClassVar[frozenset[str]] = frozenset({"relevance"})
    provides: ClassVar[frozenset[str]] = frozenset({"pinch", "send_messages"})
    fail_mode: ClassVar[FailMode] = FailMode.OPEN

    def __init__(self, deps: StageDeps) -> None:
        self.settings: PinchSettings = deps.config.pinch
        self.estimator: TokenEstimator = deps.estimator
        # Synchronous CPU work (~2 ms on a 1M-character body) that no await interrupts; the
        # adapter's contract wants a bound all the same.
        self.timeout_seconds: float | None = 2.0

    async def run(self, ctx: RequestContext) -> StageReport:
        if not self.settings.enabled:
            return StageReport(Outcome.SKIPPED, "pinch.enabled is false")
        order = ctx.relevance.order if ctx.relevance is not None else None
        outcome, note = Outcome.OK, ""
        try:
            sent, stats = self._prune(ctx, order)
        except RelevanceOrderError as exc:
            sent, stats = self._prune(ctx, None)
            outcome, note = Outcome.FALLBACK, f"; uniform instead: {exc}"
        ctx.send_messages = sent
        ctx.pinch = stats
        detail = f"{stats.mode}: {stats.original_tokens} → {stats.final_tokens} tokens, {stats.compressed} compressed"
        return StageReport(outcome, detail + note)

    def _prune(self, ctx: RequestContext, order: tuple[int, ...] | None) -> tuple[list[Message], PinchStats]:
        settings = self.settings
        return prune_context(
            ctx.messages,
            settings.budget_tokens,
            settings.keep_last_turns,
            settings.max_summarize_chars,
            order,
            self.estimator,
            tools=ctx.body.get("tools") or None,
            measured=ctx.measured_prompt(self.estimator),
        )

    def fallback(self, ctx: RequestContext, reason: str) -> None:
        ctx.send_messages = ctx.messages
        ctx.pinch = None
