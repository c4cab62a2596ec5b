"""First sight in the session ledger: a new tool result reduced once, resent as those bytes ever after. Pure.

A tool result sent for the first time is in no provider's prompt cache yet, so reducing it breaks no
cache (ARCHITECTURE §5, "First sight"). :class:`FirstSight` is the session ledger's part of it, run by
:func:`router.core.pinch_ledger.pinch_conversation` on every request of a session, before any batch:

* **Resent first.** Every tool result the ledger holds a first-sight entry for (its id and the
  digest of its content) is sent as the text recorded then — the protected last turns included, byte
  for byte on every later request (:meth:`FirstSight.resend`). The text is never made again: it
  depended on the earlier results and the settings of its moment. A result the ledger holds
  compressed goes as that instead (a batch compressed it further, from its original).
* **Only what was never sent.** New reductions are made only for the results of the in-progress turn
  (after the last assistant turn's start) that the ledger holds nothing for and that the session's
  previous request did not send verbatim already (:attr:`FirstSight.seen`, kept as the ledger's
  ``first_seen``): a result sent once as it was is never reduced later (that would change bytes a
  cache holds). After a lost ledger the older results are left as they are (:meth:`FirstSight.reduce`).
* **Lossless, and one lossy cut behind a tool.** Terminal noise, repeated lines, and what an earlier
  result shows already (a pointer naming that call, or a diff to it); and, only when the model can
  call ``pinch_retrieve`` (:mod:`router.core.retrieve`) and the settings allow it, a long output cut
  to what the model most likely reads, the whole one call away. The earlier results are the ones the model sees, as they are sent (a
  result sent compressed is left out: a pointer into its head and tail would name lines it no
  longer shows).
* **A pointer always names what is there.** A reduction that points at earlier results records them
  (id and content digest). When one of them is no longer in the conversation with that content (the
  client compacted its history), is sent compressed, or went back to its original, the pointing
  result goes as its original from then on (its entry is dropped). A batch that compresses a result
  something points at first has :meth:`FirstSight.release` let go of the pointing results (they go as their
  originals: a new one was never sent, one from the ledger leaves it). That costs no extra cache
  break: the batch changes the prompt from the compressed result on, and what points at it comes
  later; the planner counts what it gives back (:meth:`~router.core.pinch_ledger._Rewrites.steps`).

A result's text is a string content, or the longest text part of a list (the first of the longest;
every other part kept as it is): Codex's code-mode ``exec`` answers with a short header part ("Script
completed…") before the command's output.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import orjson
from xxhash import xxh3_64_hexdigest

from router.core.content import TEXT_PART_TYPES
from router.core.first_sight import EarlierIndex, EarlierResult, FirstSightSettings, NewResult, reduce_at_first_sight
from router.core.request_view import Conversation, stable_id
from router.core.tokens import CHARS_PER_TOKEN


class FirstSightEntry(NamedTuple):
    """What the ledger records of a result reduced at first sight: the text sent for it (its string
    content, or its longest text part) and the earlier results it points at, as (result id, content digest)."""

    text: str
    points_at: tuple[tuple[str, str], ...] = ()


FirstSightEntries = Mapping[str, Mapping[str, FirstSightEntry]]  # result id → content digest → entry


def content_digest(content: Any) -> str:
    """A digest of a tool result's whole content: the 64-bit XXH3 of its UTF-8 (of its JSON for parts).

    It only has to tell a changed result from the one the ledger recorded (the id already says which
    result it is), not resist an adversary: a collision would compress a changed result one batch
    early, never corrupt one. XXH3 hashes at memory speed (~10× CRC-32, ~15× SHA-256), so digesting
    every ledger result of a request costs less than compressing them.
    """
    if type(content) is str:  # also inline in pinch_conversation's ledger loop
        data = content.encode("utf-8", "surrogatepass")
    else:
        data = orjson.dumps(content, default=str)
    return xxh3_64_hexdigest(data)


def text_of(content: Any) -> tuple[str, int] | None:
    """A result's text for first sight and where it is: (the string, -1), or (the longest text part's
    text, its index in the list: the first of the longest); None for anything else (no text part)."""
    if type(content) is str:
        return content, -1
    if type(content) is not list:
        return None
    found: tuple[str, int] | None = None
    for index, part in enumerate(content):
        if type(part) is dict and part.get("type") in TEXT_PART_TYPES and type(text := part.get("text")) is str:
            if found is None or len(text) > len(found[0]):
                found = text, index
    return found


def with_text(content: Any, where: int, text: str) -> Any:
    """``content`` with its text (:func:`text_of`'s ``where``) replaced by ``text``; nothing else changed or mutated."""
    if where < 0:
        return text
    parts = list(content)
    parts[where] = {**parts[where], "text": text}
    return parts


class Calls(Protocol):
    def tool_call(self, unit: int) -> tuple[str, str]: ...


class FirstSight:
    """First sight's part of one request of a session (module doc): :meth:`resend` the ledger's texts,
    then :meth:`reduce` the new results; the planner sends :attr:`rewrites`, counts :attr:`saved`, and
    calls :meth:`release` before it compresses a result.

    ``sizes``: the units' sizes (the estimator's weighted characters, :class:`~router.core.tokens.PromptSize`).
    ``calls``: what names the call of a result's unit (default the conversation; pinch passes its
    :class:`~router.core.unit_memo.UnitMemo`, which keeps them from request to request).
    """

    def __init__(self, conversation: Conversation, sizes: Sequence[int], calls: Calls | None = None) -> None:
        self.conversation, self.sizes = conversation, sizes
        self.calls: Calls = calls if calls is not None else conversation
        self.result_units, self.units = conversation.result_units(), conversation.units
        self.key = conversation.result_key
        units, id_key = self.units, conversation.result_id_key
        self.ids = [stable_id(units[unit].get(id_key), unit) for unit in self.result_units]
        self._digests: dict[int, str] = {}
        self.rewrites: dict[int, Any] = {}  # result position → the content sent
        self.saved: dict[int, int] = {}  # result position → tokens saved
        self.new: dict[int, FirstSightEntry] = {}  # the positions reduced by this request, and their entries
        self.dropped: list[tuple[str, str]] = []  # (id, digest) of the ledger's entries sent as the original again
        self.reverted: list[int] = []  # their positions
        self.pointers: dict[int, list[int]] = {}  # result position → the positions whose text sent points at it
        self._in_progress = len(self.result_units)  # the first result of the in-progress turn
        # the earlier results indexed as this request reduced against them, for the next (reduce)
        self.earlier: EarlierIndex | None = None

    def digest_at(self, position: int) -> str:
        known = self._digests.get(position)
        if known is None:
            known = self._digests[position] = content_digest(self.units[self.result_units[position]].get(self.key))
        return known

    @property
    def added(self) -> list[tuple[str, str, FirstSightEntry]]:
        """The ledger's new entries: (id, digest, entry)."""
        return [(self.ids[position], self.digest_at(position), entry) for position, entry in self.new.items()]

    @property
    def seen(self) -> tuple[str, ...]:
        """The in-progress turn's results this request sends verbatim (ids): never reduced later."""
        return tuple(self.ids[p] for p in range(self._in_progress, len(self.ids)) if p not in self.rewrites)

    def resend(self, entries: FirstSightEntries, taken: Collection[int]) -> None:
        """The ledger's first-sight ``entries`` sent as recorded, but for the ``taken`` positions (sent
        compressed), and for a text whose pointer lost its target (no longer there with the content it
        had, compressed, or sent as its original again): that one goes as its original, its entry dropped."""
        if not entries:
            return
        ids, result_units, units, key, digest_at = self.ids, self.result_units, self.units, self.key, self.digest_at
        where_is: dict[str, list[int]] = {}
        for position, rid in enumerate(ids):
            where_is.setdefault(rid, []).append(position)
        for position, rid in enumerate(ids):
            held = entries.get(rid)
            if held is None or position in taken:
                continue
            entry = held.get(digest_at(position))
            if entry is None:
                continue
            content = units[result_units[position]].get(key)
            found = text_of(content)
            if found is None:
                continue
            targets = [self._target(where_is.get(pid, ()), pdigest, position, taken) for pid, pdigest in entry.points_at]
            if None in targets:
                self.dropped.append((rid, digest_at(position)))
                self.reverted.append(position)
                continue
            text, where = found
            self.rewrites[position] = entry.text if where < 0 else with_text(content, where, entry.text)
            self.saved[position] = _saving(self.sizes[result_units[position]], len(entry.text) - len(text))
            for target in targets:
                self.pointers.setdefault(target, []).append(position)  # type: ignore[arg-type]

    def _target(self, places: Iterable[int], digest: str, before: int, taken: Collection[int]) -> int | None:
        """The latest of ``places`` before ``before`` whose content has ``digest``, sent as when it was
        pointed at (not compressed, not back to its original); None when there is none."""
        for at in sorted(places, reverse=True):
            if at < before and self.digest_at(at) == digest:
                return None if at in taken or at in self.reverted else at
        return None

    def reduce(
        self,
        taken: Collection[int],
        seen: Collection[str],
        settings: FirstSightSettings | None,
        query: Sequence[str] = (),
        *,
        lossy: bool = False,
        earlier: EarlierIndex | None = None,
    ) -> None:
        """Reduce the in-progress turn's results never sent (not ``taken``, not resent, not in ``seen``:
        sent verbatim by the previous request), each against the results before it as the model sees
        them, the ``taken`` ones left out. ``settings`` None: none is reduced. ``query``: the task and
        the current step (what a lossy cut keeps; the lossless rules do not read it). ``lossy``: the
        model can call ``pinch_retrieve`` (the long-output cut is made when ``settings.lossy`` too).
        ``earlier``: the index of the earlier results an earlier request of the conversation left
        (:attr:`earlier`): extended when this conversation continues it, else built anew."""
        conversation, result_units, ids = self.conversation, self.result_units, self.ids
        count = len(result_units)
        start = conversation.last_turns_start(1)
        self._in_progress = new_from = bisect_left(result_units, start) if start else count
        self.earlier = earlier
        if settings is None:
            return
        # a result shorter than the least saving worth making cannot be reduced: the earlier results
        # are indexed only for one that can
        least = settings.min_saved_tokens * CHARS_PER_TOKEN
        fresh = [
            p
            for p in range(new_from, count)
            if p not in self.rewrites and p not in taken and ids[p] not in seen and p not in self.reverted and self._long_enough(p, least)
        ]
        if fresh:
            self.earlier = self._reduce(fresh, taken, settings, query, lossy and settings.lossy, earlier)

    def _long_enough(self, position: int, chars: int) -> bool:
        found = text_of(self.units[self.result_units[position]].get(self.key))
        return found is not None and len(found[0]) >= chars

    def dependents(self, target: int, live: Collection[int] | None = None) -> list[int]:
        """The positions whose text sent points at ``target``, or at one of them, and so on (among ``live``
        ones: those still sent so; default, every text this request sends)."""
        live = self.rewrites if live is None else live
        found: list[int] = []
        stack = [target]
        while stack:
            for position in self.pointers.get(stack.pop(), ()):
                if position in live and position not in found:
                    found.append(position)
                    stack.append(position)
        return found

    def release(self, target: int) -> list[int]:
        """Before ``target`` is compressed: every text pointing at it (:meth:`dependents`) goes as its
        original instead — a new one was never sent, one from the ledger leaves it. Their positions."""
        released = self.dependents(target)
        for position in released:
            del self.rewrites[position], self.saved[position]
            if self.new.pop(position, None) is None:
                self.dropped.append((self.ids[position], self.digest_at(position)))
                self.reverted.append(position)
        return released

    def compressed(self, position: int) -> None:
        """A batch compresses ``position`` (from its original): its first-sight text, if any, is no longer sent."""
        if self.rewrites.pop(position, None) is not None:
            del self.saved[position]

    def _reduce(
        self, fresh: list[int], taken: Collection[int], settings: FirstSightSettings, query: Sequence[str], lossy: bool, earlier: EarlierIndex | None
    ) -> EarlierIndex:
        """Reduce the ``fresh`` results, each against the ones before it as sent; the index of them all."""
        new = set(fresh)
        latest: dict[str, int] = {}  # result id → its latest position in the index (a pointer names the latest)
        before: list[EarlierResult] = []  # the results before the first new one, as sent: one request's index holds them
        for position in range(fresh[0]):
            result = self._as_sent(position, taken)
            if result is not None:
                before.append(result)
                latest[result.call_id] = position
        # On a long session indexing them again on every turn was most of first sight's time (O(session) a request)
        index = earlier if earlier is not None and earlier.continued_by(before, settings) else EarlierIndex(settings=settings)
        for result in before[len(index) :]:
            index.add(result)
        for position in range(fresh[0], fresh[-1] + 1):
            if position in new:
                self._reduce_one(position, index, latest, query, settings, lossy)
            result = self._as_sent(position, taken)  # a new one as this request sends it: reduced, or not
            if result is not None:
                index.add(result)
                latest[result.call_id] = position
        return index

    def _reduce_one(
        self, position: int, index: EarlierIndex, latest: Mapping[str, int], query: Sequence[str], settings: FirstSightSettings, lossy: bool
    ) -> None:
        """Reduce the new result at ``position`` against ``index`` (``latest``: where each result it holds is)."""
        unit = self.result_units[position]
        content = self.units[unit].get(self.key)
        text, where = text_of(content)  # type: ignore[misc]  # a new result has a text (reduce)
        name, arguments = self.calls.tool_call(unit)
        reduction = reduce_at_first_sight(NewResult(text, name, arguments), index, query, settings, allow_lossy=lossy, retrieve_id=self.ids[position])
        if reduction is None:
            return
        targets = [latest[pid] for pid in reduction.points_at]
        self.new[position] = FirstSightEntry(reduction.text, tuple((self.ids[t], self.digest_at(t)) for t in targets))
        self.rewrites[position] = reduction.text if where < 0 else with_text(content, where, reduction.text)
        self.saved[position] = _saving(self.sizes[unit], len(reduction.text) - len(text))
        for target in targets:
            self.pointers.setdefault(target, []).append(position)

    def _as_sent(self, position: int, taken: Collection[int]) -> EarlierResult | None:
        """An earlier result as this request sends it (its first-sight text, if any); None for one sent
        compressed (``taken``) or with no text."""
        if position in taken:
            return None
        unit = self.result_units[position]
        content = self.units[unit].get(self.key)
        found = text_of(content)
        if found is None:
            return None
        text, where = found
        sent = self.rewrites.get(position)
        if sent is not None:
            text = sent if where < 0 else sent[where]["text"]
        return EarlierResult(self.ids[position], *self.calls.tool_call(unit), text)


def _saving(size: int, delta: int) -> int:
    """The tokens a unit of ``size`` weighted characters saves when its text changes by ``delta`` characters."""
    return (size + delta) // -CHARS_PER_TOKEN - size // -CHARS_PER_TOKEN
