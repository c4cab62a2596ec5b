"""/metrics: Prometheus text that prometheus-client parses, with counters that move."""

from __future__ import annotations

import asyncio
import math

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from router.core.results import Outcome, StageRecord
from router.observe.decision_record import Decision
from router.observe.metrics import LATENCY_BUCKETS, MULTIPROCESS_DIR_ENV, Metrics, sample_worker_gauges
from router.tools.mock_upstream import Behaviour
from tests.support.config import chat_body, make_config
async def scrape(client) -> dict[tuple[str, tuple], float]:
    resp = await client.get("/metrics")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(await resp.text()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_counters_move_as_requests_flow(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(make_config(url))
    before = await scrape(client)
    assert value(before, "pinch_router_requests_total", model="main", category="none", status="200") == 0
    for _ in range(3):
        await client.post("/v1/chat/completions", json=chat_body())
    mock.then(Behaviour(status=500))  # one candidate, no Retry-After: one failed attempt, then 502
    await client.post("/v1/chat/completions", json=chat_body())
    await client.post("/v1/chat/completions", json=chat_body(model="nope"))
    after = await scrape(client)
    assert value(after, "pinch_router_requests_total", model="main", category="none", status="200") == 3
    # no model answered the 502: it counts under none, not the candidate that failed
    assert value(after, "pinch_router_requests_total", model="none", category="none", status="502") == 1
    assert value(after, "pinch_router_requests_total", model="none", category="none", status="404") == 1
    assert value(after, "pinch_router_stage_duration_seconds_count", stage="capability-gate") == 5
    assert value(after, "pinch_router_stage_outcomes_total", stage="upstream-forward", outcome="ok") == 4
    assert value(after, "pinch_router_upstream_first_byte_seconds_count", provider="mock") == 3
    assert value(after, "pinch_router_upstream_attempts_total", provider="mock", result="failed") == 1
    assert value(after, "pinch_router_overhead_seconds_count") == 5
    assert value(after, "pinch_router_usage_tokens_total", model="main", kind="completion") == 21


async def test_client_chosen_names_never_become_label_values(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    await client.post("/v1/chat/completions", json=chat_body(model="attacker-chosen-label"))
    text = await (await client.get("/metrics")).text()
    assert "attacker-chosen-label" not in text


async def test_gauges_show_what_is_open_and_return_to_idle(proxy, mock_upstream):
    import asyncio

    mock, url = mock_upstream
    client = await proxy(make_config(url))
    mock.then(Behaviour(event_delay=0.05, text="a b c d e f g h"))
    resp = await client.post("/v1/chat/completions", json=chat_body(stream=True))
    await resp.content.readuntil(b"\n\n")
    during = await scrape(client)
    assert value(during, "pinch_router_requests_in_flight") == 1
    assert value(during, "pinch_router_upstream_responses_open") == 1
    assert value(during, "pinch_router_asyncio_tasks") >= 1
    await resp.read()
    await asyncio.sleep(0.05)
    after = await scrape(client)
    assert value(after, "pinch_router_requests_in_flight") == 0
    assert value(after, "pinch_router_upstream_responses_open") == 0


def samples_of(registry_text: bytes, family: str) -> dict[tuple[str, tuple], float]:
    """``family``'s samples by name suffix (``_bucket``, ``_sum``, ...) and labels, creation times left out."""
    return {
        (sample.name.removeprefix(family), tuple(sorted(sample.labels.items()))): sample.value
        for metric in text_string_to_metric_families(registry_text.decode())
        for sample in metric.samples
        if metric.name == family and not sample.name.endswith("_created")
    }


def decision(**fields) -> Decision:
    return Decision(**{"request_id": "req_1", "ts": 0.0, "status": 200, "duration_ms": 1.0, **fields})


@pytest.mark.parametrize("ms", [0.0, 0.25, 0.5, 0.5000001, 1.0, 7.3, 300_000.0, 300_000.1, float("nan")])
def test_a_tallied_latency_lands_where_prometheus_clients_own_observe_puts_it(ms):
    metrics = Metrics(["m"], ["c"])
    metrics.observe(decision(overhead_ms=ms))
    metrics.observe(decision(overhead_ms=2.0))
    reference = CollectorRegistry()
    histogram = Histogram("reference_seconds", "", buckets=LATENCY_BUCKETS, registry=reference)
    histogram.observe(ms / 1000)
    histogram.observe(0.002)
    ours, theirs = samples_of(metrics.render(), "pinch_router_overhead_seconds"), samples_of(generate_latest(reference), "reference_seconds")
    assert ours.keys() == theirs.keys()
    assert all(ours[k] == theirs[k] or (math.isnan(ours[k]) and math.isnan(theirs[k])) for k in ours)


def test_what_is_observed_between_scrapes_is_counted_once():
    metrics = Metrics(["m"], ["c"])
    stages = (StageRecord("classifier", Outcome.OK, 0.2), StageRecord("upstream-forward", Outcome.OK, 3.0))
    for _ in range(2):
        metrics.observe(decision(model="m", category="c", stages=stages, prompt_tokens=10))
    first = metrics.render()
    metrics.observe(decision(model="m", category="c", stages=stages, prompt_tokens=10))
    second, third = metrics.render(), metrics.render()
    assert samples_of(first, "pinch_router_requests")[("_total", (("category", "c"), ("model", "m"), ("status", "200")))] == 2
    assert second == third
    assert samples_of(second, "pinch_router_requests")[("_total", (("category", "c"), ("model", "m"), ("status", "200")))] == 3
    assert samples_of(second, "pinch_router_usage_tokens")[("_total", (("kind", "prompt"), ("model", "m")))] == 30
    timed = samples_of(second, "pinch_router_stage_duration_seconds")
    assert timed[("_count", (("stage", "classifier"),))] == 3 and timed[("_sum", (("stage", "upstream-forward"),))] == pytest.approx(0.009)
    assert timed[("_bucket", (("le", "0.0005"), ("stage", "classifier")))] == 3
    assert timed[("_bucket", (("le", "0.0025"), ("stage", "upstream-forward")))] == 0
    assert timed[("_bucket", (("le", "0.005"), ("stage", "upstream-forward")))] == 3


def test_a_negative_count_is_refused_when_observed_and_the_metrics_still_render():
    metrics = Metrics(["m"], ["c"])
    with pytest.raises(ValueError):
        metrics.observe(decision(model="m", completion_tokens=-1))
    rendered = metrics.render()
    assert b"pinch_router_requests_total" in rendered
    # refused whole: none of that decision's series was counted
    assert ("_total", (("category", "none"), ("model", "m"), ("status", "200"))) not in samples_of(rendered, "pinch_router_requests")


def test_a_worker_of_several_tallies_too_and_writes_its_metrics_out_for_the_others_to_read(monkeypatch, tmp_path):
    # observed at once, each observation a write to the shared files cost a worker's request +16 %:
    # a worker tallies as one process does, and writes out every second (sample_worker_gauges) and at a scrape
    monkeypatch.setenv(MULTIPROCESS_DIR_ENV, str(tmp_path))
    metrics = Metrics(["m"], ["c"])
    metrics.observe(decision(model="m", category="c", overhead_ms=2.0))
    metrics.in_flight.inc()
    read = metrics.registry.get_sample_value  # the values themselves, as the shared files hold them
    assert read("pinch_router_requests_total", {"model": "m", "category": "c", "status": "200"}) is None
    assert read("pinch_router_requests_in_flight") == 0
    metrics.write_out()
    assert read("pinch_router_requests_total", {"model": "m", "category": "c", "status": "200"}) == 1
    assert read("pinch_router_overhead_seconds_bucket", {"le": "0.0025"}) == 1
    assert read("pinch_router_requests_in_flight") == 1 and read("pinch_router_asyncio_tasks") == 0  # no loop runs here


async def test_a_worker_writes_its_metrics_out_every_second_and_once_more_as_it_stops(monkeypatch, tmp_path):
    monkeypatch.setenv(MULTIPROCESS_DIR_ENV, str(tmp_path))
    metrics = Metrics(["m"], ["c"])
    read = metrics.registry.get_sample_value
    sampler = asyncio.get_running_loop().create_task(sample_worker_gauges(metrics, every_seconds=0.05))
    metrics.observe(decision(model="m", category="c"))
    for _ in range(100):
        await asyncio.sleep(0.05)
        if read("pinch_router_requests_total", {"model": "m", "category": "c", "status": "200"}) == 1:
            break
    assert read("pinch_router_requests_total", {"model": "m", "category": "c", "status": "200"}) == 1
    assert read("pinch_router_asyncio_tasks") >= 1  # the sampler itself, at least
    metrics.observe(decision(model="m", category="c"))
    sampler.cancel()
    await asyncio.gather(sampler, return_exceptions=True)
    assert read("pinch_router_requests_total", {"model": "m", "category": "c", "status": "200"}) == 2