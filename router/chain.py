"""The chain: stage registry, order validation, and assembly into middlewares.

The configured order is data (``middlewares:`` in config). It is validated and
built once at start-up, then frozen into a tuple of middlewares.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import aiohttp

from router.config import Config
from router.context import EDGE_FIELDS
from router.core.tokens import TokenEstimator
from router.metrics import Metrics
from router.session_escalation import SessionEscalation
from router.session_store import LocalStore, SessionStore
from router.stage import Middleware, Stage, stage_middleware

TERMINAL_STAGE = "upstream-forward"


@dataclass(frozen=True, slots=True)
class StageDeps:
    """What a stage may be built with: settings and the shared I/O seams."""

    config: Config
    http: aiohttp.ClientSession
    estimator: TokenEstimator
    clock: Callable[[], float] = time.monotonic
    escalation: SessionEscalation | None = None  # shared with POST /v1/outcome
    metrics: Metrics | None = None  # for gauges of what is open right now
    # What the proxy remembers per session between requests (classifications, pinch ledgers):
    # one per process, kept across reloads, on Redis with state.backend: redis.
    state: SessionStore = field(default_factory=LocalStore)


class StageClass(Protocol):
    name: str
    requires: frozenset[str]
    reads: frozenset[str]
    provides: frozenset[str]

    def __call__(self, deps: StageDeps) -> Stage: ...


class ChainError(ValueError):
    """The configured middleware order cannot work; the message names the stage."""


def stage_registry() -> dict[str, StageClass]:
    """Every stage the proxy knows, by its configured name."""
    from middlewares.capability_gate import CapabilityGate
    from middlewares.classification_cache import ClassificationCache
    from middlewares.classifier import Classifier
    from middlewares.pinch_prune import PinchPrune
    from middlewares.pinch_relevance import PinchRelevance
    from middlewares.session_fingerprint import SessionFingerprint
    from middlewares.upstream_forward import UpstreamForward

    stages: list[StageClass] = [SessionFingerprint, ClassificationCache, Classifier, PinchRelevance, PinchPrune, CapabilityGate, UpstreamForward]
    return {stage.name: stage for stage in stages}


def validate_order(names: Sequence[str], registry: dict[str, StageClass]) -> list[StageClass]:
    """Check a configured order and return the stage classes in that order.

    Rejects an unknown or duplicate name, a stage placed before a field it
    requires (or after an optional input's provider would run), and a chain
    that does not end in ``upstream-forward``.
    """
    problems: list[str] = []
    seen: set[str] = set()
    classes: list[StageClass] = []
    for i, name in enumerate(names):
        if name not in registry:
            problems.append(f"middlewares[{i}]: unknown stage {name!r} (known: {', '.join(sorted(registry))})")
        elif name in seen:
            problems.append(f"middlewares[{i}]: stage {name!r} appears more than once")
        else:
            classes.append(registry[name])
        seen.add(name)
    if not names or names[-1] != TERMINAL_STAGE:
        where = f"it is at middlewares[{list(names).index(TERMINAL_STAGE)}]" if TERMINAL_STAGE in names else "it is missing"
        problems.append(f"middlewares: the chain must end with {TERMINAL_STAGE!r}, but {where}")
    if problems:
        raise ChainError("\n".join(problems))

    available = set(EDGE_FIELDS)
    for position, stage in enumerate(classes):
        for needed in sorted(stage.requires - available):
            providers = [s.name for s in classes[position + 1 :] if needed in s.provides]
            hint = f"; {providers[0]!r} provides it but comes later" if providers else (
                "; no stage in the chain provides it"
            )
            problems.append(f"middlewares: stage {stage.name!r} requires {needed!r}{hint}")
        for optional in sorted(stage.reads):
            later = [s.name for s in classes[position + 1 :] if optional in s.provides]
            if later:
                problems.append(
                    f"middlewares: stage {stage.name!r} reads {optional!r}, but {later[0]!r}, which provides it, comes after it"
                )
        available |= stage.provides
    if problems:
        raise ChainError("\n".join(problems))
    return classes


def build_chain(config: Config, deps: StageDeps, registry: dict[str, StageClass] | None = None) -> tuple[list[Stage], tuple[Middleware, ...]]:
    """Validate the configured order, build every stage once, and wrap each as a middleware."""
    classes = validate_order(config.middlewares, registry or stage_registry())
    stages = [cls(deps) for cls in classes]
    return stages, tuple(stage_middleware(stage) for stage in stages)
