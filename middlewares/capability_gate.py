"""capability-gate: pick the model that can really serve this request (ARCHITECTURE §8).

Needs are measured fresh on every request from what will be sent (after
pinch). Fails closed: no capable model ⇒ 400 ``no_capable_model``; an internal
error ⇒ 503, never a guess.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import ClassVar

from router.config import Catalogue, RoutingSettings
from router.contract.context import RequestContext
from router.core.results import CAPABILITIES, CLASSIFICATION, PINCH, ROUTE, Route, SESSION
from router.core.redaction import clip
from router.core.model_families import ModelFamilies, hinted_tier
from router.core.routing import NoRoute, detect_capabilities, select_route
from router.core.session_state import SessionReads
from router.core.tokens import TokenEstimator
from router.state.escalation import SessionEscalation
from router.core.errors import ApiError, internal_failure, invalid_request
from router.contract.stage import FailMode, StageReport
from middlewares.session_fingerprint import SESSION_STATE


class CapabilityGate:
    name: ClassVar[str] = "capability-gate"
    section: ClassVar[str] = "routing"
    requires: ClassVar[frozenset[str]] = frozenset({"view"})
    reads: ClassVar[frozenset[str]] = frozenset({CLASSIFICATION.name, PINCH.name, SESSION.name, SESSION_STATE.name})
    provides: ClassVar[frozenset[str]] = frozenset({CAPABILITIES.name, ROUTE.name, "response"})  # response: the 400/404 it refuses with
    fail_mode: ClassVar[FailMode] = FailMode.CLOSED

    def __init__(
        self,
        *,
        settings: RoutingSettings,
        catalogue: Catalogue,
        estimator: TokenEstimator,
        clock: Callable[[], float],
        session_reads: SessionReads,
        escalation: SessionEscalation | None = None,
    ) -> None:
        self.settings, self.catalogue, self.estimator = settings, catalogue, estimator
        self.timeout_seconds: float | None = 2.0
        self._families = ModelFamilies([m.name for m in self.catalogue.models], self.settings.aliases, self.settings.model_families)
        self.escalation = escalation
        self.clock = clock
        if self.escalation is not None:
            session_reads.add(self.escalation.space)
        # Read once per generation (a reload builds a new chain): each read of a pydantic model's
        # attribute goes through its __getattr__ hook, ~5× the cost of a plain one.
        routing = self.settings
        self._models, self._tiers, self._fallback_tier = self.catalogue.models, routing.tiers, routing.fallback_tier
        self._min_output_tokens, self._clamp_output = routing.min_output_tokens, routing.output_limit == "clamp"
        self._min_tool_proficiency = routing.min_tool_proficiency

    async def run(self, ctx: RequestContext) -> StageReport:
        catalogue = self.catalogue
        requested = self._families.resolve(ctx.view.model)
        if requested.unknown:
            name = clip(ctx.view.model or "")
            ctx.response = ctx.error_response(invalid_request(
                f"model {name!r} is neither a configured model, a routing alias nor a model family "
                f"(models: {', '.join(m.name for m in catalogue.models)}; aliases: {', '.join(self.settings.aliases)}). "
                f"To route it, add {name!r} to routing.aliases (or \"*\" to route every unknown name) or a pattern "
                f"matching it to routing.model_families, or send model \"auto\"",
                code="model_not_found",
                param="model",
                status=404,
            ))
            return StageReport(detail="unknown model")
        pinned, family = requested.pinned, requested.family
        classification = ctx[CLASSIFICATION]
        tier = classification.task_tier if classification is not None else self._fallback_tier
        tier = hinted_tier(tier, classification.source if classification is not None else None, family)
        escalation = None
        session = ctx[SESSION]
        if self.escalation is not None and session is not None:
            escalation = await self.escalation.escalate(session.key, tier, self._tiers, self.clock(), ctx[SESSION_STATE])
            if escalation is not None:
                tier = escalation.to_tier
        pinch = ctx[PINCH]
        needs = detect_capabilities(
            ctx.view,
            self.estimator,
            classification.required_context_tokens if classification is not None else None,
            # pinch's final count is exactly the prompt it sends, with this estimator
            pinch.final_tokens if pinch is not None else ctx.measured_prompt(self.estimator).tokens,
            min_output_tokens=self._min_output_tokens,
            clamp_output=self._clamp_output,
        )
        ctx[CAPABILITIES] = needs
        route = select_route(self._models, needs, tier, self._min_tool_proficiency, pinned)
        if isinstance(route, NoRoute):
            ctx[ROUTE] = Route(candidates=(), tier=tier, pinned=pinned is not None, rejected=route.rejected, family=family.describe() if family else "")
            ctx.response = ctx.error_response(invalid_request(route.message(), code="no_capable_model"))
            return StageReport(detail="no capable model")
        if escalation is not None or family is not None:
            route = replace(route, escalation=escalation.reason() if escalation is not None else "", family=family.describe() if family else "")
        ctx[ROUTE] = route
        why = (f"; model family {route.family}" if route.family else "") + (f"; {route.escalation}" if route.escalation else "")
        return StageReport(detail=f"{route.chosen.model} (tier {tier}, {len(route.candidates)} candidates){why}")

    def fallback(self, ctx: RequestContext, reason: str) -> None:
        ctx[ROUTE] = None
        ctx.response = ctx.error_response(ApiError(503, internal_failure("routing", ctx.request_id), "server_error", "routing_failed"))
