"""One request to one provider: passed through when both speak the client's format, else translated.

:func:`plan_exchange` is what upstream-forward asks for each candidate. The
client's wire adapter writes the chain's changes into the client's body; when the
provider speaks the same format (``openai-chat`` for ``api: openai`` / ``ollama``,
``anthropic-messages`` for ``api: anthropic``) those bytes go out as they are and
the answer comes back untouched. When the formats differ, the request, the answer
and the stream are translated (:mod:`router.core.anthropic_chat`,
:mod:`router.core.sse_translation`). A pair of formats with no translation is
refused with a clear 400 rather than sent in a format the provider cannot read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from router.config import ProviderSettings
from router.context import Candidate, RequestContext
from router.core.anthropic_chat import chat_completion_to_message, chat_to_messages_body, message_to_chat_completion, messages_to_chat_body
from router.core.anthropic_view import ANTHROPIC_MESSAGES
from router.core.chat_view import OPENAI_CHAT
from router.core.request_view import BodyChanges
from router.core.sse_translation import AnthropicToChatSse, ChatToAnthropicSse, StreamTranslator
from router.providers.anthropic import ANTHROPIC_WIRE
from router.wire.anthropic_messages import ANTHROPIC_MESSAGES_ADAPTER

PROVIDER_WIRES = {"openai": OPENAI_CHAT, "ollama": OPENAI_CHAT, "anthropic": ANTHROPIC_WIRE}


def provider_wire(provider: ProviderSettings) -> str:
    """The wire format a provider's chat endpoint speaks."""
    return PROVIDER_WIRES[provider.api]


class NoTranslation(ValueError):
    """The client's format cannot be translated into the provider's."""


@dataclass(frozen=True, slots=True)
class Exchange:
    """What to send one candidate, and how its answer comes back to the client.

    ``answer`` turns a whole JSON answer into the client's format, ``stream`` makes a
    translator for a streamed one; both None when the formats are the same.
    ``provider_wire`` also says how the provider's stream ends (``[DONE]`` or
    ``message_stop``).
    """

    payload: bytes
    client_wire: str
    provider_wire: str
    answer: Callable[[bytes], bytes] | None = None
    stream: Callable[[], StreamTranslator] | None = None

    @property
    def translated(self) -> bool:
        return self.client_wire != self.provider_wire


def plan_exchange(ctx: RequestContext, candidate: Candidate, provider: ProviderSettings, changes: BodyChanges, *, input_tokens: int, default_max_tokens: int) -> Exchange:
    """The exchange with ``candidate`` (see the module doc). ``input_tokens`` is the prompt as sent (after
    pinch), reported where the provider's own count comes too late (a translated stream's start);
    ``default_max_tokens`` is sent to an Anthropic provider when the client set no limit (it is required there)."""
    client, target = ctx.wire.name, provider_wire(provider)
    if client == target:
        return Exchange(ctx.wire.upstream_body(ctx.body, ctx.view, changes), client, target)
    model = candidate.model
    if client == ANTHROPIC_MESSAGES and target == OPENAI_CHAT:
        body = ANTHROPIC_MESSAGES_ADAPTER.upstream_dict(ctx.body, ctx.view, changes)
        payload = orjson.dumps(messages_to_chat_body(body, candidate.upstream_model, reasoning_content=provider.reasoning_content))

        def answer(raw: bytes) -> bytes:
            return orjson.dumps(chat_completion_to_message(_object(raw), model, input_tokens, reasoning_content=provider.reasoning_content))

        return Exchange(payload, client, target, answer, lambda: ChatToAnthropicSse(model, input_tokens, reasoning_content=provider.reasoning_content))
    if client == OPENAI_CHAT and target == ANTHROPIC_WIRE:
        # the chat adapter writes the chain's changes (model, pinched results, output clamp); translated from there
        body = orjson.loads(ctx.wire.upstream_body(ctx.body, ctx.view, changes))
        payload = orjson.dumps(chat_to_messages_body(body, candidate.upstream_model, changes.output_tokens or default_max_tokens))

        def answer(raw: bytes) -> bytes:
            return orjson.dumps(message_to_chat_completion(_object(raw), model))

        return Exchange(payload, client, target, answer, lambda: AnthropicToChatSse(model, include_usage=ctx.view.usage_requested))
    raise NoTranslation(f"requests in {client} cannot be sent to {candidate.provider} (it speaks {target})")


def _object(raw: bytes) -> dict[str, Any]:
    value = orjson.loads(raw)
    return value if isinstance(value, dict) else {}
