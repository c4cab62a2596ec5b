"""``pinch-router demo``: what routing and pinch do to a real agent session, with no model server and no agent.

It serves the mock upstream (:class:`~router.tools.mock_upstream.MockUpstream`: the chat model, the
classifier and the embeddings in one) and the proxy (:func:`router.server.app.create_app`) on free
loopback ports, and replays a shared transcript turn by turn as ONE session through the configured
chain — session-fingerprint, classification-cache, classifier, pinch, capability-gate,
upstream-forward — on a config derived from the given one (default: the shipped ``config.yaml``):
every provider pointed at the mock, every model given the scenario's window. Each turn's chosen model,
classification source, tokens pinch saved and the share the (simulated) prompt cache served are
shown as they come, under a progress bar; then the same session is replayed without pinch, and the
summary compares the two — tokens sent and the session's cost at the scenario's cache prices.

Both replays are eval-pinch's own (:func:`router.tools.eval_pinch.replay_session`) and the summary's
figures are eval-pinch's :class:`~router.tools.eval_pinch.Ratios`, so the demo reports what
``pinch-router eval-pinch --scenario S --budget B FILE`` reports on the configured mode's row
(tests/unit/tools/test_demo.py holds them equal).

In-process, not subprocesses: the replay drives the proxy's clock (eval-pinch's injected
:class:`~router.tools.eval_pinch.ReplayClock`), so the scenario's cache lifetime and the agent's pauses
pass without waiting; both servers live on this event loop, so Ctrl-C (or any error) closes both ports
before the command returns, and nothing outlives it.

The pinch replay's decision rows go to ``decisions.sqlite3`` in the output directory (the state
directory's ``demo/``), beside the request of the turn pinch saved most on, for ``explain``. With
``--keep`` a proxy on that log stays up after the summary, on a free loopback port, and the summary
ends with its dashboard's URL for the session (:func:`keep_dashboard`), until Ctrl-C.
"""

from __future__ import annotations

import asyncio
import io
import logging
import shlex
import sqlite3
import sys
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

import aiohttp
import orjson

from router.config import Config
from router.core.pricing import Prices
from router.core.tokens import TokenEstimator
from router.core.usage_summary import Sums
from router.observe.decision_sums import overview_groups
from router.observe.prices import prices_of
from router.server.app import create_app
from router.tools.eval_pinch import (
    MODES,
    NO_PINCH,
    SCENARIOS,
    Mode,
    Ratios,
    Scenario,
    SessionRun,
    Turn,
    replay_session,
    serve,
    turn_truths,
)
from router.tools.decision_text import format_dollars
from router.tools.mock_upstream import MockUpstream
from router.tools.transcripts import RequestFileError, Transcript, load_transcript

# Packaged (router/tools/data/, with its provenance and license in the .meta.json beside it), so the demo
# runs from any install; the same bytes as the shared copy in tests/data/transcripts/ (a test holds them equal).
DEFAULT_TRANSCRIPT = Path(__file__).resolve().parent / "data" / "mswea-deepseek-chat__sqlfluff__sqlfluff-1733.json"
# Cold gaps: the agent's user steps away past the cache lifetime every tenth turn — the case the
# ledger is for. `--scenario` picks another of eval-pinch's.
DEFAULT_SCENARIO = "cold"
SESSION_FILE = "decisions.sqlite3"


def configured_mode(config: Config) -> Mode:
    """eval-pinch's mode that the configuration's pinch settings are (relevance and ledger on or off)."""
    pinch = config.pinch
    if not pinch.enabled:
        return NO_PINCH
    return next(m for m in MODES if m.pinch and m.relevance == pinch.relevance.enabled and m.ledger == pinch.ledger)


@dataclass(frozen=True, slots=True)
class DemoResult:
    transcript: str
    scenario: Scenario
    budget: int
    mode: Mode
    pinched: SessionRun
    baseline: SessionRun
    ratios: Ratios  # eval-pinch's figures for the pinched run against the baseline
    explain_file: Path | None  # the request of the turn pinch saved most on
    transcript_file: Path | None = None  # where the transcript was read from
    dollars: Sums | None = None  # the pinch replay's decision rows at the config's prices, as the dashboard sums them


class TurnView:
    """Each turn as a line, with a progress bar under the lines when the stream is a terminal."""

    def __init__(self, stream: TextIO, total: int, width: int = 30) -> None:
        self.stream = stream
        self.total = max(total, 1)
        self.width = width
        self.tty = stream.isatty()

    def advance(self, label: str) -> None:  # eval-pinch's progress interface: the lines say more
        pass

    def turn(self, turn: Turn) -> None:
        self.stream.write(("\r\033[K" if self.tty else "") + turn_line(turn) + "\n")
        if self.tty:
            done = turn.index + 1
            filled = self.width * done // self.total
            self.stream.write(f"[{'#' * filled}{'-' * (self.width - filled)}] {done}/{self.total} turns")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()


def _header(turn: Turn, name: str) -> str:
    lowered = {k.lower(): v for k, v in turn.headers.items()}
    return lowered.get(name, "-")


def turn_line(turn: Turn) -> str:
    """``turn  12/80  local-coder     cached      saved  3,210  cached  87%  (sent 14,020 of 17,230)``"""
    head = f"turn {turn.index + 1:>3}/{turn.total}"
    if turn.status != 200:
        return f"{head}  refused: {turn.status} {turn.error_code}"
    saved = int(_header(turn, "x-router-pinch-saved").replace("-", "0") or 0)
    cached = turn.cached_tokens / turn.sent_tokens if turn.sent_tokens else 0.0
    return (
        f"{head}  {_header(turn, 'x-router-model'):<15} {_header(turn, 'x-router-source'):<10}"
        f"  saved {saved:>6,}  cached {cached:>4.0%}  (sent {turn.sent_tokens:,} of {turn.original_tokens:,})"
    )


async def run_demo(
    config: Config,
    transcript: Transcript,
    scenario: Scenario,
    budget: int,
    out_dir: Path,
    view: TurnView | None = None,
    baseline_note: TextIO | None = None,
) -> DemoResult:
    """Both replays (the configured mode, then no pinch) on the full chain; the figures eval-pinch would report."""
    mode = configured_mode(config)
    estimator = TokenEstimator(config.tokens.image_tokens, config.tokens.per_message_overhead)
    truths = turn_truths(transcript, config.pinch.keep_last_turns, estimator)
    out_dir.mkdir(parents=True, exist_ok=True)
    log_file = out_dir / SESSION_FILE
    for stale in (log_file, log_file.with_name(log_file.name + "-wal"), log_file.with_name(log_file.name + "-shm")):
        stale.unlink(missing_ok=True)
    view = view or TurnView(io.StringIO(), len(truths))
    mock = MockUpstream(retrieves=False)  # as eval-pinch's
    upstream_runner, upstream_url = await serve(mock.app())
    try:
        async with aiohttp.ClientSession() as client:
            pinched = await replay_session(
                transcript, truths, config, scenario, mode, budget, (mock, upstream_url), client, estimator, view,
                full_chain=True, decision_log=str(log_file), on_turn=view.turn,
            )  # fmt: skip
            view.close()
            if baseline_note is not None:
                baseline_note.write("replaying the same session without pinch, for the comparison ...\n")
                baseline_note.flush()
            baseline = await replay_session(
                transcript, truths, config, scenario, NO_PINCH, budget, (mock, upstream_url), client, estimator, view, full_chain=True
            )
    finally:
        await upstream_runner.cleanup()
    explain_file = None
    saved = [(t.original_tokens - t.sent_tokens, t.index) for t in pinched.turns if t.status == 200]
    if saved and max(saved)[0] > 0:
        index = max(saved)[1]
        explain_file = out_dir / f"turn-{index + 1}.json"
        explain_file.write_bytes(orjson.dumps(transcript.body(truths[index].messages), option=orjson.OPT_INDENT_2))
    ratios = Ratios.of([pinched], [baseline], scenario)
    return DemoResult(transcript.name, scenario, budget, mode, pinched, baseline, ratios, explain_file, dollars=session_dollars(log_file, prices_of(config)))


def session_dollars(log_file: Path, prices: Prices) -> Sums | None:
    """What a decision log's rows add up to in dollars at ``prices``: the dashboard's own sums
    (:func:`router.observe.decision_sums.overview_groups`) over every row; None without rows."""
    with sqlite3.connect(log_file) as db:
        first, last = db.execute("SELECT MIN(ts), MAX(ts) FROM decisions").fetchone()
        if first is None:
            return None
        until = last + 1.0
        groups = overview_groups(db, prices, first, until, until - first)
    totals = Sums()
    for group in groups:
        totals.add(group.sums)
    return totals


def format_summary(result: DemoResult, config_path: str, out_dir: Path) -> str:
    """The two sessions side by side, what chose the models, and the commands to look closer."""
    with_pinch = result.pinched.cost(result.scenario)
    without = result.baseline.cost(result.scenario)
    r = result.ratios
    pricing = result.scenario.pricing
    prices = (
        f"cache read {pricing.read}×, write {pricing.write}× the input price, {pricing.lifetime_seconds:.0f} s lifetime"
        if pricing
        else "no prompt cache: every token at the input price"
    )
    models = Counter(_header(t, "x-router-model") for t in result.pinched.turns if t.status == 200)
    sources = Counter(_header(t, "x-router-source") for t in result.pinched.turns if t.status == 200)

    def row(name: str, a: str, b: str, ratio: str = "") -> str:
        return f"  {name:<26}{a:>14}{b:>16}  {ratio}"

    lines = [
        "",
        f"summary — {result.transcript}: {len(result.pinched.turns)} turns as one session; "
        f"{result.scenario.description}; budget {result.budget:,}; pinch {result.mode.name}",
        row("", "with pinch", "without pinch"),
        row("requests sent", f"{with_pinch.requests}", f"{without.requests}", f"({r.refused} refused)" if r.refused else ""),
        row("tokens sent", f"{with_pinch.tokens_sent:,}", f"{without.tokens_sent:,}", f"{r.sent_ratio:.2f}×"),
        row("cached (reported)", f"{r.reported_cached_share:.1%}", f"{_reported_share(result.baseline, without.tokens_sent):.1%}"),
        row("fresh tokens / request", f"{with_pinch.fresh_per_request:,.0f}", f"{without.fresh_per_request:,.0f}", f"{r.fresh_ratio:.2f}×"),
        row("cost, input-token units", f"{with_pinch.cost:,.0f}", f"{without.cost:,.0f}", f"{r.cost_ratio:.2f}×"),
        f"  prices: {prices}; pinch batches {r.batches}, restored results {r.restored}",
        *_dollar_lines(result.dollars),
        f"  models: {_counts(models)}; classification: {_counts(sources)}",
        "",
        "look closer:",
    ]
    program = command_name()
    if result.explain_file is not None:
        lines.append(
            f"  {program} explain --offline --config {shlex.quote(config_path)} {shlex.quote(str(result.explain_file))}"
            "   # the chain's decision for the turn pinch saved most on, as a request alone: a new session"
            " without the demo's ledger, so pinch prunes it afresh and may save more than the session did"
        )
    log_file = out_dir / SESSION_FILE
    query = "select model, source, tokens_before, tokens_after, cached_tokens, pinch_reason from decisions order by ts"
    lines += [
        f"  python3 -c \"import sqlite3; [print(*r) for r in sqlite3.connect('{log_file}').execute('{query}')]\""
        "   # the decision log of the pinch replay",
        f"  {program} top   # decisions live from a proxy you run ({program} serve; extra [tui]): the demo's"
        " proxies are gone, so it shows requests from then on",
        f"  {program} demo --keep   # the same, then a proxy stays up on its decision log: the dashboard of the session, in a browser",
        f"  {program} eval-pinch --scenario {result.scenario.name} --budget {result.budget} {shlex.quote(str(result.transcript_file or DEFAULT_TRANSCRIPT))}"
        "   # every pinch mode on this session",
    ]
    return "\n".join(lines)


async def keep_dashboard(config: Config, log_file: Path, out: TextIO, stop: asyncio.Event | None = None) -> str:
    """A proxy on the demo's decision log (``config`` otherwise), on a free loopback port, until ``stop``
    is set (or Ctrl-C): its dashboard shows the demo's session. Its URL is printed, and returned."""
    raw = config.model_dump(mode="json")
    raw["decision_log"] = {**raw["decision_log"], "enabled": True, "path": str(log_file)}
    raw["server"] = {**raw["server"], "host": "127.0.0.1"}
    with sqlite3.connect(log_file) as db:
        row = db.execute("SELECT session FROM decisions ORDER BY ts DESC LIMIT 1").fetchone()
    runner, base = await serve(await create_app(type(config).model_validate(raw)))
    url = f"{base}/ui/" + (f"#/session/{row[0]}" if row and row[0] else "")
    try:
        out.write(f"\ndashboard: {url}   (a proxy on the demo's decision log; Ctrl-C stops it)\n")
        out.flush()
        await (stop or asyncio.Event()).wait()
    finally:
        await runner.cleanup()
    return url


def _dollar_lines(dollars: Sums | None) -> list[str]:
    """The pinch replay in dollars at the config's prices, as its dashboard shows them (docs/dashboard.md)."""
    if dollars is None:
        return []
    if not dollars.spent and not dollars.routing_priced:
        return ["  dollars: the config prices its models at $0 (set their cost_per_mtok to see what a session costs)"]
    figures = dollars.as_json()
    routing = figures["saved_by_routing"]
    return [
        f"  dollars, at the config's prices (as the dashboard): {format_dollars(figures['spent'])} spent with pinch; "
        f"saved {format_dollars(figures['saved_by_pinch'])} by pinch"
        + (f", {format_dollars(routing)} by routing" if routing is not None else " (routing: no reference model priced)")
    ]


def command_name() -> str:
    """How to run pinch-router as the user did: the script beside this Python (the README's set-up puts
    it in .venv/bin, not on PATH), relative when under the working directory; else the bare name."""
    script = Path(sys.executable).parent / "pinch-router"
    if not script.exists():
        return "pinch-router"
    try:
        return shlex.quote(str(script.relative_to(Path.cwd())))
    except ValueError:
        return shlex.quote(str(script))


def _reported_share(run: SessionRun, sent: int) -> float:
    return run.reported_cached / sent if sent else 0.0


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{name} ×{n}" for name, n in counter.most_common()) or "-"


def demo(
    config: Config,
    config_path: str,
    out_dir: Path,
    *,
    transcript_file: str | None = None,
    scenario: str = DEFAULT_SCENARIO,
    budget: int | None = None,
    out: TextIO | None = None,
    keep: bool = False,
) -> int:
    """The command: 0 after the summary, 2 when the transcript cannot be read, 130 on Ctrl-C. ``keep``:
    after the summary, a proxy on the demo's decision log serves its dashboard until Ctrl-C (then 0)."""
    out = out or sys.stdout
    path = Path(transcript_file) if transcript_file else DEFAULT_TRANSCRIPT
    try:
        transcript = load_transcript(path)
    except RequestFileError as error:
        print(f"pinch-router demo: {error}", file=sys.stderr)
        return 2
    chosen = next(s for s in SCENARIOS if s.name == scenario)
    budget = budget or config.pinch.budget_tokens
    out.write(
        f"pinch-router demo: {transcript.name} replayed as one session through the proxy to the mock upstream "
        f"(no model server); {chosen.description}; pinch budget {budget:,}\n"
    )
    out.flush()
    view = TurnView(out, len(transcript.turn_requests()))
    # The stages' warnings and the request log lines would tear the live lines; the summary counts what matters.
    stage_logs = logging.getLogger("pinch_router")
    level = stage_logs.level
    stage_logs.setLevel(logging.ERROR)
    try:
        result = asyncio.run(run_demo(config, transcript, chosen, budget, out_dir, view, baseline_note=out))
        result = replace(result, transcript_file=path)
    except KeyboardInterrupt:
        view.close()
        out.write("\npinch-router demo: stopped (Ctrl-C); both servers are closed\n")
        out.flush()
        return 130
    finally:
        stage_logs.setLevel(level)
    out.write(format_summary(result, config_path, out_dir) + "\n")
    if keep:
        try:
            asyncio.run(keep_dashboard(config, out_dir / SESSION_FILE, out))
        except KeyboardInterrupt:
            out.write("pinch-router demo: the dashboard's proxy is stopped\n")
            out.flush()
    return 0
