"""``pinch_retrieve`` in the Responses API (:mod:`router.wire.retrieve`). Pure.

A call is a ``function_call`` output item. A round continued is appended to the ``input`` as every
output item it made (reasoning included: it goes back with the call it led to) and one
``function_call_output`` per call. Streamed, every event of a call's item (by ``output_index``) is
held back, and, when the round called only the tool, its ``response.completed``; the next round's
``response.created`` and ``response.in_progress`` are dropped, its ``output_index`` follows the items
the client was sent, and its ``response.completed`` names the first round's response id and lists
every item the client was sent. Once an event is held back, the later ones' ``sequence_number`` is
renumbered so the client's stays gapless.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from router.core.retrieve import TOOL_NAME, RetrieveCall, RetrieveRounds
from router.wire.openai_responses.view import OPENAI_RESPONSES

_OPENING = frozenset({"response.created", "response.in_progress"})
_CLOSING = frozenset({"response.completed", "response.incomplete", "response.failed"})


def _is_retrieve(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "function_call" and item.get("name") == TOOL_NAME


def _is_call(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "function_call"


def _output(answer: Any) -> list[Any]:
    output = answer.get("output") if isinstance(answer, dict) else None
    return output if isinstance(output, list) else []


def _without_declaration(response: dict[str, Any]) -> dict[str, Any]:
    """A response object without the tool the proxy declared, in the ``tools`` it echoes of the request."""
    tools = response.get("tools")
    if not isinstance(tools, list) or not any(isinstance(t, dict) and t.get("name") == TOOL_NAME for t in tools):
        return response
    return {**response, "tools": [t for t in tools if not (isinstance(t, dict) and t.get("name") == TOOL_NAME)]}


def _retrieve_call(item: dict[str, Any]) -> RetrieveCall:
    return RetrieveCall(str(item.get("call_id") or item.get("id") or ""), item.get("arguments"))


class ResponsesRetrieve:
    wire = OPENAI_RESPONSES
    echoes_tools = True  # a response object repeats the request's tools: the proxy's is left out of it

    def calls(self, answer: Any) -> tuple[list[RetrieveCall], bool]:
        output = _output(answer)
        found = [_retrieve_call(item) for item in output if _is_retrieve(item)]
        return found, any(_is_call(item) and not _is_retrieve(item) for item in output)

    def without_calls(self, answer: Any) -> Any:
        if not isinstance(answer, dict):
            return answer
        output = answer.get("output")
        if isinstance(output, list) and not any(_is_retrieve(item) for item in output):  # its own output: the answer as it is
            return _without_declaration(answer)
        return _without_declaration({**answer, "output": [item for item in _output(answer) if not _is_retrieve(item)]})

    def continued(self, payload: dict[str, Any], answer: Any, results: Sequence[tuple[RetrieveCall, str]]) -> dict[str, Any]:
        given = payload.get("input")
        items = [{"role": "user", "content": given}] if isinstance(given, str) else list(given or ())
        replies = [{"type": "function_call_output", "call_id": call.call_id, "output": text} for call, text in results]
        return {**payload, "input": [*items, *_output(answer), *replies]}

    def stream(self) -> ResponsesRetrieveStream:
        return ResponsesRetrieveStream()


class ResponsesRetrieveStream(RetrieveRounds):
    """A Responses stream's rounds (module doc)."""

    def __init__(self) -> None:
        self.sent_items: list[Any] = []  # the items the client was sent whole, in the rounds before this one
        self.response_id: str | None = None  # the first round's
        self.next_number: int | None = None  # the sequence number the client's next event gets
        super().__init__()

    def _reset(self) -> None:
        self.calls: list[RetrieveCall] = []
        self.others = False
        self.ended = False
        self._retrieve: set[int] = set()
        self._items: dict[int, Any] = {}  # output_index → the item done
        self._held: list[tuple[bytes, dict[str, Any]]] = []

    def _carry_over(self) -> None:
        self.sent_items += [self._items[i] for i in sorted(self._items) if i not in self._retrieve]

    def _event(self, raw: bytes, event: dict[str, Any]) -> bytes:
        kind = event.get("type")
        if isinstance(event.get("response"), dict):  # the response object: without the proxy's tool in its echo
            response = _without_declaration(event["response"])
            if response is not event["response"]:
                event = {**event, "response": response}
                raw = self._renumbered(b"", event, force=True, count=False)
        if kind in _OPENING:
            if self.response_id is None and isinstance(event.get("response"), dict):
                self.response_id = event["response"].get("id")
            return b"" if self.continuing else self._renumbered(raw, event)
        if kind in _CLOSING:
            self.ended = True
            if self.calls and not self.others:
                self._held.append((raw, event))
                return b""
            if self.continuing and isinstance(event.get("response"), dict):
                response = event["response"]
                own = [item for item in _output(response) if not _is_retrieve(item)]
                event = {**event, "response": {**response, "id": self.response_id or response.get("id"), "output": [*self.sent_items, *own]}}
                return self._renumbered(raw, event, force=True)
            return self._renumbered(raw, event)
        index = event.get("output_index")
        if not isinstance(index, int):
            return self._renumbered(raw, event)
        item = event.get("item")
        if kind == "response.output_item.added" and _is_retrieve(item):
            self._retrieve.add(index)
        elif kind == "response.output_item.added" and _is_call(item):
            self.others = True
        if kind == "response.output_item.done" and isinstance(item, dict):
            self._items[index] = item
            if index in self._retrieve:
                self.calls.append(_retrieve_call(item))
        if index in self._retrieve:
            return b""
        shift = len(self.sent_items) - sum(1 for r in self._retrieve if r < index)
        return self._renumbered(raw, {**event, "output_index": index + shift} if shift else event, force=bool(shift))

    def _renumbered(self, raw: bytes, event: dict[str, Any], force: bool = False, count: bool = True) -> bytes:
        """The event as the client gets it: numbered on from the client's last one (events held back,
        a round's own numbers starting again), rewritten only when something in it changed."""
        number = event.get("sequence_number")
        if isinstance(number, int) and count:
            wanted = number if self.next_number is None else self.next_number
            self.next_number = wanted + 1
            if wanted != number:
                event, force = {**event, "sequence_number": wanted}, True
        if not force:
            return raw
        name = raw.split(b"\n", 1)[0] if raw.startswith(b"event:") else b"event: " + str(event.get("type")).encode()
        return name + b"\ndata: " + orjson.dumps(event) + b"\n\n"

    def answer(self) -> Any:
        return {"output": [self._items[i] for i in sorted(self._items)]}

    def release(self) -> bytes:
        held, self._held = self._held, []
        return b"".join(self._renumbered(raw, event) for raw, event in held)


RESPONSES_RETRIEVE = ResponsesRetrieve()
