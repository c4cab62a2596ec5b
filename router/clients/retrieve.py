"""The proxy answering ``pinch_retrieve`` itself: a round that called only the tool is continued
upstream with the originals, and the client sees one answer (:mod:`router.core.retrieve` says what
the tool is and where the originals are; :mod:`router.wire.retrieve` what a call looks like in each
provider format).

A whole answer (:meth:`RetrieveLoop.whole`): its calls answered, the request sent again with the
round appended, until an answer calls no retrieve, or after :data:`MAX_ROUNDS` continued rounds
(then its retrieve calls are left out). A round that also called the client's tools goes to the
client without its retrieve calls. A stream (:meth:`RetrieveLoop.next_stream`): the relay asks for
the next round's response when a round ended having called only the tool; what the client was sent
stays, and the next round's events follow in the same stream. A continued round that fails before
its first byte is that attempt failing (a whole answer: the next candidate is tried); in a stream,
it ends the stream with the client's error event, as any broken stream.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson

from router.contract.context import RequestContext
from router.core.pinch_first_sight import text_of
from router.core.request_view import tool_results_of
from router.core.retrieve import RetrieveCall, answer_call
from router.core.tokens import CHARS_PER_TOKEN
from router.wire.retrieve import RetrieveFormat, RetrieveStream
from router.core.results import UPSTREAM

MAX_ROUNDS = 3  # continued rounds per request: a model that keeps calling gets its answer without them after

Reopen = Callable[[bytes], Awaitable[aiohttp.ClientResponse]]
ReadWhole = Callable[[aiohttp.ClientResponse], Awaitable[tuple[bytes, Any]]]


class RetrieveLoop:
    """The retrieve rounds of one attempt (module doc). ``payload``: the body the provider was sent."""

    def __init__(self, ctx: RequestContext, fmt: RetrieveFormat, payload: bytes) -> None:
        self.ctx, self.fmt = ctx, fmt
        self._payload: bytes | dict[str, Any] = payload
        self.rounds = 0
        self._originals: dict[str, str] | None = None
        self.stream: RetrieveStream | None = None

    def original(self, wanted: str) -> str | None:
        """The original text of the tool result ``wanted`` (its call id) as the client sent it in this request."""
        if self._originals is None:
            self._originals = {}
            for result in tool_results_of(self.ctx.view.conversation):
                found = text_of(result.content)
                content = result.content
                self._originals[result.id] = found[0] if found is not None else content if isinstance(content, str) else orjson.dumps(content, default=str).decode()
        return self._originals.get(wanted)

    def _continued(self, answer: Any, calls: list[RetrieveCall]) -> bytes:
        """The next round's body: the payload so far with ``answer``'s turn and the calls' results appended."""
        results = [(call, answer_call(call.arguments, self.original)[0]) for call in calls]
        payload = self._payload if isinstance(self._payload, dict) else orjson.loads(self._payload)
        self._payload = self.fmt.continued(payload, answer, results)
        self.rounds += 1
        upstream = self.ctx[UPSTREAM]
        if upstream is not None:
            upstream.retrieve_calls += len(calls)
            upstream.retrieve_tokens += sum(-(-len(text) // CHARS_PER_TOKEN) for _, text in results)
        return orjson.dumps(self._payload)

    async def whole(self, body: bytes, answer: Any, reopen: Reopen, read: ReadWhole) -> tuple[bytes, Any]:
        """A whole answer, its retrieve rounds continued (module doc): the answer the client gets, and its JSON."""
        while True:
            calls, others = self.fmt.calls(answer)
            if not calls and not self.fmt.echoes_tools:
                return body, answer
            if not calls:  # an answer that repeats the request's tools: without the proxy's, written again only when they held it
                left = self.fmt.without_calls(answer)
                return (body, answer) if left is answer else (orjson.dumps(left), left)
            if others or self.rounds >= MAX_ROUNDS:
                answer = self.fmt.without_calls(answer)
                return orjson.dumps(answer), answer
            response = await reopen(self._continued(answer, calls))
            try:
                body, answer = await read(response)
            finally:
                response.release()

    def stream_filter(self) -> RetrieveStream:
        """The stream's filter, which the relay feeds the provider's bytes through first."""
        self.stream = self.fmt.stream()
        return self.stream

    def round_over(self) -> bool:
        """The streamed round ended having called only the tool: the next round is due."""
        stream = self.stream
        return stream is not None and stream.ended and bool(stream.calls) and not stream.others

    async def next_stream(self, reopen: Reopen) -> aiohttp.ClientResponse | None:
        """The next round's response, for the relay to read on; None when the rounds ran out (the
        round's held closing events then go to the client: :meth:`RetrieveStream.release`)."""
        stream = self.stream
        assert stream is not None
        if self.rounds >= MAX_ROUNDS:
            return None
        body = self._continued(stream.answer(), list(stream.calls))
        stream.next_round()
        return await reopen(body)
