"""What a translation is: one request's body turned into the provider's wire format, and the answer back. Pure.

A translator is made per request attempt (:func:`router.translate.registry.translator`) with the
:class:`AnswerIds` the answer it makes needs (the clock and randomness stay outside); ``request``
reads the body the client's wire adapter wrote, the chain's changes in it, and remembers what the
answer's translation must echo.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson

from router.core.frozen import frozen
from router.core.results import Candidate, Usage
from router.translate.chat_bytes import chat_body_bytes

EVENT_STREAM = "text/event-stream"


@frozen
class AnswerIds:
    """What a translated answer is given that only the outside world has: ``token``, random hex (at
    least 24 digits) that makes its ids unique (Claude Code merges answers that share a message id;
    a client answers calls by their ids), and ``created``, the epoch second it is made.
    ``input_tokens``: the request's prompt as the proxy counted it, the chain's changes in (pinch's
    ``final_tokens``), for an answer that states it before the provider's usage comes (Anthropic's
    ``message_start``); None: the translation counts it itself."""

    token: str
    created: int
    input_tokens: int | None = None


class Translator(Protocol):
    """Turns a request in the client's wire format into the provider's, and the provider's answer back.

    ``request``: the upstream body (the dict the client's wire adapter made,
    :meth:`~router.wire.WireAdapter.translation_source`, or its bytes) → the provider's body bytes;
    it never changes the dict. ``response_object``: a whole answer (its bytes, or its parsed JSON) →
    the client's answer as a JSON object, before it is written (the exchange reads its usage there,
    not from its bytes read back); ``response``: its bytes. Both raise :class:`MalformedAnswer` when
    it is none the provider's format allows. ``stream()``: a fresh :class:`StreamTranslator` for one streamed
    answer; ``streams(content_type)``: whether an answer of that type is a stream. ``dropped``: what
    ``request`` could not carry to the provider (``"tool web_search"``, …), reported to the client
    in ``x-router-dropped`` instead of failing the request.
    """

    dropped: tuple[str, ...]

    def request(self, body: bytes | dict[str, Any], candidate: Candidate) -> bytes: ...

    def response_object(self, body: bytes | Any) -> dict[str, Any]: ...

    def response(self, body: bytes | Any) -> bytes:
        return orjson.dumps(self.response_object(body))

    def streams(self, content_type: str) -> bool: ...

    def stream(self) -> StreamTranslator: ...


class ToChat(Translator, Protocol):
    """A translation to chat completions, the wire a chained translation goes through
    (:mod:`router.translate.chained`): ``chat_request`` is ``request``'s body before it is written
    (a translator subclasses this protocol to inherit ``request``)."""

    def chat_request(self, body: bytes | dict[str, Any], candidate: Candidate) -> dict[str, Any]: ...

    def request(self, body: bytes | dict[str, Any], candidate: Candidate) -> bytes:
        return chat_body_bytes(self.chat_request(body, candidate))


class StreamTranslator(Protocol):
    """One streamed answer: provider bytes in, whole client events out.

    ``feed`` returns the client's complete events so far (maybe b""), and raises
    :class:`StreamBroken` when the provider reports an error mid-stream; ``finish`` the events
    owed at the provider's end of stream (b"" when it ended cleanly already). ``usage``: the usage
    the provider reported.
    """

    usage: Usage | None

    def feed(self, chunk: bytes) -> bytes: ...

    def finish(self) -> bytes: ...


class StreamBroken(Exception):
    """The provider reported an error inside a stream it had started."""


class MalformedAnswer(StreamBroken):
    """The provider's answer, or an event of its stream, is none its wire format allows (a
    completion without choices, a message whose content is no list of blocks).

    ``response`` raises it for a whole answer: the exchange makes it the attempt's failure (the
    next candidate answers, else the client gets the error in its own format). A stream
    translator's ``feed`` raises it as the :class:`StreamBroken` it is: before the first byte the
    next candidate, after it the client's stream-error event.
    """


class Untranslatable(LookupError):
    """No translator from the client's wire format to the provider's."""
