"""Gemini's answers as the proxy reads them: usage, the end of a stream, the JSON-array framing. Pure.

A ``GenerateContentResponse`` (whole, or one chunk of a stream) reports ``usageMetadata``:
``promptTokenCount`` (the cached part included), ``cachedContentTokenCount``,
``candidatesTokenCount`` and ``thoughtsTokenCount`` (the output is both), ``totalTokenCount``.
A stream with ``?alt=sse`` is ``data: {chunk}`` events and has no end marker: the chunk that
carries a candidate's ``finishReason`` is its last. Without ``alt=sse`` Google streams one JSON
array of the same chunks (``[{…}``, ``,{…}`` …, ``]``): the proxy always asks a provider for
SSE, and :class:`JsonArrayFraming` writes the client's events as that array.
"""

from __future__ import annotations

from typing import Any

import orjson

from router.core.results import Usage
from router.core.sse import data_payloads
from router.wire.gemini.errors import error_payload
from router.wire.usage import token_count

SSE_EVENT_END = b"\r\n\r\n"  # as Google ends its events
JSON = "application/json"


def _count(obj: dict[str, Any], camel: str, snake: str) -> int | None:
    return token_count(obj.get(camel, obj.get(snake)))


def usage_of(answer: Any) -> Usage | None:
    """The usage of one parsed response or chunk (None: it reports none)."""
    if not isinstance(answer, dict):
        return None
    metadata = answer.get("usageMetadata", answer.get("usage_metadata"))
    if not isinstance(metadata, dict):
        return None
    prompt = _count(metadata, "promptTokenCount", "prompt_token_count")
    candidates = _count(metadata, "candidatesTokenCount", "candidates_token_count")
    thoughts = _count(metadata, "thoughtsTokenCount", "thoughts_token_count")
    completion = None if candidates is None and thoughts is None else (candidates or 0) + (thoughts or 0)
    total = _count(metadata, "totalTokenCount", "total_token_count")
    return Usage(prompt, completion, total, _count(metadata, "cachedContentTokenCount", "cached_content_token_count"))


def answer_problem(answer: Any) -> str | None:
    """What makes a provider's whole answer (its JSON) no ``GenerateContentResponse``, or None: a
    ``candidates`` list of objects whose ``content`` (when there) holds a list of part objects. A
    blocked prompt answers no candidates but its ``promptFeedback``, which is an answer."""
    if not isinstance(answer, dict):
        return "not a JSON object"
    candidates = answer.get("candidates")
    if candidates is None:
        return None if isinstance(answer.get("promptFeedback", answer.get("prompt_feedback")), dict) else "it has no candidates"
    if not isinstance(candidates, list):
        return "its candidates are no list"
    for c, candidate in enumerate(candidates):
        if not isinstance(candidate, dict):
            return f"candidates.{c} is no object"
        content = candidate.get("content")
        if content is None:
            continue  # a candidate stopped by its finishReason (SAFETY, RECITATION) before any content
        parts = content.get("parts") if isinstance(content, dict) else None
        if not isinstance(content, dict) or (parts is not None and not (isinstance(parts, list) and all(isinstance(p, dict) for p in parts))):
            return f"candidates.{c}.content is no object with a list of parts"
    return None


def read_usage(data: bytes) -> Usage | None:
    try:
        return usage_of(orjson.loads(data))
    except orjson.JSONDecodeError:
        return None


def is_last_chunk(data: bytes) -> bool:
    """Whether one SSE data payload is a stream's last chunk: a candidate with its ``finishReason``
    (parsed only when the name occurs in it)."""
    if b'"finishReason"' not in data and b'"finish_reason"' not in data:
        return False
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    candidates = chunk.get("candidates") if isinstance(chunk, dict) else None
    return isinstance(candidates, list) and any(
        isinstance(c, dict) and (c.get("finishReason") or c.get("finish_reason")) for c in candidates
    )


class JsonArrayFraming:
    """A stream's chunks as Google's JSON array (``streamGenerateContent`` without ``alt=sse``): the
    client's whole SSE events in, the array's bytes out (``[`` before the first chunk, ``,`` between,
    ``]`` after the last — also after an error, which is one more element).

    The array stays JSON whatever the events are: one that is not (a passed-through provider's,
    relayed as it came to an SSE client) ends it with an error element in Google's shape instead,
    and what follows is left out."""

    content_type = JSON

    def __init__(self) -> None:
        self.started = False
        self.ended = False  # an element that ends the array is written: nothing more goes in

    def events(self, ready: bytes) -> bytes:
        out = []
        for data in data_payloads(ready):
            if self.ended:
                break
            try:
                orjson.loads(data)
            except orjson.JSONDecodeError:
                message = f"upstream stream interrupted: the provider sent an event that is not JSON ({len(data)} bytes)"
                data = orjson.dumps(error_payload(502, message, "upstream_stream_interrupted"))
                self.ended = True
            out.append((b",\r\n" if self.started else b"[") + data)
            self.started = True
        return b"".join(out)

    def close(self) -> bytes:
        return b"]" if self.started else b"[]"
