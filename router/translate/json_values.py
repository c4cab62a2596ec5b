"""JSON values the translations read alike: a call's arguments as an object, an answer's body as an object. Pure."""

from __future__ import annotations

from typing import Any

import orjson


def tool_input(arguments: Any) -> dict[str, Any]:
    """Tool-call arguments (JSON text) as a ``tool_use`` input object; not an object ⇒ ``{"arguments": text}``."""
    if isinstance(arguments, dict):
        return arguments
    if not isinstance(arguments, str) or not arguments.strip():
        return {}
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"arguments": arguments}


def answer_object(raw: bytes) -> dict[str, Any]:
    """A provider's whole answer as a JSON object ({} when it is another JSON value)."""
    value = orjson.loads(raw)
    return value if isinstance(value, dict) else {}
