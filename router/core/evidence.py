"""Lexical evidence: which old tool results hold the exact names the session itself uses (ARCHITECTURE §6). Pure.

Embeddings are fuzzy; a file path, a code identifier or an error name is exact.
When the agent's own words — the task and its recent steps (their text and
tool-call arguments, :class:`~router.core.turn_text.TurnText`) — name
``src/app/models.py``, ``parse_args`` or ``IntegrityError``, an old result that
holds that name is evidence of what the session is working with.

* :func:`evidence_terms`: the names in a text: a token with a slash, an
  underscore, a dot, or an inner capital (``CamelCase``), of at least
  :data:`MIN_TERM_CHARS` characters — plain words are not evidence.
* :func:`lexical_evidence`: per candidate, the sum over the names it shares
  with the agent's words of ``log(1 + mentions) / results_holding``: a name the
  agent keeps using counts more, a name that every result holds (the repository
  root, ``self.assert``) counts little. Scaled so the best candidate has 1;
  all zeros when no candidate shares a name.

Terms of a text are memoised by the text's digest (:class:`TermCache`): the old
results of a session are the same on every request, so a request extracts the
names of its new results only.
"""

from __future__ import annotations

import math
import re
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence

from xxhash import xxh3_64_intdigest

MIN_TERM_CHARS = 4
_TOKEN = re.compile(r"[A-Za-z_][\w./-]*\w")
_INNER_CAPITAL = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")


def evidence_terms(text: str) -> frozenset[str]:
    """The paths, identifiers and error names in ``text`` (module doc)."""
    terms = set()
    for match in _TOKEN.finditer(text):
        term = match.group().strip("./-")
        if len(term) < MIN_TERM_CHARS:
            continue
        if "/" in term or "_" in term or "." in term or _INNER_CAPITAL.search(term):
            terms.add(term)
    return frozenset(terms)


class TermCache:
    """:func:`evidence_terms` memoised by the text's 64-bit digest, the oldest forgotten beyond ``max_entries``."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._terms: OrderedDict[int, frozenset[str]] = OrderedDict()

    def terms(self, text: str) -> frozenset[str]:
        key = xxh3_64_intdigest(text.encode("utf-8", "surrogatepass"))
        found = self._terms.get(key)
        if found is None:
            found = self._terms[key] = evidence_terms(text)
            if len(self._terms) > self.max_entries:
                self._terms.popitem(last=False)
        else:
            self._terms.move_to_end(key)
        return found


def lexical_evidence(candidates: Sequence[frozenset[str]], agent: Iterable[frozenset[str]], results: Iterable[frozenset[str]]) -> list[float]:
    """Each candidate's evidence in [0, 1] (module doc).

    ``candidates``: the terms of each trim candidate; ``agent``: the terms of each of the agent's
    texts (the task, each recent step), a name counted once per text it occurs in; ``results``: the
    terms of every tool result of the request (candidates included), for how common a name is.
    """
    mentions = Counter(term for terms in agent for term in terms)
    if not mentions:
        return [0.0] * len(candidates)
    holding = Counter(term for terms in results for term in terms if term in mentions)
    raw = [
        sum(math.log1p(mentions[term]) / max(holding[term], 1) for term in terms if term in mentions) for terms in candidates
    ]
    peak = max(raw, default=0.0)
    return [value / peak for value in raw] if peak > 0 else [0.0] * len(candidates)
