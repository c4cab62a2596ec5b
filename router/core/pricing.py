"""What each decision row cost in dollars, what it would have cost unpinched, and on the reference model. Pure.

The decision log keeps tokens, never dollars: a row is priced when it is read, at the prices of the
config serving then (the models' ``cost_per_mtok``, docs/dashboard.md). Three figures a row:

* **cost**: what the answering model's provider billed, from the usage it reported — the prompt's
  uncached part at ``input``, the part read from its prompt cache at ``cache_read``, the part written
  to it at ``cache_write`` (each unset: the ``input`` price), the completion at ``output``. A row
  without a reported prompt (an error, a stream whose usage never came) or whose model the config no
  longer has is *unpriced*: it counts as no dollars, and is counted as unpriced.
* **unpinched**: the same request without pinch, at the same model — eval-pinch's counterfactual,
  read from the row instead of replayed. Its prompt is the one sent plus the tokens pinch removed
  (``tokens_before - tokens_after``, the proxy's estimate). Cache: where the provider reports no
  cache accounting, none either way. Where it does, the unpinched prompt's cached part is the one
  sent's plus what pinch removed from it (old results sit in the cached prefix), except on a request
  where pinch rewrote the prefix (newly compressed or restored results) while the session's cache
  was warm (its previous request was answered by the same model within the provider's cache
  lifetime): unpinched, the provider would have read the whole previous prompt from its cache. Its
  written part keeps the request's own share of fresh tokens written. A request pinch left alone
  prices exactly as it was billed, so pinch's saving is 0 there, and a rewrite shows as what it cost.
* **reference**: the same request as sent, on the model the client asked for where it is priced
  (a catalogue model, or a name in ``dashboard.reference_prices``), else on ``dashboard.reference_model``;
  None without either. Where the answering provider reported cache figures, the reference reads and
  writes the same tokens; where it reported none, the reference's cache is assumed to serve the
  session's previous prompt while warm (the reference provider's lifetime) and, if it prices writes,
  to write the rest. Routing's saving is the reference minus the cost (0 where the model asked for answered).

Each saving is measured against the requests changed in one way only (pinch off; another model), so
the two do not add up to "no proxy". Tokens are the provider's for the prompt it got and the proxy's
estimate for what pinch removed; the reference is priced on the same token counts (another model's
tokenizer would count a little differently).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any

from router.core.frozen import frozen

PER_MTOK = 1_000_000
DEFAULT_CACHE_LIFETIME_SECONDS = 300.0  # the common providers' (router.core.cache_timing)
REMEMBERED_REFERENCES = 1_000  # the requested model names a RowPricer keeps the reference of


@frozen
class ModelPrice:
    """Dollars per million tokens, and how long the model's provider keeps a cached prefix."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float | None = None  # None: the input price (a cache nobody priced earns nothing)
    cache_write: float | None = None  # None: the input price (no write premium)
    cache_lifetime_seconds: float = DEFAULT_CACHE_LIFETIME_SECONDS

    def cost(self, prompt: int, cached: int, written: int, completion: int) -> float:
        """Dollars for a prompt of ``prompt`` tokens of which ``cached`` were read from the cache and
        ``written`` written to it, and ``completion`` tokens of answer."""
        return self.dollars(max(prompt - cached - written, 0), cached, written, completion)

    def dollars(self, fresh: int, cached: int, written: int, completion: int) -> float:
        """Dollars for ``fresh`` prompt tokens at ``input``, ``cached`` at ``cache_read``, ``written`` at
        ``cache_write`` and ``completion`` at ``output``: linear, so a sum of token counts of many requests
        at one price is priced in one call (:mod:`router.observe.decision_sums`)."""
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        return (fresh * self.input + cached * read + written * write + completion * self.output) / PER_MTOK


@frozen
class Prices:
    """The prices a dashboard reads rows with: the catalogue's by model name, the prices of models
    clients ask for by name (``dashboard.reference_prices``), and the reference model's."""

    models: Mapping[str, ModelPrice]
    requested: Mapping[str, ModelPrice] = field(default_factory=dict)
    reference_name: str | None = None
    reference: ModelPrice | None = None

    def reference_for(self, requested_model: str | None) -> tuple[str, ModelPrice] | None:
        """What a request asking for ``requested_model`` is compared with: that model where it is priced
        (a catalogue name; a ``reference_prices`` name, exactly or as the longest name it starts with,
        so ``claude-opus-4-5`` prices ``claude-opus-4-5-20251101``), else the reference model; None: neither."""
        if requested_model:
            if requested_model in self.models:
                return requested_model, self.models[requested_model]
            if requested_model in self.requested:
                return requested_model, self.requested[requested_model]
            prefixes = [name for name in self.requested if requested_model.startswith(name)]
            if prefixes:
                name = max(prefixes, key=len)
                return name, self.requested[name]
        if self.reference is not None and self.reference_name is not None:
            return self.reference_name, self.reference
        return None

    @property
    def longest_lifetime(self) -> float:
        """The longest cache lifetime of any price: how far before a window its sessions' rows matter."""
        prices = [*self.models.values(), *self.requested.values(), *([self.reference] if self.reference else [])]
        return max((p.cache_lifetime_seconds for p in prices), default=DEFAULT_CACHE_LIFETIME_SECONDS)


@frozen
class RowCost:
    """A row's dollars: None where it is unpriced (``cost``), or has no reference (``reference``)."""

    cost: float | None = None
    unpinched: float | None = None
    reference: float | None = None
    reference_model: str | None = None

    @property
    def pinch_saved(self) -> float:
        return 0.0 if self.cost is None or self.unpinched is None else self.unpinched - self.cost

    @property
    def routing_saved(self) -> float | None:
        return None if self.cost is None or self.reference is None else self.reference - self.cost


UNPRICED = RowCost()


@frozen
class _Previous:
    """A session's previous request: when, the model that answered (None: none), its prompt as sent and
    unpinched (None: not reported)."""

    ts: float
    model: str | None
    prompt: int | None
    unpinched_prompt: int | None


def price_rows(rows: Sequence[Mapping[str, Any]], prices: Prices) -> list[RowCost]:
    """Each row's :class:`RowCost`, in order. ``rows`` are decision rows (dicts with the log's column
    names) in the order they arrived (``ts``); rows of several sessions may interleave. A row's
    previous one is its session's previous row, whatever became of it (an error in between: the
    cache is not taken as warm)."""
    pricer = RowPricer(prices)
    return [pricer.price(row) for row in rows]


class RowPricer:
    """:func:`price_rows` one row at a time, as rows arrive (the proxy's metrics price each request as
    it ends): each session's previous row is remembered — of the ``sessions`` latest sessions only when
    given, so that a process that runs for months holds a bounded memory (a session idle for longer
    than that many others' requests has a cold cache anyway)."""

    def __init__(self, prices: Prices, sessions: int | None = None) -> None:
        self.prices = prices
        self._sessions = sessions
        self._previous: dict[str, _Previous] = {}
        self._references: dict[str | None, tuple[str, ModelPrice] | None] = {}  # by requested model: a few names

    def price(self, row: Mapping[str, Any]) -> RowCost:
        """``row``'s dollars (a mapping with the decision log's column names), after every row before it."""
        prices = self.prices
        model, prompt, session = row.get("model"), row.get("prompt_tokens"), row.get("session")
        before = None
        if session is not None:
            previous = self._previous
            before = previous.pop(session, None)  # re-inserted last: the dict is in order of use
            previous[session] = _Previous(row["ts"], model, prompt, None if prompt is None else prompt + _removed(row))
            if self._sessions is not None and len(previous) > self._sessions:
                del previous[next(iter(previous))]
        price = prices.models.get(model) if model is not None else None
        if price is None or prompt is None:
            return UNPRICED
        cost, unpinched = _priced(row, price, prompt, before)
        requested = row.get("requested_model")
        if requested in self._references:
            reference = self._references[requested]
        else:
            if len(self._references) >= REMEMBERED_REFERENCES:  # names are the clients': bounded
                self._references.clear()
            reference = self._references[requested] = prices.reference_for(requested)
        if reference is None:
            reference_cost = None
        elif reference[0] == model:  # the model asked for answered: routing changed nothing
            reference_cost = cost
        else:
            reference_cost = _reference_cost(row, reference[1], prompt, before)
        return RowCost(cost, unpinched, reference_cost, reference[0] if reference is not None else None)


def _priced(row: Mapping[str, Any], price: ModelPrice, prompt: int, before: _Previous | None) -> tuple[float, float]:
    completion = row.get("completion_tokens") or 0
    cached, written = row.get("cached_tokens"), row.get("cache_write_tokens") or 0
    removed = _removed(row)
    unpinched_prompt = prompt + removed
    if cached is None:  # no cache accounting: every prompt token at the input price, either way
        return price.cost(prompt, 0, written, completion), price.cost(unpinched_prompt, 0, 0, completion)
    cost = price.cost(prompt, cached, written, completion)
    rewrote = (row.get("pinch_newly_compressed") or 0) + (row.get("pinch_restored") or 0) > 0
    if rewrote and _warm(row, price, before):
        assert before is not None
        cached_unpinched = min(unpinched_prompt, max(cached, before.unpinched_prompt or 0))
    elif cached > 0:
        cached_unpinched = max(min(unpinched_prompt, cached + removed), 0)
    else:
        cached_unpinched = 0
    fresh, fresh_unpinched = prompt - cached, max(unpinched_prompt - cached_unpinched, 0)
    # the request's own share of fresh tokens written, in whole tokens (as the SQL sums round it)
    written_unpinched = min(fresh_unpinched * written // fresh, fresh_unpinched) if fresh > 0 else 0
    return cost, price.cost(unpinched_prompt, cached_unpinched, written_unpinched, completion)


def _reference_cost(row: Mapping[str, Any], price: ModelPrice, prompt: int, before: _Previous | None) -> float:
    completion = row.get("completion_tokens") or 0
    cached = row.get("cached_tokens")
    if cached is not None:  # the provider's own cache figures stand for the reference's
        return price.cost(prompt, cached, row.get("cache_write_tokens") or 0, completion)
    cached = min(prompt, before.prompt or 0) if before is not None and row["ts"] - before.ts <= price.cache_lifetime_seconds else 0
    written = prompt - cached if price.cache_write is not None else 0
    return price.cost(prompt, cached, written, completion)


def _warm(row: Mapping[str, Any], price: ModelPrice, before: _Previous | None) -> bool:
    return before is not None and before.model == row["model"] and row["ts"] - before.ts <= price.cache_lifetime_seconds


def _removed(row: Mapping[str, Any]) -> int:
    """The tokens pinch removed from the request (the proxy's estimate; 0 where it did not run), net: a
    request pinch added to (the ``pinch_retrieve`` tool it offered) is negative, as its header says."""
    before, after = row.get("tokens_before"), row.get("tokens_after")
    return before - after if before is not None and after is not None else 0
