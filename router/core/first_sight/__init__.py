"""First sight: a new tool result reduced once, the first time it is sent (ARCHITECTURE §5). Pure.

The reducers live one a module (terminal noise, repeated lines so far).
"""

from router.core.first_sight.model import (
    DEFAULT_SETTINGS,
    EarlierResult,
    FirstSightSettings,
    NewResult,
    Reduction,
    Rule,
    Step,
)

__all__ = ["DEFAULT_SETTINGS", "EarlierResult", "FirstSightSettings", "NewResult", "Reduction", "Rule", "Step"]
