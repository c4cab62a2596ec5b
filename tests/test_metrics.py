"""/metrics: Prometheus text that prometheus-client parses, with counters that move."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from router.tools.mock_upstream import Behaviour
from tests.conftest import chat_body, make_config


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
