"""`pinch-router top`: the pure formatting of decision rows, and the live TUI against a real proxy."""

from __future__ import annotations

from datetime import UTC

import pytest
from textual.widgets import DataTable, Static

from bench.harness import free_port  # a loopback port where nothing listens
from router.tools.decision_text import format_dollars
from router.tools.top import (
    COLUMNS,
    DecisionFeed,
    DecisionScreen,
    FeedError,
    TopApp,
    classification_cell,
    decision_cells,
    parse_decisions,
    summary_line,
)
from tests.support.config import chat_body, make_config, model_entry
from tests.support.factories import decision_row

URL = "/v1/chat/completions"
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}]


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


def test_pinch_that_did_not_run_is_not_zero_saved():
    assert decision_cells(decision_row(pinch_mode=None, tokens_before=None, tokens_after=None), UTC)[4] == "-"
    assert decision_cells(decision_row(pinch_mode="within_budget", tokens_before=10, tokens_after=10), UTC)[4] == "0"


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


async def test_the_summary_shows_the_last_hours_dollars_as_the_dashboard_counts_them(proxy, mock_upstream):
    _, upstream = mock_upstream
    price = {"input": 3.0, "output": 15.0}
    config = make_config(upstream, models=[model_entry("main", cost_per_mtok=price)], dashboard={"reference_prices": {"opus": {"input": 15.0, "output": 75.0}}, "reference_model": "opus"})
    client = await proxy(config)
    for text in ("one", "two two two"):
        await client.post(URL, json=chat_body(text), headers={"x-session-id": "s"})
    overview = await (await client.get("/ui/api/overview", params={"window": "hour"})).json()
    assert overview["spent"] > 0 and overview["saved_by_routing"] > 0
    app = TopApp(DecisionFeed(str(client.make_url("")).rstrip("/")), interval=60, tz=UTC)
    async with app.run_test(size=(300, 30)) as pilot:
        await app.poll()
        await pilot.pause()
        summary = visible_text(app.query_one("#summary", Static))
    spent, pinch, routing = (format_dollars(overview[k]) for k in ("spent", "saved_by_pinch", "saved_by_routing"))
    assert f"last hour {spent} spent, saved {pinch} by pinch, {routing} by routing" in summary


async def test_without_prices_the_summary_shows_no_dollars(proxy, mock_upstream):
    client, url = await start_proxy(proxy, mock_upstream)
    await client.post(URL, json=chat_body("one"))
    app = TopApp(DecisionFeed(url), interval=60, tz=UTC)
    async with app.run_test(size=(300, 30)) as pilot:
        await app.poll()
        await pilot.pause()
        assert "$" not in visible_text(app.query_one("#summary", Static))


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
