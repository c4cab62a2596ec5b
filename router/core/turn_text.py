"""The current turn's text, computed once at the edge (ARCHITECTURE §3, §6).

Two parts, because measured on real transcripts the *next* step follows both
the task and the current step, and scoring by the better of two queries beats
one concatenated query:

* ``task``: the head of the last user message (what was asked);
* ``step``: the most recent assistant message's tool-call arguments plus the
  tail of its text (what the agent is doing right now).

The classifier reads both; pinch-relevance embeds both as its queries.
"""

from __future__ import annotations

from router.core.frozen import frozen
from router.core.content import Message, content_text, tool_call_arguments


@frozen
class TurnText:
    task: str
    step: str


def extract_turn_text(messages: list[Message], max_chars: int) -> TurnText:
    """Each part is at most ``max_chars`` characters."""
    task = ""
    step = ""
    for message in reversed(messages):
        role = message.get("role")
        if role == "user" and not task:
            task = content_text(message.get("content"))[:max_chars]
        elif role == "assistant" and not step:
            step = _step_text(message, max_chars)
        if task and step:
            break
    return TurnText(task=task, step=step)


def _step_text(message: Message, max_chars: int) -> str:
    calls = "\n".join(tool_call_arguments(message))[: max_chars // 2]
    room = max_chars - len(calls) - (1 if calls else 0)
    text = content_text(message.get("content"))
    tail = text[-room:] if room > 0 and text else ""
    return "\n".join(part for part in (calls, tail) if part)
