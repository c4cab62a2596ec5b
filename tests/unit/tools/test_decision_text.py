"""One decision as text (router/tools/decision_text.py), the renderer `top` and `explain` share, on plain rows."""

from __future__ import annotations

from datetime import UTC

import pytest

from router.tools.decision_text import (
    decision_detail,
    decision_fields,
    format_ms,
    format_tokens,
    text_table,
    thousands,
    trace_lines,
)
from tests.support.factories import decision_row


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


@pytest.mark.parametrize(("n", "text"), [(None, "-"), (0, "0"), (50_000, "50,000"), (True, "-"), ("12", "-")])
def test_thousands_writes_counts_in_full_and_a_dash_for_anything_else(n, text):
    assert thousands(n) == text


@pytest.mark.parametrize(
    ("fields", "line"),
    [
        ({"pinch_reapplied": 0, "pinch_newly_compressed": 0, "pinch_reason": "within budget after the ledger"}, "ledger      0 reapplied, 0 newly compressed — within budget after the ledger"),
        ({"pinch_reapplied": 2, "pinch_newly_compressed": 0, "pinch_reason": ""}, "ledger      2 reapplied, 0 newly compressed"),
        ({"pinch_reapplied": 0, "pinch_newly_compressed": 0, "pinch_reason": ""}, None),  # nothing to say
        ({"pinch_mode": None, "pinch_reapplied": 3, "pinch_reason": "x"}, None),  # pinch did not run
    ],
)
def test_the_ledger_line_appears_only_when_the_ledger_has_something_to_say(fields, line):
    lines = [f"{name:<12}{value}" for name, value in decision_fields(decision_row(**fields)) if name == "ledger"]
    assert lines == ([line] if line else [])


def test_an_output_limit_nothing_was_sent_with_shows_only_what_was_asked():
    assert ("max tokens", "requested 32000") in decision_fields(decision_row(requested_max_tokens=32_000, sent_max_tokens=None))


@pytest.mark.parametrize(
    ("fields", "wire"),
    [
        ({"wire_in": "anthropic-messages", "wire_out": "openai-chat", "wire_dropped": "tool web_search"}, "anthropic-messages → openai-chat, translated, dropped tool web_search"),
        ({"wire_in": "openai-chat", "wire_out": "openai-chat"}, "openai-chat → openai-chat, passed through"),
        ({"wire_in": "openai-responses", "wire_out": None}, "openai-responses, no provider tried"),
        ({"wire_in": None}, None),  # refused at the edge, before any wire adapter
    ],
)
def test_the_wire_line_says_how_the_clients_format_reached_the_provider(fields, wire):
    assert [value for name, value in decision_fields(decision_row(**fields)) if name == "wire"] == ([wire] if wire else [])


def test_time_without_the_proxys_overhead_leaves_it_out():
    row = decision_row(first_byte_ms=None, upstream_ms=None, overhead_ms=None, duration_ms=4.5)
    assert ("time", "total 4.5 ms") in decision_fields(row)


def test_the_trace_aligns_milliseconds_right_and_lists_stages_that_did_not_run():
    stages = [{"stage": "classifier", "outcome": "fallback", "ms": 12.5, "detail": "timeout"}, {"stage": "capability-gate", "outcome": "ok", "ms": 0.1}]
    assert trace_lines(stages, [("upstream-forward", "explain never calls the chat upstream")]) == [
        "  stage             outcome      ms  detail",
        "  classifier        fallback  12.50  timeout",
        "  capability-gate   ok         0.10",
        "  upstream-forward  not run          explain never calls the chat upstream",
    ]
    assert trace_lines([]) == ["  (no stage ran)"]


def test_a_table_pads_each_column_to_its_widest_cell_and_leaves_the_last_free():
    rows = [("index", "tool", "how"), ("4", "bash", "placeholder"), ("12", "open", "elided")]
    assert text_table(rows, right=(0,)) == ["  index  tool  how", "      4  bash  placeholder", "     12  open  elided"]
