"""The chain: order validation and assembly into middlewares (the registry is the composition root's: :mod:`router.registry`).

The configured order is data (``middlewares:`` in config). It is validated and
built once at start-up, then frozen into a tuple of middlewares.
"""

from __future__ import annotations

from collections.abc import Sequence

from router.config import Config
from router.context import EDGE_FIELDS
from router.stage import Middleware, Stage, StageClass, StageDeps, stage_middleware

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


def build_chain(config: Config, deps: StageDeps, registry: dict[str, StageClass]) -> tuple[list[Stage], tuple[Middleware, ...]]:
    """Validate the configured order (the one place it is), build every stage once, wrap each as a middleware."""
    classes = validate_order(config.middlewares, registry)
    stages = [cls(deps) for cls in classes]
    return stages, tuple(stage_middleware(stage) for stage in stages)
