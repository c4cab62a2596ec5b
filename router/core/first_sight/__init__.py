"""First sight: a new tool result reduced once, the first time it is sent (ARCHITECTURE §5). Pure.

:func:`reduce_at_first_sight` is the content router; the reducers live one a module
(terminal noise, repeated lines, already in context, long output).
"""

from router.core.first_sight.content_router import reduce_at_first_sight
from router.core.first_sight.in_context import EarlierIndex
from router.core.first_sight.model import (
    DEFAULT_SETTINGS,
    EarlierResult,
    FirstSightSettings,
    NewResult,
    Reduction,
    Rule,
    Step,
)

__all__ = [
    "DEFAULT_SETTINGS",
    "EarlierIndex",
    "EarlierResult",
    "FirstSightSettings",
    "NewResult",
    "Reduction",
    "Rule",
    "Step",
    "reduce_at_first_sight",
]
