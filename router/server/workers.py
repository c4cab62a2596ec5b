"""`serve --workers N`: N serving processes on one port (SO_REUSEPORT), one supervisor.

The supervisor starts N copies of ``pinch-router serve`` (the same arguments, the
port fixed, ``PINCH_ROUTER_WORKER`` set), each a full proxy that binds the port
with SO_REUSEPORT: the kernel spreads connections over them. It forwards SIGTERM
and SIGINT (each worker drains as a single process does), and SIGHUP (each reloads);
it exits when all have, with the worst exit status. A worker that exits while the
others serve ends the whole group (code 1), so a supervisor above (systemd, an
orchestrator) sees one failure and restarts one thing. A supervisor that dies without
stopping them (SIGKILL, an OOM kill) takes the workers with it: each notices within
a second that its parent is gone and stops as on SIGTERM, draining what it serves,
instead of holding the port unsupervised.

Across workers:

* session state must be shared, so ``state.backend: memory`` with N > 1 refuses to
  start (each worker would keep its own classifications and ledgers, and a session
  would be classified and pinched differently by whichever worker took the
  connection) unless ``--allow-split-state`` says that is wanted;
* metrics: prometheus-client's multiprocess mode — the supervisor gives the workers
  one directory (``PROMETHEUS_MULTIPROC_DIR``) and any worker's ``/metrics`` sums
  every worker's counters and histograms, and each gauge across the live workers
  as it says (what is open now summed, the state backend's health the lowest; see
  :mod:`router.observe.metrics`);
* the decision log is one SQLite file in WAL mode, written by each worker's own
  writer thread: SQLite serialises the writers (each waits up to its busy timeout).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

from router.observe.metrics import MULTIPROCESS_DIR_ENV

WORKER_ENV = "PINCH_ROUTER_WORKER"
SUPERVISOR_ENV = "PINCH_ROUTER_SUPERVISOR"  # the supervisor's pid, as its workers were started by it
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def is_worker() -> bool:
    return WORKER_ENV in os.environ


async def stop_when_orphaned(_config: object, every_seconds: float = 1.0) -> None:
    """In a worker: once the supervisor that started it is gone, stop as on SIGTERM (the drain applies).

    The pid comes from the environment, not from ``getppid()`` at start-up, so a supervisor
    that died before this check began is still noticed."""
    supervisor = int(os.environ.get(SUPERVISOR_ENV, "0") or 0)
    if supervisor <= 0:
        return
    while os.getppid() == supervisor:
        await asyncio.sleep(every_seconds)
    os.kill(os.getpid(), signal.SIGTERM)


def split_state_refusal(backend: str, workers: int, allowed: bool) -> str | None:
    """Why ``--workers`` cannot run on this state backend, or None."""
    if workers > 1 and backend == "memory" and not allowed:
        return (
            f"refusing --workers {workers} with state.backend: memory: each worker would keep its own session state, "
            "so a session would be classified, pinched and escalated differently by whichever worker took its connection "
            "(set state.backend: redis, or pass --allow-split-state to accept that)"
        )
    return None


def worker_argv(argv: Sequence[str], port: int) -> list[str]:
    """The command line (``serve …``) for one worker: ``--workers`` dropped, the port fixed."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in ("--workers", "--port"):
            skip = True
            continue
        if arg.startswith(("--workers=", "--port=")):
            continue
        out.append(arg)
    return [*out, "--port", str(port)]


def supervise(argv: Sequence[str], workers: int, port: int) -> int:
    """Run ``workers`` serving processes until they have all exited; the worst exit status."""
    metrics_dir = tempfile.mkdtemp(prefix="pinch-router-metrics-")
    env = {**os.environ, WORKER_ENV: "1", SUPERVISOR_ENV: str(os.getpid()), MULTIPROCESS_DIR_ENV: metrics_dir}
    args = [sys.executable, "-m", "router", *worker_argv(argv, port)]
    # Started with SIGHUP ignored (inherited across exec) until each installs its reload handler:
    # a reload asked for while a worker still starts must not kill it, and with it the group.
    # It reads the config as it starts, and its file watch sees a later edit.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    children = [subprocess.Popen(args, env=env) for _ in range(workers)]

    stop = {"signalled": False, "unexpected": False}

    def forward(signum: int, _frame: object) -> None:
        if signum != signal.SIGHUP:
            stop["signalled"] = True
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED}
    print(f"pinch-router: {workers} workers on port {port} (pids {', '.join(str(c.pid) for c in children)})", file=sys.stderr, flush=True)
    try:
        while True:
            codes = [child.poll() for child in children]
            if all(code is not None for code in codes):
                worst = max(abs(code) for code in codes if code is not None)
                return max(worst, 1) if stop["unexpected"] else worst
            if not stop["signalled"] and not stop["unexpected"] and any(code is not None for code in codes):
                # one worker ended on its own (start-up failed, or it crashed): end the group
                stop["unexpected"] = True
                print("pinch-router: a worker exited; stopping the others", file=sys.stderr, flush=True)
                for child in children:
                    if child.poll() is None:
                        child.send_signal(signal.SIGTERM)
            time.sleep(0.05)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        shutil.rmtree(metrics_dir, ignore_errors=True)
