"""What pinch works out about a tool result from its own unit and the units before it, kept from one
request of a conversation to the next. Pure.

A long session resends its conversation on every request; when the body was resumed from the one
before (:mod:`router.core.resent_prefix`) its first ``shared_units`` units are that body's very
objects, never changed. Pinch asks two things of old results on every request:

* each candidate's **compression** from its original (:func:`router.core.pinch._rewrite`), for every
  new candidate whenever a batch is planned — and with a warm cache the plan usually ends in "the
  rewrite does not pay", to be planned again on the next request over the same candidates plus one;
* the **call** that produced a result (:meth:`~router.core.request_view.Conversation.tool_call`): a
  placeholder's tool name, first sight's label of every earlier result it indexes.

A compression reads the unit (its content and size), ``max_summarize_chars``, the estimator (the
size) and, for a placeholder, the tool's name; a call reads the units before the result. So on a
format whose names read nothing after the result (``Conversation.names_from_earlier_units``), both
are the same for a unit the next request shares, under the same settings: :class:`UnitMemo` takes
them from the one before instead of working them out again (in a 1 MB Claude Code session whose new
results a warm cache held uncompressed, ~40 % of a request's instructions). On any other format the
memo serves one request.
"""

from __future__ import annotations

from typing import Any

from router.core.request_view import Conversation
from router.core.tokens import TokenEstimator


class UnitMemo:
    """One request's answers about its units (module doc), seeded from ``prior`` — the memo of the
    request whose body this one resumed — for the first ``shared_units`` units when the format's names
    read nothing later and the settings are the same. Serves as the ``names`` pinch's rewrites ask."""

    __slots__ = ("conversation", "max_chars", "estimator", "compressions", "names", "calls", "_top")

    def __init__(
        self, conversation: Conversation, max_chars: int, estimator: TokenEstimator, prior: UnitMemo | None = None, shared_units: int = 0
    ) -> None:
        self.conversation, self.max_chars, self.estimator = conversation, max_chars, estimator
        self.compressions: dict[int, Any] = {}  # unit → its compression from the original (None: none saves)
        self.names: dict[int, str] = {}  # unit → its tool's name
        self.calls: dict[int, tuple[str, str]] = {}  # unit → its call (name, arguments)
        self._top = -1  # the highest unit with an answer
        if (
            prior is not None
            and shared_units > 0
            and getattr(conversation, "names_from_earlier_units", False)
            and prior.max_chars == max_chars
            and prior.estimator == estimator
        ):
            if prior._top < shared_units:  # the usual next turn: every unit it answered is shared
                self.compressions, self.names, self.calls = dict(prior.compressions), dict(prior.names), dict(prior.calls)
                self._top = prior._top
            else:
                self.compressions = {u: c for u, c in prior.compressions.items() if u < shared_units}
                self.names = {u: n for u, n in prior.names.items() if u < shared_units}
                self.calls = {u: c for u, c in prior.calls.items() if u < shared_units}
                self._top = shared_units - 1

    def tool_name(self, unit: int) -> str:
        found = self.names.get(unit)
        if found is None:
            found = self.names[unit] = self.conversation.tool_name(unit)
            self._top = max(self._top, unit)
        return found

    def tool_call(self, unit: int) -> tuple[str, str]:
        found = self.calls.get(unit)
        if found is None:
            found = self.calls[unit] = self.conversation.tool_call(unit)
            self._top = max(self._top, unit)
        return found

    def compression(self, unit: int, absent: Any) -> Any:
        """The compression kept for ``unit``, else ``absent``."""
        return self.compressions.get(unit, absent)

    def keep_compression(self, unit: int, compression: Any) -> None:
        self.compressions[unit] = compression
        self._top = max(self._top, unit)
