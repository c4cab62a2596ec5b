"""One decision as text, for people: the one renderer `top` (its detail popup) and `explain` share.

It reads a decision in its JSON form — a ``/v1/decisions`` row, or
:meth:`router.observe.decision_record.Decision.as_json` of the context `explain` ran —
so what `explain` predicts and what `top` shows afterwards read alike, line for
line. Pure: plain data in, text out (no terminal UI, no network).

Fields are ``(name, value)`` pairs printed as ``name`` in a 12-column gutter
then the value; a name repeated on the following lines of a list (rejected
models, attempts) is left blank.
"""

from __future__ import annotations

import math

from collections.abc import Iterable, Sequence
from datetime import datetime, tzinfo
from typing import Any

from router.observe.decision_record import wire_route

Row = dict[str, Any]
Field = tuple[str, str]
GUTTER = 12


def format_ms(ms: float | None) -> str:
    if ms is None:
        return "-"
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    if ms >= 100:
        return f"{ms:.0f} ms"
    return f"{ms:.1f} ms"


def format_dollars(value: float) -> str:
    """A total in dollars as the dashboard shows it (dashboard.js ``fmtUsd``): to the cent, an amount
    under a cent to two significant digits."""
    size = abs(value)
    if size == 0:
        return "$0.00"
    sign = "-" if value < 0 else ""
    if size < 0.01:
        return f"{sign}${size:.{1 - math.floor(math.log10(size))}f}"
    return f"{sign}${size:,.2f}"


def format_tokens(tokens: int | None) -> str:
    """Compact, for a table cell: ``999``, ``1.2k``, ``30k``, ``2.5M``."""
    if tokens is None:
        return "-"
    size = abs(tokens)
    if size >= 1_000_000:
        return f"{tokens / 1_000_000:.1f}M"
    if size >= 10_000:
        return f"{tokens / 1000:.0f}k"
    if size >= 1000:
        return f"{tokens / 1000:.1f}k"
    return str(tokens)


def thousands(n: Any) -> str:
    """In full with separators (``50,000``); ``-`` for anything not a count."""
    return f"{n:,}" if isinstance(n, int) and not isinstance(n, bool) else "-"


def pinch_saved(row: Row) -> int | None:
    """Tokens pinch removed, or None when pinch did not run for this request."""
    before, after = row.get("tokens_before"), row.get("tokens_after")
    if before is None or after is None:
        return None
    return before - after


def text_table(rows: Sequence[Sequence[str]], right: Iterable[int] = (), indent: str = "  ") -> list[str]:
    """Columns padded to their widest cell (``right``: the columns aligned right), the last one free-form."""
    if not rows:
        return []
    right = set(right)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for r in rows:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=False))]
        lines.append((indent + "  ".join([*cells, r[-1]])).rstrip())
    return lines


def field_lines(fields: Iterable[Field]) -> list[str]:
    return [f"{name:<{GUTTER}}{value}".rstrip() for name, value in fields]


def _listed(name: str, values: Iterable[str]) -> list[Field]:
    """One field per value, the name on the first only."""
    return [(name if i == 0 else "", value) for i, value in enumerate(values)]


def _cache_text(row: Row) -> str:
    """``; 1,536 from the prompt cache (77%), 160 written to it``, or '' when the upstream did not say."""
    cached, prompt, written = row.get("cached_tokens"), row.get("prompt_tokens"), row.get("cache_write_tokens")
    if not isinstance(cached, int):
        return ""
    share = f" ({cached / prompt:.0%})" if isinstance(prompt, int) and prompt else ""
    return f"; {cached:,} from the prompt cache{share}" + (f", {written:,} written to it" if isinstance(written, int) else "")


def pinch_fields(row: Row) -> list[Field]:
    """What pinch did, and what its session ledger says when it has anything to say."""
    mode = row.get("pinch_mode")
    if mode is None:
        return [("pinch", "not run")]
    if mode == "within_budget":
        fields = [("pinch", f"within budget: {thousands(row.get('tokens_before'))} tokens")]
    else:
        fields = [
            (
                "pinch",
                f"{mode}: {thousands(row.get('tokens_before'))} → {thousands(row.get('tokens_after'))} tokens, "
                f"saved {thousands(pinch_saved(row))}, {row.get('pinch_compressed') or 0} compressed",
            )
        ]
    reapplied, newly, reason = row.get("pinch_reapplied") or 0, row.get("pinch_newly_compressed") or 0, row.get("pinch_reason") or ""
    restored = row.get("pinch_restored") or 0
    if reapplied or newly or restored or reason:
        counts = f"{reapplied} reapplied, {newly} newly compressed" + (f", {restored} restored verbatim" if restored else "")
        fields.append(("ledger", counts + (f" — {reason}" if reason else "")))
    return fields


def decision_fields(row: Row) -> list[Field]:
    """The decision, one field per line: who asked, how it was classified and routed, what pinch
    did, who was tried and what it cost. A field the row has nothing for is left out."""
    fields: list[Field] = []
    session = row.get("session")
    requested = row.get("requested_model") or "(none: routed)"
    fields.append(("session", (f"{session} ({row.get('session_source')})" if session else "-") + f"   requested model {requested}"))
    if row.get("client"):  # the name of the client key it came with (server.api_keys)
        fields.append(("client", row["client"]))
    if row.get("category") is not None or row.get("routed_tier") is not None:
        escalation = f" ({row['escalation']})" if row.get("escalation") else ""
        escalation = (f" (model family {row['model_family']})" if row.get("model_family") else "") + escalation
        said = f" ({row['classifier_reason']})" if row.get("classifier_reason") else ""
        fields.append(
            ("class", f"{row.get('category')}, tier {row.get('tier')}, source {row.get('source')}{said}; routed tier {row.get('routed_tier')}{escalation}")
        )
    if row.get("model"):
        fields.append(("model", f"{row['model']} via {row.get('provider') or '-'}"))
    elif row.get("attempts"):
        fields.append(("model", "(none answered)"))
    if row.get("wire_in") and row.get("wire_out"):
        fields.append(("wire", wire_route(row["wire_in"], row["wire_out"], row.get("wire_dropped") or "")))
    elif row.get("wire_in"):
        fields.append(("wire", f"{row['wire_in']}, no provider tried"))
    if row.get("requested_max_tokens") is not None:
        sent = row.get("sent_max_tokens")
        fields.append(("max tokens", f"requested {row['requested_max_tokens']}" + (f", sent {sent}" if sent is not None else "")))
    if row.get("candidates"):  # the gate's order: the first was chosen, the rest are its fallbacks
        fields.append(("candidates", " → ".join(row["candidates"])))
    rejected = row.get("rejected") or []
    fields += _listed("rejected", (f"{r.get('model', '?')}: {'; '.join(r.get('reasons') or [])}" for r in rejected))
    if not rejected:
        gate_ran = any(stage.get("stage") == "capability-gate" for stage in row.get("stages") or [])
        fields.append(("rejected", "(none)" if gate_ran else "(the gate did not run)"))
    fields += pinch_fields(row)
    if row.get("relevance_status") is not None:
        reason = f" ({row['relevance_reason']})" if row.get("relevance_reason") else ""
        fields.append(("relevance", f"{row['relevance_status']}{reason}"))
    fields += _listed(
        "attempts",
        (
            f"{i + 1}. {a.get('model', '?')} ({a.get('provider', '?')}) → {a.get('status') or 'no answer'}" + (f": {a['error']}" if a.get("error") else "")
            for i, a in enumerate(row.get("attempts") or [])
        ),
    )
    if row.get("providers_down"):
        fields.append(("down", f"skipped as marked down: {', '.join(row['providers_down'])}"))
    if row.get("retrieve_calls"):
        calls = row["retrieve_calls"]
        fields.append(("retrieve", f"{calls} pinch_retrieve call{'' if calls == 1 else 's'} answered by the proxy, {thousands(row.get('retrieve_tokens'))} tokens added"))
    time = []
    if row.get("first_byte_ms") is not None:
        time.append(f"first byte {format_ms(row['first_byte_ms'])}")
    if row.get("upstream_ms") is not None:
        time.append(f"upstream {format_ms(row['upstream_ms'])}")
    overhead = row.get("overhead_ms")
    time.append(f"total {format_ms(row.get('duration_ms'))}" + (f", {format_ms(overhead)} in the proxy" if overhead is not None else ""))
    fields.append(("time", ", ".join(time)))
    if row.get("total_tokens") is not None:
        usage = f"{thousands(row.get('prompt_tokens'))} prompt + {thousands(row.get('completion_tokens'))} completion tokens"
        fields.append(("usage", usage + _cache_text(row)))
    if row.get("stream_error"):
        fields.append(("stream error", row["stream_error"]))
    if row.get("outcome"):
        fields.append(("outcome", row["outcome"] + (f" ({row['outcome_reason']})" if row.get("outcome_reason") else "")))
    return fields


def trace_lines(stages: Sequence[Row], not_run: Sequence[tuple[str, str]] = ()) -> list[str]:
    """The stage trace as a table; ``not_run``: (stage, why) of configured stages that did not run."""
    if not stages and not not_run:
        return ["  (no stage ran)"]
    rows = [("stage", "outcome", "ms", "detail")]
    rows += [(s.get("stage", "?"), str(s.get("outcome", "?")), f"{s.get('ms', 0):.2f}", s.get("detail") or "") for s in stages]
    rows += [(name, "not run", "", why) for name, why in not_run]
    return text_table(rows, right=(2,))


def decision_detail(row: Row, tz: tzinfo | None = None) -> str:
    """The full record of one decision (``top``'s detail popup): a heading line, the
    fields, and the stage trace last, as it is the longest part."""
    when = "-" if row.get("ts") is None else datetime.fromtimestamp(row["ts"], tz).strftime("%Y-%m-%d %H:%M:%S")
    status = f"{row.get('status')}" + (f" {row['error_code']}" if row.get("error_code") else "")
    heading = f"{row.get('request_id')}   {when}   status {status}{'   stream' if row.get('stream') else ''}"
    return "\n".join([heading, "", *field_lines(decision_fields(row)), "", "trace", *trace_lines(row.get("stages") or [])])
