"""`pinch-router top`: the pure formatting of decision rows, and the live TUI against a real proxy."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from textual.widgets import DataTable, Static

from bench.harness import free_port  # a loopback port where nothing listens
from router.tools.top import (
    COLUMNS,
    DecisionFeed,
    DecisionScreen,
    FeedError,
    TopApp,
    classification_cell,
    decision_cells,
    decision_detail,
    format_ms,
    format_tokens,
    parse_decisions,
    summary_line,
)
from tests.conftest import chat_body, make_config, model_entry

URL = "/v1/chat/completions"
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}]


def decision_row(**fields: Any) -> dict[str, Any]:
    """A /v1/decisions row as the proxy returns it (a routed, answered request)."""
    row: dict[str, Any] = {
        "request_id": "req_0123456789abcdef01234567",
        "ts": datetime(2025, 3, 4, 14, 3, 7, tzinfo=UTC).timestamp(),
        "status": 200,
        "duration_ms": 1234.5,
        "error_code": None,
        "session": "a1b2c3d4e5f60718",
        "session_source": "header",
        "requested_model": "auto",
        "stream": True,
        "category": "debugging",
        "tier": 2,
        "source": "classifier",
        "routed_tier": 2,
        "escalation": "",
        "model": "main",
        "provider": "mock",
        "candidates": ["main", "backup"],
        "attempts": [{"model": "main", "provider": "mock", "status": 200, "error": ""}],
        "rejected": [{"model": "no-tools", "reasons": ["does not support tools"]}],
        "pinch_mode": "uniform",
        "tokens_before": 50_000,
        "tokens_after": 20_000,
        "pinch_compressed": 7,
        "relevance_status": "unavailable",
        "relevance_reason": "connection refused",
        "stages": [
            {"stage": "session-fingerprint", "outcome": "ok", "ms": 0.02, "detail": "header"},
            {"stage": "classifier", "outcome": "fallback", "ms": 1.5, "detail": "ClientConnectorError: refused"},
            {"stage": "capability-gate", "outcome": "ok", "ms": 0.1, "detail": "main (tier 2, 2 candidates)"},
        ],
        "upstream_status": 200,
        "first_byte_ms": 120.0,
        "upstream_ms": 1200.0,
        "prompt_tokens": 20_000,
        "completion_tokens": 30,
        "total_tokens": 20_030,
        "overhead_ms": 2.25,
        "stream_error": "",
        "outcome": None,
        "outcome_reason": None,
        "outcome_ts": None,
    }
    row.update(fields)
    return row


# --- pure helpers -------------------------------------------------------------------


def test_a_row_becomes_one_cell_per_column():
    cells = decision_cells(decision_row(), UTC)
    assert len(cells) == len(COLUMNS)
    assert dict(zip([key for key, _ in COLUMNS], cells, strict=True)) == {
        "time": "14:03:07",
        "session": "a1b2c3d4",
        "class": "debugging/2/classifier",
        "model": "main",
        "saved": "30k",
        "status": "200",
        "latency": "1.23 s",
        "overhead": "2.2 ms",
    }


def test_a_refused_request_shows_dashes_not_none():
    row = {"request_id": "req_x", "ts": 0.0, "status": 400, "duration_ms": 0.4, "error_code": "invalid_json"}
    cells = decision_cells(row, UTC)
    assert cells[1:5] == ("-", "-", "-", "-")
    assert "None" not in " ".join(cells)


@pytest.mark.parametrize(
    ("fields", "cell"),
    [
        ({}, "debugging/2/classifier"),
        ({"routed_tier": 3, "escalation": "escalated from tier 2 to 3"}, "debugging/2→3/classifier"),
        ({"category": None, "tier": None, "source": None, "routed_tier": 2}, "-/-→2/-"),
        ({"category": None, "tier": None, "source": None, "routed_tier": None}, "-"),
    ],
)
def test_classification_cell_shows_escalation_and_missing_parts(fields, cell):
    assert classification_cell(decision_row(**fields)) == cell


@pytest.mark.parametrize(("outcome", "cell"), [(None, "200"), ("success", "200 ✓"), ("failure", "200 ✗")])
def test_status_cell_marks_reported_outcomes(outcome, cell):
    assert decision_cells(decision_row(outcome=outcome), UTC)[5] == cell


@pytest.mark.parametrize(
    ("ms", "text"), [(None, "-"), (0.042, "0.0 ms"), (2.25, "2.2 ms"), (150.4, "150 ms"), (1500, "1.50 s")]
)
def test_format_ms(ms, text):
    assert format_ms(ms) == text


@pytest.mark.parametrize(
    ("tokens", "text"), [(None, "-"), (0, "0"), (999, "999"), (1234, "1.2k"), (30_000, "30k"), (2_500_000, "2.5M")]
)
def test_format_tokens(tokens, text):
    assert format_tokens(tokens) == text


def test_pinch_that_did_not_run_is_not_zero_saved():
    assert decision_cells(decision_row(pinch_mode=None, tokens_before=None, tokens_after=None), UTC)[4] == "-"
    assert decision_cells(decision_row(pinch_mode="within_budget", tokens_before=10, tokens_after=10), UTC)[4] == "0"


def test_detail_has_the_decision_rejections_attempts_pinch_and_trace():
    detail = decision_detail(decision_row(), UTC)
    lines = detail.splitlines()
    assert lines[0] == "req_0123456789abcdef01234567   2025-03-04 14:03:07   status 200   stream"
    assert "session     a1b2c3d4e5f60718 (header)   requested model auto" in lines
    assert "class       debugging, tier 2, source classifier; routed tier 2" in lines
    assert "model       main via mock" in lines
    assert "candidates  main → backup" in lines
    assert "rejected    no-tools: does not support tools" in lines
    assert "pinch       uniform: 50,000 → 20,000 tokens, saved 30,000, 7 compressed" in lines
    assert "relevance   unavailable (connection refused)" in lines
    assert "attempts    1. main (mock) → 200" in lines
    assert "time        first byte 120 ms, upstream 1.20 s, total 1.23 s, 2.2 ms in the proxy" in lines
    trace = detail.split("\ntrace\n")[1].splitlines()
    assert trace[0].split() == ["stage", "outcome", "ms", "detail"]
    assert trace[2] == "  classifier           fallback  1.50  ClientConnectorError: refused"


def test_detail_lists_every_rejection_and_failed_attempt_on_its_own_line():
    detail = decision_detail(
        decision_row(
            rejected=[{"model": "a", "reasons": ["does not support tools", "context window 8 is smaller"]}, {"model": "b", "reasons": ["x"]}],
            attempts=[
                {"model": "main", "provider": "mock", "status": 500, "error": "upstream answered 500"},
                {"model": "backup", "provider": "mock", "status": None, "error": "connect timeout"},
            ],
        ),
        UTC,
    ).splitlines()
    assert "rejected    a: does not support tools; context window 8 is smaller" in detail
    assert "            b: x" in detail
    assert "attempts    1. main (mock) → 500: upstream answered 500" in detail
    assert "            2. backup (mock) → no answer: connect timeout" in detail


def test_detail_names_the_model_that_answered_and_the_gates_order():
    row = decision_row(
        model="backup",
        attempts=[
            {"model": "main", "provider": "mock", "status": 503, "error": "upstream answered 503"},
            {"model": "backup", "provider": "mock", "status": 200, "error": ""},
        ],
        pinch_mode="within_budget",
        tokens_before=1234,
        tokens_after=1234,
    )
    lines = decision_detail(row, UTC).splitlines()
    assert "model       backup via mock" in lines
    assert "candidates  main → backup" in lines
    assert "pinch       within budget: 1,234 tokens" in lines


def test_detail_shows_the_output_limit_requested_and_sent():
    lines = decision_detail(decision_row(requested_max_tokens=32_000, sent_max_tokens=8_192), UTC).splitlines()
    assert "max tokens  requested 32000, sent 8192" in lines


def test_detail_of_a_gate_refusal_lists_its_rejections_and_no_model():
    row = decision_row(
        status=400,
        error_code="no_capable_model",
        model=None,
        provider=None,
        candidates=[],
        attempts=[],
        rejected=[{"model": "main", "reasons": ["does not support tools"]}],
    )
    detail = decision_detail(row, UTC)
    assert "rejected    main: does not support tools" in detail
    assert not any(line.startswith("model ") for line in detail.splitlines())
    assert "the gate did not run" not in detail


def test_detail_of_a_refused_request_says_what_did_not_run():
    detail = decision_detail({"request_id": "req_x", "ts": 0.0, "status": 415, "error_code": "unsupported_media_type"}, UTC)
    assert "status 415 unsupported_media_type" in detail
    assert "(no stage ran)" in detail and "rejected    (the gate did not run)" in detail
    assert "pinch       not run" in detail
    assert "None" not in detail


def test_detail_shows_escalation_and_outcome():
    detail = decision_detail(
        decision_row(routed_tier=3, escalation="escalated from tier 2 to 3", outcome="failure", outcome_reason="tests failed"), UTC
    )
    assert "routed tier 3 (escalated from tier 2 to 3)" in detail
    assert "outcome     failure (tests failed)" in detail


def test_detail_shows_the_ledger_and_the_prompt_cache():
    row = decision_row(
        pinch_reapplied=5, pinch_newly_compressed=3, pinch_reason="over budget and the cache is cold", cached_tokens=15_000, cache_write_tokens=400
    )
    lines = decision_detail(row, UTC).splitlines()
    assert "ledger      5 reapplied, 3 newly compressed — over budget and the cache is cold" in lines
    assert "usage       20,000 prompt + 30 completion tokens; 15,000 from the prompt cache (75%), 400 written to it" in lines


def test_detail_without_cache_accounting_or_ledger_says_nothing_of_them():
    detail = decision_detail(decision_row(pinch_mode=None, tokens_before=None, tokens_after=None), UTC)
    assert "ledger" not in detail and "prompt cache" not in detail
    assert "usage       20,000 prompt + 30 completion tokens" in detail.splitlines()


def test_summary_line_shows_the_prompt_cache_share_of_the_rows_that_report_it():
    rows = [decision_row(cached_tokens=15_000), decision_row(prompt_tokens=10_000, cached_tokens=0), decision_row()]
    assert "prompt cache 50% of 30k tokens" in summary_line(rows)
    assert "prompt cache" not in summary_line([decision_row()])


def test_summary_line_counts_errors_savings_and_models():
    rows = [decision_row(), decision_row(status=502, model="backup"), decision_row(tokens_before=None, tokens_after=None)]
    line = summary_line(rows)
    assert line.startswith("3 decisions · 1 errors · pinch saved 60k tokens")
    assert "latency p50 1.23 s" in line and "overhead p50 2.2 ms" in line
    assert line.endswith("main×2 backup×1")
    assert summary_line([]) == "no decisions yet"


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (401, b'{"error": {"message": "missing or invalid API key"}}', "HTTP 401: missing or invalid API key (pass --api-key"),
        (404, b'{"error": {"message": "the decision log is disabled"}}', "HTTP 404: the decision log is disabled"),
        (200, b"<html>", "not JSON"),
        (200, b'{"data": 5}', "no list of decisions"),
    ],
)
def test_bad_answers_become_a_feed_error(status, body, message):
    with pytest.raises(FeedError) as info:
        parse_decisions(status, body)
    assert message in str(info.value)


def test_a_good_answer_is_its_rows():
    assert parse_decisions(200, b'{"object": "list", "data": [{"request_id": "a"}]}') == [{"request_id": "a"}]


# --- the app against a real proxy -----------------------------------------------------


async def start_proxy(proxy, mock_upstream):
    _, upstream = mock_upstream
    config = make_config(
        upstream,
        models=[model_entry("plain", supports={"tools": False}, quality=0.9), model_entry("tooled")],
    )
    client = await proxy(config)
    return client, str(client.make_url("")).rstrip("/")


def table_of(app: TopApp) -> DataTable:
    return app.query_one(DataTable)


def visible_text(widget: Static) -> str:
    return str(widget.render())


async def test_the_table_fills_with_the_proxys_decisions_newest_first(proxy, mock_upstream):
    client, url = await start_proxy(proxy, mock_upstream)
    ids = []
    for body in (chat_body("one"), chat_body("two", tools=TOOLS), chat_body("three")):
        resp = await client.post(URL, json=body)
        ids.append(resp.headers["x-router-request-id"])
    app = TopApp(DecisionFeed(url), interval=60, tz=UTC)
    async with app.run_test(size=(120, 30)) as pilot:
        await app.poll()
        await pilot.pause()
        table = table_of(app)
        assert [key.value for key in table.rows] == ids[::-1]
        models = [table.get_cell(request_id, "model") for request_id in ids]
        assert models == ["plain", "tooled", "plain"]
        assert "3 decisions · 0 errors" in visible_text(app.query_one("#summary", Static))

        resp = await client.post(URL, json=chat_body("four"))
        await app.poll()
        assert table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value == resp.headers["x-router-request-id"]
        assert table.row_count == 4


async def test_a_row_opens_its_trace_and_rejections_and_escape_closes_it(proxy, mock_upstream):
    client, url = await start_proxy(proxy, mock_upstream)
    resp = await client.post(URL, json=chat_body("run the tests", tools=TOOLS))
    request_id = resp.headers["x-router-request-id"]
    app = TopApp(DecisionFeed(url), interval=60, tz=UTC)
    async with app.run_test(size=(120, 30)) as pilot:
        await app.poll()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DecisionScreen)
        detail = visible_text(app.screen.query_one("#detail", Static))
        assert request_id in detail
        for stage in ("session-fingerprint", "capability-gate", "upstream-forward"):
            assert stage in detail
        assert "plain: does not support tools" in detail
        assert "tooled via mock" in detail
        assert "requested model auto" in detail
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, DecisionScreen)
        assert table_of(app).row_count == 1


async def test_the_cursor_stays_on_its_request_when_new_rows_arrive(proxy, mock_upstream):
    client, url = await start_proxy(proxy, mock_upstream)
    first = (await client.post(URL, json=chat_body("one"))).headers["x-router-request-id"]
    await client.post(URL, json=chat_body("two"))
    app = TopApp(DecisionFeed(url), interval=60, tz=UTC)
    async with app.run_test(size=(120, 30)) as pilot:
        await app.poll()
        await pilot.press("down")
        table = table_of(app)
        assert table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value == first
        await client.post(URL, json=chat_body("three"))
        await app.poll()
        assert table.row_count == 3
        assert table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value == first


async def test_an_unreachable_proxy_is_a_status_line_not_a_crash():
    url = f"http://127.0.0.1:{free_port()}"  # connecting is refused at once
    app = TopApp(DecisionFeed(url, timeout_seconds=2), interval=60)
    async with app.run_test(size=(120, 30)) as pilot:
        await app.poll()
        await pilot.pause()
        status = app.query_one("#status", Static)
        assert f"cannot reach {url}" in visible_text(status)
        assert status.has_class("error")
        assert app.is_running and table_of(app).row_count == 0
        await pilot.press("enter")  # nothing to open: no error either
        assert not isinstance(app.screen, DecisionScreen)


async def test_a_wrong_api_key_is_reported_and_recovery_clears_the_error(proxy, mock_upstream):
    _, upstream = mock_upstream
    client = await proxy(make_config(upstream, server={"api_keys": ["sekrit"]}))
    url = str(client.make_url("")).rstrip("/")
    feed = DecisionFeed(url, api_key="wrong")
    app = TopApp(feed, interval=60)
    async with app.run_test(size=(120, 30)):
        await app.poll()
        status = app.query_one("#status", Static)
        assert "HTTP 401" in visible_text(status) and "--api-key" in visible_text(status)
        feed.headers = {"Authorization": "Bearer sekrit"}
        await app.poll()
        assert not status.has_class("error") and app.last_error is None


def test_the_top_command_takes_its_key_from_the_environment(monkeypatch):
    from router.cli import build_parser

    monkeypatch.setenv("PINCH_ROUTER_API_KEY", "from-env")
    args = build_parser().parse_args(["top", "--interval", "0.5"])
    assert (args.url, args.api_key, args.interval, args.limit) == ("http://127.0.0.1:8787", "from-env", 0.5, 200)
    assert build_parser().parse_args(["top", "--api-key", "given"]).api_key == "given"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["top", "--interval", "0"])
