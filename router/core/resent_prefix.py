"""A conversation resent byte for byte is parsed and checked once. Pure.

An agent sends its whole conversation with every request: each body's bytes begin with the
previous body's opening and messages, then add the turn's new messages, and end with the tail
(tools, settings; Codex's changes every turn). Parsing those repeated bytes again is the largest
part of a long request's cost (on a 224 KB transcript, orjson's parse is ~2 M of the proxy's ~9 M
instructions, and the wire's check and the token estimate walk every message again). So each edge
keeps the last bodies it accepted (:class:`ResentBodies`), and a body whose bytes repeat one of
them up to the end of one of its conversation elements (a message, an item, a content) is parsed
from the bytes after it alone (:meth:`ResentBodies.resume`): the elements before are the earlier
parse's very objects, and what the wire's check learned of them (:attr:`KnownBody.facts`) and the
estimator's sizes (:attr:`KnownBody.measured`) are the earlier request's.

Exactness: the body resumed is ``orjson.loads(raw)``, value for value, key for key, always.

* An element's end is known only where the earlier body's bytes are exactly orjson's writing of
  it, element by element (and the whole body, when it is kept without an earlier one): JSON as
  Node's ``JSON.stringify``, serde_json and httpx ≥ 0.28 write it. A body written otherwise
  (spaces, escaped non-ASCII, a duplicate key) is kept with the elements that compare, or not at
  all (its next request is parsed whole, as without this module).
* A resumed body repeats the earlier bytes up to such an end. The bytes after it must be the
  array's end, or a comma and one or more elements, then the rest of the body; they are parsed as
  one object whose first key holds those elements (a key no JSON text can hold without the escape
  ``\u0000``, whose presence sends the body to the whole parse). The same bytes before make the
  same values (the pairs before the array are kept as those bytes hold them); a key written again
  after the array takes its first place's value, as a parse of the whole does.
* Nothing kept is ever changed: the proxy builds every upstream body, rewrite and translation as
  new objects (copy on write), and the tests check after each request that every kept body
  still equals its bytes' parse.

Anything else (no earlier body, bytes that do not line up, a part that is no JSON) is a miss, and
the caller parses the whole body. A body is kept only once its request was accepted (valid,
within the depth limit, no number parsed again), so what was checked of it holds. A wire's check
that resumes takes its facts only where what they depend on besides the elements (Anthropic's
``system``, Gemini's ``systemInstruction``) is the earlier body's.

What the chain made of a kept body goes on to the body that resumes it, for what repeats to be
taken again rather than made again: pinch's decisions on its old results (:attr:`KnownBody.pinch`),
and its array as it went upstream (:attr:`KnownBody.sent`: the rewritten elements and their bytes).

Memory: at most ``max_bytes`` of request bytes are kept (their parse is ~3–5× that), the least
recently kept dropped first; a conversation's newest body replaces its earlier one. A body pinch
rewrote also holds the array it sent upstream (no longer than its own).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import compress, count
from operator import is_, is_not
from typing import Any, NamedTuple

import orjson

from router.core.tokens import PromptSize, TokenEstimator

OPENING_BYTES = 32  # a body's first bytes pick the earlier bodies it is compared with (an agent's share them)
PER_OPENING = 64  # bodies kept with the same first bytes: the conversations one agent holds open at once
SIGNATURE_BYTES = 64  # the second element's first bytes, which tell an agent's conversations apart
MIN_BYTES = 8192  # a smaller body is parsed whole for less than comparing it costs (~5 µs)
_JSON_SPACE = b" \t\n\r"


@dataclass(slots=True, eq=False)
class KnownBody:
    """A body accepted earlier, as the next one is compared with and resumed from.

    ``elements``: its ``key`` array as its bytes hold it (``body[key]``, unless a later duplicate key
    replaced it); ``ends[i]``: the offset just past element ``i``, for the leading elements whose
    bytes are known to sit there (see the module doc); ``head``: the pairs its bytes hold before the
    array. A body kept without an earlier one is laid out (``ends`` and ``head`` found) only when a
    body with its opening comes to be compared with it: None until then. ``facts``: what the wire's
    check learned of the elements, for the next check to resume from (the wire's own type; None:
    nothing). ``measured``: the estimator's measurement of this body once measured (:class:`Measured`);
    ``prior``: the ``measured`` of the body this one resumed, whose first units it shares. ``pinch``:
    what pinch decided on this body's old results, for the next body to resume it
    (:class:`router.core.pinch_ledger.PinchNote`, set by pinch-prune; None: nothing);
    ``prior_pinch``: the ``pinch`` of the body this one resumed. ``sent``: its array as pinch's
    rewrites made it and as it was written upstream (:class:`Sent`), once it was; ``prior_sent``: the
    ``sent`` of the body this one resumed, whose rewritten elements and bytes the next
    :meth:`rewritten` and :meth:`written` take again when they repeat.
    """

    raw: bytes
    body: dict[str, Any]
    key: str
    elements: list[Any]
    ends: list[int] | None
    head: list[tuple[str, Any]] | None
    max_depth: int
    start: int = -1  # the offset of its first element (once laid out)
    facts: Any = None
    measured: Measured | None = None
    prior: Measured | None = None
    resumed: int = 0  # the elements taken from the body this one resumed (0: parsed whole)
    # the first bytes of its second element (none: one element), which a body that resumes more
    # than its first element repeats: a cheap test before the whole prefix is compared
    signature: bytes = b""
    # its bytes from the array's closing bracket on, and the pairs they hold, when known (b"": not
    # known): a body that repeats them too takes those values instead of parsing them again
    tail: bytes = b""
    tail_items: dict[str, Any] | None = None
    pinch: Any = None
    prior_pinch: Any = None
    sent: Sent | None = None
    prior_sent: Sent | None = None

    def rewritten(
        self, elements: list[Any], rewrites: Mapping[int, Any], element_of: Callable[[int], int], write: Callable[[Mapping[int, Any]], list[Any]]
    ) -> list[Any]:
        """``write(rewrites)``: ``elements`` with pinch's ``rewrites`` (result position → content) written
        in, every element it does not rewrite left as it is (the wire's write-back; ``element_of``: the
        element a position's result is in). When ``elements`` are this body's own (element for
        element) and the body this one resumed was written with rewrites, the elements that write made
        before the first element whose rewrites differ now (a result rewritten anew, or for the first
        time: pinch's ledger adds the turn's new results to what it rewrites) — the same positions, the
        same content objects — are what ``write`` would make equal: they are taken again, the very
        objects, so that the translations and :meth:`written` find them unchanged (on the 230 KB
        transcript, its 75 compressed results: ~40 µs a request); only the elements from there on are
        written. Other ``elements`` are only written."""
        if elements is not self.elements and not (len(elements) == len(self.elements) and all(map(is_, elements, self.elements))):
            return write(rewrites)  # not this body's array: nothing of it to take again, nor to keep
        prior = self.prior_sent
        if prior is None or prior.rewrites is None or prior.rewritten is None:
            out = write(rewrites)
        else:
            before = prior.rewrites
            # the first element whose rewrites differ from the turn before's (none beyond what it resumed)
            first = min(self.resumed, len(prior.rewritten))
            if len(rewrites) != len(before) or list(rewrites) != list(before) or not all(map(is_, rewrites.values(), before.values())):
                # the same rewrites (the usual turn) are told in C above; only a turn that differs walks them
                for position, content in rewrites.items():
                    if before.get(position, _NOT_REWRITTEN) is not content:
                        first = min(first, element_of(position))
                if first and any(position not in rewrites for position in before):
                    first = 0  # a result no longer rewritten (a re-plan): rare, written whole
            if first == 0:
                out = write(rewrites)
            elif element_of(max(rewrites)) < first:  # nothing rewritten from there on: the usual turn
                out = prior.rewritten[:first] + self.elements[first:]
            else:
                after = {position: content for position, content in rewrites.items() if element_of(position) >= first}
                out = prior.rewritten[:first] + write(after)[first:]
        sent = self.sent  # what was written stays: written() takes it only for the very same elements
        self.sent = Sent(rewrites, out, None, b"") if sent is None else sent._replace(rewrites=rewrites, rewritten=out)
        return out

    def written(self, elements: list[Any]) -> Any:
        """``elements`` (a body's array as it goes upstream) to be written in place of the list: the
        runs of them that are this body's own elements, where they were, as the bytes the client sent
        (orjson's writing of them: the elements laid out are exactly that), the others written; the
        list itself when none can be. ``orjson.dumps`` of the result is byte for byte ``orjson.dumps``
        of ``elements``, without serialising again what the chain did not change."""
        ends = self.ends
        if not ends:
            return elements
        # The array as it went upstream last time (this body's own, then the body's it resumed): the
        # elements of it that this array repeats as its first, the very objects, are those bytes again.
        prior = self.sent if self.sent is not None and self.sent.written is not None else self.prior_sent
        skip = 0
        if prior is not None and prior.written is not None and len(prior.written) <= len(elements) and all(map(is_, prior.written, elements)):
            skip = len(prior.written)
            if skip == len(elements):  # all of it (a request tried on a second candidate, or resent as it was)
                self._sent_as(elements, prior.fragment)
                return orjson.Fragment(prior.fragment)
        known = min(len(ends), len(elements))
        # the positions that differ, found in C: a request's rewrites are a few of its elements
        changed = list(compress(count(skip), map(is_not, elements[skip:known], self.elements[skip:known])))
        changed.extend(range(max(known, skip), len(elements)))
        if not skip and len(changed) == len(elements):
            return elements
        # the pieces are views of the client's bytes, joined once: a long body's array is copied
        # once here (and once by orjson), not sliced, joined and bracketed in four copies
        raw, pieces, at = memoryview(self.raw), [b"["], skip  # at: the first element not yet written
        if skip:
            assert prior is not None
            pieces[0] = memoryview(prior.fragment)[:-1]  # its elements, without the closing bracket
            if skip < len(elements):
                pieces.append(b",")
        for index in changed:
            if index > at:
                pieces.append(raw[self.start if at == 0 else ends[at - 1] + 1 : ends[index - 1]])
                pieces.append(b",")
            pieces.append(orjson.dumps(elements[index]))
            pieces.append(b",")
            at = index + 1
        if at < len(elements):
            pieces.append(raw[self.start if at == 0 else ends[at - 1] + 1 : ends[len(elements) - 1]])
        else:
            pieces.pop()  # the last comma
        pieces.append(b"]")
        fragment = b"".join(pieces)
        if skip or changed:  # kept for the next turn (a body sent as the client wrote it needs none)
            self._sent_as(elements, fragment)
        return orjson.Fragment(fragment)

    def _sent_as(self, elements: list[Any], fragment: bytes) -> None:
        sent = self.sent
        self.sent = Sent(None, None, elements, fragment) if sent is None else sent._replace(written=elements, fragment=fragment)

    def measure(self, estimator: TokenEstimator, units: list[Any], tools: Any, reused: int) -> PromptSize:
        """``estimator.measure(units, tools)``, the first ``reused`` units' sizes taken from the body this
        one resumed (they are its very objects) when the same estimator measured it, and the tools'
        tokens when they are the same objects (:func:`same_objects`); kept for the next."""
        prior = self.prior
        if prior is None or prior.estimator != estimator:
            size = estimator.measure(units, tools)
        else:
            known = prior.sizes[:reused] if reused and len(prior.sizes) >= reused else None
            tools_chars = prior.tools_chars if same_objects(tools, prior.tools) else None
            size = estimator.measure(units, tools, known, tools_chars)
        self.measured = Measured(estimator, size.sizes, tools, size.tools_chars)
        return size


_NOT_REWRITTEN = object()


class Sent(NamedTuple):
    """A body's array on its way upstream: ``rewritten``, what :meth:`KnownBody.rewritten` made of it
    with pinch's ``rewrites`` (None: not made so); ``written``, the array :meth:`KnownBody.written`
    wrote, and ``fragment``, its bytes (``orjson.dumps(written)``; None, b"": not written)."""

    rewrites: Mapping[int, Any] | None
    rewritten: list[Any] | None
    written: list[Any] | None
    fragment: bytes


class Measured(NamedTuple):
    """A body's measurement by ``estimator``: each unit's size, and the characters of the tools' JSON (``tools`` what was counted)."""

    estimator: TokenEstimator
    sizes: list[int]
    tools: Any
    tools_chars: int


def same_objects(value: Any, other: Any) -> bool:
    """``value`` and ``other`` are one object, or lists of the same objects, or of such objects and of
    objects whose values are the same objects, key for key in the same order: their JSON is the same
    bytes (no parsed object is ever changed). For a view's tools, which a resumed body takes from the
    body before (the Responses view adds its ``instructions`` to them in an object of its own)."""
    if value is other:
        return True
    if type(value) is not list or type(other) is not list or len(value) != len(other):
        return False
    for mine, theirs in zip(value, other):
        if mine is theirs:
            continue
        if type(mine) is not dict or type(theirs) is not dict or len(mine) != len(theirs):
            return False
        if not all(a == b and mine[a] is theirs[b] for a, b in zip(mine, theirs)):
            return False
    return True


class Resumed(NamedTuple):
    """A body parsed from the bytes it adds to ``parent``: the first ``count`` of its ``elements``
    (its array as its bytes hold it) are the parent's; ``tail_items``: the pairs after the array."""

    body: dict[str, Any]
    parent: KnownBody
    count: int
    elements: list[Any]
    tail_items: dict[str, Any]


class ResentBodies:
    """The bodies one edge accepted last, by their first bytes, within ``max_bytes`` of request bytes;
    none smaller than ``min_bytes``."""

    def __init__(self, max_bytes: int, max_bodies: int = 512, min_bytes: int = MIN_BYTES) -> None:
        self.max_bytes = max_bytes
        self.max_bodies = max_bodies
        self.min_bytes = min_bytes
        self.held = 0  # bytes of the bodies kept
        self._by_opening: dict[bytes, list[KnownBody]] = {}  # most recently kept first
        self._order: OrderedDict[int, KnownBody] = OrderedDict()  # id → body, least recently kept first

    def __len__(self) -> int:
        return len(self._order)

    def bodies(self) -> list[KnownBody]:
        """Every body kept (for the tests that check nothing kept was changed)."""
        return list(self._order.values())

    def resume(self, raw: bytes, key: str, max_depth: int) -> Resumed | None:
        """``raw`` parsed from a body kept earlier (the module doc), or None: parse it whole."""
        group = self._by_opening.get(raw[:OPENING_BYTES])
        if not group:
            return None
        best: KnownBody | None = None
        best_count = 0
        for known in tuple(group):
            if known.key != key or known.max_depth != max_depth:
                continue
            if known.ends is None and not self._lay_out(known):
                continue
            ends = known.ends
            assert ends is not None
            if known.signature and not raw.startswith(known.signature, ends[0]):
                # another conversation that opens the same way: at most its first element is shared
                if not best_count and raw.startswith(memoryview(known.raw)[: ends[0]]):
                    best, best_count = known, 1
                continue
            count = _repeated(raw, known)
            if count > best_count:
                best, best_count = known, count
                if count == len(ends):
                    break  # all of it: the usual next turn of one conversation
        if best is None:
            return None
        assert best.ends is not None and best.head is not None
        end = best.ends[best_count - 1]
        tail = best.tail_items if best.tail and len(raw) - len(best.tail) >= end and raw.endswith(best.tail) else None
        added = None
        if tail is not None:  # the tail repeated too (tools, settings): its values are the earlier parse's
            added = _elements(raw[end : len(raw) - len(best.tail)])
        if added is None:  # else (or those bytes end the array early) the rest is parsed
            rest = _rest(raw[end:])
            if rest is None:
                return None
            added, tail = rest
        elements = best.elements[:best_count] + added if added else best.elements[:best_count]
        body = dict(best.head)
        body[key] = elements
        if tail:
            body.update(tail)  # as a parse of the whole: a key written again takes its place's value
        return Resumed(body, best, best_count, elements, tail)

    def keep(self, raw: bytes, body: Any, key: str, max_depth: int, facts: Any, resumed: Resumed | None) -> KnownBody | None:
        """Keep an accepted body for the next one to resume from; None when its bytes cannot serve (the module doc)."""
        if not self.max_bytes or len(raw) * 4 > self.max_bytes or len(raw) < self.min_bytes:
            return None  # off, a body that would push out everything else, or one cheap to parse
        if resumed is not None and resumed.parent.ends is not None:
            parent, count, elements = resumed.parent, resumed.count, resumed.elements
            ends = parent.ends[:count]
            _extend_ends(ends, raw, elements, ends[-1])
            known = KnownBody(raw, body, key, elements, ends, parent.head, max_depth, parent.start, facts=facts,
                              prior=parent.measured, resumed=count, signature=_signature(raw, ends),
                              prior_pinch=parent.pinch, prior_sent=parent.sent)  # fmt: skip
            if len(ends) == len(elements) and raw[ends[-1] : ends[-1] + 1] == b"]":
                known.tail, known.tail_items = raw[ends[-1] :], resumed.tail_items
            if count >= 2 or count == len(parent.ends):
                self._drop(parent)  # the same conversation, one turn on (not one that only shares its opening)
        elif type(body) is dict and type(body.get(key)) is list and body[key]:
            # laid out when a body with its opening comes (most bodies kept this way are a
            # conversation's first; a client whose bytes never line up pays nothing more)
            known = KnownBody(raw, body, key, body[key], None, None, max_depth, facts=facts)
        else:
            return None
        self._add(known)
        return known

    def clear(self) -> int:
        """Forget every body kept (the proxy went idle: their memory goes back); the bytes they held."""
        held = self.held
        self._by_opening.clear()
        self._order.clear()
        self.held = 0
        return held

    def _lay_out(self, known: KnownBody) -> bool:
        layout = _canonical_layout(known.raw, known.body, known.key)
        if layout is None:
            self._drop(known)  # its bytes are not orjson's writing of it: no body can resume from it
            return False
        known.ends, known.head, known.start = layout
        known.signature = _signature(known.raw, known.ends)
        known.tail = known.raw[known.ends[-1] :]  # laid out: the bracket right after the last element
        known.tail_items = {name: value for name, value in known.body.items() if name not in dict(known.head) and name != known.key}
        return True

    def _add(self, known: KnownBody) -> None:
        group = self._by_opening.setdefault(known.raw[:OPENING_BYTES], [])
        group.insert(0, known)
        self._order[id(known)] = known
        self.held += len(known.raw)
        if len(group) > PER_OPENING:
            self._drop(group[-1])
        while self.held > self.max_bytes or len(self._order) > self.max_bodies:
            self._drop(next(iter(self._order.values())))

    def _drop(self, known: KnownBody) -> None:
        if self._order.pop(id(known), None) is None:
            return  # dropped already (another request of the conversation moved on first)
        self.held -= len(known.raw)
        opening = known.raw[:OPENING_BYTES]
        group = self._by_opening[opening]
        group.remove(known)
        if not group:
            del self._by_opening[opening]


def _signature(raw: bytes, ends: list[int]) -> bytes:
    return raw[ends[0] : min(ends[1], ends[0] + SIGNATURE_BYTES)] if len(ends) > 1 else b""


def _repeated(raw: bytes, known: KnownBody) -> int:
    """How many of ``known``'s leading elements ``raw`` repeats byte for byte."""
    ends, view = known.ends, memoryview(known.raw)
    assert ends is not None
    last = len(ends) - 1
    if raw.startswith(view[: ends[last]]):
        return last + 1
    low, high = 0, last  # ends[i] repeated for i < low; not for i >= high
    while low < high:
        middle = (low + high) // 2
        if raw.startswith(view[: ends[middle]]):
            low = middle + 1
        else:
            high = middle
    return low


# The rest of a body after a repeated element is parsed as an object whose first key, this one,
# holds the array's remaining elements. A key of a JSON text can be "\0..." only written with the
# escape \u0000 (a raw NUL is no JSON), so a rest without that escape cannot hold this key.
_REST_KEY = "\x00rest"
_REST_OPENING = b'{"\\u0000rest":['


def _elements(between: bytes) -> list[Any] | None:
    """The elements ``between`` a repeated element and a repeated tail adds: ``[]`` for nothing,
    None for bytes that are no comma and one or more elements (the caller parses the body whole)."""
    rest = between.lstrip(_JSON_SPACE)
    if not rest:
        return []
    if rest[0] != 0x2C:  # ","
        return None
    try:
        added = orjson.loads(b"[" + rest[1:] + b"]")
    except orjson.JSONDecodeError:
        return None
    return added or None  # "," then nothing is no JSON


def _rest(rest: bytes) -> tuple[list[Any], dict[str, Any]] | None:
    """The elements and the body's pairs after the array in the bytes after a repeated element:
    nothing more in the array, or a comma and one or more elements; then the rest of the body.
    None for anything else (the caller parses the body whole and says why)."""
    stripped = rest.lstrip(_JSON_SPACE)
    if stripped[:1] == b",":
        stripped = stripped[1:]
    elif stripped[:1] != b"]":
        return None
    if b"\\u0000" in stripped:
        return None
    try:
        parsed = orjson.loads(_REST_OPENING + stripped)
    except orjson.JSONDecodeError:
        return None
    added = parsed.pop(_REST_KEY)
    if not added and rest.lstrip(_JSON_SPACE)[:1] == b",":
        return None  # a comma and no element: no JSON
    return added, parsed


def _extend_ends(ends: list[int], raw: bytes, elements: list[Any], position: int) -> None:
    """Add to ``ends`` the end of each element after the ``len(ends)`` known, while its bytes are orjson's writing of it."""
    for index in range(len(ends), len(elements)):
        if position >= len(raw) or raw[position] != 0x2C:  # ","
            return
        written = orjson.dumps(elements[index])
        if not raw.startswith(written, position + 1):
            return
        position += 1 + len(written)
        ends.append(position)


def _canonical_layout(raw: bytes, body: Any, key: str) -> tuple[list[int], list[tuple[str, Any]], int] | None:
    """``(ends, head, start)`` of a body whose bytes are exactly orjson's writing of it, else None."""
    if type(body) is not dict or type(body.get(key)) is not list or not body[key]:
        return None
    head: list[tuple[str, Any]] = []
    written_head, written_tail = [], []
    into = written_head
    for name, value in body.items():
        if name == key:
            into = written_tail
            continue
        if into is written_head:
            head.append((name, value))
        into.append(orjson.dumps(name) + b":" + orjson.dumps(value))
    opening = b"{" + b"".join(part + b"," for part in written_head) + orjson.dumps(key) + b":["
    if not raw.startswith(opening):
        return None
    elements = body[key]
    first = orjson.dumps(elements[0])
    if not raw.startswith(first, len(opening)):
        return None
    ends = [len(opening) + len(first)]
    _extend_ends(ends, raw, elements, ends[0])
    closing = b"]" + b"".join(b"," + part for part in written_tail) + b"}"
    if len(ends) != len(elements) or len(raw) - ends[-1] != len(closing) or not raw.endswith(closing):
        return None
    return ends, head, len(opening)
