"""``pinch_retrieve`` in Ollama's native chat (:mod:`router.wire.retrieve`). Pure.

A call is a ``message.tool_calls`` entry, whole in one line of a stream (Ollama never fragments one).
A round continued is appended as the assistant message it made (its text and its calls) and one
``tool`` message per call. Streamed (NDJSON), a call is left out of its line (a line left with nothing
is dropped) and, when the round called only the tool, its last line (``done: true``) is held back;
the next round's lines follow — an Ollama stream has no opening line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from router.core.retrieve import TOOL_NAME, RetrieveCall
from router.wire.ollama.answers import OLLAMA_CHAT


def _message(answer: Any) -> dict[str, Any]:
    message = answer.get("message") if isinstance(answer, dict) else None
    return message if isinstance(message, dict) else {}


def _is_retrieve(call: Any) -> bool:
    function = call.get("function") if isinstance(call, dict) else None
    return isinstance(function, dict) and function.get("name") == TOOL_NAME


def _retrieve_call(call: dict[str, Any], index: int) -> RetrieveCall:
    call_id = call.get("id")
    return RetrieveCall(call_id if isinstance(call_id, str) and call_id else f"{TOOL_NAME}#{index}", call["function"].get("arguments") or {})


def _calls(message: dict[str, Any]) -> list[Any]:
    calls = message.get("tool_calls")
    return calls if isinstance(calls, list) else []


class OllamaRetrieve:
    wire = OLLAMA_CHAT
    echoes_tools = False

    def calls(self, answer: Any) -> tuple[list[RetrieveCall], bool]:
        calls = _calls(_message(answer))
        found = [_retrieve_call(call, i) for i, call in enumerate(calls) if _is_retrieve(call)]
        return found, len(found) < len(calls)

    def without_calls(self, answer: Any) -> Any:
        message = _message(answer)
        if not _calls(message):
            return answer
        return {**answer, "message": {**message, "tool_calls": [call for call in _calls(message) if not _is_retrieve(call)]}}

    def continued(self, payload: dict[str, Any], answer: Any, results: Sequence[tuple[RetrieveCall, str]]) -> dict[str, Any]:
        message = _message(answer)
        turn: dict[str, Any] = {"role": "assistant", "content": message.get("content") if isinstance(message.get("content"), str) else ""}
        turn["tool_calls"] = [{"function": {"name": TOOL_NAME, "arguments": _arguments(call.arguments)}} for call, _ in results]
        replies = [{"role": "tool", "content": text, "tool_name": TOOL_NAME} for _, text in results]
        return {**payload, "messages": [*payload.get("messages", ()), turn, *replies]}

    def stream(self) -> OllamaRetrieveStream:
        return OllamaRetrieveStream()


def _arguments(arguments: Any) -> Any:
    """Ollama takes arguments as an object only."""
    if isinstance(arguments, (str, bytes)):
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return {}
    return arguments if isinstance(arguments, dict) else {}


class OllamaRetrieveStream:
    """An Ollama stream's rounds (module doc)."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.next_round()

    def next_round(self) -> None:
        self.calls: list[RetrieveCall] = []
        self.others = False
        self.ended = False
        self._text: list[str] = []
        self._held: list[bytes] = []

    def feed(self, chunk: bytes) -> bytes:
        self.buffer += chunk
        end = self.buffer.rfind(b"\n")
        if end < 0:
            return b""
        lines, self.buffer = bytes(self.buffer[: end + 1]), self.buffer[end + 1 :]
        return b"".join(self._line(line + b"\n") for line in lines.split(b"\n")[:-1])

    def _line(self, raw: bytes) -> bytes:
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw
        if not isinstance(line, dict):
            return raw
        message = _message(line)
        if isinstance(message.get("content"), str):
            self._text.append(message["content"])
        calls = _calls(message)
        if line.get("done") is True:
            self.ended = True
            if self.calls and not self.others:
                self._held.append(raw)
                return b""
            return raw
        if not any(_is_retrieve(call) for call in calls):
            self.others = self.others or bool(calls)
            return raw
        for call in calls:
            if _is_retrieve(call):
                self.calls.append(_retrieve_call(call, len(self.calls)))
            else:
                self.others = True
        kept = [call for call in calls if not _is_retrieve(call)]
        rest = {key: value for key, value in message.items() if key != "tool_calls"}
        if not kept and not rest.get("content") and not rest.get("thinking"):
            return b""
        return orjson.dumps({**line, "message": {**rest, "tool_calls": kept} if kept else rest}) + b"\n"

    def answer(self) -> Any:
        return {"message": {"role": "assistant", "content": "".join(self._text)}}

    def release(self) -> bytes:
        held, self._held = b"".join(self._held), []
        return held


OLLAMA_RETRIEVE = OllamaRetrieve()
