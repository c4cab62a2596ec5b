"""``pinch_retrieve`` in the Messages API (:mod:`router.wire.retrieve`). Pure.

A call is a ``tool_use`` content block. A round continued is appended as the assistant message it
made (every block of it: signed thinking must go back with the call it led to) and one user message
of ``tool_result`` blocks. Streamed, a call's ``content_block_start``/``delta``/``stop`` are held
back, and, when the round is continued, its ``message_delta`` and ``message_stop``; the next
round's ``message_start`` is dropped and its block indices follow the ones the client was sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from router.core.retrieve import TOOL_NAME, RetrieveCall, RetrieveRounds, ToolOffer

WIRE = "anthropic-messages"
_CLOSING = frozenset({"message_delta", "message_stop"})


def with_tool(payload: dict[str, Any], tool: ToolOffer) -> dict[str, Any]:
    """``payload`` with ``tool`` declared after the client's tools."""
    declared = {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
    tools = payload.get("tools")
    return {**payload, "tools": [*(tools if isinstance(tools, list) else ()), declared]}


def _is_retrieve(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") == TOOL_NAME


def _blocks(answer: Any) -> list[Any]:
    content = answer.get("content") if isinstance(answer, dict) else None
    return content if isinstance(content, list) else []


class MessagesRetrieve:
    wire = WIRE
    echoes_tools = False

    def calls(self, answer: Any) -> tuple[list[RetrieveCall], bool]:
        blocks = _blocks(answer)
        found = [RetrieveCall(str(block.get("id") or ""), block.get("input")) for block in blocks if _is_retrieve(block)]
        others = any(isinstance(block, dict) and block.get("type") == "tool_use" and not _is_retrieve(block) for block in blocks)
        return found, others

    def without_calls(self, answer: Any) -> Any:
        return {**answer, "content": [block for block in _blocks(answer) if not _is_retrieve(block)]}

    def continued(self, payload: dict[str, Any], answer: Any, results: Sequence[tuple[RetrieveCall, str]]) -> dict[str, Any]:
        turn = {"role": "assistant", "content": _blocks(answer)}
        replies = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.call_id, "content": text} for call, text in results]}
        return {**payload, "messages": [*payload.get("messages", ()), turn, replies]}

    def stream(self) -> MessagesRetrieveStream:
        return MessagesRetrieveStream()


class MessagesRetrieveStream(RetrieveRounds):
    """A Messages stream's rounds (module doc)."""

    def __init__(self) -> None:
        self.sent_blocks = 0  # block indices the client was sent, in the rounds before this one
        super().__init__()

    def _reset(self) -> None:
        self.calls: list[RetrieveCall] = []
        self.others = False
        self.ended = False
        self._blocks: dict[int, dict[str, Any]] = {}  # index → the block as it grows
        self._json: dict[int, list[str]] = {}  # a tool_use block's input, as its deltas come
        self._retrieve: set[int] = set()
        self._held: list[bytes] = []
        self._top = -1  # the highest index of this round

    def _carry_over(self) -> None:
        self.sent_blocks += self._top + 1 - len(self._retrieve)

    def _event(self, raw: bytes, event: dict[str, Any]) -> bytes:
        kind = event.get("type")
        if kind == "message_start":
            return b"" if self.continuing else raw
        if kind in _CLOSING:
            if kind == "message_stop":
                self.ended = True
            if self._retrieve and not self.others:
                self._held.append(raw)
                return b""
            return raw
        index = event.get("index")
        if not isinstance(index, int):
            return raw
        self._top = max(self._top, index)
        if kind == "content_block_start":
            block = event.get("content_block")
            self._blocks[index] = dict(block) if isinstance(block, dict) else {}
            if _is_retrieve(block):
                self._retrieve.add(index)
            elif isinstance(block, dict) and block.get("type") == "tool_use":
                self.others = True
        elif kind == "content_block_delta":
            self._grow(index, event.get("delta"))
        elif kind == "content_block_stop" and index in self._retrieve:
            self._finish_call(index)
        if index in self._retrieve:
            return b""
        shift = self.sent_blocks - sum(1 for r in self._retrieve if r < index)
        if shift == 0:
            return raw
        name = raw.split(b"\n", 1)[0] if raw.startswith(b"event:") else b"event: " + kind.encode()  # type: ignore[union-attr]
        return name + b"\ndata: " + orjson.dumps({**event, "index": index + shift}) + b"\n\n"

    def _grow(self, index: int, delta: Any) -> None:
        block = self._blocks.get(index)
        if block is None or not isinstance(delta, dict):
            return
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + str(delta.get("text", ""))
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
        elif kind == "signature_delta":
            block["signature"] = str(delta.get("signature", ""))
        elif kind == "input_json_delta":
            self._json.setdefault(index, []).append(str(delta.get("partial_json", "")))

    def _finish_call(self, index: int) -> None:
        text = "".join(self._json.get(index, ()))
        block = self._blocks[index]
        self.calls.append(RetrieveCall(str(block.get("id") or f"toolu_{index}"), text or block.get("input") or {}))

    def answer(self) -> Any:
        content = []
        for index in sorted(self._blocks):
            block = dict(self._blocks[index])
            if block.get("type") == "tool_use":
                text = "".join(self._json.get(index, ()))
                try:
                    block["input"] = orjson.loads(text) if text else block.get("input") or {}
                except orjson.JSONDecodeError:
                    block["input"] = {}
            content.append(block)
        return {"role": "assistant", "content": content}

    def release(self) -> bytes:
        held, self._held = b"".join(self._held), []
        return held


MESSAGES_RETRIEVE = MessagesRetrieve()
