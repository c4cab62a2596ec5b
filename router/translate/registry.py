"""The one registry of translations, keyed by (client wire, provider wire). Pure.

The same format in and out is a pass-through (no translator: the client's body with only the
chain's changes, the answer relayed event by event); a registered pair translates the request and
the answer, streams included; a pair with no translator is not servable by that provider (the
candidate fails over).

A format registers its pair with chat completions, one line of :data:`CHAT_PAIRS`: its translation
to chat (a client of the format, a chat provider) and from chat (a chat client, a provider of the
format), either when it has only one side (a provider-only format, a client-only one). Every other
pair is composed through chat (:func:`router.translate.chained.through_chat`), unless it has a
translation of its own in :data:`OWN_PAIRS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from router.translate.chained import through_chat
from router.translate.chat_to_gemini import ChatToGemini
from router.translate.chat_to_messages import ChatToMessagesTranslator
from router.translate.chat_to_ollama import OllamaChatTranslator
from router.translate.gemini_to_chat import GeminiToChat
from router.translate.messages_to_chat import MessagesToChatTranslator
from router.translate.ollama_to_chat import OllamaToChat
from router.translate.protocol import AnswerIds, ToChat, Translator, Untranslatable
from router.translate.responses_to_chat import ResponsesToChat
from router.wire.anthropic_messages.view import ANTHROPIC_MESSAGES
from router.wire.gemini.parts import GEMINI
from router.wire.ollama.answers import OLLAMA_CHAT
from router.wire.ollama.view import OLLAMA
from router.wire.openai_chat.view import OPENAI_CHAT
from router.wire.openai_responses.view import OPENAI_RESPONSES

# Each made with the answer's ids and whether the provider takes system messages anywhere
# (providers.<name>.system_messages; else a translation to chat sends one, leading: translate/chat_shape.py).
Make = Callable[[AnswerIds, bool], Translator]


@dataclass(frozen=True, slots=True)
class ChatPair:
    """A format's translations with chat completions: ``to_chat`` its requests to chat's (and chat's
    answers back), ``from_chat`` chat's requests to its own (and its answers back to chat's)."""

    to_chat: Callable[[AnswerIds, bool], ToChat] | None = None
    from_chat: Make | None = None


CHAT_PAIRS: dict[str, ChatPair] = {
    ANTHROPIC_MESSAGES: ChatPair(MessagesToChatTranslator, ChatToMessagesTranslator),
    OPENAI_RESPONSES: ChatPair(to_chat=ResponsesToChat),  # a Responses provider serves Responses clients only
    GEMINI: ChatPair(GeminiToChat, ChatToGemini),
    OLLAMA_CHAT: ChatPair(from_chat=OllamaChatTranslator),  # a provider's format only
    OLLAMA: ChatPair(to_chat=OllamaToChat),  # a client's format only (a native /api/chat provider is OLLAMA_CHAT)
}
# A pair with a translation of its own instead of the one through chat (none yet).
OWN_PAIRS: dict[tuple[str, str], Make] = {}


def translators() -> dict[tuple[str, str], Make]:
    """Every pair's translator: each format's with chat, its own, and through chat for the rest."""
    pairs: dict[tuple[str, str], Make] = dict(OWN_PAIRS)
    for wire, pair in CHAT_PAIRS.items():
        if pair.to_chat is not None:
            pairs[wire, OPENAI_CHAT] = pair.to_chat
        if pair.from_chat is not None:
            pairs[OPENAI_CHAT, wire] = pair.from_chat
    for client, into in CHAT_PAIRS.items():
        for provider, out in CHAT_PAIRS.items():
            if client != provider and into.to_chat is not None and out.from_chat is not None:
                pairs.setdefault((client, provider), through_chat(into.to_chat, out.from_chat))
    return pairs


TRANSLATORS = translators()


def translator(client_wire: str, provider_wire: str, ids: AnswerIds, *, system_anywhere: bool = False) -> Translator | None:
    """None for a pass-through (the same format); else the pair's translator (:class:`Untranslatable` if none)."""
    if client_wire == provider_wire:
        return None
    make = TRANSLATORS.get((client_wire, provider_wire))
    if make is None:
        raise Untranslatable(f"no translation from {client_wire} to {provider_wire}")
    return make(ids, system_anywhere)
