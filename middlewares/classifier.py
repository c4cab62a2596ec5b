"""classifier: what kind of work is this turn? (ARCHITECTURE §7)

In order:

1. A client override (``x-router-category`` / ``x-router-tier``) wins over
   everything, a cached classification included: source ``override``, no
   classifier call. An invalid override is a 400 ``invalid_override``. One
   header alone takes the other value from ``routing.fallback_*``.
2. A classification already in the context (a cache hit) ⇒ skipped.
3. Otherwise the configured small LLM is asked once (see
   :mod:`router.clients.classifier`) for ``{category, tier,
   required_context_tokens}``; the answer is parsed tolerantly and validated
   strictly (:mod:`router.core.classification`).

Fails open: a timeout (``classifier.timeout_seconds``) or an error makes the
adapter call :meth:`Classifier.fallback`; an invalid answer falls back here.
Either way the request goes on with ``routing.fallback_category`` /
``fallback_tier`` and source ``fallback`` — which the classification cache
never stores, so the next turn asks again.
"""

from __future__ import annotations

from typing import ClassVar

import aiohttp

from router.clients.classifier import ClassifierClient
from router.config import Catalogue, ClassifierSettings, RoutingSettings
from router.core.results import CLASSIFICATION, Classification, ClassificationSource, Outcome
from router.contract.context import RequestContext
from router.core.classification import (
    CATEGORY_HEADER,
    TIER_HEADER,
    InvalidAnswer,
    InvalidOverride,
    classifier_messages,
    parse_classifier_answer,
    parse_override,
)
from router.core.errors import invalid_request
from router.contract.stage import FailMode, StageReport
from middlewares.classification_cache import CACHED_CLASSIFICATION


class Classifier:
    name: ClassVar[str] = "classifier"
    section: ClassVar[str] = "classifier"
    requires: ClassVar[frozenset[str]] = frozenset({"headers", "view"})
    reads: ClassVar[frozenset[str]] = frozenset({CACHED_CLASSIFICATION.name})
    provides: ClassVar[frozenset[str]] = frozenset({CLASSIFICATION.name, "response"})  # response: a bad override is refused
    fail_mode: ClassVar[FailMode] = FailMode.OPEN

    def __init__(self, *, settings: ClassifierSettings, catalogue: Catalogue, http: aiohttp.ClientSession) -> None:
        self.settings = settings
        self.routing: RoutingSettings = catalogue.routing
        self.timeout_seconds: float | None = self.settings.timeout_seconds
        self.client = ClassifierClient(http, catalogue.providers[self.settings.provider], self.settings, catalogue.max_response_bytes)
        # A classifier's context guess may steer towards big windows, never past the biggest one.
        self._largest_window = max(model.context_window for model in catalogue.models)
        # What an override is checked against, read once per generation (a reload builds a new
        # chain) rather than through the pydantic model's __getattr__ hook on every request.
        routing = catalogue.routing
        self._override_bounds = (routing.categories, routing.tiers, routing.fallback_category, routing.fallback_tier)

    async def run(self, ctx: RequestContext) -> StageReport:
        override = parse_override(ctx.headers.get(CATEGORY_HEADER), ctx.headers.get(TIER_HEADER), *self._override_bounds)
        if isinstance(override, InvalidOverride):
            ctx.response = ctx.error_response(invalid_request(override.message, code="invalid_override", param=override.header))
            return StageReport(detail=f"invalid override ({override.header})")
        if override is not None:
            ctx[CLASSIFICATION] = override
            return StageReport(detail=f"override: {_describe(override)}")
        cached = ctx[CACHED_CLASSIFICATION]
        if cached is not None:  # the session's, from classification-cache
            ctx[CLASSIFICATION] = cached
            return StageReport(Outcome.SKIPPED, f"already {cached.source}")
        if not ctx.view.turn_text.task and not ctx.view.turn_text.step:
            self.fallback(ctx, "nothing to classify")
            return StageReport(Outcome.FALLBACK, "nothing to classify")

        routing = self.routing
        reply = await self.client.ask(classifier_messages(routing.categories, routing.tiers, ctx.view.turn_text))
        answer = parse_classifier_answer(reply, routing.categories, routing.tiers, self._largest_window)
        if isinstance(answer, InvalidAnswer):
            self.fallback(ctx, answer.reason)
            return StageReport(Outcome.FALLBACK, answer.reason)
        classification = ctx[CLASSIFICATION] = Classification(
            answer.category, answer.tier, ClassificationSource.CLASSIFIER, answer.required_context_tokens, answer.reason
        )
        return StageReport(detail=_describe(classification))

    def fallback(self, ctx: RequestContext, reason: str) -> None:
        ctx[CLASSIFICATION] = Classification(
            self.routing.fallback_category, self.routing.fallback_tier, ClassificationSource.FALLBACK
        )


def _describe(classification: Classification) -> str:
    reason = f" ({classification.reason})" if classification.reason else ""
    return f"{classification.task_category}, tier {classification.task_tier}{reason}"
