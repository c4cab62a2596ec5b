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

from router.core.json_body import json_object
from router.core.results import Usage
from router.core.sse import data_payloads
from router.wire.gemini.errors import error_payload
from router.wire.gemini.parts import FUNCTION_CALL, field
from router.wire.usage import token_count, usage_problem

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


# The token counts of a usageMetadata, in both spellings.
USAGE_COUNTS = (
    "promptTokenCount", "prompt_token_count", "candidatesTokenCount", "candidates_token_count", "thoughtsTokenCount",
    "thoughts_token_count", "totalTokenCount", "total_token_count", "cachedContentTokenCount", "cached_content_token_count",
)  # fmt: skip


def answer_problem(answer: Any, chunk: bool = False) -> str | None:
    """What makes a provider's whole answer (its JSON) no ``GenerateContentResponse``, or None: a
    ``candidates`` list of objects whose ``content`` (when there) holds a list of part objects, a
    text part's text a string, a call's name a string, a string
    ``finishReason``, and a ``usageMetadata`` of token counts. A blocked prompt answers no
    candidates but its ``promptFeedback``, which is an answer; ``chunk``: one chunk of a stream,
    which may carry no candidates (its usage alone)."""
    if not isinstance(answer, dict):
        return "not a JSON object"
    candidates = answer.get("candidates")
    if candidates is None and not chunk:
        return None if isinstance(answer.get("promptFeedback", answer.get("prompt_feedback")), dict) else "it has no candidates"
    if candidates is not None and not isinstance(candidates, list):
        return "its candidates are no list"
    for c, candidate in enumerate(candidates or ()):
        if problem := _candidate_problem(candidate, f"candidates.{c}"):
            return problem
    return usage_problem(answer.get("usageMetadata", answer.get("usage_metadata")), USAGE_COUNTS, "usageMetadata")


def chunk_problem(chunk: Any) -> str | None:
    """:func:`answer_problem` of one chunk of a stream."""
    return answer_problem(chunk, chunk=True)


def _candidate_problem(candidate: Any, where: str) -> str | None:
    if not isinstance(candidate, dict):
        return f"{where} is no object"
    reason = candidate.get("finishReason", candidate.get("finish_reason"))
    if reason is not None and not isinstance(reason, str):
        return f"{where}.finishReason is no string"
    content = candidate.get("content")
    if content is None:
        return None  # a candidate stopped by its finishReason (SAFETY, RECITATION) before any content
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(content, dict) or (parts is not None and not (isinstance(parts, list) and all(isinstance(p, dict) for p in parts))):
        return f"{where}.content is no object with a list of parts"
    for p, part in enumerate(parts or ()):
        if "text" in part and not isinstance(part["text"], str):
            return f"{where}.content.parts.{p}.text is no string"
        call = field(part, FUNCTION_CALL)  # what its args hold is the model's: the client's tool judges them
        if call is not None and not (isinstance(call, dict) and isinstance(call.get("name"), str)):
            return f"{where}.content.parts.{p}.functionCall is no call with a string name"
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
    chunk = json_object(data)
    candidates = chunk.get("candidates") if chunk is not None else None
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
