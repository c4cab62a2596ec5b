"""The dashboard's figures (router/core/usage_summary.py) summed from plain decision rows and their prices."""

from __future__ import annotations

from typing import Any

import pytest

from router.core.pricing import ModelPrice, Prices, RowCost, price_rows
from router.core.usage_summary import overview, session_summaries, session_turns

SINCE, UNTIL = 10_000.0, 13_600.0  # an hour
PRICES = Prices({"big": ModelPrice(input=10.0, output=30.0), "small": ModelPrice(input=1.0, output=2.0)}, reference_name="big", reference=ModelPrice(input=10.0, output=30.0))


def row(ts: float, **fields: Any) -> dict[str, Any]:
    base = {
        "request_id": f"req_{ts}", "ts": ts, "status": 200, "session": "s1", "client": "alice", "model": "small", "requested_model": "auto",
        "source": "classifier", "wire_in": "openai-chat", "prompt_tokens": 1_000, "completion_tokens": 100, "attempt_count": 1,
    }  # fmt: skip
    return base | fields


def summed(rows: list[dict[str, Any]], bucket: float = 600) -> dict[str, Any]:
    return overview(rows, price_rows(rows, PRICES), SINCE, UNTIL, bucket)


def test_the_overview_counts_the_windows_rows_only():
    rows = [row(SINCE - 100), row(SINCE), row(SINCE + 10), row(UNTIL)]
    o = summed(rows)
    assert (o["requests"], o["tokens_in"], o["tokens_out"]) == (2, 2_000, 200)
    assert o["spent"] == pytest.approx(2 * (1_000 * 1 + 100 * 2) / 1e6)


def test_the_timeline_buckets_add_up_to_the_totals():
    rows = [row(SINCE + t, model=m, status=s) for t, m, s in [(5, "small", 200), (700, "big", 200), (710, "small", 502), (3_599, "big", 200)]]
    o = summed(rows)
    timeline = o["timeline"]
    # the clock's buckets: the window's first and last are parts of theirs (9,600-10,200 and 13,200-13,800)
    assert timeline["t"] == [9_600 + i * 600 for i in range(7)]
    assert timeline["requests"] == [1, 2, 0, 0, 0, 0, 1]
    assert timeline["errors"] == [0, 1, 0, 0, 0, 0, 0]
    for name, total in (("requests", "requests"), ("tokens_in", "tokens_in"), ("tokens_out", "tokens_out")):
        assert sum(timeline[name]) == o[total]
    assert sum(timeline["spent"]) == pytest.approx(o["spent"])
    assert sum(timeline["unpinched"]) - sum(timeline["spent"]) == pytest.approx(o["saved_by_pinch"])
    assert sum(timeline["reference"]) - sum(timeline["spent"]) == pytest.approx(o["saved_by_routing"])


def test_errors_leave_out_clients_that_left_and_fallbacks_count_requests_tried_twice():
    rows = [
        row(SINCE + 1, status=502, error_code="upstream_failed", model=None, prompt_tokens=None, completion_tokens=None, attempt_count=2),
        row(SINCE + 2, status=499),
        row(SINCE + 3, status=400, error_code="no_capable_model", model=None, prompt_tokens=None, attempt_count=None),
        row(SINCE + 4, attempt_count=None, attempts=[{"model": "big"}, {"model": "small"}]),
    ]
    o = summed(rows)
    assert (o["errors"], o["client_closed"], o["fallbacks"]) == (2, 1, 2)
    assert o["error_codes"] == {"no_capable_model": 1, "upstream_failed": 1}


def test_the_cache_share_is_over_the_answers_that_reported_cache_figures():
    rows = [row(SINCE + 1, cached_tokens=600), row(SINCE + 2, cached_tokens=0, prompt_tokens=1_000), row(SINCE + 3, prompt_tokens=50_000)]
    o = summed(rows)
    assert (o["cached_tokens"], o["cache_share"]) == (600, 0.3)
    assert summed([row(SINCE + 1)])["cache_share"] is None


def test_the_model_mix_and_classification_sources():
    rows = [row(SINCE + 1, model="big", source="override"), row(SINCE + 2), row(SINCE + 3, source="cached"), row(SINCE + 4, model=None, status=502, source="cached", prompt_tokens=None)]
    o = summed(rows)
    assert [(m["model"], m["requests"]) for m in o["models"]] == [("small", 2), ("big", 1), ("none", 1)]
    assert o["sources"] == {"cached": 2, "classifier": 1, "override": 1}
    big = o["models"][1]
    assert big["spent"] == pytest.approx((1_000 * 10 + 100 * 30) / 1e6)


def test_routing_is_measured_over_the_requests_that_have_a_reference_only():
    prices = Prices({"small": ModelPrice(1.0, 2.0)}, {"gpt-5": ModelPrice(5.0, 10.0)})
    rows = [row(SINCE + 1, requested_model="gpt-5"), row(SINCE + 2, requested_model="auto")]
    o = overview(rows, price_rows(rows, prices), SINCE, UNTIL, 600)
    assert o["routing_priced_requests"] == 1
    assert o["saved_by_routing"] == pytest.approx((1_000 * 4 + 100 * 8) / 1e6)
    none = overview(rows[1:], price_rows(rows[1:], prices), SINCE, UNTIL, 600)
    assert (none["saved_by_routing"], none["reference"]) == (None, None)


def test_answers_without_usage_are_counted_unpriced():
    o = summed([row(SINCE + 1, prompt_tokens=None, completion_tokens=None), row(SINCE + 2, model=None, status=502, prompt_tokens=None)])
    assert (o["unpriced_requests"], o["spent"]) == (1, 0.0)


def test_pinch_tokens_and_dollars_saved():
    rows = [row(SINCE + 1, tokens_before=5_000, tokens_after=1_000), row(SINCE + 2, tokens_before=900, tokens_after=900)]
    o = summed(rows)
    assert o["pinch_tokens_saved"] == 4_000
    assert o["saved_by_pinch"] == pytest.approx(4_000 * 1.0 / 1e6)


def test_sessions_are_listed_latest_first_with_their_totals():
    rows = [
        row(SINCE - 50, session="old"),
        row(SINCE + 1, session="a", model="big", wire_in="anthropic-messages"),
        row(SINCE + 2, session="b", client="bob"),
        row(SINCE + 3, session="a"),
        row(SINCE + 4, session=None),  # refused at the edge: no session
    ]
    sessions = session_summaries(rows, price_rows(rows, PRICES), SINCE)
    assert [s["session"] for s in sessions] == ["a", "b"]
    a = sessions[0]
    assert (a["client"], a["wire"], a["first_seen"], a["last_seen"], a["requests"]) == ("alice", "anthropic-messages", SINCE + 1, SINCE + 3, 2)
    assert a["models"] == ["big", "small"]
    assert a["spent"] == pytest.approx((1_000 * 10 + 100 * 30 + 1_000 * 1 + 100 * 2) / 1e6)
    assert a["saved_by_routing"] == pytest.approx((1_000 * 9 + 100 * 28) / 1e6)  # the small model's request against big
    assert [s["session"] for s in session_summaries(rows, price_rows(rows, PRICES), SINCE, limit=1)] == ["a"]


def test_a_sessions_turns_carry_their_dollars_and_the_running_totals():
    rows = [row(1, tokens_before=3_000, tokens_after=1_000), row(2, status=502, model=None, prompt_tokens=None), row(3, tokens_before=4_000, tokens_after=1_000)]
    costs = price_rows(rows, PRICES)
    turns = session_turns(rows, costs)
    assert [t["request_id"] for t in turns] == ["req_1", "req_2", "req_3"]
    assert turns[1]["cost"] is None and turns[1]["spent_so_far"] == turns[0]["spent_so_far"]
    assert turns[-1]["spent_so_far"] == pytest.approx(2 * (1_000 * 1 + 100 * 2) / 1e6)
    assert turns[-1]["unpinched_so_far"] - turns[-1]["spent_so_far"] == pytest.approx(5_000 / 1e6)
    assert turns[0]["reference_model"] == "big"
    assert "messages" not in turns[0]  # figures only


def test_an_empty_window():
    o = summed([])
    assert (o["requests"], o["spent"], o["saved_by_routing"], o["cache_share"], o["models"]) == (0, 0.0, None, None, [])
    assert o["timeline"]["requests"] == [0] * 7
    assert session_summaries([], [], SINCE) == []


def test_a_row_cost_of_none_is_never_summed_as_a_number():
    rows = [row(SINCE + 1)]
    o = overview(rows, [RowCost()], SINCE, UNTIL, 600)
    assert (o["spent"], o["unpriced_requests"]) == (0.0, 1)
