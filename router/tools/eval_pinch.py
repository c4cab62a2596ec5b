"""``pinch-router eval-pinch``: replay agent transcripts as sessions through the proxy and price them.

Each transcript (an OpenAI request body ``{"messages": [...], "tools": [...]}``,
or a bare list of messages) is replayed turn by turn as ONE session: the
request of turn k is every message before the k-th assistant message, i.e.
what the agent sent to get that answer. Every request goes through the real
proxy — :func:`router.server.app.create_app` served on a loopback port, with an
injected clock that the replay advances — to a recording
:class:`~router.tools.mock_upstream.MockUpstream` on another loopback port, so
what is measured is the messages that really went upstream. A fresh proxy
(fresh session state) serves each replay.

Scenarios (:data:`SCENARIOS`) say how time passes and what the provider
caches; modes (:data:`MODES`) say what pinch does: none, uniform or
relevance, each with the per-session ledger off (old results rewritten afresh
every request) and on. Per scenario, budget and mode it prints, summed over
the transcripts: tokens sent, the share of them that repeated the previous
request's start, the share the upstream reported as cached, fresh (uncached)
tokens per request, the session's cost — all relative to no pinch in the same
scenario — the ledger's batches and restored results, and in every scenario the
referenced-results quality figure beside a recency policy at equal tokens, given
the mode's first-sight texts and given none (see :mod:`router.tools.pinch_measures` for every definition); under each table
the reasons the ledger gave. Then each target of issue #11 as met or missed,
judged on every transcript that exceeds the budget at least once.

The upstream's cached tokens and the pinch figures (batches, reasons) are read
back from the proxy's own decision rows (an in-memory decision log): the mock
upstream simulates a prefix cache with the scenario's lifetime
(:class:`~router.tools.mock_upstream.SimulatedPromptCache`), so the proxy's cache
accounting is checked against the price model on every run.

Relevance runs against the mock upstream's embeddings endpoint — a
deterministic hashed bag of words, not a real model — unless
``--embeddings-from-config`` keeps the configured endpoint.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import aiohttp
import orjson
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from router.server.app import create_app
from router.config import Config
from router.core.content import Message
from router.core.pinch import is_compressed
from router.core.retrieve import TOOL_NAME
from router.core.sse import data_payloads
from router.contract.context import RequestContext
from router.tools.pinch_measures import (
    ANTHROPIC,
    GEMINI,
    CachePricing,
    SentRequest,
    SessionCost,
    message_terms,
    price_session,
    recency_kept,
    referenced_results,
    unchanged_prefix_tokens,
)
from router.core.tokens import TokenEstimator
from router.wire.openai_chat.view import protected_from, trim_candidates
from router.http.edge import context_from_body
from router.http.endpoints import MAX_DECISIONS
from router.core.errors import ApiError
from router.tools.mock_upstream import MockUpstream, SimulatedPromptCache
from router.tools.transcripts import RequestFileError, Transcript, load_transcript

DEFAULT_BUDGETS = (20_000, 40_000)
# Seconds between two requests of a session: an agent's step, well inside any cache lifetime.
STEP_SECONDS = 20.0
REPLAY_MODEL = "replay-model"
REPLAY_PROVIDER = "replay"
EMBEDDING_MODEL = "hashed-bag-of-words"
SHARED_TRANSCRIPTS = Path(__file__).resolve().parents[2] / "tests" / "data" / "transcripts"


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    context_window: int
    cache_lifetime_seconds: float  # the provider's, as configured; 0 = caches nothing
    pricing: CachePricing | None = ANTHROPIC  # None: every token costs 1
    cold_every: int | None = None  # every n-th request arrives after the cache expired
    quality: bool = True  # measure the referenced-results figure here


LARGE_WINDOW = 1_000_000
SCENARIOS = (
    Scenario("warm", f"warm cache: consecutive requests, a {LARGE_WINDOW:,}-token window", LARGE_WINDOW, ANTHROPIC.lifetime_seconds),
    Scenario(
        "cold",
        "cold gaps: the cache lifetime exceeded before every 10th request",
        LARGE_WINDOW,
        ANTHROPIC.lifetime_seconds,
        cold_every=10,
    ),
    Scenario("nocache", "no prompt cache: the provider caches nothing", LARGE_WINDOW, 0.0, pricing=None),
    Scenario("window", "window-bound: a 32,768-token window, warm cache", 32_768, ANTHROPIC.lifetime_seconds),
    Scenario("gemini", "warm cache priced as Gemini's implicit caching (cached 0.1×, no write premium)", LARGE_WINDOW, GEMINI.lifetime_seconds, pricing=GEMINI),
)


@dataclass(frozen=True, slots=True)
class Mode:
    name: str
    pinch: bool
    relevance: bool = False
    ledger: bool = False


NO_PINCH = Mode("no pinch", pinch=False)
MODES = (
    NO_PINCH,
    Mode("uniform, ledger off", pinch=True),
    Mode("uniform, ledger on", pinch=True, ledger=True),
    Mode("relevance, ledger off", pinch=True, relevance=True),
    Mode("relevance, ledger on", pinch=True, relevance=True, ledger=True),
)


@dataclass(slots=True)
class Quality:
    """Referenced old results kept verbatim, by the mode and by recency at the mode's tokens: given the
    same first-sight texts as the mode (the yardstick the targets judge with), and with none (every
    result as the client sent it: recency alone, as before first sight existed)."""

    referenced: int = 0
    kept: int = 0
    kept_by_recency: int = 0
    kept_by_plain_recency: int = 0

    def add(self, other: Quality) -> None:
        self.referenced += other.referenced
        self.kept += other.kept
        self.kept_by_recency += other.kept_by_recency
        self.kept_by_plain_recency += other.kept_by_plain_recency

    @property
    def share(self) -> float:
        return self.kept / self.referenced if self.referenced else 0.0

    @property
    def recency_share(self) -> float:
        return self.kept_by_recency / self.referenced if self.referenced else 0.0

    @property
    def plain_recency_share(self) -> float:
        return self.kept_by_plain_recency / self.referenced if self.referenced else 0.0


@dataclass(slots=True)
class SessionRun:
    """One transcript replayed in one scenario and mode."""

    requests: list[SentRequest] = field(default_factory=list)
    refused: int = 0  # answered with an error instead of going upstream (e.g. over the window)
    refusals: Counter[str] = field(default_factory=Counter)  # "status code" of each refusal
    over_budget: int = 0  # requests whose original prompt exceeded the budget
    batches: int = 0  # requests that compressed results for the first time (the ledger's rewrites)
    restored: int = 0  # results the ledger held compressed that went verbatim again (cold-cache moments)
    reported_cached: int = 0  # cached prompt tokens the upstream reported, as the decision rows recorded them
    first_sight_new: int = 0  # results reduced at first sight (the decision rows' pinch_first_sight_new)
    first_sight_saved: int = 0  # tokens first sight saved over every request (pinch_first_sight_saved)
    relevance_ranked: int = 0  # requests a relevance order was computed for (decision rows' relevance_status ok)
    relevance_unavailable: Counter[str] = field(default_factory=Counter)  # why ranking failed (uniform instead)
    reasons: Counter[str] = field(default_factory=Counter)  # why requests did or did not compress, numbers as N
    quality: Quality = field(default_factory=Quality)
    turns: list[Turn] = field(default_factory=list)  # every turn as the client saw it, in order
    batch_turns: list[int] = field(default_factory=list)  # indices of the turns on which the ledger batched
    # The old results the next step references, on every turn: sent verbatim or reduced losslessly, cut
    # at first sight (one pinch_retrieve away), or compressed by pinch
    referenced: Counter[str] = field(default_factory=Counter)
    overhead_ms: list[float] = field(default_factory=list)  # the proxy's own time per request (decision rows)

    def cost(self, scenario: Scenario) -> SessionCost:
        return price_session(self.requests, scenario.pricing)


@dataclass(frozen=True, slots=True)
class TurnTruth:
    """What one turn's request is, independent of any mode: its candidates and which the next step used."""

    messages: list[Message]
    tokens: int
    candidates: list[int]
    referenced: list[int]


def turn_truths(transcript: Transcript, keep_last_turns: int, estimator: TokenEstimator) -> list[TurnTruth]:
    terms = [message_terms(m) for m in transcript.messages]
    truths = []
    for request in transcript.turn_requests():
        candidates = trim_candidates(request, keep_last_turns)
        next_step = terms[len(request)]  # the assistant message that answered this request
        truths.append(
            TurnTruth(
                request,
                estimator.prompt_tokens(request, transcript.tools),
                candidates,
                referenced_results(terms[: len(request)], next_step, candidates, protected_from(request, keep_last_turns)),
            )
        )
    return truths


class ReplayClock:
    """The proxy's monotonic clock during a replay: time passes only when the replay says so."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def replay_config(
    config: Config,
    scenario: Scenario,
    mode: Mode,
    budget: int,
    upstream_url: str,
    *,
    own_embeddings: bool,
    full_chain: bool = False,
    decision_log: str = ":memory:",
) -> Config:
    """The user's pinch, token and routing settings around one replay model and provider.

    ``full_chain``: the configured chain, providers and models instead (the demo's): every provider
    at ``upstream_url`` with the scenario's cache lifetime, every model with the scenario's window,
    so the classifier and the gate choose among the configured models. Pinch sees the same budget
    and window either way, so both replays send the same messages (tests/unit/tools/test_demo.py).
    ``decision_log``: where the rows go (in memory unless a file is asked for)."""
    raw = config.model_dump(mode="json")
    if full_chain:
        raw["providers"] = {
            name: {**provider, "base_url": upstream_url, "api_key_env": None, "cache_lifetime_seconds": scenario.cache_lifetime_seconds}
            for name, provider in raw["providers"].items()
        }
        raw["models"] = [{**model, "context_window": scenario.context_window} for model in raw["models"]]
    else:
        raw["providers"] = {REPLAY_PROVIDER: {"base_url": upstream_url, "cache_lifetime_seconds": scenario.cache_lifetime_seconds}}
        raw["models"] = [
            {
                "name": REPLAY_MODEL,
                "provider": REPLAY_PROVIDER,
                "upstream_model": "replay",
                "context_window": scenario.context_window,
                "max_output_tokens": 4096,
                "supports": {"tools": True, "vision": True, "json_mode": True},
                "tiers": raw["routing"]["tiers"],
            }
        ]
        raw["middlewares"] = ["session-fingerprint", "pinch-relevance", "pinch-prune", "capability-gate", "upstream-forward"]
        raw["classifier"] = {**raw["classifier"], "provider": REPLAY_PROVIDER}
    # the replay reads each request's pinch figures back from its row
    raw["decision_log"] = {**raw["decision_log"], "enabled": True, "path": decision_log}
    raw["escalation"] = {**raw["escalation"], "enabled": False}
    pinch = raw["pinch"]
    pinch.update(enabled=mode.pinch, budget_tokens=budget, ledger=mode.ledger)
    relevance = pinch["relevance"]
    relevance["enabled"] = mode.relevance
    if not own_embeddings:
        relevance.update(base_url=upstream_url, api="openai", model=EMBEDDING_MODEL, api_key_env=None)
    return Config.model_validate(raw)


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    """``app`` on a free loopback port: its runner (to clean up) and its URL."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    return runner, f"http://{host}:{port}"


async def replay_session(
    transcript: Transcript,
    truths: Sequence[TurnTruth],
    config: Config,
    scenario: Scenario,
    mode: Mode,
    budget: int,
    upstream: tuple[MockUpstream, str],
    client: aiohttp.ClientSession,
    estimator: TokenEstimator,
    progress: ProgressBar,
    *,
    own_embeddings: bool = False,
    full_chain: bool = False,
    decision_log: str = ":memory:",
    stream: bool = False,
    on_turn: Callable[[Turn], None] | None = None,
) -> SessionRun:
    """One replay of ``transcript`` as one session (see the module doc); ``on_turn`` sees each turn's answer."""
    mock, upstream_url = upstream
    settings = replay_config(
        config, scenario, mode, budget, f"{upstream_url}/v1", own_embeddings=own_embeddings, full_chain=full_chain, decision_log=decision_log
    )
    clock = ReplayClock()
    mock.prompt_cache = SimulatedPromptCache(scenario.cache_lifetime_seconds, clock, estimator)
    runner, proxy_url = await serve(await create_app(settings, clock=clock))
    run = SessionRun()
    previous: list[Message] | None = None
    forms: dict[int, Message] = {}  # message index → first sight's text for it, as last sent (_learn_forms)
    sent_at = clock.now
    headers = {"Content-Type": "application/json", "x-router-session": f"eval-pinch-{transcript.name}"}
    try:
        for index, truth in enumerate(truths):
            cold = scenario.cold_every is not None and index > 0 and index % scenario.cold_every == 0
            clock.advance(scenario.cache_lifetime_seconds + STEP_SECONDS if cold else STEP_SECONDS)
            mock.received.clear()
            body = transcript.body(truth.messages)
            if stream:  # as agents ask: streamed, with the usage report (the cached tokens are read from it)
                body = {**body, "stream": True, "stream_options": {"include_usage": True}}
            async with client.post(f"{proxy_url}/v1/chat/completions", data=orjson.dumps(body), headers=headers) as response:
                answer = await response.read()
                status = response.status
                answer_headers = dict(response.headers)
            run.over_budget += truth.tokens > budget
            chats = [r for r in mock.received if r.path == "/v1/chat/completions"]
            mock.received.clear()
            progress.advance(f"{scenario.name} {budget // 1000}k {mode.name} {transcript.name}")
            if status != 200 or not chats:
                run.refused += 1
                run.refusals[f"{status} {_error_code(answer)}"] += 1
                _record_turn(run, Turn(index, len(truths), status, answer_headers, truth.tokens, 0, 0, _error_code(answer)), on_turn)
                continue
            sent: list[Message] = chats[-1].body["messages"]
            sent_tools = chats[-1].body.get("tools")  # the client's, and pinch_retrieve when the proxy offered it
            tokens = estimator.prompt_tokens(sent, sent_tools)
            _record_turn(run, Turn(index, len(truths), status, answer_headers, truth.tokens, tokens, _cached_tokens(answer)), on_turn)
            prefix = unchanged_prefix_tokens(previous, sent, estimator, sent_tools)
            run.requests.append(SentRequest(tokens, prefix, clock.now - sent_at if previous is not None else 0.0))
            previous, sent_at = sent, clock.now
            run.referenced.update(_referenced_as_sent(truth, sent))
            _learn_forms(forms, truth, sent)
            if scenario.quality:
                run.quality.add(_turn_quality(truth, sent, tokens, settings.pinch.max_summarize_chars, estimator, sent_tools, forms))
        await _read_decisions(client, proxy_url, run)
    finally:
        await runner.cleanup()
    return run


@dataclass(frozen=True, slots=True)
class Turn:
    """One replayed turn as the client saw it: the answer's status and headers, the turn's own
    prompt tokens, the tokens that went upstream (0: none did) and the cached tokens the answer reported."""

    index: int
    total: int
    status: int
    headers: dict[str, str]
    original_tokens: int
    sent_tokens: int
    cached_tokens: int
    error_code: str | None = None


    @property
    def forwarded(self) -> bool:
        """The request went upstream (a refused one has an error code)."""
        return self.error_code is None

    @property
    def request_id(self) -> str | None:
        return self.headers.get("x-router-request-id") or self.headers.get("X-Router-Request-Id")


def _record_turn(run: SessionRun, turn: Turn, on_turn: Callable[[Turn], None] | None) -> None:
    run.turns.append(turn)
    if on_turn is not None:
        on_turn(turn)


def _cached_tokens(answer: bytes) -> int:
    """The cached prompt tokens a chat answer reports: a whole answer's usage, or a stream's usage chunk."""
    for payload in reversed(data_payloads(answer)) if answer.startswith(b"data:") else [answer]:
        try:
            usage = orjson.loads(payload).get("usage")
        except (orjson.JSONDecodeError, AttributeError):
            continue
        if isinstance(usage, dict):
            try:
                return int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
            except (AttributeError, TypeError, ValueError):
                return 0
    return 0


def _error_code(answer: bytes) -> str:
    try:
        error = orjson.loads(answer).get("error")
    except (orjson.JSONDecodeError, AttributeError):
        error = None
    return str(error.get("code")) if isinstance(error, dict) else "(no error code)"


async def _read_decisions(client: aiohttp.ClientSession, proxy_url: str, run: SessionRun) -> None:
    """The pinch figures of the replay's requests, from the proxy's own decision rows."""
    async with client.get(f"{proxy_url}/v1/decisions", params={"limit": str(MAX_DECISIONS)}) as response:
        rows = (await response.json())["data"]
    turn_of = {turn.request_id: turn.index for turn in run.turns}
    for row in rows:
        run.batches += bool(row.get("pinch_newly_compressed"))
        if row.get("pinch_newly_compressed") and row.get("request_id") in turn_of:
            run.batch_turns.append(turn_of[row["request_id"]])
        run.restored += row.get("pinch_restored") or 0
        run.first_sight_new += row.get("pinch_first_sight_new") or 0
        run.first_sight_saved += row.get("pinch_first_sight_saved") or 0
        run.reported_cached += row.get("cached_tokens") or 0
        if row.get("overhead_ms") is not None:
            run.overhead_ms.append(row["overhead_ms"])
        run.relevance_ranked += row.get("relevance_status") == "ok"
        if row.get("relevance_status") == "unavailable":
            run.relevance_unavailable[row.get("relevance_reason") or "?"] += 1
        if row.get("pinch_reason"):
            run.reasons[_NUMBER.sub("N", row["pinch_reason"])] += 1
    run.batch_turns.sort()


_NUMBER = re.compile(r"\d[\d,.]*\d|\d")


def _turn_quality(
    truth: TurnTruth, sent: list[Message], tokens: int, max_summarize_chars: int, estimator: TokenEstimator, tools: Any, forms: Mapping[int, Message]
) -> Quality:
    """The referenced results the mode kept, and recency at the mode's tokens, on a turn where pinch
    compressed any. A result sent as first sight's text is kept (lossless: what it leaves out, a
    result the model sees shows; or cut, the whole one pinch_retrieve away). Recency is given the same
    first sight (``forms``: each result's first-sight text, :func:`_learn_forms`): it sends those
    texts too and compresses oldest first from there, at the tokens the mode sent, with the same tool
    schemas. So what a mode keeps as first sight's text costs recency what it costs the mode, whichever
    results the mode chose (before, recency was given the mode's first-sight savings on the originals:
    the more first-sight texts a mode kept, the more tokens its yardstick had). Recency with no first
    sight is counted beside it, on the originals at the same tokens: what the mode keeps against a
    keep-the-newest policy that reduces nothing at first sight. A turn where only first sight acted has
    nothing to judge."""
    if not truth.referenced or tokens >= estimator.prompt_tokens([forms.get(i, m) for i, m in enumerate(truth.messages)], tools):
        return Quality()
    recency = recency_kept(truth.messages, truth.candidates, tokens, max_summarize_chars, estimator, tools, forms)
    plain = recency_kept(truth.messages, truth.candidates, tokens, max_summarize_chars, estimator, tools) if forms else recency
    return Quality(
        referenced=len(truth.referenced),
        kept=sum(sent[i] == truth.messages[i] or _first_sight_text(sent[i], truth.messages[i]) for i in truth.referenced),
        kept_by_recency=sum(i in recency for i in truth.referenced),
        kept_by_plain_recency=sum(i in plain for i in truth.referenced),
    )


def _learn_forms(forms: dict[int, Message], truth: TurnTruth, sent: list[Message]) -> None:
    """Record the first-sight texts this request sent (message index → message), and forget those
    sent as their originals again (first sight let go of them); a compressed one keeps its last text:
    every result is sent as first sight made it before any batch can compress it (the batch takes
    only results older than the protected turns)."""
    for i, (message, original) in enumerate(zip(sent, truth.messages)):
        if message == original:
            forms.pop(i, None)
        elif _first_sight_text(message, original):
            forms[i] = message


RETRIEVE_MARK = f"{TOOL_NAME}(\""  # in the first line of an output cut at first sight
REFERENCED_KINDS = ("verbatim or lossless", "one pinch_retrieve away", "compressed")


def _referenced_as_sent(truth: TurnTruth, sent: list[Message]) -> Counter[str]:
    """How the turn's referenced old results went: verbatim or reduced losslessly, cut at first sight
    (its first line names pinch_retrieve), or compressed by pinch."""
    kinds: Counter[str] = Counter()
    for i in truth.referenced:
        content = sent[i].get("content")
        if sent[i] == truth.messages[i] or not isinstance(content, str):
            kinds[REFERENCED_KINDS[0]] += 1
        elif is_compressed(content):
            kinds[REFERENCED_KINDS[2]] += 1
        else:
            kinds[REFERENCED_KINDS[1 if RETRIEVE_MARK in content.partition("\n")[0] else 0]] += 1
    return kinds


def _first_sight_text(sent: Message, original: Message) -> bool:
    """``sent`` is ``original`` as first sight reduced it (losslessly, or cut behind pinch_retrieve): a
    tool result whose text changed but is no compression of pinch's."""
    content = sent.get("content")
    return sent.get("role") == "tool" and type(content) is str and content != original.get("content") and not is_compressed(content)


class ProgressBar:
    """``[#####-----] 12/40 turns  name`` redrawn in place on a stream (stderr)."""

    def __init__(self, total: int, stream: TextIO, width: int = 30) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.stream = stream
        self.width = width
        self.label = ""

    def advance(self, label: str) -> None:
        self.done += 1
        if label == self.label and self.done < self.total and self.done % 10:
            return  # redraw every tenth turn or on a new label: the bar is for a person, not a log
        self.label = label
        filled = self.width * self.done // self.total
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(f"\r[{bar}] {self.done}/{self.total} turns  {label[:60]:<60}")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


# --- results and report ---------------------------------------------------------------

RunKey = tuple[str, str, int, str]  # transcript, scenario, budget, mode


@dataclass(slots=True)
class Results:
    """Every replay, by (transcript, scenario, budget, mode); no pinch is replayed once per scenario."""

    transcripts: list[str]
    scenarios: tuple[Scenario, ...]
    budgets: tuple[int, ...]
    modes: tuple[Mode, ...]
    runs: dict[RunKey, SessionRun] = field(default_factory=dict)

    def run(self, transcript: str, scenario: Scenario, budget: int, mode: Mode) -> SessionRun:
        return self.runs[(transcript, scenario.name, 0 if not mode.pinch else budget, mode.name)]

    def ratios(self, transcripts: Sequence[str], scenario: Scenario, budget: int, mode: Mode) -> Ratios:
        runs = [self.run(t, scenario, budget, mode) for t in transcripts]
        bases = [self.run(t, scenario, budget, NO_PINCH) for t in transcripts]
        return Ratios.of(runs, bases, scenario)


@dataclass(frozen=True, slots=True)
class Ratios:
    requests: int
    refused: int
    sent: int
    sent_ratio: float
    prefix_share: float
    fresh_per_request: float
    fresh_ratio: float
    cost_ratio: float
    batches: int
    reported_cached_share: float
    quality: Quality
    restored: int = 0

    @classmethod
    def of(cls, runs: Sequence[SessionRun], bases: Sequence[SessionRun], scenario: Scenario) -> Ratios:
        costs = [r.cost(scenario) for r in runs]
        base = [b.cost(scenario) for b in bases]
        quality = Quality()
        for r in runs:
            quality.add(r.quality)
        sent = sum(c.tokens_sent for c in costs)
        requests = sum(c.requests for c in costs)
        fresh = sum(c.fresh_tokens for c in costs)
        return cls(
            requests=requests,
            refused=sum(r.refused for r in runs),
            sent=sent,
            sent_ratio=_ratio(sent, sum(c.tokens_sent for c in base)),
            prefix_share=_ratio(sum(c.prefix_tokens for c in costs), sent),
            fresh_per_request=fresh / requests if requests else 0.0,
            fresh_ratio=_ratio(fresh / max(requests, 1), sum(c.fresh_tokens for c in base) / max(sum(c.requests for c in base), 1)),
            cost_ratio=_ratio(sum(c.cost for c in costs), sum(c.cost for c in base)),
            batches=sum(r.batches for r in runs),
            reported_cached_share=_ratio(sum(r.reported_cached for r in runs), sent),
            quality=quality,
            restored=sum(r.restored for r in runs),
        )


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def format_table(results: Results, scenario: Scenario, budget: int, transcripts: Sequence[str] | None = None) -> list[str]:
    """One scenario and budget: a row per mode, summed over ``transcripts`` (default: all)."""
    transcripts = results.transcripts if transcripts is None else transcripts
    rows = [
        (
            "mode",
            "requests",
            "tokens sent",
            "×",
            "unchanged prefix",
            "cached",
            "fresh/request",
            "×",
            "cost ×",
            "batches",
            "restored",
            *(("referenced kept", "recency", "no first sight") if scenario.quality else ()),
        )
    ]
    for mode in results.modes:
        r = results.ratios(transcripts, scenario, budget, mode)
        fitted = f"{r.requests}" + (f" ({r.refused} refused)" if r.refused else "")
        quality: tuple[str, ...] = ()
        if scenario.quality:  # only turns on which pinch compressed count; none ⇒ nothing to compare
            referenced = r.quality.referenced
            quality = (
                (f"{r.quality.share:.1%} of {referenced}", f"{r.quality.recency_share:.1%}", f"{r.quality.plain_recency_share:.1%}")
                if referenced
                else ("-", "-", "-")
            )
        rows.append(
            (
                mode.name,
                fitted,
                f"{r.sent:,}",
                f"{r.sent_ratio:.2f}",
                f"{r.prefix_share:.1%}",
                f"{r.reported_cached_share:.1%}",
                f"{r.fresh_per_request:,.0f}",
                f"{r.fresh_ratio:.2f}",
                f"{r.cost_ratio:.2f}",
                f"{r.batches}" if mode.ledger else "-",
                f"{r.restored}" if mode.ledger else "-",
                *quality,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))) for row in rows]
    refusals = []
    for mode in results.modes:
        counts: Counter[str] = Counter()
        for transcript in transcripts:
            counts.update(results.run(transcript, scenario, budget, mode).refusals)
        refusals += [f"{mode.name} {refusal} ×{n}" for refusal, n in counts.most_common()]
    if refusals:
        lines.append(f"  refused: {'; '.join(refusals)} (no pinch's figures cover only the requests it could send)")
    for mode in results.modes:
        if not mode.relevance:
            continue
        runs = [results.run(transcript, scenario, budget, mode) for transcript in transcripts]
        unavailable: Counter[str] = Counter()
        for run in runs:
            unavailable.update(run.relevance_unavailable)
        # counted even when none failed: a run under load says how many rankings it made and none timed out
        ranked = sum(run.relevance_ranked for run in runs)
        if unavailable:
            reason, _ = unavailable.most_common(1)[0]
            timed_out = sum(n for why, n in unavailable.items() if "timed out" in why)
            lines.append(
                f"  relevance UNAVAILABLE ({mode.name}) on {unavailable.total()} requests ({timed_out} timed out), "
                f"pruned uniformly instead: {reason}; {ranked} ranked"
            )
        else:
            lines.append(f"  relevance ({mode.name}): ranked {ranked} request{'' if ranked == 1 else 's'}, none unavailable (0 timed out)")
    for mode in results.modes:
        reasons: Counter[str] = Counter()
        for transcript in transcripts:
            reasons.update(results.run(transcript, scenario, budget, mode).reasons)
        if mode.ledger and reasons:
            lines.append(f"  why ({mode.name}): " + " | ".join(f"{reason} ×{n}" for reason, n in reasons.most_common(4)))
    for mode in results.modes:
        runs = [results.run(transcript, scenario, budget, mode) for transcript in transcripts]
        saved = sum(run.first_sight_saved for run in runs)
        if saved:
            sent = results.ratios(transcripts, scenario, budget, mode).sent
            base = results.ratios(transcripts, scenario, budget, NO_PINCH).sent
            lines.append(
                f"  first sight ({mode.name}): {sum(run.first_sight_new for run in runs)} results reduced, {saved:,} tokens saved "
                f"over the requests ({_ratio(saved, sent + saved):.1%} of what they would have sent; {_ratio(saved, base):.1%} of no pinch's tokens)"
            )
    for mode in results.modes:
        runs = [results.run(transcript, scenario, budget, mode) for transcript in transcripts]
        referenced: Counter[str] = Counter()
        overhead = sorted(ms for run in runs for ms in run.overhead_ms)
        for run in runs:
            referenced.update(run.referenced)
        if referenced and mode.ledger:
            lines.append(f"  referenced old results ({mode.name}): " + ", ".join(f"{referenced[kind]:,} {kind}" for kind in REFERENCED_KINDS))
        if overhead and mode.ledger:
            lines.append(f"  proxy time per request ({mode.name}): p50 {_percentile(overhead, 0.5):.1f} ms, p99 {_percentile(overhead, 0.99):.1f} ms")
    return lines


def _percentile(ordered: list[float], share: float) -> float:
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


Verdict = tuple[bool, float, str]  # met, how far off (larger is worse), the figures as text


def cost_and_fresh_at_most_no_pinch(r: Ratios) -> Verdict:
    ok = r.cost_ratio <= 1.0 and r.fresh_ratio <= 1.05
    return ok, max(r.cost_ratio, r.fresh_ratio / 1.05), f"cost {r.cost_ratio:.3f}×, fresh {r.fresh_ratio:.3f}×"


def cost_at_most(limit: float) -> Callable[[Ratios], Verdict]:
    return lambda r: (r.cost_ratio <= limit, r.cost_ratio, f"cost {r.cost_ratio:.3f}×")


def sent_at_most(limit: float) -> Callable[[Ratios], Verdict]:
    return lambda r: (r.sent_ratio <= limit, r.sent_ratio, f"sent {r.sent_ratio:.3f}×")


def fits_with_prefix(r: Ratios) -> Verdict:
    ok = r.refused == 0 and r.prefix_share >= 0.89
    return ok, r.refused + 1 - r.prefix_share, f"{r.refused} refused, prefix {r.prefix_share:.1%}"


def keeps_at_least_recency(r: Ratios) -> Verdict | None:
    if not r.quality.referenced:
        return None
    margin = (r.quality.share - r.quality.recency_share) * 100
    return margin >= 0, -margin, f"{r.quality.share:.1%} vs recency {r.quality.recency_share:.1%} ({margin:+.1f} points)"


def keeps_more_than_recency(points: float) -> Callable[[Ratios], Verdict | None]:
    def judge(r: Ratios) -> Verdict | None:
        if not r.quality.referenced:
            return None  # no referenced result was at stake
        margin = (r.quality.share - r.quality.recency_share) * 100
        return margin >= points, -margin, f"{r.quality.share:.1%} vs recency {r.quality.recency_share:.1%} ({margin:+.1f} points)"

    return judge


@dataclass(frozen=True, slots=True)
class Target:
    """One 'Done when' figure of issue #11 (or #26), judged per transcript (the worst case shown)."""

    scenario: str
    budget: int | None  # None: every budget
    text: str
    judge: Callable[[Ratios], Verdict | None]  # None: nothing to judge on this transcript
    relevance_only: bool = False

    def _judged(self, results: Results, scenario: Scenario, budget: int, modes: Sequence[Mode]) -> tuple[list[Mode], list[str]]:
        """The modes this target judges, and the transcripts over the budget in any of them
        (one never over budget gives pinch nothing to do, so nothing to judge)."""
        modes = [m for m in modes if m.relevance or not self.relevance_only]
        over = [t for t in results.transcripts if any(results.run(t, scenario, budget, m).over_budget for m in modes)]
        return modes, over

    def worst(self, results: Results, scenario: Scenario, budget: int, modes: Sequence[Mode]) -> tuple[bool, str]:
        """Met on every transcript over the budget, in every mode? With the worst case's figures."""
        modes, over = self._judged(results, scenario, budget, modes)
        verdicts = []
        for transcript in over:
            for mode in modes:
                verdict = self.judge(results.ratios([transcript], scenario, budget, mode))
                if verdict is not None:
                    ok, badness, figures = verdict
                    verdicts.append((ok, badness, f"{figures} ({mode.name}, {transcript})"))
        return _summary(verdicts, "no transcript exceeds the budget")

    def together(self, results: Results, scenario: Scenario, budget: int, modes: Sequence[Mode]) -> tuple[bool, str]:
        """The same target on the transcripts over the budget summed as one, in every mode: the
        reading of a figure as the issue's own tables give it (totals over the transcripts), without
        the transcripts that never exceed the budget, which would only pull every ratio toward 1.00×."""
        modes, over = self._judged(results, scenario, budget, modes)
        verdicts = []
        for mode in modes if over else ():
            verdict = self.judge(results.ratios(over, scenario, budget, mode))
            if verdict is not None:
                ok, badness, figures = verdict
                verdicts.append((ok, badness, f"{figures} ({mode.name}, {len(over)} of {len(results.transcripts)} transcripts)"))
        return _summary(verdicts, "no transcript exceeds the budget")


def _summary(verdicts: list[tuple[bool, float, str]], when_none: str) -> tuple[bool, str]:
    """Met when every verdict is, with the worst one's figures (a miss before any met one)."""
    if not verdicts:
        return True, f"nothing to judge ({when_none})"
    _, _, figures = max(verdicts, key=lambda v: (not v[0], v[1]))
    missed = sum(not v[0] for v in verdicts)
    return missed == 0, f"{'worst' if not missed else f'{missed} of {len(verdicts)} missed, worst'}: {figures}"


TARGETS = (
    Target("warm", None, "cost ≤ 1.00× and fresh ≤ 1.05× of no pinch", cost_and_fresh_at_most_no_pinch),
    Target("cold", 20_000, "cost ≤ 0.80× of no pinch", cost_at_most(0.80)),
    Target("cold", 40_000, "cost ≤ 0.85× of no pinch", cost_at_most(0.85)),
    Target("nocache", 20_000, "tokens sent ≤ 0.70× of no pinch", sent_at_most(0.70)),
    Target("window", None, "every request fits, unchanged prefix ≥ 89 %", fits_with_prefix),
    *(
        Target(
            scenario,
            40_000,
            "referenced results kept verbatim by relevance ≥ recency at equal tokens + 5 points (issue #26)",
            keeps_more_than_recency(5),
            relevance_only=True,
        )
        for scenario in ("nocache", "cold")
    ),
    *(
        Target(scenario.name, None, "referenced results kept verbatim by relevance ≥ recency at equal tokens (issue #26)", keeps_at_least_recency, relevance_only=True)
        for scenario in SCENARIOS
    ),
)


def format_targets(results: Results) -> list[str]:
    """Each target met or missed by the modes that ship (the ledger on), per transcript over the budget
    (the verdict), and on those transcripts together (shown beside it)."""
    shipped = [m for m in results.modes if m.pinch and m.ledger]
    by_name = {s.name: s for s in results.scenarios}
    lines = [f"targets (issues #11, #26), judged on {', '.join(m.name for m in shipped)}, per transcript over the budget:"]
    for target in TARGETS:
        scenario = by_name.get(target.scenario)
        for budget in results.budgets:
            if scenario is None or (target.budget is not None and target.budget != budget):
                continue
            ok, detail = target.worst(results, scenario, budget, shipped)
            lines.append(f"  {'met   ' if ok else 'MISSED'}  {scenario.name} {budget // 1000}k: {target.text} — {detail}")
            ok, detail = target.together(results, scenario, budget, shipped)
            lines.append(f"  {'met   ' if ok else 'MISSED'}    the transcripts over the budget together — {detail}")
    return lines


def format_report(results: Results, config: Config, *, own_embeddings: bool, per_transcript: bool = False) -> str:
    pinch = config.pinch
    embeddings = (
        f"the configured endpoint ({pinch.relevance.api} {pinch.relevance.base_url}, model {pinch.relevance.model})"
        if own_embeddings
        else "the mock upstream's deterministic hashed bag-of-words embeddings (not a real model)"
    )
    lines = [
        f"eval-pinch: {len(results.transcripts)} transcript{'s' if len(results.transcripts) != 1 else ''}; keep_last_turns {pinch.keep_last_turns}, "
        f"max_summarize_chars {pinch.max_summarize_chars:,}; relevance ranks with {embeddings}",
        "prices: Anthropic (cache read 0.1×, write 1.25×, 5-minute lifetime); every figure relative to no pinch in its scenario",
    ]
    for scenario in results.scenarios:
        for budget in results.budgets:
            lines += ["", f"{scenario.description} — budget {budget:,}"]
            lines += format_table(results, scenario, budget)
            for transcript in results.transcripts if per_transcript else ():
                lines += [f"  {transcript}:", *("  " + line for line in format_table(results, scenario, budget, [transcript]))]
    lines += ["", *format_targets(results)]
    return "\n".join(lines)


async def run_eval(
    config: Config,
    transcripts: list[Transcript],
    out: TextIO,
    err: TextIO,
    *,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    scenarios: Sequence[Scenario] = SCENARIOS,
    modes: Sequence[Mode] | None = None,
    own_embeddings: bool = False,
    per_transcript: bool = False,
    stream: bool = False,
) -> Results:
    modes = tuple(modes) if modes is not None else MODES
    if NO_PINCH not in modes:
        modes = (NO_PINCH, *modes)  # every figure is relative to it
    estimator = TokenEstimator(config.tokens.image_tokens, config.tokens.per_message_overhead)
    results = Results([t.name for t in transcripts], tuple(scenarios), tuple(budgets), modes)
    plan = [(s, 0, NO_PINCH) for s in scenarios] + [(s, b, m) for s in scenarios for b in budgets for m in modes if m.pinch]
    truths = {t.name: turn_truths(t, config.pinch.keep_last_turns, estimator) for t in transcripts}
    progress = ProgressBar(len(plan) * sum(len(t) for t in truths.values()), err)
    mock = MockUpstream(retrieves=False)  # what a cut leaves one pinch_retrieve away is counted, not fetched
    upstream_runner, upstream_url = await serve(mock.app())
    try:
        async with aiohttp.ClientSession() as client:
            for scenario, budget, mode in plan:
                for transcript in transcripts:
                    run = await replay_session(
                        transcript,
                        truths[transcript.name],
                        config,
                        scenario,
                        mode,
                        budget or max(budgets),
                        (mock, upstream_url),
                        client,
                        estimator,
                        progress,
                        own_embeddings=own_embeddings,
                        stream=stream,
                    )
                    if not mode.pinch:  # no pinch: the same session at every budget; over_budget is per budget
                        run.over_budget = 0
                    results.runs[(transcript.name, scenario.name, budget, mode.name)] = run
    finally:
        await upstream_runner.cleanup()
    progress.close()
    out.write(format_report(results, config, own_embeddings=own_embeddings, per_transcript=per_transcript) + "\n")
    return results


def default_transcripts() -> list[str]:
    """The shared transcripts vendored with the project (tests/data/transcripts)."""
    return sorted(str(p) for p in SHARED_TRANSCRIPTS.glob("*.json") if not p.name.endswith(".meta.json"))


def eval_pinch(
    config: Config,
    files: Sequence[str],
    *,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    scenarios: Sequence[str] | None = None,
    keep_last_turns: int | None = None,
    own_embeddings: bool = False,
    per_transcript: bool = False,
    stream: bool = False,
    plot: Callable[[Results], Sequence[Path]] | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """The command: 0 when every transcript was replayed, 2 when a file cannot be read; ``plot``
    draws the results (:func:`router.tools.pinch_plot.write_plots`), each file written is named."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        transcripts = [load_transcript(Path(f)) for f in (files or default_transcripts())]
    except RequestFileError as error:
        err.write(f"pinch-router eval-pinch: {error}\n")
        return 2
    if not transcripts:
        err.write("pinch-router eval-pinch: no transcripts given and none vendored\n")
        return 2
    if keep_last_turns is not None:
        config = config.model_copy(update={"pinch": config.pinch.model_copy(update={"keep_last_turns": keep_last_turns})})
    chosen = [s for s in SCENARIOS if scenarios is None or s.name in scenarios]
    # The stages' warnings (relevance_unavailable, stage_failed) and the request log
    # lines would tear the progress bar; the report counts what matters instead.
    stage_logs = logging.getLogger("pinch_router")
    level = stage_logs.level
    stage_logs.setLevel(logging.ERROR)
    try:
        results = asyncio.run(
            run_eval(
                config, transcripts, out, err, budgets=budgets, scenarios=chosen, own_embeddings=own_embeddings, per_transcript=per_transcript,
                stream=stream,
            )
        )
    finally:
        stage_logs.setLevel(level)
    if plot is not None:
        for path in plot(results):
            out.write(f"wrote {path}\n")
    return 0


def request_context(messages: list[Message], tools: Any, turn_chars: int) -> RequestContext:
    """A context as the edge would build it for this request (no client connection behind it)."""
    body: dict[str, Any] = {"model": "auto", "messages": messages, **({"tools": tools} if tools else {})}
    ctx = context_from_body(body, CIMultiDictProxy(CIMultiDict()), request_id="eval", started=time.perf_counter(), turn_chars=turn_chars)
    if isinstance(ctx, ApiError):
        raise RequestFileError(f"turn of {len(messages)} messages is not a valid request: {ctx.message}")
    return ctx
