"""pinch-prune: compress old tool results so the prompt fits its limits (ARCHITECTURE §5).

Reads ``ctx.view`` (the conversation in any wire format, never changed) and,
when pinch-relevance ran before it, ``ctx[RELEVANCE]``; writes ``ctx[REWRITES]``
(the compressed tool results by position, which the wire adapter writes into
the body that goes upstream) and
``ctx[PINCH]`` (the stats behind ``x-router-pinch-saved``, with the reason a
request did or did not compress new results, shown in the trace). The limits
cover the whole prompt the gate measures: messages plus the request's tool schemas.

* The hard limit is the context window of the model the gate will prefer
  (:func:`router.core.routing.pinch_windows`, on the classified tier and the
  request's capabilities), less ``routing.min_output_tokens``; then larger
  capable windows when compression cannot fit that one.
* ``pinch.ledger`` (default) with a session key ⇒
  :func:`router.core.pinch_ledger.pinch_conversation`: the session's ledger is
  reapplied and new results are compressed in batches timed by the provider's
  cache (:mod:`router.core.cache_timing`). The ledger, the session's last-seen
  time (the ``clock`` it is built with) and its provider live in the session state
  (the ``state`` it is built with, on Redis shared by every replica): read with the session's
  escalation record in session-fingerprint's one read of the session
  (``ctx[SESSION_STATE]``; one read of its own without it), and one write, not
  waited for, per request (sent with the request's other writes as it goes upstream). A missing ledger
  (new session, evicted, restarted) is a fresh session. A request offering no tools and carrying
  no tool results (a title) leaves the session's state as it was.
* ``pinch.first_sight`` (on by default) rides on the ledger: the in-progress turn's new results are
  reduced once, losslessly, and the ledger's first-sight texts resent on every later request
  (:mod:`router.core.pinch_first_sight`), the task and step of ``ctx.view.turn_text`` as the query.
  The trace line adds ``first sight: N new, M from the ledger, T tokens saved``.
* ``pinch.ledger: false``, or no session key ⇒ every request is pruned afresh
  (:func:`router.core.pinch.prune_results`) to the budget, or to the window when that is smaller;
  nothing is reduced at first sight (there is no record to resend it from).
* What the wire format signs against its prefix (Anthropic's thinking) reaches pinch through the
  conversation's two neutral hooks: on a model that checks the signatures, a batch only the budget
  calls for waits while the conversation says so (:meth:`~router.core.request_view.Conversation.batch_hold`;
  the window still forces one); the signed parts after the first result whose bytes changed, and
  those the session already recorded so (:meth:`~router.core.request_view.Conversation.stale_signatures`),
  go in ``ctx[PINCH].stale``: left out for a model that checks them, recorded beside the ledger so
  every later request leaves out the very same parts.
* ``pinch.enabled: false`` ⇒ recorded as skipped; the original body goes
  upstream and ``ctx[PINCH]`` stays None (no pinch header).
* A relevance order ⇒ its least relevant candidates go first; none (relevance
  skipped, unavailable or absent) ⇒ uniform / oldest first. A deferred ranking
  (``ctx[RELEVANCE].rank``: pinch-relevance with the ledger) is awaited only when the
  plan without it makes a batch or re-plans the ledger at a cold moment (``relevance.restore``); the plan is
  then made again with the order, and the ranking kept in ``ctx[PINCH].ranking``. An order that does
  not fit the candidate list is a bug upstream of us: pinch goes on without it
  and records a fallback.
* Any error ⇒ fail open: the adapter calls :meth:`PinchPrune.fallback`, which
  forwards the original body untouched and leaves ``ctx[PINCH]`` None; the
  trace records the error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import ClassVar

from router.config import Catalogue, PinchSettings
from router.core.results import CLASSIFICATION, Capabilities, Outcome, PINCH, PinchMode, PinchStats, RELEVANCE, REWRITES, SESSION
from router.contract.context import RequestContext
from router.core.cache_timing import CacheVerdict, cache_lifetime, cache_state
from router.core.escalation import EscalationRecord
from router.core.pinch import RelevanceOrderError, prune_results
from router.core.model_families import ModelFamilies, hinted_tier
from router.core.pinch_ledger import PinchNote, PinchPolicy, PinchSession, WindowLimit, pinch_conversation
from router.core.request_view import Rewrites
from router.core.routing import detect_capabilities, pinch_windows
from router.core.retrieve import declaration_tokens
from router.providers import answers_retrieve
from router.core.session_state import SessionReads, Space
from router.core.tokens import TokenEstimator
from router.state.escalation import SessionEscalation
from router.state.session_store import SessionStore, read_session
from router.contract.stage import FailMode, StageReport
from middlewares.session_fingerprint import SESSION_STATE

# Distinct (needs, tier, ...) whose windows are kept: few per deployment (a handful of
# request kinds × tiers × output limits); cleared when full.
WINDOWS_REMEMBERED = 1024


class PinchPrune:
    name: ClassVar[str] = "pinch-prune"
    section: ClassVar[str] = "pinch"
    requires: ClassVar[frozenset[str]] = frozenset({"view"})
    reads: ClassVar[frozenset[str]] = frozenset({RELEVANCE.name, CLASSIFICATION.name, SESSION.name, SESSION_STATE.name})
    provides: ClassVar[frozenset[str]] = frozenset({PINCH.name, REWRITES.name})
    fail_mode: ClassVar[FailMode] = FailMode.OPEN

    def __init__(
        self,
        *,
        settings: PinchSettings,
        catalogue: Catalogue,
        estimator: TokenEstimator,
        state: SessionStore,
        clock: Callable[[], float],
        session_reads: SessionReads,
        escalation: SessionEscalation | None = None,
    ) -> None:
        self.settings, self.catalogue, self.estimator = settings, catalogue, estimator
        self.state, self.clock, self.escalation = state, clock, escalation
        self.space = Space(
            "pinch", 1, self.settings.ledger_ttl_minutes * 60, self.settings.ledger_max_sessions, PinchSession.encode, PinchSession.decode
        )
        routing = catalogue.routing
        self._families = ModelFamilies([m.name for m in catalogue.models], routing.aliases, routing.model_families)
        if self.settings.enabled and self.settings.ledger:
            session_reads.add(self.space)
        if self.settings.enabled and self.escalation is not None:
            session_reads.add(self.escalation.space)
        # pinch_windows by what it depends on: the same for every turn of a session that keeps its
        # tier and its kind of request. Built per config (a reload builds a new stage), bounded.
        self._windows_of: dict[tuple[Capabilities, int, int | None, str | None], tuple[WindowLimit, ...]] = {}
        # Synchronous CPU work (~2 ms on a 1M-character body) that no await interrupts; the
        # adapter's contract wants a bound all the same. A deferred ranking it awaits has its own.
        relevance = self.settings.relevance
        self.timeout_seconds: float | None = 2.0 + (relevance.timeout_seconds if relevance.enabled else 0.0)
        # Read once per generation (a reload builds a new stage) instead of through the pydantic
        # models' __getattr__ hook on every request: each provider's cache lifetime, the tiers.
        self._cache_lifetimes = {name: cache_lifetime(p.api, p.cache_lifetime_seconds) for name, p in catalogue.providers.items()}
        self._tiers, self._fallback_tier = catalogue.routing.tiers, catalogue.routing.fallback_tier
        self._answers_retrieve = {name: answers_retrieve(p) for name, p in catalogue.providers.items()}
        settings = self.settings
        self.policy = PinchPolicy(
            settings.budget_tokens, settings.keep_last_turns, settings.max_summarize_chars, settings.low_watermark,
            settings.cold_batch_from, settings.no_cache_watermark, first_sight=settings.first_sight.core(),
            restore=settings.relevance.restore,
        )

    async def run(self, ctx: RequestContext) -> StageReport:
        if not self.settings.enabled:
            return StageReport(Outcome.SKIPPED, "pinch.enabled is false")
        relevance = ctx[RELEVANCE]
        order = relevance.order if relevance is not None else None
        evidence = relevance.evidence if relevance is not None else None
        outcome, note = Outcome.OK, ""
        session, escalation = await self._read(ctx)
        windows = self._windows(ctx, escalation)
        try:
            sent, stats, stored, order_matters = self._prune(ctx, order, windows, session, evidence)
            if order_matters and relevance is not None and relevance.rank is not None:
                # the deferred ranking, awaited only now that the order decides something (bounded; never raises)
                ranking = await relevance.rank()
                if ranking.order is not None:
                    sent, stats, stored, _ = self._prune(ctx, ranking.order, windows, session, ranking.evidence)
                stats = replace(stats, ranking=ranking)
                note = f"; {len(ranking.order)} ranked ({ranking.embedded} embedded, {ranking.cached} cached)" if ranking.order is not None else f"; oldest first: relevance unavailable ({ranking.reason})"
        except RelevanceOrderError as exc:
            sent, stats, stored, _ = self._prune(ctx, None, windows, session)
            outcome, note = Outcome.FALLBACK, f"; uniform instead: {exc}"
        if stored is not None and (key := ctx[SESSION]) is not None:
            # Not waited for: it leaves with the request's other writes in one round trip as the
            # request goes upstream (upstream-forward sends them), before its client can have the answer.
            self.state.put_later(self.space, key.key, stored, self.clock())
        ctx[REWRITES] = sent
        ctx[PINCH] = stats
        detail = (
            f"{stats.mode}: {stats.original_tokens} → {stats.final_tokens} tokens, {stats.compressed} compressed "
            f"({stats.reapplied} from the ledger, {stats.newly_compressed} new"
            + (f", {stats.restored} restored" if stats.restored else "")
            + f"); {stats.reason}"
        )
        if stats.first_sight_new or stats.first_sight_reapplied:
            detail += (
                f"; first sight: {stats.first_sight_new} new, {stats.first_sight_reapplied} from the ledger, "
                f"{stats.first_sight_saved} tokens saved"
            )
        if stats.stale is not None:
            detail += f"; {len(stats.stale.positions)} signed reasoning parts after a changed result ({stats.stale.new} new)"
        return StageReport(outcome, detail + note)

    async def _read(self, ctx: RequestContext) -> tuple[PinchSession | None, EscalationRecord | None]:
        """The session's ledger (when the ledger is used) and escalation record, in one round trip at most."""
        if (session := ctx[SESSION]) is None:
            return None, None
        key, now = session.key, self.clock()
        ledger = self.settings.ledger
        reads = [(self.space, key)] if ledger else []
        if self.escalation is not None:
            reads.append((self.escalation.space, key))
        values = await read_session(self.state, ctx[SESSION_STATE], reads, now) if reads else []
        session = (values.pop(0) or PinchSession()) if ledger else None
        return session, (values[0] if values else None)

    def _prune(
        self,
        ctx: RequestContext,
        order: tuple[int, ...] | None,
        windows: tuple[WindowLimit, ...],
        session: PinchSession | None,
        evidence: tuple[float, ...] | None = None,
    ) -> tuple[Rewrites, PinchStats, PinchSession | None, bool]:
        """What goes upstream (``evidence``: the ranking's, for the ledger's batch order), its stats, the session's ledger to store (None: pruned afresh), and
        whether a relevance order would decide anything (a batch, or a cold moment's re-plan of the ledger)."""
        settings = self.settings
        tools, measured = ctx.view.tools, ctx.measured_prompt(self.estimator)
        if session is None or ctx[SESSION] is None:
            budget = min(settings.budget_tokens, windows[0].prompt_limit) if windows else settings.budget_tokens
            sent, stats = prune_results(
                ctx.view.conversation, max(budget, 0), settings.keep_last_turns, settings.max_summarize_chars, order, self.estimator, tools=tools, measured=measured
            )
            why = "within budget" if stats.mode is PinchMode.WITHIN_BUDGET else "pruned afresh"
            why += " (pinch.ledger is false)" if not settings.ledger else " (no session key)"
            # no record of what the previous request sent: every compressed result may be new to it
            stale, _ = ctx.view.conversation.stale_signatures(min(sent, default=None), ())
            return sent, replace(stats, newly_compressed=stats.compressed, reason=why, stale=stale), None, stats.compressed > 0
        now = self.clock()
        provider = windows[0].provider if windows else None
        # no capable model (the gate will refuse the request): the cache is judged by time alone
        lifetime = self._cache_lifetimes.get(provider, cache_lifetime("", None))  # type: ignore[arg-type]
        cache = cache_state(
            now=now, last_seen=session.last_seen, last_provider=session.provider, provider=provider, lifetime_seconds=lifetime, requests=session.requests
        )
        conversation, known = ctx.view.conversation, ctx.known_body
        prior: PinchNote | None = known.prior_pinch if known is not None else None
        retrieve = self._offers_retrieve(ctx, windows)
        declared = declaration_tokens(measured.tools_chars) if retrieve else 0  # the tools' JSON as measured: not written again
        result = pinch_conversation(
            conversation,
            session.ledger,
            self.policy,
            cache,
            # the tool's declaration goes upstream too: the windows hold it beside the prompt
            windows=tuple(replace(w, prompt_limit=w.prompt_limit - declared) for w in windows) if declared else windows,
            relevance_order=order,
            relevance_evidence=evidence,
            estimator=self.estimator,
            tools=tools,
            measured=measured,
            # a batch only the budget calls for may wait, for a model that checks the signed reasoning
            soft_hold=conversation.batch_hold(bool(windows) and windows[0].thinking_binding),
            # the decisions on the old results this body shares with the one it resumed
            memo=prior.memo if prior is not None else None,
            shared_units=ctx.view.reused_units,
            query=(ctx.view.turn_text.task, ctx.view.turn_text.step),
            retrieve=retrieve,
            earlier=prior.earlier if prior is not None else None,
            unit_memo=prior.units if prior is not None else None,
        )
        if known is not None:
            # for the next turn's body (the kept body's one note from this stage)
            known.pinch = PinchNote(result.memo, result.earlier, result.units)
        stale, keys = conversation.stale_signatures(result.first_changed, session.stale_keys)
        stats = replace(result.stats, stale=stale) if stale is not None else result.stats
        if retrieve:  # counted in what is sent
            stats = replace(stats, offers_retrieve=True, final_tokens=stats.final_tokens + declared)
        order_matters = stats.newly_compressed > 0 or (self.policy.restore and cache.verdict is CacheVerdict.COLD and len(session.ledger) > 0)
        if not ctx.view.offers_tools and not ctx.view.conversation.result_units():
            # A side request (opencode's title, a summary): its prompt is its own, so it neither warms nor
            # cools the cache of the session's loop, and it has nothing for the ledger. Recorded as a visit,
            # it made the loop's next request look warm after an idle spell (or cold, when it went to
            # another provider); the session's state stays as the loop's last request left it.
            return result.rewrites, stats, None, order_matters
        return result.rewrites, stats, PinchSession(result.ledger, now, provider, session.requests + 1, keys), order_matters

    def _offers_retrieve(self, ctx: RequestContext, windows: tuple[WindowLimit, ...]) -> bool:
        """The request offers pinch_retrieve (router.core.retrieve): lossy first sight is on, the client
        offers tools (on every request of its loop: the declaration never changes the cached prefix),
        and the preferred model's provider speaks a format whose calls the proxy can answer."""
        sight = self.settings.first_sight
        if not (sight.enabled and sight.lossy and ctx.view.offers_tools and windows):
            return False
        return self._answers_retrieve.get(windows[0].provider, False)

    def _windows(self, ctx: RequestContext, escalated: EscalationRecord | None) -> tuple[WindowLimit, ...]:
        """The windows the gate will choose from, the preferred model's first (see the module doc)."""
        catalogue, classification = self.catalogue, ctx[CLASSIFICATION]
        requested = self._families.resolve(ctx.view.model)  # the gate's reading of the name: pinned, or a family's hint
        tier = classification.task_tier if classification is not None else self._fallback_tier
        tier = hinted_tier(tier, classification.source if classification is not None else None, requested.family)
        escalation = SessionEscalation.of(escalated, tier, self._tiers, self.clock())
        tier = escalation.to_tier if escalation is not None else tier
        pinned = requested.pinned
        needs = detect_capabilities(ctx.view, self.estimator, counted_prompt_tokens=0)
        classified = classification.required_context_tokens if classification is not None else None
        key = (needs, tier, classified, pinned)
        windows = self._windows_of.get(key)
        if windows is None:
            if len(self._windows_of) >= WINDOWS_REMEMBERED:
                self._windows_of.clear()
            routing = catalogue.routing
            windows = pinch_windows(catalogue.models, needs, tier, routing.min_tool_proficiency, routing.min_output_tokens, classified, pinned)
            self._windows_of[key] = windows
        return windows

    def fallback(self, ctx: RequestContext, reason: str) -> None:
        ctx[REWRITES] = None
        ctx[PINCH] = None
