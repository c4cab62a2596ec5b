"""`pinch-router eval-pinch`: transcripts replayed as sessions through the real proxy, measured and priced."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import orjson
import pytest

from router.core.retrieve import declaration_tokens
import yaml

from router.cli import main
from router.config import load_config
from router.core.tokens import TokenEstimator, tools_chars
from router.tools.eval_pinch import (
    MODES,
    NO_PINCH,
    SCENARIOS,
    SHARED_TRANSCRIPTS,
    STEP_SECONDS,
    Mode,
    ProgressBar,
    Quality,
    Results,
    SessionRun,
    Target,
    TurnTruth,
    _learn_forms,
    _turn_quality,
    cost_at_most,
    eval_pinch,
    keeps_more_than_recency,
    run_eval,
)
from router.tools.pinch_measures import (
    ANTHROPIC,
    SentRequest,
    price_session,
    unchanged_prefix_tokens,
)
from router.tools.transcripts import Transcript, load_transcript
from router.wire.openai_chat.pinch import prune_context
from router.wire.openai_chat.view import trim_candidates
from tests.support.relevance_fakes import relevance_config, session

ESTIMATOR = TokenEstimator()
SHIPPED_CONFIG = Path(__file__).resolve().parents[3] / "config.yaml"


def load_shipped() -> Any:
    return load_config(SHIPPED_CONFIG)


def test_each_assistant_message_is_a_turn_boundary() -> None:
    messages = session(turn=2)
    turns = Transcript("t", messages, None).turn_requests()
    assert [len(request) for request in turns] == [2, 4, 6, 8, 10]
    assert turns[-1] == session(turn=1)


SMALL = SHARED_TRANSCRIPTS / "sweagent-gpt4__pydicom__pydicom-1458.json"
BUDGET_SMALL = 8_000
UNIFORM = next(m for m in MODES if m.pinch and not m.relevance and not m.ledger)
RELEVANCE = next(m for m in MODES if m.relevance and not m.ledger)
UNIFORM_LEDGER = next(m for m in MODES if m.pinch and not m.relevance and m.ledger)
SCENARIO = {s.name: s for s in SCENARIOS}


def replay_small(*scenarios: str, modes: tuple[Mode, ...] = (UNIFORM,), budget: int = BUDGET_SMALL, stream: bool = False) -> tuple[Results, str]:
    out, err = io.StringIO(), io.StringIO()
    transcript = load_transcript(SMALL)
    results = asyncio.run(
        run_eval(
            load_shipped(),
            [transcript],
            out,
            err,
            budgets=[budget],
            scenarios=[SCENARIO[s] for s in scenarios],
            modes=modes,
            stream=stream,
        )
    )
    return results, out.getvalue()


def expected_requests(sent: list[list[dict[str, Any]]], tools: Any, cold_at: set[int] = frozenset()) -> list[SentRequest]:
    """The session as it must come out: each request's tokens, its prefix, the seconds since the last."""
    out = []
    for index, messages in enumerate(sent):
        prefix = unchanged_prefix_tokens(sent[index - 1], messages, ESTIMATOR, tools) if index else 0
        gap = 0.0 if index == 0 else STEP_SECONDS + (ANTHROPIC.lifetime_seconds if index in cold_at else 0)
        out.append(SentRequest(ESTIMATOR.prompt_tokens(messages, tools), prefix, gap))
    return out


def test_no_pinch_sends_every_turn_whole_and_each_repeats_the_previous_one() -> None:
    results, _ = replay_small("warm")
    transcript = load_transcript(SMALL)
    run = results.run(transcript.name, SCENARIO["warm"], BUDGET_SMALL, NO_PINCH)
    turns = transcript.turn_requests()
    assert run.requests == expected_requests(turns, transcript.tools)
    # an agent's request extends the previous one: the prefix is all of it
    assert [r.prefix_tokens for r in run.requests[1:]] == [ESTIMATOR.prompt_tokens(t, transcript.tools) for t in turns[:-1]]


def test_uniform_pinch_is_measured_on_what_reached_the_upstream() -> None:
    results, _ = replay_small("warm")
    transcript = load_transcript(SMALL)
    settings = load_shipped().pinch
    pruned = [
        prune_context(t, BUDGET_SMALL, settings.keep_last_turns, settings.max_summarize_chars, None, ESTIMATOR, tools=transcript.tools)[0]
        for t in transcript.turn_requests()
    ]
    run = results.run(transcript.name, SCENARIO["warm"], BUDGET_SMALL, UNIFORM)
    assert run.requests == expected_requests(pruned, transcript.tools)
    assert run.over_budget == sum(ESTIMATOR.prompt_tokens(t, transcript.tools) > BUDGET_SMALL for t in transcript.turn_requests()) > 0
    base = results.run(transcript.name, SCENARIO["warm"], BUDGET_SMALL, NO_PINCH)
    ratios = results.ratios([transcript.name], SCENARIO["warm"], BUDGET_SMALL, UNIFORM)
    assert ratios.sent_ratio == sum(r.tokens for r in run.requests) / sum(r.tokens for r in base.requests) < 1
    # ledger off: a prune moves with the tail, so later requests repeat less of the previous one
    assert ratios.prefix_share < results.ratios([transcript.name], SCENARIO["warm"], BUDGET_SMALL, NO_PINCH).prefix_share


@pytest.mark.parametrize("scenario", ["warm", "cold", "nocache", "gemini"])
def test_the_cached_tokens_the_upstream_reports_reach_the_decision_rows_as_priced(scenario: str) -> None:
    results, _ = replay_small(scenario, modes=(UNIFORM, UNIFORM_LEDGER))
    name = load_transcript(SMALL).name
    for mode in (NO_PINCH, UNIFORM, UNIFORM_LEDGER):
        run = results.run(name, SCENARIO[scenario], BUDGET_SMALL, mode)
        # the mock upstream's simulated cache, read back through usage and the decision log
        assert run.reported_cached == run.cost(SCENARIO[scenario]).cached_tokens
        assert (run.reported_cached > 0) == (scenario != "nocache")


def test_cold_gaps_make_every_tenth_request_wait_out_the_cache_lifetime() -> None:
    results, _ = replay_small("cold")
    transcript = load_transcript(SMALL)
    run = results.run(transcript.name, SCENARIO["cold"], BUDGET_SMALL, NO_PINCH)
    assert [r.gap_seconds for r in run.requests] == [r.gap_seconds for r in expected_requests(transcript.turn_requests(), None, {10})]
    cost = run.cost(SCENARIO["cold"])
    # request 10 is priced all fresh although it repeats request 9 in full
    warm = price_session(run.requests[:10], ANTHROPIC).cost
    tenth = run.requests[10]
    assert price_session(run.requests[:11], ANTHROPIC).cost == pytest.approx(warm + 1.25 * tenth.tokens)
    assert cost.cached_tokens < cost.prefix_tokens


def test_no_cache_prices_every_token_at_one_and_counts_referenced_results() -> None:
    results, out = replay_small("nocache", modes=(UNIFORM, RELEVANCE))
    name = load_transcript(SMALL).name
    uniform = results.run(name, SCENARIO["nocache"], BUDGET_SMALL, UNIFORM)
    cost = uniform.cost(SCENARIO["nocache"])
    assert cost.cost == cost.tokens_sent == cost.fresh_tokens
    # uniform compresses every old result, so none of the referenced ones goes out verbatim
    assert uniform.quality.referenced > 0 and uniform.quality.kept == 0
    relevance = results.run(name, SCENARIO["nocache"], BUDGET_SMALL, RELEVANCE)
    assert relevance.quality.referenced > 0
    assert "referenced kept" in out and "recency" in out


def test_ledger_replays_read_batches_and_reasons_back_from_the_decision_rows() -> None:
    results, out = replay_small("cold", modes=(UNIFORM, UNIFORM_LEDGER))
    name = load_transcript(SMALL).name
    ledger = results.run(name, SCENARIO["cold"], BUDGET_SMALL, UNIFORM_LEDGER)
    # every request's row says why it did or did not compress new results; numbers are folded to N
    assert sum(ledger.reasons.values()) == len(ledger.requests)
    assert not any(ch.isdigit() for reason in ledger.reasons for ch in reason)
    assert 1 <= ledger.batches < len(ledger.requests)
    assert f"why ({UNIFORM_LEDGER.name}): " in out
    # a ledger rewrites less than pruning afresh every request does
    ratios = {m: results.ratios([name], SCENARIO["cold"], BUDGET_SMALL, m) for m in (UNIFORM, UNIFORM_LEDGER)}
    assert ratios[UNIFORM_LEDGER].prefix_share > ratios[UNIFORM].prefix_share


def test_first_sight_savings_are_read_back_and_shown_apart() -> None:
    results, out = replay_small("warm", modes=(UNIFORM_LEDGER,), budget=10**6)  # never over budget: first sight alone
    name = load_transcript(SMALL).name
    ledger = results.run(name, SCENARIO["warm"], 10**6, UNIFORM_LEDGER)
    base = results.run(name, SCENARIO["warm"], 10**6, NO_PINCH)
    saved = sum(r.tokens for r in base.requests) - sum(r.tokens for r in ledger.requests)
    # what the decision rows say first sight saved is exactly what the upstream received less, but for the
    # pinch_retrieve declaration every request of the session carries (the client offers tools)
    declared = len(ledger.requests) * declaration_tokens(tools_chars(load_transcript(SMALL).tools))
    assert ledger.first_sight_new > 0 and ledger.first_sight_saved - declared == saved > 0 and ledger.batches == 0
    assert f"  first sight ({UNIFORM_LEDGER.name}): {ledger.first_sight_new} results reduced, {ledger.first_sight_saved:,} tokens saved" in out
    # a turn where only first sight acted has no compression to judge: no referenced result is at stake
    assert ledger.quality.referenced == 0


def test_requests_over_the_window_are_refused_and_counted_not_sent() -> None:
    transcript = load_transcript(SHARED_TRANSCRIPTS / "mswea-deepseek-chat__sqlfluff__sqlfluff-1733.json")
    config = load_shipped()
    out = io.StringIO()
    results = asyncio.run(run_eval(config, [transcript], out, io.StringIO(), budgets=[40_000], scenarios=[SCENARIO["window"]], modes=()))
    run = results.run(transcript.name, SCENARIO["window"], 40_000, NO_PINCH)
    # the gate's fit rule: the prompt plus room for the answer (no max_tokens sent: the configured minimum)
    room = config.routing.min_output_tokens
    window = SCENARIO["window"].context_window
    too_big = [t for t in transcript.turn_requests() if ESTIMATOR.prompt_tokens(t, transcript.tools) + room > window]
    assert run.refused == len(too_big) > 0
    assert len(run.requests) == len(transcript.turn_requests()) - len(too_big)
    assert f"({len(too_big)} refused)" in out.getvalue()
    assert f"refused: no pinch 400 no_capable_model ×{len(too_big)}" in out.getvalue()


def session_run(tokens: list[int], over_budget: int = 1) -> SessionRun:
    return SessionRun(requests=[SentRequest(t, 0, STEP_SECONDS) for t in tokens], over_budget=over_budget)


def test_a_target_is_met_only_on_every_transcript_that_exceeds_the_budget() -> None:
    cold = SCENARIO["cold"]
    results = Results(["big", "small", "short"], (cold,), (20_000,), (NO_PINCH, UNIFORM_LEDGER))
    results.runs[("big", "cold", 0, NO_PINCH.name)] = session_run([100, 100])
    results.runs[("big", "cold", 20_000, UNIFORM_LEDGER.name)] = session_run([70, 70])
    results.runs[("small", "cold", 0, NO_PINCH.name)] = session_run([100, 100])
    results.runs[("small", "cold", 20_000, UNIFORM_LEDGER.name)] = session_run([90, 90])
    # never over budget: pinch had nothing to do there, so it is not judged (it costs 1.00×)
    results.runs[("short", "cold", 0, NO_PINCH.name)] = session_run([10])
    results.runs[("short", "cold", 20_000, UNIFORM_LEDGER.name)] = session_run([10], over_budget=0)
    target = Target("cold", 20_000, "cost ≤ 0.80×", cost_at_most(0.80))
    ok, detail = target.worst(results, cold, 20_000, [UNIFORM_LEDGER])
    assert not ok and detail == f"1 of 2 missed, worst: cost 0.900× ({UNIFORM_LEDGER.name}, small)"
    results.runs[("small", "cold", 20_000, UNIFORM_LEDGER.name)] = session_run([80, 80])
    assert target.worst(results, cold, 20_000, [UNIFORM_LEDGER]) == (True, f"worst: cost 0.800× ({UNIFORM_LEDGER.name}, small)")


def test_together_sums_the_transcripts_over_the_budget_and_leaves_out_the_rest() -> None:
    cold = SCENARIO["cold"]
    results = Results(["big", "small", "short"], (cold,), (20_000,), (NO_PINCH, UNIFORM_LEDGER))
    results.runs[("big", "cold", 0, NO_PINCH.name)] = session_run([300, 300])
    results.runs[("big", "cold", 20_000, UNIFORM_LEDGER.name)] = session_run([210, 210])  # 0.70×
    results.runs[("small", "cold", 0, NO_PINCH.name)] = session_run([100, 100])
    results.runs[("small", "cold", 20_000, UNIFORM_LEDGER.name)] = session_run([90, 90])  # 0.90×: missed alone
    # never over budget: summing it in would pull the ratio toward 1.00×
    results.runs[("short", "cold", 0, NO_PINCH.name)] = session_run([1_000])
    results.runs[("short", "cold", 20_000, UNIFORM_LEDGER.name)] = session_run([1_000], over_budget=0)
    target = Target("cold", 20_000, "cost ≤ 0.80×", cost_at_most(0.80))
    assert not target.worst(results, cold, 20_000, [UNIFORM_LEDGER])[0]
    # (210 + 210 + 90 + 90) / (300 + 300 + 100 + 100) = 0.75
    assert target.together(results, cold, 20_000, [UNIFORM_LEDGER]) == (True, f"worst: cost 0.750× ({UNIFORM_LEDGER.name}, 2 of 3 transcripts)")


def test_per_transcript_tables_follow_each_total(capsys: pytest.CaptureFixture[str]) -> None:
    other = SHARED_TRANSCRIPTS / "mswea-deepseek-chat__sqlfluff__sqlfluff-1733.json"
    args = ["eval-pinch", "--config", str(SHIPPED_CONFIG), "--budget", "20000", "--scenario", "nocache", "--per-transcript", str(SMALL), str(other)]
    assert main(args) == 0
    out = capsys.readouterr().out
    small, big = load_transcript(SMALL), load_transcript(other)
    block = out.split("budget 20,000\n")[1].split("\n\n")[0]
    assert f"  {small.name}:" in block and f"  {big.name}:" in block
    # each transcript's no-pinch row counts its own requests
    rows = [line for line in block.splitlines() if line.strip().startswith("no pinch")]
    assert [row.split()[2] for row in rows] == [str(len(small.turn_requests()) + len(big.turn_requests())), str(len(small.turn_requests())), str(len(big.turn_requests()))]


def test_an_unreachable_embeddings_endpoint_is_reported_not_hidden(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = yaml.safe_load(SHIPPED_CONFIG.read_text())
    raw["pinch"]["relevance"].update(base_url="http://127.0.0.1:9/v1", api="openai")  # nobody listens there
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(raw))
    args = ["eval-pinch", "--config", str(config), "--embeddings-from-config", "--budget", str(BUDGET_SMALL), "--scenario", "nocache", str(SMALL)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"relevance UNAVAILABLE ({RELEVANCE.name}) on " in out and "pruned uniformly instead" in out
    assert " timed out), pruned uniformly instead" in out and "; 0 ranked" in out


def test_the_rankings_are_counted_when_none_failed(capsys: pytest.CaptureFixture[str]) -> None:
    """A run under load says how many requests it ranked and that none fell back or timed out."""
    args = ["eval-pinch", "--config", str(SHIPPED_CONFIG), "--budget", str(BUDGET_SMALL), "--scenario", "nocache", str(SMALL)]
    assert main(args) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith(f"  relevance ({RELEVANCE.name}): "))
    assert line.endswith("none unavailable (0 timed out)") and int(line.split("ranked ")[1].split()[0]) > 0
    assert "relevance UNAVAILABLE" not in out


def test_the_quality_target_judges_relevance_only_and_only_where_references_were_at_stake() -> None:
    nocache = SCENARIO["nocache"]
    relevance_ledger = next(m for m in MODES if m.relevance and m.ledger)
    results = Results(["a", "b"], (nocache,), (40_000,), (NO_PINCH, UNIFORM_LEDGER, relevance_ledger))
    for name in ("a", "b"):
        results.runs[(name, "nocache", 0, NO_PINCH.name)] = session_run([100])
        # uniform keeps exactly what recency keeps: it would miss, but it is not judged
        results.runs[(name, "nocache", 40_000, UNIFORM_LEDGER.name)] = SessionRun([SentRequest(80, 0, 0)], over_budget=1, quality=Quality(10, 5, 5))
    results.runs[("a", "nocache", 40_000, relevance_ledger.name)] = SessionRun([SentRequest(80, 0, 0)], over_budget=1, quality=Quality(10, 9, 5))
    results.runs[("b", "nocache", 40_000, relevance_ledger.name)] = SessionRun([SentRequest(80, 0, 0)], over_budget=1)  # nothing at stake
    target = Target("nocache", 40_000, "quality", keeps_more_than_recency(5), relevance_only=True)
    assert target.worst(results, nocache, 40_000, [UNIFORM_LEDGER, relevance_ledger]) == (
        True,
        f"worst: 90.0% vs recency 50.0% (+40.0 points) ({relevance_ledger.name}, a)",
    )


def test_the_report_has_a_table_per_scenario_and_budget_and_the_targets(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval-pinch", "--config", str(SHIPPED_CONFIG), "--budget", str(BUDGET_SMALL), "--scenario", "warm", "--scenario", "nocache", str(SMALL)]) == 0
    out, err = capsys.readouterr()
    assert f"warm cache: consecutive requests, a 1,000,000-token window — budget {BUDGET_SMALL:,}" in out
    assert f"no prompt cache: the provider caches nothing — budget {BUDGET_SMALL:,}" in out
    assert "hashed bag-of-words embeddings (not a real model)" in out
    assert "targets (issues #11, #26)" in out and "warm 8k: cost ≤ 1.00×" in out
    assert "referenced results kept verbatim by relevance ≥ recency at equal tokens (issue #26)" in out
    assert "the transcripts over the budget together — " in out
    assert "turns" in err


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"{not json", "not valid JSON"), (b'{"messages": "hi"}', "expected"), (b"[1, 2]", "expected")],
)
def test_a_bad_transcript_is_reported_not_raised(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    err = io.StringIO()
    assert eval_pinch(relevance_config(), [str(path)], out=io.StringIO(), err=err) == 2
    assert message in err.getvalue() and "bad.json" in err.getvalue()


def test_a_missing_file_is_reported(tmp_path: Path) -> None:
    err = io.StringIO()
    assert eval_pinch(relevance_config(), [str(tmp_path / "nope.json")], out=io.StringIO(), err=err) == 2
    assert "cannot read" in err.getvalue()


def test_a_bare_list_of_messages_is_a_transcript(tmp_path: Path) -> None:
    path = tmp_path / "list.json"
    path.write_bytes(orjson.dumps(session()))
    transcript = load_transcript(path)
    assert (transcript.name, len(transcript.messages), transcript.tools) == ("list", 10, None)


def test_budget_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["eval-pinch", "--budget", "0", "x.json"])
    assert "must be at least 1" in capsys.readouterr().err


def test_progress_bar_redraws_on_a_new_label_every_tenth_turn_and_at_the_end() -> None:
    stream = io.StringIO()
    bar = ProgressBar(12, stream, width=12)
    for _ in range(12):
        bar.advance("a")
    bar.close()
    drawn = [line.split("]")[1].split("turns")[0].strip() for line in stream.getvalue().split("\r")[1:]]
    assert drawn == ["1/12", "10/12", "12/12"]
    assert "[############] 12/12 turns  a" in stream.getvalue()
    assert stream.getvalue().endswith("\n")


def test_a_streaming_client_gets_the_same_savings_and_its_cached_tokens_are_read_from_the_stream() -> None:
    whole, _ = replay_small("warm", modes=(UNIFORM_LEDGER,))
    streamed, out = replay_small("warm", modes=(UNIFORM_LEDGER,), stream=True)
    name = load_transcript(SMALL).name
    for mode in (NO_PINCH, UNIFORM_LEDGER):
        a, b = whole.run(name, SCENARIO["warm"], BUDGET_SMALL, mode), streamed.run(name, SCENARIO["warm"], BUDGET_SMALL, mode)
        assert a.requests == b.requests and a.first_sight_saved == b.first_sight_saved
        assert sum(t.cached_tokens for t in b.turns) == sum(t.cached_tokens for t in a.turns) > 0  # read from the stream's usage chunk
    ledger = streamed.run(name, SCENARIO["warm"], BUDGET_SMALL, UNIFORM_LEDGER)
    assert sum(ledger.referenced.values()) > 0 and len(ledger.overhead_ms) == len(ledger.requests)
    assert f"  referenced old results ({UNIFORM_LEDGER.name}): " in out and f"  proxy time per request ({UNIFORM_LEDGER.name}): p50 " in out


def test_recency_is_given_the_first_sight_texts_the_replay_saw_whichever_the_mode_kept() -> None:
    """The yardstick sends each result as first sight last sent it (#49), also once the mode compressed
    it; a result sent as its original again (first sight let go of it) is its original for recency too."""
    messages = session(turn=2)
    at = next(i for i, m in enumerate(messages) if m.get("role") == "tool")
    truth = TurnTruth(messages, ESTIMATOR.prompt_tokens(messages), [at], [at])
    reduced = {**messages[at], "content": "[pinch-router: same output as the earlier call bash ls]"}
    compressed = {**messages[at], "content": "[pinch-router: old bash result omitted (900 characters)]"}
    forms: dict[int, Any] = {}
    _learn_forms(forms, truth, [*messages[:at], reduced, *messages[at + 1 :]])
    assert forms == {at: reduced}
    _learn_forms(forms, truth, [*messages[:at], compressed, *messages[at + 1 :]])
    assert forms == {at: reduced}
    _learn_forms(forms, truth, messages)
    assert forms == {}


def test_recency_with_no_first_sight_is_counted_beside_on_the_originals() -> None:
    """Beside the yardstick with the mode's first-sight texts, recency with none (#49): every result as the
    client sent it, at the same tokens. A result first sight sent short costs recency its original then."""
    messages = session()
    candidates = trim_candidates(messages, 1)
    oldest, middle, newest = candidates
    reduced = {**messages[oldest], "content": "[pinch-router: same output as the earlier call bash ls]"}
    compressed = {**messages[middle], "content": "[pinch-router: old bash result omitted (900 characters)]"}
    sent = [reduced if i == oldest else compressed if i == middle else m for i, m in enumerate(messages)]
    truth = TurnTruth(messages, ESTIMATOR.prompt_tokens(messages), candidates, [oldest, newest])
    quality = _turn_quality(truth, sent, ESTIMATOR.prompt_tokens(sent), 400, ESTIMATOR, None, {oldest: reduced})
    assert (quality.referenced, quality.kept) == (2, 2)
    # with the same short text recency keeps the oldest (compressing it saves nothing more) and compresses
    # the two others to reach the mode's tokens; on the originals it has to compress all three
    assert (quality.kept_by_recency, quality.kept_by_plain_recency) == (1, 0)
    assert (quality.recency_share, quality.plain_recency_share) == (0.5, 0.0)
    # no first-sight texts: the two are one figure
    plain = _turn_quality(truth, [compressed if i == middle else m for i, m in enumerate(messages)], ESTIMATOR.prompt_tokens(sent) + 50, 400, ESTIMATOR, None, {})
    assert plain.kept_by_recency == plain.kept_by_plain_recency
