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

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from router.core.frozen import frozen

T = TypeVar("T")


# Assistant steps before the current one kept in TurnText.recent: on the shared transcripts, the agent's words
# over its last 16 steps found the results its next step used about as well as all of them did.
RECENT_STEPS = 16


class RecentSteps(Sequence[str]):
    """:attr:`TurnText.recent`, cut from the conversation when first read: pinch-relevance alone reads
    it, and most requests (relevance off, the shipped default) never do — while cutting 16 steps is
    a fifth of a long transcript's view. Compares, hashes and reads as the tuple it stands for."""

    __slots__ = ("_cut", "_steps")

    def __init__(self, cut: Callable[[], tuple[str, ...]]) -> None:
        self._cut: Callable[[], tuple[str, ...]] | None = cut
        self._steps: tuple[str, ...] = ()

    def _all(self) -> tuple[str, ...]:
        if self._cut is not None:
            self._steps, self._cut = self._cut(), None  # the conversation is not kept past the cut
        return self._steps

    def __getitem__(self, index: Any) -> Any:
        return self._all()[index]

    def __len__(self) -> int:
        return len(self._all())

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RecentSteps):
            other = other._all()
        return self._all() == other if isinstance(other, tuple) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._all())

    def __repr__(self) -> str:
        return repr(self._all())


@frozen
class TurnText:
    task: str
    step: str
    recent: Sequence[str] = ()


def latest_turn_text(
    newest_first: Callable[[], Iterable[tuple[Any, T]]],
    task_of: Callable[[T], str],
    step_of: Callable[[T], tuple[Sequence[str], str]],
    max_chars: int,
    users: Iterable[T] | None = None,
) -> TurnText:
    """The turn text of a conversation given as ``(role, message)`` pairs, newest first, in any wire
    format (``newest_first()`` gives them, each time it is called): ``task_of`` reads a user message's
    words, ``step_of`` an assistant message's calls (each ``name(arguments)``) and text. The task is
    the newest user message with words, cut to ``max_chars``; the step the newest assistant message
    with calls or text: its calls (one a line, at most half of ``max_chars``), then the tail of its
    text that fits; ``recent`` the :data:`RECENT_STEPS` assistant messages with calls or text before
    it (newer than the task or not), each cut the same way — when first read (:class:`RecentSteps`).
    ``users``: the user messages, newest first, when the caller has them: the task is looked for among
    them, and the walk for the step stops at it (an agent's task is often its transcript's first message)."""
    task = step = ""
    if users is not None:
        for message in users:
            task = task_of(message)[:max_chars]
            if task:
                break
        for role, message in newest_first():
            if role == "assistant":
                calls, text = step_of(message)
                step = step_text(calls, text, max_chars)
                if step:
                    break
    else:
        for role, message in newest_first():
            if role == "user":
                if not task:
                    task = task_of(message)[:max_chars]
            elif role == "assistant" and not step:
                calls, text = step_of(message)
                step = step_text(calls, text, max_chars)
            if task and step:
                break

    def recent() -> tuple[str, ...]:
        steps: list[str] = []
        past_step = False
        for role, message in newest_first():
            if role != "assistant":
                continue
            calls, text = step_of(message)
            if not past_step:
                past_step = bool(step_text(calls, text, max_chars))  # the step itself
            elif calls or text:
                steps.append(step_text(calls, text, max_chars))
                if len(steps) >= RECENT_STEPS:
                    break
        return tuple(steps)

    return TurnText(task=task, step=step, recent=RecentSteps(recent) if step else ())


def step_text(calls: Sequence[str], text: str, max_chars: int) -> str:
    joined = "\n".join(calls)[: max_chars // 2] if calls else ""
    room = max_chars - len(joined) - (1 if joined else 0)
    if room <= 0 or not text:
        return joined
    tail = text[-room:]
    return f"{joined}\n{tail}" if joined else tail
