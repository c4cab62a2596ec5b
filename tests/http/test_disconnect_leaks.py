"""WHAT-USERS-HIT #13: clients that leave mid-stream leave nothing behind.

Sixteen clients at once each read the first event of a slow stream and hang up. Afterwards
the proxy holds no request, no upstream response and no task more than before, and the
upstream saw every stream cancelled — measured on the proxy's own gauges
(``pinch_router_requests_in_flight``, ``pinch_router_upstream_responses_open``,
``pinch_router_asyncio_tasks``). Under load with memory figures: ``bench/bench_load.py``.
"""

from __future__ import annotations

import asyncio

from router.tools.mock_upstream import Behaviour
from tests.support.config import chat_body, make_config
from tests.http.test_metrics import scrape, value

CLIENTS = 16
GAUGES = ("pinch_router_requests_in_flight", "pinch_router_upstream_responses_open", "pinch_router_asyncio_tasks")


async def gauges(client) -> dict[str, float]:
    samples = await scrape(client)
    return {name: value(samples, name) for name in GAUGES}


async def test_clients_that_hang_up_mid_stream_leave_no_request_upstream_or_task_behind(proxy, mock_upstream):
    mock, url = mock_upstream
    for _ in range(CLIENTS):
        mock.then(Behaviour(event_delay=0.05, text=" ".join(["word"] * 400)))
    client = await proxy(make_config(url))
    before = await gauges(client)

    async def leave_after_the_first_event() -> None:
        resp = await client.post("/v1/chat/completions", json=chat_body(stream=True))
        await resp.content.readuntil(b"\n\n")
        resp.close()

    await asyncio.gather(*(leave_after_the_first_event() for _ in range(CLIENTS)))
    after = before
    for _ in range(200):  # each proxy task notices at its next write (within one event delay)
        after = await gauges(client)
        if after == before and mock.open_streams == 0:
            break
        await asyncio.sleep(0.02)
    assert after == before
    assert mock.open_streams == 0 and mock.cancelled_streams == CLIENTS
