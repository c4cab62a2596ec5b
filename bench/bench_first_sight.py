"""Measurement: what first sight saves on real sessions (issue #44).

Replays each transcript as one session: every tool result, when it is first sent, goes
through :func:`router.core.first_sight.reduce_at_first_sight` once — with the conversation's
earlier results as the model sees them (reduced where they were), the task and the current
step as the query (the turn text of the request that first carries it) — and is then resent
as those bytes on every later request. So a result's saving counts once per later request
that includes it; the share is of every request's prompt tokens (messages and tool schemas,
the project's estimator), i.e. how far a warm session's tokens fall against no pinch.

Two runs per transcript: lossless rules only, and with the lossy long-output cut
(``pinch_retrieve`` offered). Each reduction is timed as the best of three runs with the garbage
collector paused (:func:`timed`); last, a 40,000-line log (every line of the shared set's tool
results, numbered, over and over) is timed against the shared set's results as earlier ones. The shared set (tests/data/transcripts) is the tuning set;
the held-out set (../shared/transcripts-more, or --held-out DIR) is measured, never tuned on.

    .venv/bin/python -m bench.bench_first_sight [--held-out DIR] [--save]
"""

from __future__ import annotations

import argparse
import gc
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness import ROOT, TRANSCRIPTS, percentile, print_table
from router.core.first_sight import EarlierIndex, EarlierResult, FirstSightSettings, NewResult, Reduction, reduce_at_first_sight
from router.core.first_sight.model import text_tokens
from router.core.tokens import DEFAULT_ESTIMATOR, tools_tokens
from router.tools.transcripts import Transcript, load_transcript
from router.wire.openai_chat.view import extract_turn_text

HELD_OUT = ROOT.parent / "shared" / "transcripts-more"
TURN_TEXT_CHARS = 2000
TARGET = 0.85  # issue #44: a warm session's prompt tokens at most this share of no pinch
TIMINGS = 3


@dataclass
class Replay:
    """One transcript replayed with one setting: tokens of its tool results, and of its requests."""

    results: int = 0
    result_tokens: int = 0  # every tool result, as the tool returned it
    reduced_tokens: int = 0  # the same, as first sight sent them
    prompt_tokens: int = 0  # every request of the session, without first sight
    saved_prompt_tokens: int = 0  # what first sight takes off them (each saving × the requests that resend it)
    reduced: int = 0
    rule_tokens: Counter[str] = field(default_factory=Counter)  # saved prompt tokens by rule
    seconds: list[float] = field(default_factory=list)


def timed(reduce: Callable[[], Reduction | None]) -> tuple[float, Reduction | None]:
    """The best of :data:`TIMINGS` runs of a reduction (it is deterministic), with the garbage collector
    paused: neither a collection the replay's own garbage triggers nor another process on the machine
    is a cost of the reduction."""
    best = float("inf")
    gc.disable()
    try:
        for _ in range(TIMINGS):
            started = time.perf_counter()
            reduction = reduce()
            best = min(best, time.perf_counter() - started)
    finally:
        gc.enable()
    return best, reduction


def replay(transcript: Transcript, settings: FirstSightSettings, allow_lossy: bool) -> Replay:
    messages = transcript.messages
    out = Replay()
    sizes = DEFAULT_ESTIMATOR.message_sizes(messages)
    schema_tokens = tools_tokens(transcript.tools)
    assistants = [i for i, m in enumerate(messages) if m.get("role") == "assistant" and i > 0]
    for end in assistants:  # Transcript.turn_requests: everything before each assistant message
        out.prompt_tokens += DEFAULT_ESTIMATOR.sizes_tokens(sizes[:end]) + schema_tokens
    calls: dict[str, tuple[str, str]] = {}
    index = EarlierIndex(settings=settings)
    for position, message in enumerate(messages):
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            calls[call.get("id", "")] = (function.get("name", ""), function.get("arguments", ""))
        if message.get("role") != "tool" or not isinstance(message.get("content"), str):
            continue
        call_id = message.get("tool_call_id", f"#{position}")
        name, arguments = calls.get(call_id, ("", ""))
        text = message["content"]
        turn = extract_turn_text(messages[: position + 1], TURN_TEXT_CHARS)
        seconds, reduction = timed(
            lambda: reduce_at_first_sight(
                NewResult(text, name, arguments), index, (turn.task, turn.step), settings, allow_lossy=allow_lossy, retrieve_id=call_id
            )
        )
        out.seconds.append(seconds)
        sent = text if reduction is None else reduction.text
        index.add(EarlierResult(call_id, name, arguments, sent))
        later = sum(1 for end in assistants if end > position)
        out.results += 1
        out.result_tokens += text_tokens(text)
        out.reduced_tokens += text_tokens(sent)
        if reduction is not None:
            out.reduced += 1
            out.saved_prompt_tokens += reduction.tokens_saved * later
            for step in reduction.steps:
                out.rule_tokens[step.rule] += (step.chars_before - step.chars_after) // 4 * later
    return out


def report(title: str, paths: list[Path], settings: FirstSightSettings, out: list[str]) -> tuple[float, float]:
    """The set's table into ``out``; its prompt tokens with first sight over without, lossless and with lossy."""
    out += [f"## {title}", ""]
    out.append(f"{'transcript':<46} {'results':>7} {'result tok':>10} {'lossless':>9} {'+lossy':>9} {'prompt tok':>10} {'lossless':>9} {'+lossy':>9}")
    out.append(f"{'':<46} {'':>7} {'':>10} {'(after)':>9} {'(after)':>9} {'(session)':>10} {'(×)':>9} {'(×)':>9}")
    totals = {False: Replay(), True: Replay()}
    for path in paths:
        transcript = load_transcript(path)
        runs = {lossy: replay(transcript, settings, lossy) for lossy in (False, True)}
        for lossy, run in runs.items():
            total = totals[lossy]
            total.results += run.results
            total.result_tokens += run.result_tokens
            total.reduced_tokens += run.reduced_tokens
            total.prompt_tokens += run.prompt_tokens
            total.saved_prompt_tokens += run.saved_prompt_tokens
            total.reduced += run.reduced
            total.rule_tokens.update(run.rule_tokens)
            total.seconds.extend(run.seconds)
        out.append(_row(transcript.name[:46], runs[False], runs[True]))
    out += [_row("all", totals[False], totals[True]), ""]
    for lossy, total in totals.items():
        rules = ", ".join(f"{rule} {tokens / total.prompt_tokens:.1%}" for rule, tokens in total.rule_tokens.most_common())
        ms = [s * 1000 for s in total.seconds]
        out.append(
            f"{'with lossy' if lossy else 'lossless'}: {total.reduced} of {total.results} results reduced; prompt tokens saved by rule: {rules or 'none'}; "
            f"time a result p50 {percentile(ms, 50):.3f} ms, p99 {percentile(ms, 99):.3f} ms, max {max(ms, default=0):.3f} ms"
        )
    out.append("")
    return tuple(1 - totals[lossy].saved_prompt_tokens / (totals[lossy].prompt_tokens or 1) for lossy in (False, True))  # type: ignore[return-value]


def log_timing(settings: FirstSightSettings, out: list[str], lines: int = 40_000) -> None:
    texts = [m["content"] for p in sorted(TRANSCRIPTS.glob("*.json")) if not p.name.endswith(".meta.json")
             for m in load_transcript(p).messages if m.get("role") == "tool" and isinstance(m.get("content"), str)]
    pool = [line for text in texts for line in text.split("\n")]
    log = "\n".join(f"{i:>6} {pool[i % len(pool)]}" for i in range(lines))
    index = EarlierIndex((EarlierResult(f"c{i}", "bash", "{}", text) for i, text in enumerate(texts)), settings)
    query = ("fix the failing test in src/sqlfluff/rules/L003.py", "grep -n _process_raw_stack")
    for lossy in (False, True):
        seconds, reduction = timed(lambda: reduce_at_first_sight(NewResult(log), index, query, settings, allow_lossy=lossy, retrieve_id="log"))
        after = len(reduction.text) if reduction else len(log)
        out.append(f"a {lines:,}-line log ({len(log):,} characters), {'with lossy' if lossy else 'lossless'}: {seconds * 1000:.1f} ms, {after:,} characters after")
    out.append("")


def _row(name: str, lossless: Replay, lossy: Replay) -> str:
    base = lossless.prompt_tokens or 1
    return (
        f"{name:<46} {lossless.results:>7} {lossless.result_tokens:>10,} {lossless.reduced_tokens:>9,} {lossy.reduced_tokens:>9,} "
        f"{lossless.prompt_tokens:>10,} {1 - lossless.saved_prompt_tokens / base:>9.3f} {1 - lossy.saved_prompt_tokens / base:>9.3f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transcripts", type=Path, default=TRANSCRIPTS, help="the tuning set")
    parser.add_argument("--held-out", type=Path, default=HELD_OUT, help="measured only, never tuned on")
    parser.add_argument("--save", action="store_true", help="also write the table to bench/results/bench_first_sight.txt")
    args = parser.parse_args(argv)
    settings = FirstSightSettings()
    out: list[str] = []
    verdicts = []
    for title, directory in (("shared (tuning) set", args.transcripts), ("held-out set", args.held_out)):
        paths = sorted(p for p in directory.glob("*.json") if not p.name.endswith(".meta.json"))
        if not paths:
            out += [f"## {title}: no transcripts in {directory}", ""]
            continue
        lossless, lossy = report(f"{title}: {directory.name}", paths, settings, out)
        verdicts.append(f"{title.split()[0]} {lossless:.3f}× lossless, {lossy:.3f}× with lossy ({'met' if lossy <= TARGET else 'MISSED'})")
    log_timing(settings, out)
    out.append("(×): the session's prompt tokens with first sight, over those without; each result reduced once when first sent, resent as is.")
    out.append(f"target ≤ {TARGET}× of no pinch in a warm session, all transcripts of a set together: {'; '.join(verdicts)}")
    return print_table(__file__, out, args.save, argv)


if __name__ == "__main__":
    raise SystemExit(main())
