"""The request fields several client formats share, checked once: ``model``, ``stream`` and the ``tools`` array
(OpenAI chat, the Responses API, Ollama's API write them alike). Each check names the field it refuses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from router.core.errors import InvalidRequest


def model_and_stream(body: dict[str, Any]) -> tuple[str | None, bool | None]:
    """The body's ``model`` (a non-empty string) and ``stream`` (a boolean), each None when absent."""
    model = body.get("model")
    if model is not None and (not isinstance(model, str) or not model):
        raise InvalidRequest("'model' must be a non-empty string", "model")
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise InvalidRequest("'stream' must be a boolean", "stream")
    return model, stream


def tool_list(body: dict[str, Any], check_tool: Callable[[Any, str], None]) -> list[Any] | None:
    """The body's ``tools``, an array whose every entry ``check_tool`` (the format's own) accepts; None when absent."""
    tools = body.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise InvalidRequest("'tools' must be an array", "tools")
    for i, tool in enumerate(tools):
        check_tool(tool, f"tools[{i}]")
    return tools
