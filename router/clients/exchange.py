"""One attempt's wire formats: the body a candidate's provider is sent, and its answer in the client's format.

The provider's adapter names the wire its chat speaks. The same format as the client's is a
pass-through: the client's body with only the chain's changes, the answer relayed as it came. A
different one is translated (:mod:`router.translate`, by the pair): the request before it goes, the
answer, and each event of a stream. A pair with no translation fails this candidate over, and so does
a whole answer that is none of the provider's format (a completion without choices). The
translations are pure; this is where they get the ids and the clock an answer needs.
"""

from __future__ import annotations

import logging
import os
import random
import secrets
import time
from typing import Any

import orjson

from router.clients.failure import AttemptFailure
from router.config import ProviderSettings
from router.contract.context import RequestContext
from router.core.errors import JSON
from router.core.request_view import NO_REWRITES, BodyChanges
from router.core.results import PINCH, REWRITES, Candidate, Usage
from router.core.retrieve import RETRIEVE_TOOL
from router.providers import provider_adapter
from router.translate.protocol import AnswerIds, MalformedAnswer, StreamBroken, StreamTranslator, Untranslatable
from router.translate.registry import translator
from router.wire.retrieve import retrieve_format

EVENT_STREAM = "text/event-stream"

log = logging.getLogger("pinch_router.exchange")


class _AnswerIds:
    """The random hex that makes a translated answer's ids unique (24 digits, as ``secrets.token_hex(12)``
    gave; any slice of it as random as the whole, since translations take prefixes of it): from a
    generator seeded once per process from the OS. An answer's id names it, it guards nothing: asking
    the OS for random bytes on every request cost ~1.5 % of a small request's CPU. A forked worker
    seeds its own."""

    def __init__(self) -> None:
        self.random = random.Random()
        self.renew()
        os.register_at_fork(after_in_child=self.renew)

    def renew(self) -> None:
        self.random.seed(secrets.token_bytes(32))

    def __call__(self) -> str:
        return f"{self.random.getrandbits(96):024x}"


answer_id = _AnswerIds()


class Exchange:
    """The formats of one request to one candidate (see the module doc)."""

    def __init__(self, ctx: RequestContext, candidate: Candidate, provider: ProviderSettings, cache_key: str | None) -> None:
        """:class:`~router.clients.attempt.AttemptFailure` when nothing translates the client's
        format to the provider's."""
        self.ctx = ctx
        view = ctx.view
        self.wire_out = provider_adapter(provider).chat_wire(provider)
        try:
            ids = AnswerIds(answer_id(), int(time.time()), prompt_tokens_sent(ctx))
            self.translation = translator(ctx.wire.name, self.wire_out, ids, system_anywhere=provider.system_messages == "anywhere")
        except Untranslatable as exc:
            raise AttemptFailure("status", str(exc)) from None
        passed, pinch = self.translation is None, ctx[PINCH]
        # signed reasoning whose prefix pinch changed is left out only where it is checked (passed through)
        stale = pinch.stale if pinch is not None and candidate.thinking_binding and passed else None
        self.inject_usage = view.stream and not view.usage_requested
        # pinch_retrieve, declared for a provider whose format the proxy answers its calls in (router.core.retrieve)
        self.retrieve = retrieve_format(self.wire_out) if pinch is not None and pinch.offers_retrieve else None
        changes = BodyChanges(
            candidate.upstream_model, ctx[REWRITES] or NO_REWRITES, candidate.output_tokens, self.inject_usage, cache_key, not passed,
            candidate.thinking_off, stale, ctx.known_body, RETRIEVE_TOOL if self.retrieve is not None else None,
        )
        if passed:
            self.payload = ctx.wire.upstream_body(ctx.body, view, changes)
        else:  # the body as a dict, never written and read back before the translation reads it
            self.payload = self.translation.request(ctx.wire.translation_source(ctx.body, view, changes), candidate)
        self.dropped = ctx.wire.passthrough_dropped(view, changes) if passed else self.translation.dropped

    def streams(self, content_type: str) -> bool:
        """Whether an answer of ``content_type`` is a stream (the provider's format decides)."""
        return content_type == EVENT_STREAM if self.translation is None else self.translation.streams(content_type)

    def stream(self) -> StreamTranslator | None:
        """The translator of one streamed answer; None: relayed as it comes."""
        return None if self.translation is None else ReadGuard(self.translation.stream(), self.ctx.request_id)

    def answer(self, body: bytes, parsed: Any, content_type: str) -> tuple[bytes, str, Usage | None]:
        """A whole answer (``parsed``: its JSON) in the client's format: its bytes, content type and usage.

        :class:`~router.clients.attempt.AttemptFailure` when it is no answer of the provider's
        format (:class:`~router.translate.protocol.MalformedAnswer`, or the client's own
        ``answer_problem`` when passed through): the next candidate is tried, and the client never
        gets a body its format does not allow with a 200.
        """
        wire = self.ctx.wire
        if self.translation is None:  # parsed already for the not-JSON check: not parsed a second time
            problem = wire.answer_problem(parsed)
            if problem is not None:
                raise AttemptFailure("read", f"answered 200 with what is no {wire.name} answer: {problem}")
            return body, content_type, wire.usage_of(parsed)
        try:
            translated = self.translation.response_object(parsed)  # parsed already: not parsed a second time
            written = orjson.dumps(translated)
        except MalformedAnswer as exc:
            raise AttemptFailure("read", f"answered 200 with what is no {self.wire_out} answer: {exc}") from None
        except Exception as exc:  # the translation could not read it: none it was written for (and a bug, logged)
            raise AttemptFailure("read", f"answered 200 with what is no {self.wire_out} answer: {unreadable(exc, self.ctx.request_id)}") from None
        return written, JSON, wire.usage_of(translated)  # its usage read from the object written: not read back from its bytes


def prompt_tokens_sent(ctx: RequestContext) -> int | None:
    """The prompt's tokens as it goes upstream, when the chain counted it: pinch's count after its
    rewrites, else the prompt as the client sent it (nothing rewrote it); None: never counted."""
    if (pinch := ctx[PINCH]) is not None:
        return pinch.final_tokens
    return ctx.prompt_size.tokens if ctx.prompt_size is not None and not ctx[REWRITES] else None


def unreadable(exc: Exception, request_id: str) -> str:
    """Why a translation failed on what a provider sent, for the attempt's record; logged with its
    traceback as ``translation_failed`` — every shape a provider may send should be one a
    translation reads, or calls malformed by name."""
    log.warning("translation_failed", exc_info=exc, extra={"request_id": request_id})
    return f"the translation could not read it ({type(exc).__name__})"


class ReadGuard:
    """A stream translator whose failure to read the provider's events, whatever raised it, is a
    :class:`~router.translate.protocol.MalformedAnswer`: the relay then ends the stream with the
    client's error event (before the first byte: the next candidate), instead of leaving the
    client a stream cut in the middle."""

    def __init__(self, inner: StreamTranslator, request_id: str) -> None:
        self.inner, self.request_id = inner, request_id

    @property
    def usage(self) -> Usage | None:
        return self.inner.usage

    def feed(self, chunk: bytes) -> bytes:
        try:
            return self.inner.feed(chunk)
        except StreamBroken:
            raise
        except Exception as exc:
            raise MalformedAnswer(unreadable(exc, self.request_id)) from None

    def finish(self) -> bytes:
        try:
            return self.inner.finish()
        except StreamBroken:
            raise
        except Exception as exc:
            raise MalformedAnswer(unreadable(exc, self.request_id)) from None
