"""What changed between two configs, as dotted key paths. Pure."""

from __future__ import annotations

from typing import Any


def changed_paths(old: Any, new: Any, path: str = "") -> tuple[str, ...]:
    """Dotted paths of the keys whose values differ (``classifier.model``), in the new config's key order.

    Mappings are compared key by key; a list (the chain, the catalogue) is one
    value: it changed or it did not, and its path says which one.
    """
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[str] = []
        for key in [*new, *(k for k in old if k not in new)]:
            if old.get(key) != new.get(key):
                found += changed_paths(old.get(key), new.get(key), f"{path}.{key}" if path else str(key))
        return tuple(found)
    return () if old == new else (path or "<root>",)
