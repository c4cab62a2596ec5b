"""Compaction items of the Responses API, and the proxy's own. Pure.

Codex on OpenAI's own provider compacts a long session in a normal Responses call: its last
input item is ``{"type": "compaction_trigger"}``, and it expects exactly one ``compaction``
output item back, whose ``encrypted_content`` it sends again, in place of the history it
summarises, at the head of every later request (OpenAI's "compaction v2"). A provider's
``encrypted_content`` is for that provider alone to read.

The proxy makes compaction items too, when a chat model wrote the summary
(:mod:`router.translate.compaction`): their ``encrypted_content`` is :data:`MARKER` and the
summary as a JSON string — nothing is secret in it, "encrypted" is only what the client calls
the opaque field. No provider can read one, so every provider is given the summary instead: a
chat model as a user message (the translation), a Responses provider as a user message item in
the input it is passed (:func:`readable`, by :func:`router.wire.openai_responses.view.body_with_changes`).
"""

from __future__ import annotations

from typing import Any

import orjson

TRIGGER = "compaction_trigger"
ITEM = "compaction"
# The encrypted_content of a compaction item the proxy made: this prefix, then the summary as a JSON string.
MARKER = "pinch-router.summary.v1:"
# What the summary is introduced by, wherever the proxy gives it to a model.
SUMMARY_LEAD_IN = "A summary of the conversation before this point, written when it was compacted:\n\n"


def asks_compaction(items: list[Any] | tuple[Any, ...]) -> bool:
    """Whether the request's input ends with a compaction trigger (the API requires it to be the last item)."""
    return bool(items) and isinstance(items[-1], dict) and items[-1].get("type") == TRIGGER


def encode_summary(summary: str) -> str:
    return MARKER + orjson.dumps(summary).decode()


def decode_summary(encrypted: Any) -> str | None:
    """The summary a proxy-made compaction item carries; None for another provider's (or a damaged) one."""
    if not isinstance(encrypted, str) or not encrypted.startswith(MARKER):
        return None
    try:
        summary = orjson.loads(encrypted[len(MARKER) :])
    except orjson.JSONDecodeError:
        return None
    return summary if isinstance(summary, str) else None


def compaction_item(item_id: str, summary: str) -> dict[str, Any]:
    """The output item that answers a compaction trigger with the proxy's summary."""
    return {"id": item_id, "type": ITEM, "encrypted_content": encode_summary(summary)}


def proxy_summary(item: Any) -> str | None:
    """The summary of a compaction item the proxy made; None for any other item."""
    if not isinstance(item, dict) or item.get("type") != ITEM:
        return None
    return decode_summary(item.get("encrypted_content"))


def readable(item: dict[str, Any]) -> dict[str, Any]:
    """``item``, or for a compaction item the proxy made a user message item holding its summary, which a
    Responses provider reads where its own compaction item would stand."""
    summary = proxy_summary(item)
    if summary is None:
        return item
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": SUMMARY_LEAD_IN + summary}]}
