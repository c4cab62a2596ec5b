"""See the cache: the provider's prompt-cache accounting read from every answer, logged and counted."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest

from router.core.results import Usage
from router.core.sse import SseRelay
from router.observe.decision_log import COLUMNS, DecisionLog
from router.observe.decision_record import Decision
from router.tools.mock_upstream import Behaviour
from router.wire.openai_chat.adapter import OPENAI_CHAT_ADAPTER
from router.wire.usage import read_usage
from tests.http.test_decision_log import decisions
from tests.http.test_metrics import scrape, value
from tests.support.config import chat_body, make_config

OPENAI_USAGE = {"prompt_tokens": 2000, "completion_tokens": 50, "total_tokens": 2050, "prompt_tokens_details": {"cached_tokens": 1536}}
# Anthropic's shape: input_tokens leaves out what was read from or written to the cache
ANTHROPIC_USAGE = {"input_tokens": 40, "output_tokens": 50, "cache_read_input_tokens": 1800, "cache_creation_input_tokens": 160}


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (OPENAI_USAGE, Usage(2000, 50, 2050, cached_tokens=1536)),
        (ANTHROPIC_USAGE, Usage(2000, 50, None, cached_tokens=1800, cache_write_tokens=160)),
        # an OpenAI-compatible server passing Anthropic's cache fields through
        (
            {"prompt_tokens": 2000, "completion_tokens": 5, "total_tokens": 2005, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 0},
            Usage(2000, 5, 2005, cached_tokens=900, cache_write_tokens=0),
        ),
        # DeepSeek's disk cache
        ({"prompt_tokens": 300, "completion_tokens": 1, "total_tokens": 301, "prompt_cache_hit_tokens": 256}, Usage(300, 1, 301, 256)),
        # no cache accounting: unknown, not zero
        ({"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}, Usage(10, 1, 11)),
        # junk figures are not figures
        ({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": -3}}, Usage(10, None, None)),
        ({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": True}}, Usage(10, None, None)),
        ({"prompt_tokens": 10, "prompt_tokens_details": "none"}, Usage(10, None, None)),
    ],
)
def test_both_shapes_of_cache_accounting_are_read(usage: dict[str, Any], expected: Usage) -> None:
    assert read_usage(orjson.dumps({"id": "x", "usage": usage})) == expected


def test_uncached_prompt_tokens_need_the_cache_figure() -> None:
    assert Usage(2000, 50, 2050, cached_tokens=1536).uncached_prompt_tokens == 464
    assert Usage(2000, 50, 2050).uncached_prompt_tokens is None


def test_an_anthropic_stream_reports_the_prompt_at_the_start_and_the_output_at_the_end() -> None:
    relay = SseRelay(OPENAI_CHAT_ADAPTER)
    relay.feed(
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","usage":'
        b'{"input_tokens":40,"output_tokens":1,"cache_read_input_tokens":1800,"cache_creation_input_tokens":160}}}\n\n'
    )
    relay.feed(b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":50}}\n\n')
    assert relay.usage == Usage(2000, 50, None, cached_tokens=1800, cache_write_tokens=160)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(
    ("usage", "cached", "written", "prompt"),
    [(OPENAI_USAGE, 1536, None, 2000), (ANTHROPIC_USAGE, 1800, 160, 2000)],
    ids=["openai", "anthropic"],
)
async def test_the_cache_figures_reach_the_decision_log_and_the_metrics(
    proxy, mock_upstream, stream: bool, usage: dict[str, Any], cached: int, written: int | None, prompt: int
) -> None:
    mock, url = mock_upstream
    client = await proxy(make_config(url))
    mock.then(Behaviour(usage=usage))
    body = chat_body("hi", stream=True, stream_options={"include_usage": True}) if stream else chat_body("hi")
    resp = await client.post("/v1/chat/completions", json=body)
    await resp.read()
    assert resp.status == 200
    (row,) = await decisions(client)
    assert (row["prompt_tokens"], row["cached_tokens"], row["cache_write_tokens"]) == (prompt, cached, written)
    samples = await scrape(client)
    assert value(samples, "pinch_router_prompt_cache_tokens_total", model="main", kind="cached") == cached
    assert value(samples, "pinch_router_prompt_cache_tokens_total", model="main", kind="uncached") == prompt - cached
    assert value(samples, "pinch_router_prompt_cache_tokens_total", model="main", kind="written") == (written or 0)


async def test_a_whole_answer_is_parsed_once_for_its_json_check_and_its_usage(proxy, mock_upstream, monkeypatch) -> None:
    """The not-JSON check of a non-streamed answer parses it; its usage is read from that parse (#19)."""
    mock, url = mock_upstream
    client = await proxy(make_config(url))
    mock.then(Behaviour(usage=OPENAI_USAGE))
    answers_parsed = []
    loads = orjson.loads

    def counted_loads(data: Any) -> Any:
        value = loads(data)
        if isinstance(value, dict) and value.get("object") == "chat.completion":
            answers_parsed.append(value)
        return value

    monkeypatch.setattr(orjson, "loads", counted_loads)
    resp = await client.post("/v1/chat/completions", json=chat_body("hi"))
    assert resp.status == 200 and (await resp.json())["usage"] == OPENAI_USAGE
    (row,) = await decisions(client)
    assert (row["prompt_tokens"], row["cached_tokens"]) == (2000, 1536)
    assert len(answers_parsed) == 1


async def test_an_answer_without_cache_accounting_counts_no_cached_or_uncached_tokens(proxy, mock_upstream) -> None:
    _, url = mock_upstream
    client = await proxy(make_config(url))
    await (await client.post("/v1/chat/completions", json=chat_body("hi"))).read()
    (row,) = await decisions(client)
    assert row["prompt_tokens"] > 0 and row["cached_tokens"] is None
    samples = await scrape(client)
    assert value(samples, "pinch_router_prompt_cache_tokens_total", model="main", kind="uncached") == 0


async def test_a_log_file_from_before_the_new_columns_gets_them_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "decisions.sqlite3"
    old_columns = [c for c in COLUMNS if c not in {"cached_tokens", "cache_write_tokens", "pinch_reapplied", "pinch_newly_compressed", "pinch_reason"}]
    with sqlite3.connect(path) as conn:
        conn.execute(f"CREATE TABLE decisions ({', '.join(old_columns)}, outcome TEXT, outcome_reason TEXT, outcome_ts REAL)")
        conn.execute("INSERT INTO decisions (request_id, ts, status, duration_ms, stream) VALUES ('old', 1.0, 200, 3.0, 0)")
    log = DecisionLog(str(path), flush_interval=0.01)
    await log.start()
    try:
        log.submit(Decision("new", 2.0, 200, 4.0, prompt_tokens=100, cached_tokens=80, pinch_reason="within budget"))
        rows = {row["request_id"]: row for row in await log.recent(10)}
    finally:
        await log.close()
    assert rows["old"]["cached_tokens"] is None
    assert (rows["new"]["cached_tokens"], rows["new"]["pinch_reason"]) == (80, "within budget")
