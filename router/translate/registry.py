"""The one registry of translations, keyed by (client wire, provider wire). Pure.

The same format in and out is a pass-through (no translator: the client's body with only the
chain's changes, the answer relayed event by event); a registered pair translates the request and
the answer, streams included; a pair with no translator is not servable by that provider (the
candidate fails over). A new wire format registers its pairs here.
"""

from __future__ import annotations

from collections.abc import Callable

from router.translate.chained import (
    gemini_to_messages,
    gemini_to_ollama_native,
    messages_to_gemini,
    messages_to_ollama_native,
    responses_to_gemini,
    responses_to_messages,
    responses_to_ollama_native,
)
from router.translate.chat_to_gemini import ChatToGemini
from router.translate.chat_to_messages import ChatToMessagesTranslator
from router.translate.chat_to_ollama import OLLAMA_CHAT, OllamaChatTranslator
from router.translate.gemini_to_chat import GeminiToChat
from router.translate.messages_to_chat import MessagesToChatTranslator
from router.translate.protocol import AnswerIds, Translator, Untranslatable
from router.translate.responses_to_chat import ResponsesToChat
from router.wire.anthropic_messages.view import ANTHROPIC_MESSAGES
from router.wire.gemini.parts import GEMINI
from router.wire.openai_chat.view import OPENAI_CHAT
from router.wire.openai_responses.view import OPENAI_RESPONSES

# Each made with the answer's ids and whether the provider takes system messages anywhere
# (providers.<name>.system_messages; else a translation to chat sends one, leading: translate/chat_shape.py).
TRANSLATORS: dict[tuple[str, str], Callable[[AnswerIds, bool], Translator]] = {
    (OPENAI_CHAT, OLLAMA_CHAT): OllamaChatTranslator,
    (ANTHROPIC_MESSAGES, OPENAI_CHAT): MessagesToChatTranslator,
    (OPENAI_CHAT, ANTHROPIC_MESSAGES): ChatToMessagesTranslator,
    (ANTHROPIC_MESSAGES, OLLAMA_CHAT): messages_to_ollama_native,  # through chat
    (OPENAI_RESPONSES, OPENAI_CHAT): ResponsesToChat,
    (OPENAI_RESPONSES, ANTHROPIC_MESSAGES): responses_to_messages,  # through chat
    (OPENAI_RESPONSES, OLLAMA_CHAT): responses_to_ollama_native,  # through chat
    (GEMINI, OPENAI_CHAT): GeminiToChat,
    (OPENAI_CHAT, GEMINI): ChatToGemini,
    (GEMINI, ANTHROPIC_MESSAGES): gemini_to_messages,  # through chat
    (GEMINI, OLLAMA_CHAT): gemini_to_ollama_native,  # through chat
    (ANTHROPIC_MESSAGES, GEMINI): messages_to_gemini,  # through chat
    (OPENAI_RESPONSES, GEMINI): responses_to_gemini,  # through chat
}


def translator(client_wire: str, provider_wire: str, ids: AnswerIds, *, system_anywhere: bool = False) -> Translator | None:
    """None for a pass-through (the same format); else the pair's translator (:class:`Untranslatable` if none)."""
    if client_wire == provider_wire:
        return None
    make = TRANSLATORS.get((client_wire, provider_wire))
    if make is None:
        raise Untranslatable(f"no translation from {client_wire} to {provider_wire}")
    return make(ids, system_anywhere)
