"""The chain: the configured order (``middlewares:``) checked once (the registry's check,
:meth:`router.server.registry.StageRegistry.chain`), and each generation's stages built into middlewares."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from router.contract.context import EDGE_FIELDS
from router.contract.stage import Middleware, Stage, StageClass, stage_middleware

TERMINAL_STAGE = "upstream-forward"


class ChainError(ValueError):
    """The configured middleware order cannot work; the message names the stage."""


def validate_order(names: Sequence[str], registry: dict[str, StageClass]) -> list[StageClass]:
    """The stage classes of an order, in it. Rejects an unknown or repeated name, a stage placed
    before a field it requires (or after an optional input's provider), and a chain that does not
    end in ``upstream-forward``, naming every problem."""
    problems: list[str] = []
    classes: list[StageClass] = []
    for i, name in enumerate(names):
        if name not in registry:
            problems.append(f"middlewares[{i}]: unknown stage {name!r} (known: {', '.join(sorted(registry))})")
        elif name in names[:i]:
            problems.append(f"middlewares[{i}]: stage {name!r} appears more than once")
        else:
            classes.append(registry[name])
    if not names or names[-1] != TERMINAL_STAGE:
        where = f"it is at middlewares[{list(names).index(TERMINAL_STAGE)}]" if TERMINAL_STAGE in names else "it is missing"
        problems.append(f"middlewares: the chain must end with {TERMINAL_STAGE!r}, but {where}")
    if problems:
        raise ChainError("\n".join(problems))
    available = set(EDGE_FIELDS)
    for position, stage in enumerate(classes):
        later = classes[position + 1 :]
        for needed in sorted(stage.requires - available):
            providers = [s.name for s in later if needed in s.provides]
            hint = f"; {providers[0]!r} provides it but comes later" if providers else "; no stage in the chain provides it"
            problems.append(f"middlewares: stage {stage.name!r} requires {needed!r}{hint}")
        for optional in sorted(stage.reads):
            if provider := next((s.name for s in later if optional in s.provides), None):
                problems.append(f"middlewares: stage {stage.name!r} reads {optional!r}, but {provider!r}, which provides it, comes after it")
        available |= stage.provides
    if problems:
        raise ChainError("\n".join(problems))
    return classes


def build_chain(classes: Sequence[StageClass], build: Callable[[StageClass], Stage]) -> tuple[list[Stage], tuple[Middleware, ...]]:
    """Build every stage of a checked order once (``build``: with the dependencies it names) and wrap each as a middleware."""
    stages = [build(cls) for cls in classes]
    return stages, tuple(stage_middleware(stage) for stage in stages)
