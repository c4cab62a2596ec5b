"""The chain: the order check and assembly into middlewares (the registry, and the one call of the
check against it, are the composition root's: :func:`router.server.registry.chain_stages`).

The configured order is data (``middlewares:`` in config). It is validated once,
then each generation (start-up, every reload) builds its stages from the
validated classes and freezes them into a tuple of middlewares.
"""

from __future__ import annotations

from collections.abc import Sequence

from router.contract.context import EDGE_FIELDS
from router.contract.stage import Middleware, Stage, StageClass, StageDeps, stage_middleware

__all__ = ["TERMINAL_STAGE", "ChainError", "StageClass", "StageDeps", "build_chain", "validate_order"]

TERMINAL_STAGE = "upstream-forward"


class ChainError(ValueError):
    """The configured middleware order cannot work; the message names the stage."""


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


def build_chain(classes: Sequence[StageClass], deps: StageDeps) -> tuple[list[Stage], tuple[Middleware, ...]]:
    """Build every stage of a validated order (:func:`router.server.registry.chain_stages`) once, and wrap each as a middleware."""
    stages = [cls(deps) for cls in classes]
    return stages, tuple(stage_middleware(stage) for stage in stages)
