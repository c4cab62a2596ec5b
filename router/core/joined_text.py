"""Long texts joined once per conversation, not once per request. Pure.

A session's opening (the system prompt's blocks, the first user message's parts) is joined into
one text on every request, for the fingerprint and the turn text — 20–30 KB copied each time
for Claude Code's system blocks or Gemini CLI's first message. A resent conversation's parts
are the earlier parse's very strings (:mod:`router.core.resent_prefix`), so the text joined from
those same objects is the same text: :func:`joined` keeps the last long joins by the identity of
their parts (holding the parts, so no id is reused while kept) and gives the kept text back.
Nothing is hashed or compared but identities; a join of new strings is made and kept as before.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from operator import is_

MIN_CHARS = 4096  # a shorter join costs less than looking it up
MAX_CHARS = 131072  # a longer one is joined every time: at most KEPT × 2 × this held (16 MB)
KEPT = 64  # joins kept: a few per conversation held open at once
_kept: OrderedDict[tuple[int, ...], tuple[str, tuple[str, ...], str]] = OrderedDict()


def joined(separator: str, texts: Sequence[str]) -> str:
    """``separator.join(texts)``, the text itself when the same string objects were joined lately."""
    if len(texts) < 2:
        return texts[0] if texts else ""
    if not MIN_CHARS <= sum(map(len, texts)) <= MAX_CHARS:
        return separator.join(texts)
    key = tuple(map(id, texts))
    entry = _kept.get(key)
    if entry is not None and entry[0] == separator and all(map(is_, entry[1], texts)):
        _kept.move_to_end(key)
        return entry[2]
    text = separator.join(texts)
    _kept[key] = (separator, tuple(texts), text)
    if len(_kept) > KEPT:
        _kept.popitem(last=False)
    return text
