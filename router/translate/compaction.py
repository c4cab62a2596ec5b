"""A Responses client's compaction, done by a chat model. Pure.

Codex on OpenAI's own provider compacts a long session in a normal Responses call: its last
input item is ``{"type": "compaction_trigger"}``, and it expects exactly one ``compaction``
output item back, whose ``encrypted_content`` it sends again, in place of the history it
summarises, at the head of every later request (OpenAI's "compaction v2"; Codex 0.171.0 fails
the turn with "expected exactly one compaction output item" otherwise). A chat provider knows
neither item, so the translation does what OpenAI's server does, in the open:

* the trigger becomes a user message asking for a summary (:data:`PROMPT`), with tool calls
  ruled out (``tool_choice: none``);
* the model's text comes back as a ``compaction`` item whose ``encrypted_content`` is that
  text, encoded and marked as the proxy's (:func:`encode_summary`) — nothing is secret in it,
  "encrypted" is only what the client calls the opaque field;
* a later ``compaction`` item the proxy made goes to the chat model as a user message holding
  the summary (:func:`summary_message`); one another provider made cannot be read, and is
  dropped and reported like any item a chat request cannot carry.
"""

from __future__ import annotations

from typing import Any

import orjson

TRIGGER = "compaction_trigger"
ITEM = "compaction"
# The encrypted_content of a compaction item the proxy made: this prefix, then the summary as a JSON string.
MARKER = "pinch-router.summary.v1:"

PROMPT = (
    "The conversation so far is about to be replaced by a summary, so that the work can go on in a "
    "smaller context. Write that summary now, for the model that continues the work: the user's "
    "requests, the progress made and the decisions taken, what was learnt from the tools' results "
    "(the files, commands, errors and figures that matter), and what remains to be done next. "
    "Do not call any tool; answer with the summary only."
)
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
    """The output item that answers a compaction trigger."""
    return {"id": item_id, "type": ITEM, "encrypted_content": encode_summary(summary)}


def summary_message(item: dict[str, Any]) -> dict[str, Any] | None:
    """A chat user message for a compaction item the proxy made; None when it is not one."""
    summary = decode_summary(item.get("encrypted_content"))
    return None if summary is None else {"role": "user", "content": SUMMARY_LEAD_IN + summary}
