"""Vendors the schema components the conformance test validates against, from OpenAI's own spec.

    git -C <openai-openapi clone> show <commit>:openapi.yaml > /tmp/openapi.yaml
    .venv/bin/python tests/data/openapi/vendor.py /tmp/openapi.yaml <commit>

writes ``openai-components.json`` next to this file: the ``ROOTS`` and every component they
reference (the ``$ref`` closure), unchanged, under ``components.schemas`` so their references
resolve as in the spec, with the spec's ``info`` and the commit they came from.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

ROOTS = ("CreateChatCompletionResponse", "CreateChatCompletionStreamResponse", "Response", "ResponseStreamEvent", "ErrorResponse")
PREFIX = "#/components/schemas/"


def closure(schemas: dict[str, Any], roots: tuple[str, ...]) -> dict[str, Any]:
    """The named schemas and every schema they reference, transitively."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo += _refs(schemas[name])
    return {name: schemas[name] for name in sorted(seen)}


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        own = [ref.removeprefix(PREFIX)] if isinstance(ref, str) and ref.startswith(PREFIX) else []
        return own + [r for value in node.values() for r in _refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in _refs(value)]
    return []


def main(spec_path: str, commit: str) -> None:
    spec = yaml.load(Path(spec_path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    out = {
        "openapi": spec["openapi"],
        "info": {**spec["info"], "x-source": f"https://github.com/openai/openai-openapi/blob/{commit}/openapi.yaml"},
        "components": {"schemas": closure(spec["components"]["schemas"], ROOTS)},
    }
    target = Path(__file__).with_name("openai-components.json")
    target.write_text(json.dumps(out, indent=1, sort_keys=True, ensure_ascii=False, default=str) + "\n")
    print(f"{len(out['components']['schemas'])} schemas → {target}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
