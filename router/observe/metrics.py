"""Prometheus metrics, one registry per app (so tests and several apps never share counters).

Everything is observed from the finished :class:`Decision`, in one place.
Label values are bounded: model, category, stage, provider, client key name and status
come from config or a fixed vocabulary, never from client input.

A decision's ~25 observations are tallied in plain dicts and handed to
prometheus-client when the metrics are read (:meth:`Metrics.render`): each
call into prometheus-client takes a lock and checks its arguments, and made
the metrics cost a request ~15 µs of the loop's CPU; tallied, a third of that (:meth:`Metrics.observe`).
A worker of ``serve --workers N`` tallies alike, and hands its tallies over every
second besides (:func:`sample_worker_gauges`, :meth:`Metrics.write_out`), as it
writes what is open now: another worker may answer a scrape from the shared
files, so a worker's values reach it within a second. Observed at once instead,
each observation a write to a shared file, the metrics were 0.35 M instructions
of a worker's request (+16 %, callgrind, the small chat body).

Under ``serve --workers N`` (``PROMETHEUS_MULTIPROC_DIR`` set) every worker
writes its values to that directory and any worker's ``/metrics`` renders all
of them: counters and histograms added up; each gauge as its
``multiprocess_mode`` says — what is open now (requests in flight, upstream
responses, asyncio tasks) summed over the live workers, ``state_backend_up``
the lowest (0 while any worker serves degraded). A worker's asyncio tasks,
read at scrape time by one process, are sampled every second instead
(:func:`sample_worker_gauges`).
"""

from __future__ import annotations

import asyncio
import os
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client import values
from prometheus_client.multiprocess import MultiProcessCollector

from router.core.limits import NANO_USD, Amount
from router.core.pricing import Prices, RowPricer
from router.observe.decision_record import Decision
from router.observe.prices import priced

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_BOUNDS = (*LATENCY_BUCKETS, float("inf"))  # as prometheus-client completes them
_FIRST, _INF = _BOUNDS[0], _BOUNDS[-1]
CONTENT_TYPE = CONTENT_TYPE_LATEST
MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"  # set by `serve --workers N` for its workers
# What a request is priced from (router.core.pricing), and how many sessions' previous requests are kept.
PRICED_FIELDS = (
    "ts", "session", "model", "requested_model", "prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens",
    "tokens_before", "tokens_after", "pinch_newly_compressed", "pinch_restored",
)  # fmt: skip
PRICED_SESSIONS = 10_000
Series = tuple[Any, ...]  # (a metric, then its label values as the decision holds them)


class Metrics:
    def __init__(self, models: list[str], categories: list[str], providers: list[str] | None = None, clients: list[str] | None = None) -> None:
        self.registry = CollectorRegistry()
        # An observation names its series by a key, ``(metric, *label values)``, the values as
        # the decision holds them (a status as its int, an outcome as its enum); the child of
        # each key, looked up once (:meth:`_series`), is where prometheus-client keeps it.
        self._children: dict[Series, Any] = {}
        # Not yet handed to prometheus-client, by key: a counter's increments; a latency
        # histogram's [sum, count in each of _BOUNDS' buckets].
        self._counted: dict[Series, float] = {}
        self._timed: dict[Series, list[float]] = {}
        self._add = self._tally
        # Only configured names become label values; anything else is "other".
        self._models = frozenset(models)
        self._categories = frozenset(categories)
        self._clients = frozenset(clients or ())  # the client keys' names (server.api_keys)
        r = self.registry
        self.requests = Counter("pinch_router_requests", "Requests by the model that answered (none: no model did), category and HTTP status", ["model", "category", "status"], registry=r)
        self.classification = Counter("pinch_router_classification", "Classifications by source", ["source"], registry=r)
        self.pinch = Counter("pinch_router_pinch", "Pinch runs by mode", ["mode"], registry=r)
        self.pinch_saved = Counter("pinch_router_pinch_saved_tokens", "Prompt tokens removed by pinch", registry=r)
        self.relevance = Counter("pinch_router_relevance", "Relevance ranking by status", ["status"], registry=r)
        self.stage_seconds = Histogram("pinch_router_stage_duration_seconds", "Own work of each stage", ["stage"], buckets=LATENCY_BUCKETS, registry=r)
        self.stage_outcomes = Counter("pinch_router_stage_outcomes", "Stage outcomes (fallback, timeout, error, ...)", ["stage", "outcome"], registry=r)
        self.first_byte = Histogram("pinch_router_upstream_first_byte_seconds", "Upstream time to first byte", ["provider"], buckets=LATENCY_BUCKETS, registry=r)
        self.upstream_total = Histogram("pinch_router_upstream_total_seconds", "Upstream time to the end of the answer", ["provider"], buckets=LATENCY_BUCKETS, registry=r)
        self.overhead = Histogram("pinch_router_overhead_seconds", "Time spent in the proxy itself", buckets=LATENCY_BUCKETS, registry=r)
        self.usage = Counter("pinch_router_usage_tokens", "Tokens reported by upstreams", ["model", "kind"], registry=r)
        # With server.api_keys: by the name of the key each request came with (docs/keys.md).
        self.client_requests = Counter("pinch_router_client_requests", "Requests by the name of the client key they came with and HTTP status", ["client", "status"], registry=r)
        self.client_usage = Counter("pinch_router_client_usage_tokens", "Tokens reported by upstreams, by the name of the client key the request came with", ["client", "kind"], registry=r)
        # The keys' limits (router.core.limits): what each key was charged, what it was refused.
        self.client_cost = Counter(
            "pinch_router_client_cost_usd", "Dollars charged to each client key: its answers' usage at the answering model's cost_per_mtok", ["client"], registry=r
        )
        self.client_limited = Counter(
            "pinch_router_client_limited", "Requests answered 429 because their client key was over a limit, by key name and limit", ["client", "limit"], registry=r
        )
        # Dollars as the dashboard counts them (router.core.pricing, the serving config's prices): spent,
        # and saved by pinch and by routing, which can fall (a rewrite costs once; a dearer model answered).
        self.cost = Counter("pinch_router_cost_usd", "Dollars spent: answers' usage at the answering model's cost_per_mtok, by model and client key name", ["model", "client"], registry=r)
        self.saved = Gauge(
            "pinch_router_saved_usd",
            "Dollars saved against the same requests without pinch (by=pinch) or on the model asked for or the reference model (by=routing), "
            "as the dashboard counts them; falls when a request cost more than its counterfactual",
            ["model", "client", "by"],
            registry=r,
            multiprocess_mode="sum",
        )
        self._pricer: RowPricer | None = None
        self.prompt_cache = Counter(
            "pinch_router_prompt_cache_tokens",
            "Prompt tokens of answers whose upstream reported cache accounting: served from its prompt cache "
            "(cached), prefilled afresh (uncached), written to the cache (written)",
            ["model", "kind"],
            registry=r,
        )
        self.upstream_attempts = Counter("pinch_router_upstream_attempts", "Upstream attempts by provider and result", ["provider", "result"], registry=r)
        self.decisions_dropped = Counter("pinch_router_decision_log_dropped", "Decision rows dropped because the log queue was full", registry=r)
        self.escalations = Counter("pinch_router_escalations", "Requests whose tier was raised after failed outcomes", registry=r)
        # Refused before any route ran: a bad or missing key, malformed HTTP (reason from a fixed vocabulary).
        self.refused = Counter("pinch_router_refused", "Requests refused before routing, by reason", ["reason"], registry=r)
        self.wires = Counter("pinch_router_wire_requests", "Requests by the client's wire format and the one the provider was spoken to in", ["wire_in", "wire_out"], registry=r)
        self.bodies = Counter(
            "pinch_router_request_bodies",
            "Request bodies kept for the next turn, by wire and parse: resumed (its first messages the body before's, resent byte for byte) or whole",
            ["wire", "parse"],
            registry=r,
        )
        # The endpoints answered outside the chain that an agent calls as part of its work (count_tokens).
        self.endpoint_requests = Counter("pinch_router_endpoint_requests", "Requests to endpoints answered outside the routing chain, by endpoint and HTTP status", ["endpoint", "status"], registry=r)
        self.unknown_paths = Counter("pinch_router_unknown_path_requests", "Requests to paths the proxy does not serve, by the API they belong to", ["api"], registry=r)
        self.state_fallback = Counter(
            "pinch_router_state_backend_fallback",
            "Session-state calls served from the process's memory because the shared backend (Redis) could not answer",
            registry=r,
        )
        self.state_up = Gauge("pinch_router_state_backend_up", "1 while the configured state backend answers", registry=r, multiprocess_mode="livemin")
        # Read at scrape time: what is alive now (load tests check these return to idle).
        in_flight = Gauge("pinch_router_requests_in_flight", "Chat requests being served", registry=r, multiprocess_mode="livesum")
        upstream_open = Gauge("pinch_router_upstream_responses_open", "Upstream responses not yet released", registry=r, multiprocess_mode="livesum")
        # moved twice a request each: what they count is read when the metrics are (see OpenCount)
        self.in_flight = OpenCount.of(in_flight)
        self.upstream_open = OpenCount.of(upstream_open)
        self.tasks = Gauge("pinch_router_asyncio_tasks", "asyncio tasks alive in the proxy's loop", registry=r, multiprocess_mode="livesum")
        self.connections_open = Gauge("pinch_router_connections_open", "Client connections open", registry=r, multiprocess_mode="livesum")
        self.connections_closed = Counter(
            "pinch_router_connections_closed", "Client connections the proxy closed itself, by reason (head_timeout, evicted_at_cap, refused_at_cap)", ["reason"], registry=r
        )
        # The provider circuit breakers (router.core.breaker): read from them when the metrics are
        # (and every second by a worker of several, for the others' scrapes); the highest worker's.
        self.breaker_open = Gauge(
            "pinch_router_provider_breaker_open",
            "1 while requests skip the provider: it gave no answer and its breaker is open (upstream.breaker)",
            ["provider"],
            registry=r,
            multiprocess_mode="livemax",
        )
        self.breaker_skips = Counter("pinch_router_provider_breaker_skips", "Requests that skipped a provider marked down, by provider", ["provider"], registry=r)
        self.providers_down: Callable[[], list[str]] = list  # the app sets it: the providers its breakers skip now
        self._breakers_shown: set[str] = set(providers or ())  # every configured provider has its series, at 0 when closed
        if MULTIPROCESS_DIR_ENV not in os.environ:
            self.tasks.set_function(_task_count)

    def set_catalogue(self, models: list[str], categories: list[str], providers: list[str] | None = None) -> None:
        """The label values allowed from now on (a reloaded config's models and categories); a new
        provider's breaker series starts at 0 (a removed one's stays)."""
        self._models = frozenset(models)
        self._categories = frozenset(categories)
        self._breakers_shown.update(providers or ())

    def set_prices(self, prices: Prices) -> None:
        """Price each request from now on at ``prices`` (the serving config's; none: no dollar series)."""
        self._pricer = RowPricer(prices, sessions=PRICED_SESSIONS) if priced(prices) else None

    def _model(self, name: str | None) -> str:
        return name if name in self._models else ("none" if name is None else "other")

    def _category(self, name: str | None) -> str:
        return name if name in self._categories else ("none" if name is None else "other")

    def observe(self, d: Decision) -> None:
        """What one finished request adds, as three lists of series: those counted by one, those
        counted by an amount, the latencies; :meth:`_add` (how depends on the process) adds them,
        all in one call (a call per observation was most of the metrics' cost: 8.5 → 5.3 µs a
        request, measured in-process)."""
        model = self._model(d.model)
        ones: list[Series] = [(self.requests, model, self._category(d.category), d.status)]
        amounts: list[tuple[Series, float]] = []
        times: list[tuple[Series, float]] = []
        if d.wire_in:
            ones.append((self.wires, d.wire_in, d.wire_out or "none"))
            if d.resumed_elements is not None:
                ones.append((self.bodies, d.wire_in, "resumed" if d.resumed_elements else "whole"))
        if d.source:
            ones.append((self.classification, d.source))
        if d.pinch_mode:
            ones.append((self.pinch, d.pinch_mode))
            amounts.append(((self.pinch_saved,), max(d.pinch_saved, 0)))
        if d.relevance_status:
            ones.append((self.relevance, d.relevance_status))
        stage_seconds, stage_outcomes = self.stage_seconds, self.stage_outcomes
        for record in d.stages:  # seven stages report on every request
            times.append(((stage_seconds, record.stage), record.ms / 1000))
            ones.append((stage_outcomes, record.stage, record.outcome))
        for attempt in d.attempts:
            ones.append((self.upstream_attempts, attempt.provider, "answered" if not attempt.error else "failed"))
        if d.provider and d.first_byte_ms is not None:
            times.append(((self.first_byte, d.provider), d.first_byte_ms / 1000))
        if d.provider and d.upstream_ms is not None:
            times.append(((self.upstream_total, d.provider), d.upstream_ms / 1000))
        if d.overhead_ms is not None:
            times.append(((self.overhead,), d.overhead_ms / 1000))
        if d.prompt_tokens:
            amounts.append(((self.usage, model, "prompt"), d.prompt_tokens))
        if d.completion_tokens:
            amounts.append(((self.usage, model, "completion"), d.completion_tokens))
        if d.cached_tokens is not None and d.prompt_tokens is not None:
            amounts.append(((self.prompt_cache, model, "cached"), min(d.cached_tokens, d.prompt_tokens)))
            amounts.append(((self.prompt_cache, model, "uncached"), max(d.prompt_tokens - d.cached_tokens, 0)))
        if d.cache_write_tokens:
            amounts.append(((self.prompt_cache, model, "written"), d.cache_write_tokens))
        if d.client is not None:
            client = d.client if d.client in self._clients else "other"
            ones.append((self.client_requests, client, d.status))
            if d.prompt_tokens:
                amounts.append(((self.client_usage, client, "prompt"), d.prompt_tokens))
            if d.completion_tokens:
                amounts.append(((self.client_usage, client, "completion"), d.completion_tokens))
        if d.escalation:
            ones.append((self.escalations,))
        for provider in d.providers_down:
            ones.append((self.breaker_skips, provider))
        for _, amount in amounts:  # refused when observed, as prometheus-client does, not when handed over
            if amount < 0:
                raise ValueError(f"a counter only goes up, not by {amount}")
        if self._pricer is not None:
            self._dollars(d, model, amounts)
        self._add(ones, amounts, times)

    def _dollars(self, d: Decision, model: str, amounts: list[tuple[Series, float]]) -> None:
        """What the request cost and saved (after the counters' check: a saving may be negative)."""
        assert self._pricer is not None
        row = {name: getattr(d, name) for name in PRICED_FIELDS}
        cost = self._pricer.price(row)
        if cost.cost is None:
            return
        client = "none" if d.client is None else self._client(d.client)
        amounts.append(((self.cost, model, client), cost.cost))
        amounts.append(((self.saved, model, client, "pinch"), cost.pinch_saved))
        if cost.routing_saved is not None:
            amounts.append(((self.saved, model, client, "routing"), cost.routing_saved))

    def _client(self, name: str) -> str:
        return name if name in self._clients else "other"

    def key_charged(self, client: str, amount: Amount) -> None:
        """A request of the key ``client`` was charged ``amount`` when its answer ended."""
        if amount.nano_usd > 0:
            self._add([], [((self.client_cost, self._client(client)), amount.nano_usd / NANO_USD)], [])

    def key_limited(self, client: str, limit: str) -> None:
        """A request of the key ``client`` was refused, over its ``limit``."""
        self._add([(self.client_limited, self._client(client), limit)], [], [])

    def _tally(self, ones: list[Series], amounts: list[tuple[Series, float]], times: list[tuple[Series, float]]) -> None:
        """One process: plain dict updates, handed to prometheus-client when the metrics are read."""
        counted, timed = self._counted, self._timed
        for key in ones:
            counted[key] = counted.get(key, 0) + 1
        for key, amount in amounts:
            counted[key] = counted.get(key, 0) + amount
        for key, seconds in times:
            tally = timed.get(key)
            if tally is None:
                tally = timed[key] = [0.0] * (1 + len(_BOUNDS))
            tally[0] += seconds
            if seconds <= _FIRST:  # most of a request's stages: their own work is under half a millisecond
                tally[1] += 1
            elif seconds <= _INF:  # NaN falls in no bucket, as in prometheus-client
                tally[1 + bisect_left(_BOUNDS, seconds)] += 1  # the first bucket whose bound is >= seconds

    def hand_over(self) -> None:
        """Add the tallied observations to the prometheus-client metrics (the loop's thread only)."""
        counted, timed = self._counted, self._timed
        self._counted, self._timed = {}, {}
        for key, amount in counted.items():
            self._series(key).inc(amount)
        for key, tally in timed.items():
            _add_to_histogram(self._series(key), tally)

    def show_breakers(self) -> None:
        """Set the breaker gauge of every provider down now, and back to 0 of each that was."""
        down = set(self.providers_down())
        for provider in self._breakers_shown | down:
            self.breaker_open.labels(provider).set(1 if provider in down else 0)
        self._breakers_shown |= down

    def _series(self, key: Series) -> Any:
        """The prometheus-client child ``key`` names (the metric itself when it has no labels),
        remembered: label values are bounded, and the lookup behind ``labels`` costs more than
        the observation itself."""
        child = self._children.get(key)
        if child is None:
            metric, *values = key
            child = self._children[key] = metric.labels(*map(str, values)) if values else metric
        return child

    def write_out(self) -> None:
        """A worker of several: its tallies handed over and what is open now written, for the other
        workers' scrapes (every second, and as it stops: :func:`sample_worker_gauges`)."""
        self.hand_over()
        self.in_flight.show()
        self.upstream_open.show()
        self.tasks.set(_task_count())
        self.show_breakers()

    def render(self) -> bytes:
        """Prometheus text; call from the event loop (the task gauge counts its tasks)."""
        if MULTIPROCESS_DIR_ENV in os.environ:  # a worker of `serve --workers N`: every worker's values
            self.write_out()  # its own as of now, the others' as of their last second
            registry = CollectorRegistry()
            MultiProcessCollector(registry)
            return generate_latest(registry)
        self.hand_over()
        self.show_breakers()
        return generate_latest(self.registry)


class OpenCount:
    """What is open now (requests in flight, upstream answers being relayed), counted in a plain
    int that the gauge reads when the metrics are: a gauge's ``inc`` checks its arguments and takes
    a lock, four times a request. A worker of several writes the count to its gauge when it writes
    its metrics out (:meth:`show`, :meth:`Metrics.write_out`): the other workers read it from the
    shared files."""

    def __init__(self) -> None:
        self.value = 0
        self._gauge: Gauge | None = None  # a worker's gauge, written by show

    @staticmethod
    def of(gauge: Gauge) -> OpenCount:
        """The count to ``inc`` and ``dec`` for ``gauge``: read by it, or written to it under ``--workers``."""
        count = OpenCount()
        if MULTIPROCESS_DIR_ENV in os.environ:
            count._gauge = gauge
        else:
            gauge.set_function(lambda: count.value)
        return count

    def inc(self) -> None:
        self.value += 1

    def dec(self) -> None:
        self.value -= 1

    def show(self) -> None:
        """Write the count to a worker's gauge (nothing to do for one that reads it)."""
        if self._gauge is not None:
            self._gauge.set(self.value)


def _add_to_histogram(histogram: Any, tally: list[float]) -> None:
    """Add ``[sum, count in each bucket]`` to a histogram child. prometheus-client has no call that
    adds n observations to one bucket: its child's own values (as its observe updates them) take them."""
    histogram._sum.inc(tally[0])
    for bucket, n in zip(histogram._buckets, tally[1:], strict=True):
        if n:
            bucket.inc(n)


def use_multiprocess_metrics() -> None:
    """In a worker forked from the ``--workers`` supervisor, once ``PROMETHEUS_MULTIPROC_DIR`` is set:
    the metrics it makes from now on write to that directory. prometheus-client picks its value
    class once, as it is imported (in the supervisor, before the directory existed); this is its own
    choice made again, before any metric of the worker's is made."""
    values.ValueClass = values.get_value_class()


async def sample_worker_gauges(metrics: Metrics, every_seconds: float = 1.0) -> None:
    """Under ``--workers``: write this worker's metrics out for the others' scrapes (:meth:`Metrics.write_out`)
    every ``every_seconds``, and once more as it is cancelled (the worker stops: its last counts stay
    in the shared files)."""
    try:
        while True:
            metrics.write_out()
            await asyncio.sleep(every_seconds)
    finally:
        metrics.write_out()


def _task_count() -> float:
    try:
        return float(len(asyncio.all_tasks()))
    except RuntimeError:  # no running loop (scraped from elsewhere)
        return 0.0
