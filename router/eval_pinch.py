"""``pinch-router eval-pinch``: replay transcripts through pinch, uniform vs relevance.

Each transcript (an OpenAI request body ``{"messages": [...], "tools": [...]}``,
or a bare list of messages) is replayed turn by turn: the request of turn k is
every message before the k-th assistant message, i.e. what the agent sent to
get that answer. Each request goes through the real stages (via
:func:`router.stage.run_stage`, so timeouts and fallbacks behave as in the
proxy) twice:

* **uniform**: ``pinch-prune`` alone;
* **relevance**: ``pinch-relevance`` then ``pinch-prune``, against the
  configured embeddings endpoint, with one embedding cache for the whole
  transcript, as one proxy process would have.

The ``pinch`` section of the config supplies the numbers; both modes run
whatever its ``enabled`` flags say (``--budget`` and ``--keep-last-turns``
override). Per transcript it prints tokens before/after (summed over all
turns, and the last turn alone), embedding calls and
texts embedded vs served from the cache, and how many old tool results
(trim candidates on over-budget turns) went upstream verbatim in each mode.
A progress bar runs on stderr.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import aiohttp
from multidict import CIMultiDict, CIMultiDictProxy

from middlewares.pinch_prune import PinchPrune
from middlewares.pinch_relevance import PinchRelevance
from router.chain import StageDeps
from router.config import Config
from router.context import Message, PinchMode, RelevanceStatus, RequestContext
from router.core.tokens import TokenEstimator
from router.core.turns import trim_candidates
from router.edge import context_from_body
from router.errors import ApiError
from router.stage import run_stage
from router.transcripts import RequestFileError, Transcript, load_transcript


@dataclass(slots=True)
class TranscriptReport:
    name: str
    turns: int = 0
    over_budget: int = 0
    tokens_before: int = 0
    tokens_uniform: int = 0
    tokens_relevance: int = 0
    last_turn: tuple[int, int, int] = (0, 0, 0)  # before, uniform, relevance
    embedding_calls: int = 0
    texts_embedded: int = 0
    texts_cached: int = 0
    relevance_status: Counter[str] = field(default_factory=Counter)
    unavailable_reasons: Counter[str] = field(default_factory=Counter)
    relevance_ms: list[float] = field(default_factory=list)
    candidates: int = 0  # trim candidates summed over over-budget turns
    verbatim_uniform: int = 0
    verbatim_relevance: int = 0


def eval_config(config: Config, budget: int | None = None, keep_last_turns: int | None = None) -> Config:
    """The config with pinch and relevance switched on (and the overrides applied)."""
    pinch = config.pinch
    relevance = pinch.relevance.model_copy(update={"enabled": True})
    update: dict[str, Any] = {"enabled": True, "relevance": relevance}
    if budget is not None:
        update["budget_tokens"] = budget
    if keep_last_turns is not None:
        update["keep_last_turns"] = keep_last_turns
    return config.model_copy(update={"pinch": pinch.model_copy(update=update)})


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
        self.label = label
        filled = self.width * self.done // self.total
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(f"\r[{bar}] {self.done}/{self.total} turns  {label[:48]:<48}")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


def request_context(messages: list[Message], tools: Any, turn_chars: int) -> RequestContext:
    """A context as the edge would build it for this request (no client connection behind it)."""
    body: dict[str, Any] = {"model": "auto", "messages": messages, **({"tools": tools} if tools else {})}
    ctx = context_from_body(body, CIMultiDictProxy(CIMultiDict()), request_id="eval", started=time.perf_counter(), turn_chars=turn_chars)
    if isinstance(ctx, ApiError):
        raise RequestFileError(f"turn of {len(messages)} messages is not a valid request: {ctx.message}")
    return ctx


async def replay(transcript: Transcript, deps: StageDeps, progress: ProgressBar) -> TranscriptReport:
    """Replay one transcript; a fresh relevance stage (and so a fresh embedding cache) per transcript."""
    config = deps.config
    relevance_stage, prune_stage = PinchRelevance(deps), PinchPrune(deps)
    report = TranscriptReport(transcript.name)
    for messages in transcript.turn_requests():
        uniform = request_context(messages, transcript.tools, config.classifier.max_input_chars)
        await run_stage(prune_stage, uniform)
        ranked = request_context(messages, transcript.tools, config.classifier.max_input_chars)
        record = await run_stage(relevance_stage, ranked)
        await run_stage(prune_stage, ranked)
        _count_turn(report, messages, uniform, ranked, config.pinch.keep_last_turns, record.ms)
        progress.advance(transcript.name)
    report.embedding_calls = relevance_stage.client.requests_sent
    return report


def _count_turn(
    report: TranscriptReport, messages: list[Message], uniform: RequestContext, ranked: RequestContext, keep: int, ms: float
) -> None:
    assert uniform.pinch is not None and ranked.pinch is not None and ranked.relevance is not None
    relevance = ranked.relevance
    report.turns += 1
    report.tokens_before += uniform.pinch.original_tokens
    report.tokens_uniform += uniform.pinch.final_tokens
    report.tokens_relevance += ranked.pinch.final_tokens
    report.last_turn = (uniform.pinch.original_tokens, uniform.pinch.final_tokens, ranked.pinch.final_tokens)
    report.texts_embedded += relevance.embedded
    report.texts_cached += relevance.cached
    report.relevance_status[str(relevance.status)] += 1
    if relevance.status is RelevanceStatus.UNAVAILABLE:
        report.unavailable_reasons[relevance.reason] += 1
    elif relevance.status is RelevanceStatus.OK:
        report.relevance_ms.append(ms)
    if uniform.pinch.mode is not PinchMode.WITHIN_BUDGET:
        report.over_budget += 1
        candidates = trim_candidates(messages, keep)
        report.candidates += len(candidates)
        report.verbatim_uniform += sum(uniform.send_messages[i] == messages[i] for i in candidates)
        report.verbatim_relevance += sum(ranked.send_messages[i] == messages[i] for i in candidates)


def format_report(report: TranscriptReport, budget: int) -> str:
    before, uniform, relevance = report.last_turn
    status = ", ".join(f"{name} {count}" for name, count in sorted(report.relevance_status.items()))
    mean_ms = sum(report.relevance_ms) / len(report.relevance_ms) if report.relevance_ms else 0.0
    lines = [
        f"{report.name}",
        f"  turns: {report.turns}, over the {budget:,}-token budget: {report.over_budget}",
        f"  tokens, summed over turns: {report.tokens_before:,} before -> {report.tokens_uniform:,} uniform, "
        f"{report.tokens_relevance:,} relevance",
        f"  tokens, last turn: {before:,} before -> {uniform:,} uniform, {relevance:,} relevance",
        f"  embeddings: {report.embedding_calls:,} calls, {report.texts_embedded:,} texts embedded, "
        f"{report.texts_cached:,} from cache; relevance {status}; {mean_ms:.0f} ms mean per ranked turn",
        f"  old tool results kept verbatim on over-budget turns: uniform {report.verbatim_uniform:,}, "
        f"relevance {report.verbatim_relevance:,} (of {report.candidates:,} candidates)",
    ]
    for reason, count in report.unavailable_reasons.most_common(3):
        lines.append(f"  unavailable x{count}: {reason}")
    return "\n".join(lines)


async def run_eval(config: Config, transcripts: list[Transcript], out: TextIO, err: TextIO) -> list[TranscriptReport]:
    settings = config.pinch
    err.write(
        f"eval-pinch: budget {settings.budget_tokens:,} tokens, keep_last_turns {settings.keep_last_turns}, "
        f"embeddings {settings.relevance.api} {settings.relevance.base_url} model {settings.relevance.model}\n"
    )
    progress = ProgressBar(sum(len(t.turn_requests()) for t in transcripts), err)
    reports = []
    async with aiohttp.ClientSession() as http:
        deps = StageDeps(config=config, http=http, estimator=TokenEstimator(config.tokens.image_tokens, config.tokens.per_message_overhead))
        for transcript in transcripts:
            reports.append(await replay(transcript, deps, progress))
    progress.close()
    out.write("\n\n".join(format_report(r, settings.budget_tokens) for r in reports) + "\n")
    return reports


def eval_pinch(
    config: Config,
    files: list[str],
    *,
    budget: int | None = None,
    keep_last_turns: int | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """The command: 0 when every transcript was replayed, 2 when a file cannot be read."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        transcripts = [load_transcript(Path(f)) for f in files]
    except RequestFileError as error:
        err.write(f"pinch-router eval-pinch: {error}\n")
        return 2
    # The stages' warnings (relevance_unavailable, stage_failed) would tear the
    # progress bar; the report counts them and names their reasons instead.
    stage_logs = logging.getLogger("pinch_router")
    level = stage_logs.level
    stage_logs.setLevel(logging.ERROR)
    try:
        asyncio.run(run_eval(eval_config(config, budget, keep_last_turns), transcripts, out, err))
    finally:
        stage_logs.setLevel(level)
    return 0
