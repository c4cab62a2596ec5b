"""Signed thinking bound to the conversation before it (Anthropic's preserved thinking). Pure.

On Anthropic's preserved-thinking models each ``thinking`` / ``redacted_thinking``
block's signature commits to the block's *prefix*: the top-level ``system``,
``tools`` and every message before it, as they were sent in the request that
produced it. When anything there changed since, or a thinking block between
others was left out or moved, "that block and every later thinking block are
invalid" and the API answers 400 ("Invalid `signature` in `thinking` block. The
block is bound to a different conversation…") — the same body fails the same way
on every retry. A change invalidates only thinking already after it: thinking
before it, and thinking Claude produces afterwards (bound to the changed prefix),
stay valid. Leaving the invalid thinking out is the documented fix for a history
that was trimmed or rewritten ("remove the thinking in the kept turns").

Pinch rewrites old tool results, so on those models each batch invalidates every
signed block after its first rewritten result. :func:`unbind` names them — the
blocks after the first result whose bytes differ from the session's previous
request, plus every block the session's ledger already recorded as unbound — so
the proxy leaves exactly those out, on this request and every later one, and the
prefix of each block it keeps is byte for byte what Claude signed. When that
leaves the tool loop in progress without thinking, the request goes with thinking
off (the rule of :func:`~router.wire.anthropic_messages.validation.tool_loop_without_thinking`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import xxhash

from router.core.request_view import stale_signed
from router.core.results import StaleSignatures

from router.wire.anthropic_messages.blocks import (
    THINKING_BLOCKS,
    is_proxy_thinking,
    last_assistant_at,
    tool_loop_without_thinking,
)


# Anthropic's models that run the prefix check, as its docs list them (platform.claude.com,
# build-with-claude/preserved-thinking/prefix-checks): matched anywhere in an upstream model id,
# so dated ids and cloud ids (``anthropic.claude-fable-5-1-v1:0``) match too.
BINDING_MODELS = (
    "claude-fable-5-2",
    "claude-mythos-5-2",
    "claude-fable-5-1",
    "claude-mythos-5-1",
    "claude-opus-5-5",
    "claude-sonnet-5-5",
    "claude-haiku-5-5",
)
# A session's ledger remembers at most this many unbound blocks; the oldest are forgotten first.
MAX_UNBOUND = 4096


def binds_thinking(upstream_model: str, configured: bool | None = None) -> bool:
    """Whether a model checks the prefix of the thinking sent back (``models[].thinking_binding``):
    as configured, else as documented for its upstream model id."""
    if configured is not None:
        return configured
    model = upstream_model.lower()
    return any(name in model for name in BINDING_MODELS)


def block_key(block: Any) -> str | None:
    """How the ledger names a signed thinking block: a digest of its signature (of its ``data`` when
    redacted) — unique per block Claude produced. None for anything else, and for thinking the proxy
    made (never sent to Anthropic)."""
    if not isinstance(block, dict) or block.get("type") not in THINKING_BLOCKS or is_proxy_thinking(block):
        return None
    sealed = block.get("signature") if block.get("type") == "thinking" else block.get("data")
    return xxhash.xxh3_64_hexdigest(sealed.encode("utf-8", "surrogatepass")) if isinstance(sealed, str) and sealed else None


def dropped(stale: StaleSignatures) -> str:
    """What ``x-router-dropped`` and the decision row name for the thinking blocks left out."""
    count = len(stale.positions)
    return f"thinking bound to a prefix pinch changed ({count} block{'s' if count != 1 else ''})"


NOTHING_UNBOUND = StaleSignatures()


def unbind(messages: Sequence[Any], changed_from: int | None, remembered: Iterable[str] = ()) -> StaleSignatures:
    """The signed thinking blocks to leave out of ``messages``: every one in a message after
    ``changed_from`` (the index of the first message whose bytes differ from what the session's
    previous request sent; None: nothing changed) and every one the session ``remembered`` as
    unbound (:func:`~router.core.request_view.stale_signed`)."""
    signed = (
        (m, b, key)
        for m, message in enumerate(messages)
        if isinstance(message, dict) and message.get("role") == "assistant" and isinstance(message.get("content"), list)
        for b, block in enumerate(message["content"])
        if (key := block_key(block)) is not None
    )
    found = stale_signed(signed, changed_from, remembered, MAX_UNBOUND)
    if not found.positions:
        return found if found.keys else NOTHING_UNBOUND
    return replace(found, loop_without_reasoning=_loop_left_without_thinking(messages, list(found.positions)))


def _loop_left_without_thinking(messages: Sequence[Any], positions: list[tuple[int, int]]) -> bool:
    """Whether leaving ``positions`` out leaves the tool loop in progress without its leading thinking
    (only the last assistant message counts, so only it is rebuilt)."""
    last = last_assistant_at(messages)
    if last is None or not any(m == last for m, _ in positions):
        return False
    gone = {b for m, b in positions if m == last}
    kept = [block for b, block in enumerate(messages[last]["content"]) if b not in gone]
    return tool_loop_without_thinking([{"role": "assistant", "content": kept}])


# Why pinch holds a batch only the budget calls for (the trace's reason).
HOLD_FOR_LOOP_THINKING = "held: a batch would unbind the signed thinking of the tool loop in progress"


def loop_thinking_at_stake(messages: Sequence[Any]) -> bool:
    """Whether the tool loop in progress starts with thinking Claude signed: the last assistant message
    calls tools and opens with a signed block. Any rewrite before it unbinds that block, and the rest
    of the loop then goes without thinking (one thinking configuration per assistant turn)."""
    last = last_assistant_at(messages)
    content = messages[last].get("content") if last is not None else None
    if not isinstance(content, list) or not content:
        return False
    return block_key(content[0]) is not None and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in content)


def leaves_thinking_off(thinking: bool, stale: StaleSignatures | None) -> bool:
    """Whether leaving ``stale`` out means sending this request with thinking off: the client asked
    for thinking and the tool loop in progress has lost its leading thinking."""
    return thinking and stale is not None and stale.loop_without_reasoning
