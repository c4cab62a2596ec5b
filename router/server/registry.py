"""The stage registry: every stage the proxy knows, by its configured name (owned by the composition root).

Adding a stage: one module in ``middlewares/`` and its class in :data:`STAGES`.

:func:`chain_stages` is the one validation of a configured order against this
registry. Every entry point calls it — ``check-config``, ``serve`` and
``reload`` when they load the file (:func:`router.server.live.load_serving_config`),
the app when it builds the chain, ``explain`` — and it checks each order once:
the registry is fixed for the life of the process, so the answer for an order
never changes, and a later caller (the app after the command line loaded the
file, every worker, a reload that keeps the order) trusts the first check.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import cache
from typing import Any

import aiohttp

from middlewares.capability_gate import CapabilityGate
from middlewares.classification_cache import ClassificationCache
from middlewares.classifier import Classifier
from middlewares.pinch_prune import PinchPrune
from middlewares.pinch_relevance import PinchRelevance
from middlewares.session_fingerprint import SessionFingerprint
from middlewares.upstream_forward import UpstreamForward
from router.contract.chain import validate_order
from router.config import Catalogue, Config
from router.contract.stage import StageClass, StageDeps
from router.core.breaker import ProviderBreakers
from router.core.session_state import SessionReads
from router.core.tokens import TokenEstimator
from router.state.escalation import SessionEscalation
from router.state.session_store import SessionStore

STAGES: tuple[StageClass, ...] = (SessionFingerprint, ClassificationCache, Classifier, PinchRelevance, PinchPrune, CapabilityGate, UpstreamForward)


def stage_registry() -> dict[str, StageClass]:
    return {stage.name: stage for stage in STAGES}


def chain_stages(names: Sequence[str]) -> tuple[StageClass, ...]:
    """The stage classes of a configured order, in that order; ChainError names every problem
    (an unknown or repeated stage, one placed before what it needs, an end other than upstream-forward)."""
    return _checked(tuple(names))


@cache  # a failed check raises and is not kept: each caller gets the same error
def _checked(names: tuple[str, ...]) -> tuple[StageClass, ...]:
    return tuple(validate_order(names, stage_registry()))


def stage_deps(
    config: Config,
    *,
    http: aiohttp.ClientSession,
    clock: Callable[[], float],
    state: SessionStore,
    escalation: SessionEscalation | None = None,
    open_upstreams: Any = None,
    breakers: ProviderBreakers | None = None,
) -> Callable[[StageClass], StageDeps]:
    """What each stage of one generation is built with: the shared deps, with the stage's own
    section of ``config`` (its class's ``section``) as its settings. One :class:`SessionReads` per
    generation: its stages register what session-fingerprint reads for them."""
    base = StageDeps(
        settings=None,
        catalogue=Catalogue.of(config),
        http=http,
        estimator=TokenEstimator(config.tokens.image_tokens, config.tokens.per_message_overhead),
        clock=clock,
        state=state,
        session_reads=SessionReads(),
        escalation=escalation,
        open_upstreams=open_upstreams,
        breakers=breakers,
    )

    def deps_of(stage: StageClass) -> StageDeps:
        return replace(base, settings=getattr(config, stage.section) if stage.section else None)

    return deps_of
