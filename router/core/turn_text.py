"""The current turn's text, computed once at the edge (ARCHITECTURE §3, §6).

Two parts, because measured on real transcripts the *next* step follows both
the task and the current step, and scoring by the better of two queries beats
one concatenated query:

* ``task``: the head of the last user message (what was asked);
* ``step``: the most recent assistant message's tool-call arguments plus the
  tail of its text (what the agent is doing right now).

The classifier reads both; pinch-relevance embeds both as its queries. A third
part is for pinch-relevance only (the classifier never reads it: it says what
the session has been doing, not what this turn asks):

* ``recent``: the :data:`RECENT_STEPS` assistant messages before the step, newest
  first, each cut as the step is — the names the agent has been using, which
  pinch-relevance looks for in the old tool results (lexical evidence). Each wire format finds
its newest user and assistant messages its own way (:func:`latest_turn_text`); the cutting is
the same for all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from router.core.frozen import frozen

T = TypeVar("T")


# Assistant steps before the current one kept in TurnText.recent: on the shared transcripts, the agent's words
# over its last 16 steps found the results its next step used about as well as all of them did.
RECENT_STEPS = 16


@frozen
class TurnText:
    task: str
    step: str
    recent: tuple[str, ...] = ()


def latest_turn_text(
    newest_first: Iterable[tuple[Any, T]],
    task_of: Callable[[T], str],
    step_of: Callable[[T], tuple[Sequence[str], str]],
    max_chars: int,
) -> TurnText:
    """The turn text of a conversation given as ``(role, message)`` pairs, newest first, in any wire
    format: ``task_of`` reads a user message's words, ``step_of`` an assistant message's calls (each
    ``name(arguments)``) and text. The task is the newest user message with words, cut to
    ``max_chars``; the step the newest assistant message with calls or text: its calls (one a line,
    at most half of ``max_chars``), then the tail of its text that fits; ``recent`` the
    :data:`RECENT_STEPS` assistant messages with calls or text before it (newer than the task or not),
    each cut the same way."""
    task = step = ""
    recent: list[str] = []
    for role, message in newest_first:
        if role == "user" and not task:
            task = task_of(message)[:max_chars]
        elif role == "assistant" and len(recent) < RECENT_STEPS:
            calls, text = step_of(message)
            if not step:
                step = step_text(calls, text, max_chars)
            elif calls or text:
                recent.append(step_text(calls, text, max_chars))
        if task and len(recent) >= RECENT_STEPS:
            break
    return TurnText(task=task, step=step, recent=tuple(recent))


def step_text(calls: Sequence[str], text: str, max_chars: int) -> str:
    joined = "\n".join(calls)[: max_chars // 2]
    room = max_chars - len(joined) - (1 if joined else 0)
    tail = text[-room:] if room > 0 and text else ""
    return "\n".join(part for part in (joined, tail) if part)
