"""A Responses client's compaction, done by a chat model. Pure.

Codex on OpenAI's own provider compacts with a ``compaction_trigger`` and wants exactly one
``compaction`` item back (:mod:`router.wire.openai_responses.compaction`; Codex 0.171.0 fails
the turn with "expected exactly one compaction output item" otherwise). A chat provider knows
neither item, so the translation does what OpenAI's server does, in the open:

* the trigger becomes a user message asking for a summary (:data:`PROMPT`), with tool calls
  ruled out (``tool_choice: none``);
* the model's text comes back as a compaction item the proxy made, the summary readable in it
  (:func:`~router.wire.openai_responses.compaction.compaction_item`);
* a later compaction item the proxy made goes to the chat model as a user message holding the
  summary (:func:`summary_message`); one another provider made cannot be read, and is dropped and
  reported like any item a chat request cannot carry.
"""

from __future__ import annotations

from typing import Any

from router.wire.openai_responses.compaction import SUMMARY_LEAD_IN, proxy_summary

PROMPT = (
    "The conversation so far is about to be replaced by a summary, so that the work can go on in a "
    "smaller context. Write that summary now, for the model that continues the work: the user's "
    "requests, the progress made and the decisions taken, what was learnt from the tools' results "
    "(the files, commands, errors and figures that matter), and what remains to be done next. "
    "Do not call any tool; answer with the summary only."
)


def summary_message(item: dict[str, Any]) -> dict[str, Any] | None:
    """A chat user message for a compaction item the proxy made; None when it is not one."""
    summary = proxy_summary(item)
    return None if summary is None else {"role": "user", "content": SUMMARY_LEAD_IN + summary}
