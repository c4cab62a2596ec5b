"""Two translations one after the other, for the pairs that go through chat completions. Pure."""

from __future__ import annotations

from typing import Any

from router.core.results import Candidate, Usage
from router.translate.chat_to_gemini import ChatToGemini
from router.translate.chat_to_messages import ChatToMessagesTranslator
from router.translate.chat_to_ollama import OllamaChatTranslator
from router.translate.gemini_to_chat import GeminiToChat
from router.translate.messages_to_chat import MessagesToChatTranslator
from router.translate.protocol import AnswerIds, StreamTranslator, ToChat, Translator
from router.translate.responses_to_chat import ResponsesToChat


class ChainedTranslator:
    """Two translations one after the other: the client's wire → an intermediate wire → the provider's.

    An Anthropic client to Ollama's native chat goes Anthropic → OpenAI chat → Ollama, and its
    answer back the same way, so no third translation is written for the pair; a Responses
    client to an Anthropic or Ollama-native provider goes through chat the same way, and so does
    every pair with Gemini but chat's own.
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

    def response(self, body: bytes | Any) -> bytes:
        return self.first.response(self.second.response(body))

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


def messages_to_ollama_native(ids: AnswerIds, system_anywhere: bool = False) -> ChainedTranslator:
    return ChainedTranslator(MessagesToChatTranslator(ids, system_anywhere), OllamaChatTranslator(ids))


def responses_to_messages(ids: AnswerIds, system_anywhere: bool = False) -> ChainedTranslator:
    return ChainedTranslator(ResponsesToChat(ids, system_anywhere), ChatToMessagesTranslator(ids))


def responses_to_ollama_native(ids: AnswerIds, system_anywhere: bool = False) -> ChainedTranslator:
    return ChainedTranslator(ResponsesToChat(ids, system_anywhere), OllamaChatTranslator(ids))


def gemini_to_messages(ids: AnswerIds, system_anywhere: bool = False) -> ChainedTranslator:
    return ChainedTranslator(GeminiToChat(ids, system_anywhere), ChatToMessagesTranslator(ids))


def gemini_to_ollama_native(ids: AnswerIds, system_anywhere: bool = False) -> ChainedTranslator:
    return ChainedTranslator(GeminiToChat(ids, system_anywhere), OllamaChatTranslator(ids))


def messages_to_gemini(ids: AnswerIds, system_anywhere: bool = False) -> ChainedTranslator:
    return ChainedTranslator(MessagesToChatTranslator(ids, system_anywhere), ChatToGemini(ids))


def responses_to_gemini(ids: AnswerIds, system_anywhere: bool = False) -> ChainedTranslator:
    return ChainedTranslator(ResponsesToChat(ids, system_anywhere), ChatToGemini(ids))
