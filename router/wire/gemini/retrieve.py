"""``pinch_retrieve`` in the Gemini API (:mod:`router.wire.retrieve`). Pure.

A call is a ``functionCall`` part of the candidate's content, whole in one chunk of a stream. A round
continued is appended as the model's content (every part of it: a thought signature must go back with
the call it was given with) and a user content of ``functionResponse`` parts. Streamed, a call's part
is left out of its chunk (a chunk left with nothing is dropped); when the round called only the tool,
its last chunk's ``finishReason`` and ``usageMetadata`` are left out too (the chunk goes when it has
parts left) and the next round's chunks follow — a Gemini stream has no opening event.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from router.core.retrieve import TOOL_NAME, RetrieveCall, RetrieveRounds
from router.wire.gemini.parts import GEMINI

_END_KEYS = ("finishReason", "finish_reason")
_USAGE_KEYS = ("usageMetadata", "usage_metadata")


def _call_of(part: Any) -> dict[str, Any] | None:
    if not isinstance(part, dict):
        return None
    call = part.get("functionCall", part.get("function_call"))
    return call if isinstance(call, dict) else None


def _is_retrieve(part: Any) -> bool:
    call = _call_of(part)
    return call is not None and call.get("name") == TOOL_NAME


def _parts(answer: Any) -> list[Any]:
    candidates = answer.get("candidates") if isinstance(answer, dict) else None
    first = candidates[0] if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict) else {}
    content = first.get("content") if isinstance(first.get("content"), dict) else {}
    parts = content.get("parts")
    return parts if isinstance(parts, list) else []


def _retrieve_call(part: dict[str, Any], index: int) -> RetrieveCall:
    call = _call_of(part) or {}
    call_id = call.get("id")
    return RetrieveCall(call_id if isinstance(call_id, str) and call_id else f"{TOOL_NAME}#{index}", call.get("args") or {})


def _without_retrieve(chunk: dict[str, Any]) -> dict[str, Any]:
    """A chunk (or a whole answer) without its retrieve parts."""
    candidates = chunk.get("candidates")
    if not isinstance(candidates, list) or not candidates or not isinstance(candidates[0], dict):
        return chunk
    first = candidates[0]
    content = first.get("content") if isinstance(first.get("content"), dict) else {}
    kept = [part for part in _parts(chunk) if not _is_retrieve(part)]
    return {**chunk, "candidates": [{**first, "content": {**content, "parts": kept}}, *candidates[1:]]}


class GeminiRetrieve:
    wire = GEMINI
    echoes_tools = False

    def calls(self, answer: Any) -> tuple[list[RetrieveCall], bool]:
        parts = _parts(answer)
        found = [_retrieve_call(part, i) for i, part in enumerate(parts) if _is_retrieve(part)]
        others = any(_call_of(part) is not None and not _is_retrieve(part) for part in parts)
        return found, others

    def without_calls(self, answer: Any) -> Any:
        return _without_retrieve(answer) if isinstance(answer, dict) else answer

    def continued(self, payload: dict[str, Any], answer: Any, results: Sequence[tuple[RetrieveCall, str]]) -> dict[str, Any]:
        turn = {"role": "model", "parts": _parts(answer)}
        replies = []
        for call, text in results:
            response: dict[str, Any] = {"name": TOOL_NAME, "response": {"output": text}}
            if not call.call_id.startswith(f"{TOOL_NAME}#"):
                response["id"] = call.call_id
            replies.append({"functionResponse": response})
        return {**payload, "contents": [*payload.get("contents", ()), turn, {"role": "user", "parts": replies}]}

    def stream(self) -> GeminiRetrieveStream:
        return GeminiRetrieveStream()


class GeminiRetrieveStream(RetrieveRounds):
    """A Gemini stream's rounds (module doc)."""

    def _reset(self) -> None:
        self.calls: list[RetrieveCall] = []
        self.others = False
        self.ended = False
        self._parts: list[Any] = []  # the round's parts, as they came (for the model's turn)

    def _event(self, raw: bytes, chunk: dict[str, Any]) -> bytes:
        parts = _parts(chunk)
        self._parts += parts
        for part in parts:
            if _is_retrieve(part):
                self.calls.append(_retrieve_call(part, len(self.calls)))
            elif _call_of(part) is not None:
                self.others = True
        candidates = chunk.get("candidates")
        first = candidates[0] if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict) else {}
        ends = any(first.get(key) for key in _END_KEYS)
        self.ended = self.ended or ends
        continued = bool(self.calls) and not self.others
        if not any(_is_retrieve(part) for part in parts) and not (ends and continued):
            return raw
        kept = _without_retrieve(chunk)
        if ends and continued:  # the round goes on: its end is the next round's
            first = {k: v for k, v in kept["candidates"][0].items() if k not in _END_KEYS}
            kept = {k: v for k, v in {**kept, "candidates": [first, *kept["candidates"][1:]]}.items() if k not in _USAGE_KEYS}
        if not _parts(kept) and not any(kept["candidates"][0].get(key) for key in _END_KEYS):
            return b""
        return b"data: " + orjson.dumps(kept) + b"\n\n"

    def answer(self) -> Any:
        return {"candidates": [{"content": {"role": "model", "parts": self._parts}}]}

    def release(self) -> bytes:
        """A finishing chunk for the round that is not continued (its own end was left out)."""
        return b'data: {"candidates":[{"content":{"role":"model","parts":[]},"finishReason":"STOP"}]}\n\n'


GEMINI_RETRIEVE = GeminiRetrieve()
