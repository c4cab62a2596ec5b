"""Two translations one after the other, for the pairs that go through chat completions. Pure.

The registry (:mod:`router.translate.registry`) composes one for every pair of formats that each
translate to and from chat and have no translation of their own: a format writes only its pair
with chat."""

from __future__ import annotations

from typing import Any

from collections.abc import Callable

from router.core.results import Candidate, Usage
from router.translate.protocol import AnswerIds, StreamTranslator, ToChat, Translator


class ChainedTranslator(Translator):
    """Two translations one after the other: the client's wire → an intermediate wire → the provider's.

    An Anthropic client to Ollama's native chat goes Anthropic → OpenAI chat → Ollama, and its
    answer back the same way, so no third translation is written for the pair; so does every
    pair of formats but those with chat itself (:func:`through_chat`).
    """

    def __init__(self, first: ToChat, second: Translator) -> None:
        self.first, self.second = first, second

    @property
    def dropped(self) -> tuple[str, ...]:
        """What either translation left out."""
        return (*self.first.dropped, *self.second.dropped)

    def request(self, body: bytes | dict[str, Any], candidate: Candidate) -> bytes:
        """The second translation reads the first's chat body as a dict: never written and read back."""
        return self.second.request(self.first.chat_request(body, candidate), candidate)

    def response_object(self, body: bytes | Any) -> dict[str, Any]:
        """The second translation's chat answer goes to the first as the object it made: never written and read back."""
        return self.first.response_object(self.second.response_object(body))

    def streams(self, content_type: str) -> bool:
        return self.second.streams(content_type)

    def stream(self) -> ChainedStream:
        return ChainedStream(self.first.stream(), self.second.stream())


class ChainedStream:
    def __init__(self, outer: StreamTranslator, inner: StreamTranslator) -> None:
        self.outer, self.inner = outer, inner  # inner: provider bytes → intermediate; outer: → client

    @property
    def usage(self) -> Usage | None:
        """The provider's own figures, from the inner translator."""
        return self.inner.usage or self.outer.usage

    def feed(self, chunk: bytes) -> bytes:
        middle = self.inner.feed(chunk)
        return self.outer.feed(middle) if middle else b""

    def finish(self) -> bytes:
        middle = self.inner.finish()
        return (self.outer.feed(middle) if middle else b"") + self.outer.finish()



def through_chat(
    to_chat: Callable[[AnswerIds, bool], ToChat], from_chat: Callable[[AnswerIds, bool], Translator]
) -> Callable[[AnswerIds, bool], ChainedTranslator]:
    """The translation of a pair through chat, made per request as a pair's own is: the client's format
    → chat (``to_chat``, told whether the provider takes system messages anywhere), then chat → the
    provider's (``from_chat``, which gets a chat client's messages in their places)."""

    def make(ids: AnswerIds, system_anywhere: bool = False) -> ChainedTranslator:
        return ChainedTranslator(to_chat(ids, system_anywhere), from_chat(ids, False))

    return make
