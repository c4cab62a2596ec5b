"""What a translation made of each element of an array, taken again for the very elements a later
array repeats. Pure (no I/O); its state is the arrays translated last.

An agent resends its whole conversation every turn, and the proxy parses a resent body from its new
bytes alone: the messages it repeats are the earlier parse's very objects
(:mod:`router.core.resent_prefix`), and so are those pinch rewrote the same way again
(``KnownBody.rewritten``); none is ever changed (copy on write). So what a translation made of such
a message last turn is what it would make again: :class:`ElementMemo` keeps, for the arrays it saw
last, each element and what was made of it, and for an array with the same objects at the same
places (``is``, never ``==``) takes those results again, making the others alone (the new
messages, one pinch rewrote anew). :class:`PassMemo` does the same for a pass that carries state
from one element to the next, up to the first element that differs. A 2 MB Claude Code session
translated to chat: only the turn's new messages are translated.

It keeps :data:`ARRAYS` arrays, one per conversation (found by its first element); the results
are shared between the requests that take them, so they, like every translation's output, are
never changed in place. Holding the elements keeps them alive while the array is kept: at most
:data:`ARRAYS` conversations, most of them the very objects the endpoints' kept bodies hold too,
and none once the proxy has gone idle (:func:`forget_all`, called when the kept bodies are forgotten).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable
from itertools import compress, count
from operator import is_not
from typing import Any, Generic, TypeVar

R = TypeVar("R")

ARRAYS = 32  # conversations remembered: the sessions an agent fleet keeps going at once, with room


class _Memo:
    """The arrays a memo keeps, forgotten together by :func:`forget_all`."""

    def __init__(self, arrays: int) -> None:
        self.arrays = arrays
        self._recent: OrderedDict[int, Any] = OrderedDict()
        _MEMOS.append(self)

    def _remember(self, first: Any, entry: Any) -> None:
        self._recent.pop(id(first), None)
        self._recent[id(first)] = entry
        while len(self._recent) > self.arrays:
            self._recent.popitem(last=False)


_MEMOS: list[_Memo] = []


def forget_all() -> int:
    """Forget what every memo keeps (the proxy went idle: like the kept bodies, whose elements they
    hold, their memory goes back, :mod:`router.server.memory`); how many arrays were forgotten."""
    forgotten = 0
    for memo in _MEMOS:
        forgotten += len(memo._recent)
        memo._recent.clear()
    return forgotten


def repeated(before: list[Any], now: list[Any]) -> int:
    """How many leading elements ``now`` shares with ``before``: the very same objects."""
    # C speed, no Python step per element, one pass, no list made (a resent array repeats all the one before)
    return next(compress(count(), map(is_not, before, now)), min(len(before), len(now)))


class ElementMemo(_Memo, Generic[R]):
    """``map(elements, each)`` = ``[each(e) for e in elements]`` for an ``each`` whose result depends on
    the element alone, with the result of every element the array seen last had at the same place
    (the same object) taken again."""

    # _recent: id of an array's first element → (the array's elements, what each made of them); the
    # entry holds that element, so its id is not reused while the entry lives
    def __init__(self, arrays: int = ARRAYS) -> None:
        super().__init__(arrays)

    def map(self, elements: list[Any], each: Callable[[Any], R]) -> list[R]:
        if not elements:
            return []
        first = elements[0]
        seen = self._recent.pop(id(first), None)
        if seen is None or seen[0][0] is not first:
            results = [each(element) for element in elements]
        else:  # an element replaced (pinch rewrote it) is made again, those after it that repeat are not
            before, made = seen
            results = made[: len(elements)]
            # the places that differ, found in C: a resent array's are a few, or none
            for at in compress(count(), map(is_not, elements, before)):
                results[at] = each(elements[at])
            results += map(each, elements[len(before) :])
        self._remember(first, (list(elements), results))
        return list(results)  # the caller's own list; the results in it are shared


class PassMemo(_Memo, Generic[R]):
    """What a pass over an array made up to its marks, taken again for an array that repeats its
    elements (the same objects) past a mark.

    For a pass that walks an array in order with a little state (one result per call: the calls
    still open) and reaches marks, elements before which that state does not matter (the
    output so far is final there and the pass goes on as from the start): ``resume`` gives the
    last mark an array repeats the elements up to, and the output before it; the pass goes on
    from there and ``keep`` s what it made, its marks (element index, output length) in order.
    ``key``: what else the pass depends on (compared with ``==``)."""

    # _recent: id of an array's first element → (its elements, the key, the output, the marks)
    def __init__(self, arrays: int = ARRAYS) -> None:
        super().__init__(arrays)

    def resume(self, elements: list[Any], key: Any) -> tuple[int, list[R], list[tuple[int, int]]]:
        """(the element to go on from, the output before it — the caller's own list —, the marks before it)."""
        seen = self._recent.get(id(elements[0])) if elements else None
        if seen is None or seen[0][0] is not elements[0] or seen[1] != key:
            return 0, [], []
        before, _, out, marks = seen
        taken = bisect_right(marks, (repeated(before, elements), len(out)))
        if not taken:
            return 0, [], []
        index, length = marks[taken - 1]
        return index, out[:length], marks[:taken]

    def keep(self, elements: list[Any], key: Any, out: list[R], marks: list[tuple[int, int]]) -> None:
        if not elements:
            return
        self._remember(elements[0], (list(elements), key, list(out), marks))
