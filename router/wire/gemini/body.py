"""The body a Gemini provider is sent: the client's, with the chain's changes and no more. Pure.

The model and the stream are in the URL (the provider adapter's), so the body changes only by:
the function responses pinch rewrote; a ``maxOutputTokens`` above the candidate's limit lowered
to it, a ``thinkingBudget`` that would reach the lowered limit scaled down with it (the thinking
shares the output limit); the stale signatures of a model that checks them, and a missing
signature on the first call of a step in the current turn (a history from another model, which
Gemini 3 refuses), each as Google's placeholder (:mod:`.signatures`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from router.wire.gemini.parts import (
    GENERATION,
    MAX_OUTPUT,
    SIGNATURE,
    SKIP_SIGNATURE,
    THINKING,
    THINKING_BUDGET,
    field,
    key_of,
)


def within_output_limit(body: dict[str, Any], output_tokens: int | None) -> dict[str, Any]:
    """``body`` with ``generationConfig.maxOutputTokens`` lowered to ``output_tokens`` when it asks
    more (a limit is never added), and a ``thinkingBudget`` at or above the new limit (but below the
    client's own) scaled down in proportion; ``body`` itself when nothing changes."""
    generation = field(body, GENERATION)
    asked = field(generation, MAX_OUTPUT)
    if output_tokens is None or not isinstance(asked, int) or isinstance(asked, bool) or asked <= output_tokens:
        return body
    assert isinstance(generation, dict)
    sent = {**generation, key_of(generation, MAX_OUTPUT): output_tokens}
    thinking = field(generation, THINKING)
    budget = field(thinking, THINKING_BUDGET)
    if isinstance(thinking, dict) and isinstance(budget, int) and not isinstance(budget, bool) and output_tokens <= budget < asked:
        sent[key_of(generation, THINKING)] = {**thinking, key_of(thinking, THINKING_BUDGET): max(1, budget * output_tokens // asked)}
    return {**body, key_of(body, GENERATION): sent}


def signed(contents: list[Any], stale: Collection[tuple[int, int]], unsigned: list[tuple[int, int]]) -> tuple[list[Any], int]:
    """``contents`` (validated ones) with the signature of each part at ``stale`` replaced by the placeholder, and one
    added to the first call of each step of the current turn that has none (``unsigned``: those calls' places, as the
    view found them: :attr:`~router.wire.gemini.view.GeminiConversation.unsigned_calls`); how many were added.
    The very same list when nothing changes; nothing is mutated."""
    if not unsigned and not stale:
        return contents, 0
    replace: dict[int, set[int]] = {}
    for c, p in stale:
        if contents[c].get("role") == "model":
            replace.setdefault(c, set()).add(p)
    for c, p in unsigned:
        replace.setdefault(c, set()).add(p)
    if not replace:
        return contents, 0
    out = list(contents)
    for c, places in replace.items():
        content = contents[c]
        out[c] = {**content, "parts": [
            {**part, key_of(part, SIGNATURE): SKIP_SIGNATURE} if p in places and isinstance(part, dict) else part for p, part in enumerate(content["parts"])
        ]}
    return out, len(unsigned)
