"""The stage registry: every stage the proxy knows, by its configured name (owned by the composition root).

Adding a stage: one module in ``middlewares/`` and its class in :data:`STAGES`.
"""

from __future__ import annotations

from middlewares.capability_gate import CapabilityGate
from middlewares.classification_cache import ClassificationCache
from middlewares.classifier import Classifier
from middlewares.pinch_prune import PinchPrune
from middlewares.pinch_relevance import PinchRelevance
from middlewares.session_fingerprint import SessionFingerprint
from middlewares.upstream_forward import UpstreamForward
from router.stage import StageClass

STAGES: tuple[StageClass, ...] = (SessionFingerprint, ClassificationCache, Classifier, PinchRelevance, PinchPrune, CapabilityGate, UpstreamForward)


def stage_registry() -> dict[str, StageClass]:
    return {stage.name: stage for stage in STAGES}
