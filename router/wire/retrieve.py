"""``pinch_retrieve`` in a provider's wire format: the tool declared, its calls found, answered and
hidden. Pure (sans-io); the loop that calls the provider again is :mod:`router.clients.retrieve`.

A format that a provider speaks registers a :class:`RetrieveFormat` in :func:`retrieve_format`; one
without (yet) never gets the tool offered (:mod:`router.core.retrieve` says why it is safe to leave
out: a cut result then keeps its marker, and nothing else changes).

A **round** is one call to the provider. A round whose only tool calls are ``pinch_retrieve`` calls
is continued: the proxy sends the same request again with the round's answer and its own tool
results appended (:meth:`RetrieveFormat.continued`), and the client sees one answer. A round that
calls the client's tools too is not: its retrieve calls are left out of what the client gets (the
client could not answer them), the rest goes as it came.

A streamed round goes through a :class:`RetrieveStream` before anything else reads it (the relay's
translation, the client): the events of a retrieve call are held back as they come; at the round's
end, when it called only the tool, so are its closing events (the stream goes on with the next
round, whose opening events are dropped and whose block indices follow the ones already sent).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from router.core.retrieve import RetrieveCall, ToolOffer
from router.wire.anthropic_messages.retrieve import MESSAGES_RETRIEVE
from router.wire.gemini.retrieve import GEMINI_RETRIEVE
from router.wire.ollama.retrieve import OLLAMA_RETRIEVE
from router.wire.openai_chat.retrieve import CHAT_RETRIEVE
from router.wire.openai_responses.retrieve import RESPONSES_RETRIEVE


class RetrieveStream(Protocol):
    """One streamed answer, round after round (module doc)."""

    calls: list[RetrieveCall]  # this round's retrieve calls, in order
    others: bool  # this round called another tool too: it is not continued
    ended: bool  # this round's last event came (and, when it is continued, was held back)

    def feed(self, chunk: bytes) -> bytes:
        """The provider's next bytes → what goes on (whole events; retrieve calls and, when the round is
        continued, its closing events held back)."""
        ...

    def answer(self) -> Any:
        """This round's answer as a whole (non-streamed) answer of the format: what :meth:`RetrieveFormat.continued` appends."""
        ...

    def next_round(self) -> None:
        """The next round's events follow: its opening events are dropped, its indices follow the ones sent."""
        ...

    def release(self) -> bytes:
        """The closing events held back, when the round is not continued after all (the rounds ran out)."""
        ...


class RetrieveFormat(Protocol):
    """``pinch_retrieve`` in one provider wire format. ``echoes_tools``: its answers repeat the request's
    tools (the Responses API's response object), so every answer goes through :meth:`without_calls`,
    which leaves the proxy's declaration out of them (and gives the answer itself, the very object,
    when nothing in it is the proxy's: it then goes to the client as the provider wrote it)."""

    wire: str
    echoes_tools: bool

    def calls(self, answer: Any) -> tuple[list[RetrieveCall], bool]:
        """A whole answer's retrieve calls, and whether it calls another tool too."""
        ...

    def without_calls(self, answer: Any) -> Any:
        """``answer`` without its retrieve calls (for a round that also called the client's tools); ``answer``
        itself when it has none to leave out (and, for a format that echoes the tools, no declaration)."""
        ...

    def continued(self, payload: dict[str, Any], answer: Any, results: Sequence[tuple[RetrieveCall, str]]) -> dict[str, Any]:
        """The request ``payload`` (the provider's body) with ``answer``'s turn and the calls' results appended."""
        ...

    def stream(self) -> RetrieveStream:
        """A fresh :class:`RetrieveStream` for one streamed answer."""
        ...


class ToolDeclaring(Protocol):
    """How a client format declares a function tool in a request body (the proxy's tool goes last)."""

    def with_tool(self, payload: dict[str, Any], tool: ToolOffer) -> dict[str, Any]: ...


def retrieve_format(wire: str) -> RetrieveFormat | None:
    """The provider format's :class:`RetrieveFormat`, or None: the tool is never offered to it."""
    return _FORMATS.get(wire)


_FORMATS: dict[str, RetrieveFormat] = {f.wire: f for f in (CHAT_RETRIEVE, MESSAGES_RETRIEVE, RESPONSES_RETRIEVE, GEMINI_RETRIEVE, OLLAMA_RETRIEVE)}
