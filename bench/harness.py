"""Shared pieces of the benchmarks: loopback servers in subprocesses, a load driver, percentiles.

Everything listens on 127.0.0.1 and stops when the benchmark ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml
from prometheus_client.parser import text_string_to_metric_families

from router.tools.transcripts import load_transcript

ROOT = Path(__file__).resolve().parent.parent
# A copy of ../shared/transcripts (MIT, see its README), kept in the repo so tests and
# benchmarks run the same on a fresh clone wherever it is.
TRANSCRIPTS = ROOT / "tests" / "data" / "transcripts"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 20.0, process: subprocess.Popen[bytes] | None = None) -> None:
    """Return once something listens on ``port``; fail early if ``process`` (the server) exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            output = process.stderr.read().decode(errors="replace") if process.stderr else ""
            raise RuntimeError(f"the server exited with {process.returncode} before listening: {output}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


@contextlib.contextmanager
def spawn(
    args: list[str], port: int, env: dict[str, str] | None = None, cwd: Path = ROOT, startup_seconds: float = 20.0,
    log_path: Path | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run a server in a subprocess until the block ends (``cwd``: the tree whose ``router`` ``-m router`` runs).

    Its output goes to a temporary file (``log_path`` to keep it), never to a pipe
    nobody reads: a full pipe would block the server's logging and stall it mid-benchmark.
    """
    log = open(log_path, "wb") if log_path is not None else tempfile.TemporaryFile()
    process = subprocess.Popen(args, cwd=cwd, env={**os.environ, **(env or {})}, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, startup_seconds)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def mock_upstream(port: int) -> list[str]:
    return [sys.executable, "-m", "router", "mock-upstream", "--port", str(port)]


def memo_upstream(port: int) -> list[str]:
    """The mock upstream answering a repeated body from memory (bench/memo_upstream.py: why)."""
    return [sys.executable, str(ROOT / "bench" / "memo_upstream.py"), "--port", str(port)]


def proxy(config_path: Path) -> list[str]:
    return [sys.executable, "-m", "router", "serve", "--config", str(config_path)]


def write_config(path: Path, port: int, upstream_url: str, **sections: Any) -> Path:
    config: dict[str, Any] = {
        "server": {"port": port},
        "middlewares": ["session-fingerprint", "capability-gate", "upstream-forward"],
        "providers": {"mock": {"base_url": upstream_url}},
        "models": [
            {
                "name": "bench-model",
                "provider": "mock",
                "upstream_model": "mock",
                "context_window": 2_000_000,
                "max_output_tokens": 8192,
                "supports": {"tools": True, "vision": True, "json_mode": True},
                "tiers": [1, 2, 3],
            }
        ],
    }
    config.update(sections)
    path.write_text(yaml.safe_dump(config))
    return path


SCALED_CHARS = 1_000_000


def transcript_body(name: str = "sweagent-gpt4__pydicom__pydicom-1458") -> dict[str, Any]:
    return load_bodies()[name]


def load_bodies(directory: Path = TRANSCRIPTS) -> dict[str, dict[str, Any]]:
    """Every transcript in ``directory`` as a chat body routed with ``auto``."""
    paths = sorted(p for p in directory.glob("*.json") if not p.name.endswith(".meta.json"))
    return {path.stem: load_transcript(path).body() for path in paths}


def scaled(body: dict[str, Any], target_chars: int) -> dict[str, Any]:
    """The body with its turns (everything after the first user message) repeated to ~target_chars.

    Each copy's tool-call ids get a suffix so calls and results stay paired.
    """
    messages = body["messages"]
    first_user = next(i for i, m in enumerate(messages) if m.get("role") == "user")
    opening, turns = messages[: first_user + 1], messages[first_user + 1 :]
    copies, grown = 0, list(opening)
    while len(orjson.dumps({**body, "messages": grown})) < target_chars:
        grown.extend(_renamed(turn, copies) for turn in turns)
        copies += 1
    return {**body, "messages": grown}


def grown_session(body: dict[str, Any], target_chars: int, requests: int) -> list[dict[str, Any]]:
    """The last ``requests`` requests of ``body``'s session grown to ~``target_chars`` by repeating its exchanges.

    An exchange is an assistant message and the tool results and user messages after it; they are
    repeated in order, one at a time (so a size lands within one exchange of the target), each copy's
    tool-call ids renamed (``_r<copy>``) so calls and results stay paired. Request ``i`` resends
    request ``i - 1``'s messages and adds one exchange, as an agent does turn by turn.
    """
    messages = body["messages"]
    first_user = next(i for i, m in enumerate(messages) if m.get("role") == "user")
    opening, turns = messages[: first_user + 1], messages[first_user + 1 :]
    exchanges: list[list[dict[str, Any]]] = []
    for message in turns:
        if message.get("role") == "assistant" or not exchanges:
            exchanges.append([])
        exchanges[-1].append(message)
    grown: list[list[dict[str, Any]]] = []
    size = len(orjson.dumps({**body, "messages": opening}))
    while size < target_chars or len(grown) < requests:
        copy, index = divmod(len(grown), len(exchanges))
        exchange = [_renamed(message, copy) for message in exchanges[index]]
        grown.append(exchange)
        size += sum(len(orjson.dumps(message)) + 1 for message in exchange)
    first = len(grown) - requests + 1
    return [{**body, "messages": opening + [m for exchange in grown[:end] for m in exchange]} for end in range(first, len(grown) + 1)]


def _renamed(message: dict[str, Any], copy: int) -> dict[str, Any]:
    renamed = dict(message)
    if isinstance(message.get("tool_call_id"), str):
        renamed["tool_call_id"] = f"{message['tool_call_id']}_r{copy}"
    if isinstance(message.get("tool_calls"), list):
        renamed["tool_calls"] = [{**call, "id": f"{call['id']}_r{copy}"} for call in message["tool_calls"]]
    return renamed


def with_scaled(bodies: dict[str, dict[str, Any]], target_chars: int = SCALED_CHARS) -> dict[str, dict[str, Any]]:
    """``bodies`` plus the largest one scaled to about ``target_chars``."""
    largest = max(bodies, key=lambda name: len(orjson.dumps(bodies[name])))
    return {**bodies, f"{largest[:28]}… ×scaled": scaled(bodies[largest], target_chars)}


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[index]


@dataclass(frozen=True)
class LoadResult:
    latencies_ms: list[float]
    errors: int
    seconds: float
    # What pinch-router itself reported (x-router-overhead-ms) for each answered request; empty for other targets.
    overhead_ms: list[float] = field(default_factory=list)

    @property
    def rps(self) -> float:
        return len(self.latencies_ms) / self.seconds if self.seconds else 0.0


async def drive(url: str, body: bytes, requests: int, concurrency: int, stream: bool, headers: dict[str, str] | None = None) -> LoadResult:
    """Send ``requests`` POSTs with ``concurrency`` in flight; time each to its last byte."""
    sent_headers = {"Content-Type": "application/json", **(headers or {})}
    latencies: list[float] = []
    overheads: list[float] = []
    errors = 0
    remaining = requests
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def worker() -> None:
            nonlocal remaining, errors
            while remaining > 0:
                remaining -= 1
                started = time.perf_counter()
                try:
                    async with http.post(url, data=body, headers=sent_headers) as resp:
                        data = await resp.read()
                        if resp.status != 200 or (stream and not data.endswith(b"data: [DONE]\n\n")):
                            errors += 1
                            continue
                except aiohttp.ClientError:
                    errors += 1
                    continue
                latencies.append((time.perf_counter() - started) * 1000)
                if "x-router-overhead-ms" in resp.headers:
                    overheads.append(float(resp.headers["x-router-overhead-ms"]))

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return LoadResult(latencies, errors, time.perf_counter() - started, overheads)


# --- probes of a server process (Linux /proc), for load and leak benchmarks ----------

TCP_STATES = {
    "01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1", "05": "FIN_WAIT2", "06": "TIME_WAIT",
    "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING",
}  # fmt: skip


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time process ``pid`` has used so far (/proc/<pid>/stat); None where there is no /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime in clock ticks


def tree_cpu_seconds(pid: int) -> float | None:
    """:func:`cpu_seconds` of ``pid`` and of every process it started that still runs (a server that forks workers)."""
    own = cpu_seconds(pid)
    if own is None:
        return None
    children: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                children += [int(child) for child in (task / "children").read_text().split()]
    return own + sum(filter(None, (tree_cpu_seconds(child) for child in children)))


def rss_kib(pid: int) -> int:
    """Resident memory of process ``pid`` in KiB (VmRSS of /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/{pid}/status has no VmRSS")


def tcp_states(pid: int, *, remote_port: int | None = None, local_port: int | None = None) -> dict[str, int]:
    """How many of the TCP sockets that process ``pid`` holds are in each state.

    Only sockets to ``remote_port`` / from ``local_port`` when given. Sockets are
    matched to the process by inode through /proc/<pid>/fd, so the other end of
    a loopback connection (held by another process) is not counted.
    """
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    states: dict[str, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
                if inode not in inodes:
                    continue
                if remote_port is not None and int(remote.rsplit(":", 1)[1], 16) != remote_port:
                    continue
                if local_port is not None and int(local.rsplit(":", 1)[1], 16) != local_port:
                    continue
                name = TCP_STATES.get(state, state)
                states[name] = states.get(name, 0) + 1
    return states


async def scrape_metrics(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The samples of a Prometheus /metrics page: sample name → [(labels, value)].

    One short-lived connection, so the scrape leaves no keep-alive connection
    (and no server task) behind.
    """
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http,
        http.get(url) as response,
    ):
        text = await response.text()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


# --- wrk, the load generator of the pinned bench when installed ------------------------

# Reports the run as one JSON line: exact percentiles (wrk's own histogram, in µs), requests, errors, µs elapsed.
WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = assert(io.open(os.getenv("WRK_BODY_FILE"), "rb"))
wrk.body = f:read("*a")
f:close()
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK_RESULT {"requests": %d, "errors": %d, "us": %d, "p50": %d, "p99": %d}\\n',
    summary.requests, e.connect + e.read + e.write + e.status + e.timeout, summary.duration,
    latency:percentile(50), latency:percentile(99)))
end
"""


@dataclass(frozen=True)
class Cell:
    """One measured cell of load, from wrk or :func:`drive`: answered requests, errors, seconds, latency percentiles."""

    requests: int
    errors: int
    seconds: float
    p50_ms: float
    p99_ms: float

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @classmethod
    def of(cls, load: LoadResult) -> Cell:
        return cls(len(load.latencies_ms), load.errors, load.seconds, percentile(load.latencies_ms, 50), percentile(load.latencies_ms, 99))


def wrk_cell(url: str, body: bytes, seconds: float, concurrency: int, headers: dict[str, str] | None = None) -> Cell:
    """``seconds`` of POSTs of ``body`` with ``concurrency`` connections, by wrk (one thread), with ``headers`` too."""
    with tempfile.TemporaryDirectory() as tmp:
        script, body_file = Path(tmp) / "post.lua", Path(tmp) / "body.json"
        extra = "".join(f"wrk.headers[{orjson.dumps(name).decode()}] = {orjson.dumps(value).decode()}\n" for name, value in (headers or {}).items())
        script.write_text(WRK_SCRIPT + extra)
        body_file.write_bytes(body)
        run = subprocess.run(
            ["wrk", "-t1", f"-c{concurrency}", f"-d{seconds:g}s", "--timeout", "30s", "-s", str(script), url],
            env={**os.environ, "WRK_BODY_FILE": str(body_file)},
            capture_output=True,
            text=True,
            check=True,
        )
    line = next(line for line in run.stdout.splitlines() if line.startswith("WRK_RESULT "))
    result = orjson.loads(line.removeprefix("WRK_RESULT "))
    answered = result["requests"] - result["errors"]
    return Cell(answered, result["errors"], result["us"] / 1e6, result["p50"] / 1000, result["p99"] / 1000)


RESULTS = ROOT / "bench" / "results"


def save_results(module_file: str, table: list[str], argv: list[str] | None = None) -> Path:
    """Write a benchmark's printed table to ``bench/results/<module>.txt`` (``--save``; the docs' benchmark
    page is generated from these files): a first line ``# <command> — <UTC date>, <machine: nproc, load
    average>``, then exactly the table."""
    name = Path(module_file).stem
    command = " ".join([".venv/bin/python -m", f"bench.{name}", *(sys.argv[1:] if argv is None else argv)])
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.txt"
    path.write_text(f"# {command} — {date}, machine: {os.cpu_count()} CPUs, load average {load}\n" + "\n".join(table) + "\n")
    return path


def print_table(module_file: str, table: list[str], save: bool, argv: list[str] | None = None) -> int:
    """Print a benchmark's table and, when ``save`` (its ``--save``), write it with :func:`save_results`;
    the benchmark's exit status."""
    print("\n".join(table))
    if save:
        print(f"saved to {save_results(module_file, table, argv)}")
    return 0
