"""Paths into a parsed JSON body, for the fuzz tests that break real bodies one node at a time."""

from __future__ import annotations

from typing import Any

Path = tuple[Any, ...]


def paths_of(node: Any, path: Path = ()) -> list[Path]:
    """Every node's path in ``node``, the root (``()``) included, keys and indexes as they lead there."""
    found = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            found += paths_of(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += paths_of(value, (*path, index))
    return found


def value_at(node: Any, path: Path) -> Any:
    for step in path:
        node = node[step]
    return node


def replaced(node: Any, path: Path, value: Any) -> Any:
    """``node`` with the value at ``path`` replaced by ``value``; ``node`` itself is not changed."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(node, dict):
        return {**node, head: replaced(node[head], rest, value)}
    copy = list(node)
    copy[head] = replaced(node[head], rest, value)
    return copy
