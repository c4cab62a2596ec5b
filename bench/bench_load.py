"""Load and leak check (issue 7): many concurrent mixed clients for a bounded time, then back to idle?

One run starts a mock upstream and pinch-router, each in its own process on
127.0.0.1. The proxy runs the full chain (session-fingerprint →
classification-cache → classifier → pinch-relevance (off: no embeddings
server, so it skips) → pinch-prune → capability-gate → upstream-forward),
the mock upstream also serving as the classifier, with the decision log
written to a temporary file. This process is the load: ``--clients``
concurrent clients, half streaming (with ``stream_options.include_usage``)
and half not, each sending one request after another until ``--seconds``
have passed or ``--max-requests`` were sent, whichever comes first.

The mix: a short chat or a real agent transcript (tests/data/transcripts), with
one of 32 session ids or none (then the proxy fingerprints the messages);
the session cache's staleness is cut to 3 s, so cache hits and classifier
calls both keep happening. About 5% of all requests are streams that the
client drops after the first event (WHAT-USERS-HIT #13: leaks from cancelled
requests); they are counted apart, never as errors. The mock streams each
event after ``--event-delay`` (10 ms), so those drops land mid-stream.

Measured: errors (a non-200 answer, a stream without [DONE] or with an
error event, a body without choices, a client-side failure), p50/p99 to the
last byte, requests/s; the proxy's RSS (VmRSS) after a warm-up (20 s: bounded caches fill first) and again at
the end; and after the load stops and a short settle, the gauges on /metrics
(requests in flight, upstream responses open, asyncio tasks) and the proxy's
TCP connections to the mock upstream (kept-alive pool connections may stay:
they are reported as idle, with upstream responses open == 0 saying none is
in use) and from clients.

Stalled readers (issue #17): ``--stalled-clients`` more clients each open a
stream from a second mock upstream that streams as fast as it can
(``--fast-words`` events, no delay), then never read: their socket buffers
fill and the proxy's writes wait. Without a write timeout each pins an
upstream connection (and its buffers) for as long as it stays; with
``upstream.client_write_timeout_seconds`` (``--write-timeout``) the proxy drops
it and frees the connection. They reconnect every ``3 × --write-timeout``
seconds to keep the pressure on. Measured: the peak of upstream responses
open during the load (scraped each second), RSS, and the other clients'
latency. ``--write-timeout 1e9`` shows the behaviour without the timeout.

Targets: zero errors, RSS growth under 10%, back to idle (nothing in flight,
no upstream response open, tasks within 2 of the pre-load count, no client
connection left). Each is printed met or MISSED; the exit code is 0 either
way (a benchmark, not a test). The machine's 2 cores are shared by the load,
the proxy and the mock, so requests/s is modest and mostly says how much
CPU the load generator left over.

    .venv/bin/python -m bench.bench_load [--clients 256] [--seconds 60] [--max-requests 200000]
    .venv/bin/python -m bench.bench_load --seconds 5 --warmup 5 --clients 32    # smoke run, ~15 s in all
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import signal
import socket
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter
from typing import Any

import aiohttp
import orjson

from bench.bench_proxy import chain_sections
from bench.harness import (
    free_port,
    percentile,
    proxy,
    rss_kib,
    scrape_metrics,
    spawn,
    tcp_states,
    transcript_body,
    write_config,
)

SESSION_IDS = 32
FINGERPRINTED_SHARE = 1 / 8  # requests without a session header
TRANSCRIPT_SHARE = 0.5
SESSION_STALENESS_MINUTES = 0.05  # 3 s: sessions get reclassified while the load runs
TASK_SLACK = 2  # asyncio tasks at the end may exceed the pre-load count by this many
RSS_GROWTH_TARGET = 0.10
REQUEST_TIMEOUT_SECONDS = 60  # per request, so the run ends even if the proxy hangs
SHORT_CHAT: dict[str, Any] = {
    "model": "auto",
    "messages": [
        {"role": "system", "content": "You are a careful coding assistant."},
        {"role": "user", "content": "Rename the variable `n` to `count` in utils.py and explain why."},
    ],
}


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    stream: bool
    disconnect: bool  # drop the connection after the first event
    body: bytes
    headers: dict[str, str]


class RequestMix:
    """What each client sends next. Even-numbered clients stream, odd ones do not."""

    def __init__(self, transcript: dict[str, Any], disconnect_share: float) -> None:
        self.bodies: dict[tuple[str, bool], bytes] = {}
        for name, body in (("chat", SHORT_CHAT), ("transcript", transcript)):
            self.bodies[name, False] = orjson.dumps({**body, "stream": False})
            self.bodies[name, True] = orjson.dumps({**body, "stream": True, "stream_options": {"include_usage": True}})
        # only streams can be dropped mid-stream, and half the requests stream
        self.disconnect_share_of_streams = min(1.0, disconnect_share * 2)

    def next(self, client: int, rng: random.Random) -> PlannedRequest:
        stream = client % 2 == 0
        kind = "transcript" if rng.random() < TRANSCRIPT_SHARE else "chat"
        headers = {"Content-Type": "application/json"}
        if rng.random() >= FINGERPRINTED_SHARE:
            headers["x-router-session"] = f"load-session-{rng.randrange(SESSION_IDS)}"
        disconnect = stream and rng.random() < self.disconnect_share_of_streams
        return PlannedRequest(stream, disconnect, self.bodies[kind, stream], headers)


@dataclass
class Tally:
    """What one load phase saw; filled in by the clients as they go."""

    latencies_ms: dict[str, list[float]] = field(default_factory=lambda: {"json": [], "stream": []})
    errors: Counter[str] = field(default_factory=Counter)
    disconnects: int = 0
    sent: int = 0
    seconds: float = 0.0

    @property
    def finished(self) -> int:
        return sum(len(values) for values in self.latencies_ms.values())

    @property
    def all_latencies_ms(self) -> list[float]:
        return [value for values in self.latencies_ms.values() for value in values]


def answer_problem(data: bytes, stream: bool) -> str | None:
    """Why a 200 answer is not a good one, or None."""
    if stream:
        if b'data: {"error"' in data:
            return "stream with an error event"
        return None if data.endswith(b"data: [DONE]\n\n") else "stream without [DONE]"
    try:
        answer = orjson.loads(data)
    except orjson.JSONDecodeError:
        return "body is not JSON"
    return None if isinstance(answer, dict) and answer.get("choices") else "body without choices"


async def send(http: aiohttp.ClientSession, url: str, planned: PlannedRequest, tally: Tally) -> None:
    started = perf_counter()
    try:
        async with http.post(url, data=planned.body, headers=planned.headers) as response:
            if response.status != 200:
                await response.read()
                tally.errors[f"status {response.status}"] += 1
                return
            if planned.disconnect:
                async for line in response.content:
                    if line.startswith(b"data:"):
                        response.close()  # drops the TCP connection, as a killed client would
                        tally.disconnects += 1
                        return
                tally.errors["stream ended before its first event"] += 1
                return
            data = await response.read()
    except (aiohttp.ClientError, TimeoutError) as exc:
        tally.errors[type(exc).__name__] += 1
        return
    problem = answer_problem(data, planned.stream)
    if problem:
        tally.errors[problem] += 1
        return
    tally.latencies_ms["stream" if planned.stream else "json"].append((perf_counter() - started) * 1000)


async def run_load(url: str, mix: RequestMix, clients: int, seconds: float, max_requests: int, seed: int) -> Tally:
    """``clients`` concurrent clients sending back to back until the time or the request budget is spent."""
    tally = Tally()
    deadline = time.monotonic() + seconds
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_SECONDS)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as http:

        async def client(index: int) -> None:
            rng = random.Random(seed * 100_003 + index)
            while time.monotonic() < deadline and tally.sent < max_requests:
                tally.sent += 1
                await send(http, url, mix.next(index, rng), tally)

        started = perf_counter()
        await asyncio.gather(*(client(i) for i in range(clients)))
        tally.seconds = perf_counter() - started
    return tally  # the session is closed: no client connection stays open


@dataclass(frozen=True, slots=True)
class Gauges:
    in_flight: float
    upstream_open: float
    tasks: float


def gauges(samples: dict[str, list[tuple[dict[str, str], float]]]) -> Gauges:
    def value(name: str) -> float:
        return samples[name][0][1]

    return Gauges(
        value("pinch_router_requests_in_flight"),
        value("pinch_router_upstream_responses_open"),
        value("pinch_router_asyncio_tasks"),
    )


def totals_by(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, label: str) -> dict[str, int]:
    totals: Counter[str] = Counter()
    for labels, value in samples.get(name, []):
        totals[labels[label]] += int(value)
    return dict(sorted(totals.items()))


@dataclass
class LoadReport:
    idle: Gauges
    warm_up: Tally
    load: Tally
    rss_before_kib: int
    rss_after_kib: int
    rss_trace: list[tuple[float, int]]
    end: Gauges
    end_samples: dict[str, list[tuple[dict[str, str], float]]]
    upstream_sockets: dict[str, int]
    client_sockets: dict[str, int]
    upstream_open_peak: float = 0.0
    stalled_opened: int = 0


async def trace_rss(pid: int, into: list[tuple[float, int]], every: float = 1.0, metrics_url: str = "", opened: list[float] | None = None) -> None:
    started = time.monotonic()
    while True:
        into.append((time.monotonic() - started, rss_kib(pid)))
        if metrics_url and opened is not None:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError, KeyError, IndexError):
                opened.append(gauges(await scrape_metrics(metrics_url)).upstream_open)
        await asyncio.sleep(every)


STALLED_MODEL = "fast-stream"


async def stalled_readers(port: int, clients: int, hold: float, stop: asyncio.Event) -> int:
    """``clients`` connections that ask for a long fast stream and never read it; the streams opened."""
    body = orjson.dumps({"model": STALLED_MODEL, "stream": True, "messages": SHORT_CHAT["messages"]})
    request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    opened = 0

    async def one() -> None:
        nonlocal opened
        while not stop.is_set():
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fills fast, like a stalled terminal
            sock.setblocking(False)
            try:
                await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
                await asyncio.get_running_loop().sock_sendall(sock, request)
                opened += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), hold)  # never reads a byte
            except OSError:
                await asyncio.sleep(0.5)
            finally:
                sock.close()

    await asyncio.gather(*(one() for _ in range(clients)))
    return opened


async def measure(pid: int, proxy_port: int, upstream_port: int, mix: RequestMix, args: argparse.Namespace) -> LoadReport:
    base = f"http://127.0.0.1:{proxy_port}"
    chat_url = f"{base}/v1/chat/completions"
    idle = gauges(await scrape_metrics(f"{base}/metrics"))
    warm_up = await run_load(chat_url, mix, args.clients, args.warmup, args.max_requests, seed=1)
    rss_before = rss_kib(pid)
    trace: list[tuple[float, int]] = []
    opened: list[float] = []
    tracer = asyncio.create_task(trace_rss(pid, trace, metrics_url=f"{base}/metrics", opened=opened))
    stop = asyncio.Event()
    stalled = asyncio.create_task(stalled_readers(proxy_port, args.stalled_clients, 3 * args.write_timeout, stop))
    try:
        load = await run_load(chat_url, mix, args.clients, args.seconds, args.max_requests, seed=2)
    finally:
        tracer.cancel()
        stop.set()
        stalled_opened = await stalled
    await asyncio.sleep(args.settle)
    end_samples = await scrape_metrics(f"{base}/metrics")
    return LoadReport(
        idle=idle,
        warm_up=warm_up,
        load=load,
        rss_before_kib=rss_before,
        rss_after_kib=rss_kib(pid),
        rss_trace=trace,
        end=gauges(end_samples),
        end_samples=end_samples,
        upstream_sockets=tcp_states(pid, remote_port=upstream_port),
        client_sockets={s: n for s, n in tcp_states(pid, local_port=proxy_port).items() if s != "LISTEN"},
        upstream_open_peak=max(opened, default=0.0),
        stalled_opened=stalled_opened,
    )


def decision_rows(path: Path) -> Counter[tuple[int, str]]:
    """Rows of the decision log by (status, stream_error); read once the proxy has stopped and flushed it."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        query = "SELECT status, stream_error, count(*) FROM decisions GROUP BY 1, 2"
        return Counter({(status, error or ""): count for status, error, count in db.execute(query)})


def mib(kib: int) -> str:
    return f"{kib / 1024:.1f}"


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def print_report(report: LoadReport, decisions: Counter[tuple[int, str]]) -> None:
    load = report.load
    every = max(1, round(len(report.rss_trace) / 12))
    trace = " | ".join(f"{t:.0f}s {mib(kib)}" for t, kib in report.rss_trace[::every])
    print(f"\nwarm-up: {report.warm_up.finished:,} requests in {report.warm_up.seconds:.1f} s, errors {sum(report.warm_up.errors.values())}")
    print(f"proxy RSS during the measured load (MiB): {trace}\n")

    rows: list[tuple[str, str, str, str]] = []
    rows.append(("requests sent / finished", f"{load.sent:,} / {load.finished:,} in {load.seconds:.1f} s", "", ""))
    rows.append(("requests/s (finished)", f"{load.finished / load.seconds:.1f}" if load.seconds else "-", "", ""))
    everything = load.all_latencies_ms
    rows.append(("latency p50 / p99, all (ms)", f"{percentile(everything, 50):.1f} / {percentile(everything, 99):.1f}", "", ""))
    for kind in ("json", "stream"):
        values = load.latencies_ms[kind]
        rows.append((f"  {kind} ({len(values):,})", f"{percentile(values, 50):.1f} / {percentile(values, 99):.1f}", "", ""))
    error_count = sum(load.errors.values())
    rows.append(("errors", f"{error_count:,}", "0", verdict(error_count == 0)))
    for reason, count in load.errors.most_common():
        rows.append((f"  {reason}", f"{count:,}", "", ""))
    rows.append(("deliberate disconnects", f"{load.disconnects:,} (not errors)", "", ""))
    rows.append(("stalled-reader streams opened", f"{report.stalled_opened:,}", "", ""))
    rows.append(("upstream responses open, peak during load", f"{report.upstream_open_peak:.0f}", "", ""))
    statuses = totals_by(report.end_samples, "pinch_router_requests_total", "status")
    rows.append(("proxy's requests by status (+warm-up)", ", ".join(f"{s}: {n:,}" for s, n in statuses.items()), "", ""))
    sources = totals_by(report.end_samples, "pinch_router_classification_total", "source")
    rows.append(("classifications by source", ", ".join(f"{s}: {n:,}" for s, n in sources.items()), "", ""))
    dropped = sum(v for _, v in report.end_samples.get("pinch_router_decision_log_dropped_total", []))
    rows.append(("decision log rows written / dropped", f"{decisions.total():,} / {dropped:.0f}", "", ""))
    # A drop shows in the log as a cancelled request (499) when the proxy noticed the close while
    # waiting, as a 200 stream cut short when a write to the client failed, and not at all when the
    # proxy had already sent the whole stream (a busy client reads the first event late).
    drops = report.warm_up.disconnects + load.disconnects
    cancelled = sum(n for (status, _), n in decisions.items() if status == 499) - report.stalled_opened
    cut = decisions[200, "client disconnected"]
    rows.append(
        (
            "drops as the proxy saw them",
            f"{cancelled:,} cancelled (499), {cut:,} cut on write (200), {drops - cancelled - cut:,} after the last byte",
            "",
            "",
        )
    )
    growth = (report.rss_after_kib - report.rss_before_kib) / report.rss_before_kib
    peak = max((kib for _, kib in report.rss_trace), default=report.rss_after_kib)
    rows.append(
        (
            "RSS before → after (MiB)",
            f"{mib(report.rss_before_kib)} → {mib(report.rss_after_kib)} ({growth:+.1%}; peak {mib(peak)})",
            f"growth < {RSS_GROWTH_TARGET:.0%}",
            verdict(growth < RSS_GROWTH_TARGET),
        )
    )
    end, idle = report.end, report.idle
    rows.append(("in flight at the end", f"{end.in_flight:.0f}", "0", verdict(end.in_flight == 0)))
    rows.append(("upstream responses open at the end", f"{end.upstream_open:.0f}", "0", verdict(end.upstream_open == 0)))
    rows.append(
        (
            "asyncio tasks at the end",
            f"{end.tasks:.0f} (before the load {idle.tasks:.0f})",
            f"≤ before + {TASK_SLACK}",
            verdict(end.tasks <= idle.tasks + TASK_SLACK),
        )
    )
    client_left = sum(report.client_sockets.values())
    rows.append(("client connections at the end", describe_sockets(report.client_sockets), "0", verdict(client_left == 0)))
    rows.append(
        (
            "upstream TCP connections at the end",
            describe_sockets(report.upstream_sockets) + " (idle keep-alive pool)",
            "none in use",
            verdict(end.upstream_open == 0),
        )
    )

    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    header = ("result", "value", "target", "")
    print(f"{header[0]:<{widths[0]}}  {header[1]:<{widths[1]}}  {header[2]:<{widths[2]}}")
    print("-" * (sum(widths) + 6))
    for name, value, target, ok in rows:
        print(f"{name:<{widths[0]}}  {value:<{widths[1]}}  {target:<{widths[2]}}  {ok}".rstrip())
    missed = [row[0].strip() for row in rows if row[3] == "MISSED"]
    print("\n" + ("all targets met" if not missed else f"MISSED: {', '.join(missed)}"))


def describe_sockets(states: dict[str, int]) -> str:
    return ", ".join(f"{n} {state}" for state, n in sorted(states.items())) or "0"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=256, help="concurrent clients (half stream)")
    parser.add_argument("--seconds", type=float, default=60, help="length of the measured load")
    parser.add_argument("--max-requests", type=int, default=200_000, help="at most this many requests per phase")
    # Long enough for the bounded structures to fill first (the recorder's 10,000 recent
    # request ids take ~15 s at ~700 req/s): their filling is not growth, and with a 5 s
    # warm-up it shows up as +13%; after 20 s the RSS curve is flat.
    parser.add_argument("--warmup", type=float, default=20, help="seconds of load before RSS 'before' is taken")
    parser.add_argument("--settle", type=float, default=2, help="seconds after the load before the end is measured")
    parser.add_argument("--disconnect-share", type=float, default=0.05, help="share of all requests dropped mid-stream")
    parser.add_argument("--event-delay", type=float, default=0.01, help="mock upstream: seconds before each streamed event")
    parser.add_argument("--stalled-clients", type=int, default=0, help="clients that open a fast stream and never read it")
    parser.add_argument("--write-timeout", type=float, default=2.0, help="upstream.client_write_timeout_seconds (1e9: none)")
    parser.add_argument("--fast-words", type=int, default=20_000, help="events in each fast stream")
    parser.add_argument("--max-connections", type=int, default=512, help="upstream.max_connections (the pool stalled readers can fill)")
    args = parser.parse_args()
    # SIGTERM cleans up like Ctrl-C: the servers' `with` blocks stop them.
    signal.signal(signal.SIGTERM, signal.default_int_handler)

    transcript_name = "sweagent-gpt4__pydicom__pydicom-1458"
    mix = RequestMix(transcript_body(transcript_name), args.disconnect_share)
    up_port, proxy_port, fast_port = free_port(), free_port(), free_port()
    sections = chain_sections()
    sections["providers"] = {"mock": {"base_url": f"http://127.0.0.1:{up_port}/v1"}, "fast": {"base_url": f"http://127.0.0.1:{fast_port}/v1"}}
    sections["models"] = [
        {"name": "bench-model", "provider": "mock", "upstream_model": "mock", "context_window": 2_000_000, "max_output_tokens": 8192,
         "supports": {"tools": True, "vision": True, "json_mode": True}, "tiers": [1, 2, 3]},
        # pinned by the stalled readers only: ranks below bench-model for every routed request
        {"name": STALLED_MODEL, "provider": "fast", "upstream_model": "mock", "context_window": 2_000_000, "max_output_tokens": 8192, "tiers": [1], "quality": 0.0},
    ]
    sections["upstream"] = {"client_write_timeout_seconds": args.write_timeout, "max_connections": args.max_connections}
    sections["classifier"] = {"provider": "mock", "model": "mock-classifier"}
    sections["session_cache"] = {"enabled": True, "staleness_minutes": SESSION_STALENESS_MINUTES}
    mock = [sys.executable, "-m", "router", "mock-upstream", "--port", str(up_port), "--event-delay", str(args.event_delay)]
    with tempfile.TemporaryDirectory(prefix="pinch-load-") as tmp:
        sections["decision_log"] = {"enabled": True, "path": str(Path(tmp) / "decisions.sqlite3")}
        config = write_config(Path(tmp) / "load.yaml", proxy_port, f"http://127.0.0.1:{up_port}/v1", **sections)
        print(
            f"load: {args.clients} clients ({(args.clients + 1) // 2} streaming), {args.seconds:g} s after a "
            f"{args.warmup:g} s warm-up, at most {args.max_requests:,} requests; ~{args.disconnect_share:.0%} "
            "dropped after the first event"
        )
        print(f"chain: {' → '.join(sections['middlewares'])} (relevance off, decision log on)")
        print(
            f"bodies: short chat ({len(mix.bodies['chat', False]):,} B) and transcript {transcript_name} "
            f"({len(mix.bodies['transcript', False]):,} B); {SESSION_IDS} session ids + fingerprinted; "
            f"mock event delay {args.event_delay * 1000:g} ms"
        )
        print(
            f"stalled readers: {args.stalled_clients} (a {args.fast_words:,}-event stream each, never read, reopened every "
            f"{3 * args.write_timeout:g} s); client write timeout {args.write_timeout:g} s; upstream pool {args.max_connections}"
        )
        try:
            fast = [sys.executable, "-m", "router", "mock-upstream", "--port", str(fast_port), "--event-delay", "0", "--text", "word " * args.fast_words]
            with spawn(mock, up_port), spawn(fast, fast_port), spawn(proxy(config), proxy_port) as server:
                report = asyncio.run(measure(server.pid, proxy_port, up_port, mix, args))
        except KeyboardInterrupt:
            print("\ninterrupted: servers stopped", file=sys.stderr)
            return 130
        decisions = decision_rows(Path(tmp) / "decisions.sqlite3")  # the proxy flushed it on SIGTERM
    print_report(report, decisions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
