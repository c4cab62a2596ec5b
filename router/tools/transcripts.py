"""Requests and transcripts saved as JSON files (for `explain`, `eval-pinch` and the benchmarks).

A file holds a chat request object, a transcript ``{"messages", "tools"}``
(no model: routed like ``auto``), or a bare list of messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from router.core.content import Message


class RequestFileError(Exception):
    """A file that holds no usable request; the message names the file."""


def read_request_file(path: str | Path) -> dict[str, Any]:
    """The request body in ``path``: an object as it is, a bare list as ``{"messages": list}``."""
    path = Path(path)
    try:
        data = orjson.loads(path.read_bytes())
    except OSError as error:
        raise RequestFileError(f"{path}: cannot read ({error.strerror or error})") from None
    except orjson.JSONDecodeError as error:
        raise RequestFileError(f"{path}: not valid JSON ({error})") from None
    if isinstance(data, list):
        return {"messages": data}
    if not isinstance(data, dict):
        raise RequestFileError(f"{path}: expected a chat request object or a list of messages, got {type(data).__name__}")
    return data


@dataclass(frozen=True, slots=True)
class Transcript:
    name: str
    messages: list[Message]
    tools: Any

    def turn_requests(self) -> list[list[Message]]:
        """The messages of each turn's request: everything before each assistant message."""
        return [self.messages[:i] for i, m in enumerate(self.messages) if m.get("role") == "assistant" and i > 0]

    def body(self, messages: list[Message] | None = None) -> dict[str, Any]:
        """A chat body for ``messages`` (default: all of them), routed like ``auto``."""
        body: dict[str, Any] = {"model": "auto", "messages": self.messages if messages is None else messages}
        if self.tools:
            body["tools"] = self.tools
        return body


def load_transcript(path: str | Path) -> Transcript:
    path = Path(path)
    data = read_request_file(path)
    messages = data.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise RequestFileError(f'{path}: expected {{"messages": [...]}} or a list of messages')
    return Transcript(path.name.removesuffix(".json"), messages, data.get("tools"))
