"""The stage registry: every stage the proxy knows, by its configured name (owned by the composition root).

Adding a stage: one module in ``middlewares/`` (its constructor names the dependencies it uses) and
its class in :data:`STAGES`.

:func:`chain_stages` is the one validation of a configured order against this
registry. Every entry point calls it — ``check-config``, ``serve`` and
``reload`` when they load the file (:func:`router.server.live.load_serving_config`),
the app when it builds the chain, ``explain`` — and it checks each order once:
the registry is fixed for the life of the process, so the answer for an order
never changes, and a later caller (the app after the command line loaded the
file, every worker, a reload that keeps the order) trusts the first check.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from functools import cache

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
from router.contract.stage import Stage, StageClass
from router.core.breaker import ProviderBreakers
from router.core.session_state import SessionReads
from router.core.tokens import TokenEstimator
from router.observe.metrics import OpenCount
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


@dataclass(frozen=True, slots=True)
class Offered:
    """What the composition root offers the stages of one generation. A stage names in its
    constructor the ones it uses (and ``settings``, its own config section) and gets only those."""

    catalogue: Catalogue
    http: aiohttp.ClientSession
    estimator: TokenEstimator
    clock: Callable[[], float]
    state: SessionStore  # the process's session state
    session_reads: SessionReads  # what session-fingerprint reads for the chain in one round trip
    escalation: SessionEscalation | None = None  # shared with POST /v1/outcome
    open_upstreams: OpenCount | None = None  # the answers being relayed right now
    breakers: ProviderBreakers | None = None  # the providers' circuit breakers (the app's, across reloads)


OFFERED_NAMES = frozenset(f.name for f in fields(Offered)) | {"settings"}


@cache
def wanted(stage: StageClass) -> tuple[str, ...]:
    """The dependencies ``stage``'s constructor names; TypeError naming any the server does not offer."""
    names = tuple(inspect.signature(stage).parameters)
    unknown = [name for name in names if name not in OFFERED_NAMES]
    if unknown:
        raise TypeError(f"stage {stage.name!r} asks for {', '.join(unknown)}: not offered (offered: {', '.join(sorted(OFFERED_NAMES))})")
    return names


def stage_builder(
    config: Config,
    *,
    http: aiohttp.ClientSession,
    clock: Callable[[], float],
    state: SessionStore,
    escalation: SessionEscalation | None = None,
    open_upstreams: OpenCount | None = None,
    breakers: ProviderBreakers | None = None,
    estimator: TokenEstimator | None = None,
) -> Callable[[StageClass], Stage]:
    """How each stage of one generation is built: with what it names of the offered dependencies,
    and its own section of ``config`` (its class's ``section``) as ``settings``. One
    :class:`SessionReads` per generation: its stages register what session-fingerprint reads for them."""
    offered = Offered(
        catalogue=Catalogue.of(config),
        http=http,
        estimator=estimator or TokenEstimator(config.tokens.image_tokens, config.tokens.per_message_overhead),
        clock=clock,
        state=state,
        session_reads=SessionReads(),
        escalation=escalation,
        open_upstreams=open_upstreams,
        breakers=breakers,
    )

    def build(stage: StageClass) -> Stage:
        settings = getattr(config, stage.section) if stage.section else None
        return stage(**{name: settings if name == "settings" else getattr(offered, name) for name in wanted(stage)})

    return build
