"""``POST /v1/messages/count_tokens`` in the proxy's record: counted and logged, never a decision row.

Claude Code's ``/context`` sends 26 of these; they are answered by the proxy (nothing is routed
or forwarded), so they have their own ``endpoint`` label in
``pinch_router_endpoint_requests_total`` and a ``count_tokens`` log line, and stay out of
``pinch_router_requests_total`` and the decision log, which hold routing decisions.
"""

from __future__ import annotations

import logging

import pytest

from tests.support.anthropic_factories import BASH, body, user
from tests.support.config import make_config
def count_body(**extra):
    request = body(user("how many tokens is this?"), **extra)
    del request["max_tokens"]  # count_tokens takes none
    return request


@pytest.mark.parametrize(
    ("sent", "status", "error_code"),
    [
        pytest.param(count_body(), 200, None, id="counted"),
        pytest.param({"model": "m", "messages": []}, 400, "invalid_request", id="invalid body"),
        pytest.param(b"{not json", 400, "invalid_json", id="not JSON"),
    ],
)
async def test_every_count_tokens_call_is_counted_by_status_and_logged(proxy, caplog, sent, status, error_code):
    client = await proxy(make_config())
    with caplog.at_level(logging.INFO, logger="pinch_router.request"):
        if isinstance(sent, bytes):
            resp = await client.post("/v1/messages/count_tokens", data=sent, headers={"Content-Type": "application/json"})
        else:
            resp = await client.post("/v1/messages/count_tokens", json=sent)
    assert resp.status == status
    metrics = await (await client.get("/metrics")).text()
    assert f'pinch_router_endpoint_requests_total{{endpoint="count_tokens",status="{status}"}} 1.0' in metrics
    (line,) = [r for r in caplog.records if r.getMessage() == "count_tokens"]
    assert line.status == status and line.error_code == error_code
    if status == 200:
        assert line.input_tokens == (await resp.json())["input_tokens"] > 0
    else:
        assert line.input_tokens is None
        # the id the Anthropic-shaped error carries, in the line that tells what happened
        assert line.request_id == (await resp.json())["request_id"] == resp.headers["request-id"]


async def test_count_tokens_writes_no_decision_row_and_is_not_a_routed_request(proxy):
    client = await proxy(make_config())
    for _ in range(3):
        assert (await client.post("/v1/messages/count_tokens", json=count_body(tools=[BASH]))).status == 200
    assert (await (await client.get("/v1/decisions")).json())["data"] == []
    metrics = await (await client.get("/metrics")).text()
    assert 'pinch_router_endpoint_requests_total{endpoint="count_tokens",status="200"} 3.0' in metrics
    assert "pinch_router_requests_total{" not in metrics  # routing counts stay routing counts
