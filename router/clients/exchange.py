"""One attempt's wire formats: the body a candidate's provider is sent, and its answer in the client's format.

The provider's adapter names the wire its chat speaks. The same format as the client's is a
pass-through: the client's body with only the chain's changes, the answer relayed as it came. A
different one is translated (:mod:`router.translate`, by the pair): the request before it goes, the
answer, and each event of a stream. A pair with no translation fails this candidate over. The
translations are pure; this is where they get the ids and the clock an answer needs.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from router.clients.upstream import AttemptFailure
from router.config import ProviderSettings
from router.contract.context import RequestContext
from router.core.errors import JSON
from router.core.request_view import NO_REWRITES, BodyChanges
from router.core.results import Candidate, Usage
from router.providers import provider_adapter
from router.translate.protocol import AnswerIds, StreamTranslator, Untranslatable
from router.translate.registry import translator

EVENT_STREAM = "text/event-stream"


class Exchange:
    """The formats of one request to one candidate (see the module doc)."""

    def __init__(self, ctx: RequestContext, candidate: Candidate, provider: ProviderSettings, cache_key: str | None) -> None:
        """:class:`~router.clients.upstream.AttemptFailure` when nothing translates the client's
        format to the provider's."""
        self.ctx = ctx
        view = ctx.view
        self.wire_out = provider_adapter(provider).chat_wire(provider)
        try:
            ids = AnswerIds(secrets.token_hex(12), int(time.time()))
            self.translation = translator(ctx.wire.name, self.wire_out, ids, system_anywhere=provider.system_messages == "anywhere")
        except Untranslatable as exc:
            raise AttemptFailure("status", str(exc)) from None
        passed = self.translation is None
        # signed reasoning whose prefix pinch changed is left out only where it is checked (passed through)
        stale = ctx.pinch.stale if ctx.pinch is not None and candidate.thinking_binding and passed else None
        self.inject_usage = view.stream and not view.usage_requested
        changes = BodyChanges(
            candidate.upstream_model, ctx.rewrites or NO_REWRITES, candidate.output_tokens, self.inject_usage, cache_key, not passed,
            candidate.thinking_off, stale,
        )
        payload = ctx.wire.upstream_body(ctx.body, view, changes)
        self.payload = payload if passed else self.translation.request(payload, candidate)
        self.dropped = ctx.wire.passthrough_dropped(view, changes) if passed else self.translation.dropped

    def streams(self, content_type: str) -> bool:
        """Whether an answer of ``content_type`` is a stream (the provider's format decides)."""
        return content_type == EVENT_STREAM if self.translation is None else self.translation.streams(content_type)

    def stream(self) -> StreamTranslator | None:
        """The translator of one streamed answer; None: relayed as it comes."""
        return None if self.translation is None else self.translation.stream()

    def answer(self, body: bytes, parsed: Any, content_type: str) -> tuple[bytes, str, Usage | None]:
        """A whole answer (``parsed``: its JSON) in the client's format: its bytes, content type and usage."""
        wire = self.ctx.wire
        if self.translation is None:  # parsed already for the not-JSON check: not parsed a second time
            return body, content_type, wire.usage_of(parsed)
        translated = self.translation.response(body)
        return translated, JSON, wire.read_usage(translated)
