"""``pinch_retrieve`` in chat completions (:mod:`router.wire.retrieve`). Pure.

A call is a ``tool_calls`` entry of the choice's message; streamed, its deltas share an ``index``
(only the first names the function). A round continued is appended as the assistant message it
made (its text and its calls) and one ``tool`` message per call. Streamed, its ``finish_reason``
chunk, its usage-only chunk and ``[DONE]`` are held back; the next round's chunks follow as
they come (a chat stream has no opening event to drop, and its tool call indices are the
client's own: a continued round called no other tool).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from router.core.retrieve import TOOL_NAME, RetrieveCall, ToolOffer
from router.core.sse import SseEvents

WIRE = "openai-chat"


def with_tool(payload: dict[str, Any], tool: ToolOffer) -> dict[str, Any]:
    """``payload`` with ``tool`` declared after the client's tools (chat's form, also Ollama's)."""
    declared = {"type": "function", "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters}}
    tools = payload.get("tools")
    return {**payload, "tools": [*(tools if isinstance(tools, list) else ()), declared]}


def _message(answer: Any) -> dict[str, Any] | None:
    choices = answer.get("choices") if isinstance(answer, dict) else None
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    message = first.get("message") if first is not None else None
    return message if isinstance(message, dict) else None


def _is_retrieve(call: Any) -> bool:
    function = call.get("function") if isinstance(call, dict) else None
    return isinstance(function, dict) and function.get("name") == TOOL_NAME


class ChatRetrieve:
    wire = WIRE
    echoes_tools = False

    def calls(self, answer: Any) -> tuple[list[RetrieveCall], bool]:
        message = _message(answer)
        tool_calls = message.get("tool_calls") if message is not None else None
        if not isinstance(tool_calls, list):
            return [], False
        found = [RetrieveCall(str(call.get("id") or ""), call["function"].get("arguments")) for call in tool_calls if _is_retrieve(call)]
        return found, len(found) < len(tool_calls)

    def without_calls(self, answer: Any) -> Any:
        message = _message(answer)
        if message is None or not isinstance(message.get("tool_calls"), list):
            return answer
        kept = [call for call in message["tool_calls"] if not _is_retrieve(call)]
        first = {**answer["choices"][0], "message": {**message, "tool_calls": kept}}
        return {**answer, "choices": [first, *answer["choices"][1:]]}

    def continued(self, payload: dict[str, Any], answer: Any, results: Sequence[tuple[RetrieveCall, str]]) -> dict[str, Any]:
        message = _message(answer) or {}
        turn: dict[str, Any] = {"role": "assistant", "content": message.get("content") or None}
        turn["tool_calls"] = [
            {"id": call.call_id, "type": "function", "function": {"name": TOOL_NAME, "arguments": _arguments_text(call.arguments)}}
            for call, _ in results
        ]
        replies = [{"role": "tool", "tool_call_id": call.call_id, "content": text} for call, text in results]
        return {**payload, "messages": [*payload.get("messages", ()), turn, *replies]}

    def stream(self) -> ChatRetrieveStream:
        return ChatRetrieveStream()


def _arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()


class ChatRetrieveStream:
    """A chat stream's rounds (module doc)."""

    def __init__(self) -> None:
        self.events = SseEvents()
        self.next_round()

    def next_round(self) -> None:
        self.calls: list[Any] = []
        self.others = False
        self.ended = False
        self._retrieve: dict[int, dict[str, str]] = {}  # index → {"id", "arguments"}
        self._text_events: list[bytes] = []  # the data of the round's events that carry text
        self._held: list[bytes] = []

    def feed(self, chunk: bytes) -> bytes:
        out: list[bytes] = []
        for raw, data in self.events.feed(chunk):
            kept = self._event(raw, data)
            if kept:
                out.append(kept)
        return b"".join(out)

    def _event(self, raw: bytes, data: bytes) -> bytes:
        if data == b"[DONE]":
            self.ended = True
            return self._hold(raw)
        if b'"tool_calls"' not in data and not self._retrieve:
            if b'"content"' in data:
                self._text_events.append(data)  # read only if the round is continued
            return raw
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            return raw
        choices = event.get("choices") if isinstance(event, dict) else None
        if not isinstance(choices, list) or not choices:
            return self._hold(raw) if self._retrieve and not self.others else raw  # the usage-only chunk
        choice = choices[0] if isinstance(choices[0], dict) else {}
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        if isinstance(delta.get("content"), str):
            self._text_events.append(data)
        tool_calls = delta.get("tool_calls")
        if isinstance(tool_calls, list) and tool_calls:
            kept_calls = [call for call in tool_calls if not self._is_retrieve_delta(call)]
            if len(kept_calls) < len(tool_calls):
                if not kept_calls and not delta.get("content") and not choice.get("finish_reason"):
                    return b""
                choice = {**choice, "delta": {**delta, "tool_calls": kept_calls} if kept_calls else {k: v for k, v in delta.items() if k != "tool_calls"}}
                event = {**event, "choices": [choice, *choices[1:]]}
                raw = b"data: " + orjson.dumps(event) + b"\n\n"
        if choice.get("finish_reason") and self._retrieve and not self.others:
            return self._hold(raw)
        return raw

    def _is_retrieve_delta(self, call: Any) -> bool:
        if not isinstance(call, dict):
            return False
        index = call.get("index")
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        if function.get("name") == TOOL_NAME and isinstance(index, int):
            self._retrieve[index] = {"id": str(call.get("id") or f"call_{index}"), "arguments": ""}
        elif index not in self._retrieve:
            if function.get("name") or call.get("id"):
                self.others = True
            return False
        entry = self._retrieve[index]
        if isinstance(function.get("arguments"), str):
            entry["arguments"] += function["arguments"]
        self.calls = [RetrieveCall(e["id"], e["arguments"]) for e in self._retrieve.values()]
        return True

    def _hold(self, raw: bytes) -> bytes:
        if self._retrieve and not self.others:
            self._held.append(raw)
            return b""
        return raw

    def release(self) -> bytes:
        held, self._held = b"".join(self._held), []
        return held

    def answer(self) -> Any:
        message = {"role": "assistant", "content": "".join(map(_text_of, self._text_events)) or None}
        return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}


def _text_of(data: bytes) -> str:
    try:
        content = orjson.loads(data)["choices"][0]["delta"].get("content")
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError):
        return ""
    return content if isinstance(content, str) else ""


CHAT_RETRIEVE = ChatRetrieve()
