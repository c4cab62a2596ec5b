"""Turns and pinch candidates (ARCHITECTURE §5). Pure.

A turn starts at an assistant message. Everything from the
``keep_last_turns``-th assistant message from the end onwards — including the
in-progress turn (tool results after the last assistant message) — is
protected. Candidates are the ``tool`` messages before that point whose
content is text (a string, or a list of parts containing text), in order of
appearance. ``prune_context`` and ``pinch-relevance`` both use this one list.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from router.core.content import TEXT_PART_TYPES
from router.core.request_view import Conversation


def has_text(content: Any) -> bool:
    """Content with text: a string, or a list holding a text part."""
    if isinstance(content, str):
        return True
    return isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") in TEXT_PART_TYPES and isinstance(part.get("text"), str)
        for part in content
    )


def candidate_results(conversation: Conversation, keep_last_turns: int) -> list[int]:
    """The trim candidates of any wire format's conversation: positions in its
    ``tool_results()`` of the results with text before the protected turns, oldest first."""
    result_units = conversation.result_units()
    units, key = conversation.units, conversation.result_key
    return [
        position
        for position in range(old_results(conversation, keep_last_turns))
        if type(content := units[result_units[position]].get(key)) is str or has_text(content)  # strings first: the usual case
    ]


def old_results(conversation: Conversation, keep_last_turns: int) -> int:
    """How many tool results come before the protected turns: the candidates are among the first
    that many (results are in unit order), the ones with text."""
    end = conversation.last_turns_start(keep_last_turns)
    return bisect_left(conversation.result_units(), end) if end else 0
