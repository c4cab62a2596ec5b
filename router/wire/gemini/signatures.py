"""Gemini's thought signatures as the signed reasoning pinch must keep valid. Pure.

Gemini 3 returns a ``thoughtSignature`` on the first function call of every step of a turn (and
may on any part of a model turn) and refuses a request whose current turn — everything since
the last user content that is not only function responses — has a step whose first function
call lacks its signature, or carries one altered (ai.google.dev/gemini-api/docs/thought-signatures).
So the proxy never moves, merges or drops a part that carries one: pinch rewrites only the
``response`` of old ``functionResponse`` parts.

Google documents no check of a signature against what precedes it (Anthropic's thinking has
one), so by default nothing goes stale. For a model configured to check
(``models[].thinking_binding: true``) the hooks work as Anthropic's do: the signatures after the
first result pinch changed are stale (:func:`stale_signatures`), recorded so every later request
treats the very same ones alike, and replaced by Google's placeholder
(:data:`~router.wire.gemini.parts.SKIP_SIGNATURE`) rather than left out — a call without one is
refused — and a batch only the budget calls for waits while the tool loop in progress is signed
(:func:`loop_signed`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import xxhash

from router.core.request_view import stale_signed
from router.core.results import StaleSignatures
from router.wire.gemini.parts import SKIP_SIGNATURE, current_turn_start, first_call_at, is_model, parts_of, signature_of

# A session's record keeps at most this many stale signatures; the oldest are forgotten first.
MAX_STALE = 4096
HOLD_FOR_SIGNED_LOOP = "held: a batch would invalidate the thought signatures of the tool loop in progress"


def signature_key(part: Any) -> str | None:
    """How the record names a signed part: a digest of its signature. None for an unsigned part and
    for Google's placeholder (nothing to keep valid)."""
    signature = signature_of(part)
    if signature is None or signature == SKIP_SIGNATURE:
        return None
    return xxhash.xxh3_64_hexdigest(signature.encode("utf-8", "surrogatepass"))


def stale_signatures(contents: Sequence[Any], changed_from: int | None, remembered: Iterable[str] = ()) -> StaleSignatures:
    """The signed parts of model contents after content ``changed_from`` (the first whose bytes pinch
    changed; None: none), plus every one the session ``remembered`` as stale; positions are
    (content index, part index). The placeholder keeps the loop valid: it never goes without them."""
    signed = (
        (c, p, key)
        for c, content in enumerate(contents)
        if is_model(content)
        for p, part in enumerate(parts_of(content))
        if (key := signature_key(part)) is not None
    )
    return stale_signed(signed, changed_from, remembered, MAX_STALE)


def loop_signed(contents: Sequence[Any]) -> bool:
    """Whether the tool loop in progress (Google's current turn) has a step whose first call carries
    a real signature: a batch before it would make those signatures stale."""
    for content in contents[current_turn_start(list(contents)) :]:
        if is_model(content):
            parts = parts_of(content)
            at = first_call_at(parts)
            if at is not None and signature_key(parts[at]) is not None:
                return True
    return False


def dropped(stale: StaleSignatures) -> str:
    """What ``x-router-dropped`` and the decision row name for the signatures replaced."""
    count = len(stale.positions)
    return f"thought signatures bound to a prefix pinch changed ({count} part{'s' if count != 1 else ''}, placeholder sent)"
