"""`serve --workers N`: N serving processes on one port (SO_REUSEPORT), one supervisor.

The supervisor forks N workers, each running ``pinch-router serve`` (the same arguments,
the port fixed, ``PINCH_ROUTER_WORKER`` set), each a full proxy that loads the config
file and binds the port with SO_REUSEPORT: the kernel spreads connections over them.
Forked, not started afresh: the supervisor has imported everything a worker needs, so a
worker starts in a fraction of a second instead of the seconds the imports take. It
forwards SIGTERM and SIGINT (each worker drains as a single process does), and SIGHUP
(each reloads); it exits when all have, with the worst exit status.

A worker that dies on its own (a crash, ``kill -9``, the OOM killer) is started again
at once, as gunicorn and uvicorn do, while the others go on serving: only the
requests the dead one was serving fail. One that keeps dying is started again with a
back-off (0.25 s, doubling to 10 s) — after it died before it listened, or within
10 s of listening. A worker says it listens with one byte down a pipe
(``PINCH_ROUTER_READY_FD``); one that dies before that :data:`MAX_STARTUP_FAILURES`
times in a row (a port another program holds, a broken state directory: its own line
says why) stops the group with exit status 1 and a line saying so, so a supervisor
above (systemd, an orchestrator) sees the failure. A supervisor that dies without
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
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn

from prometheus_client.multiprocess import mark_process_dead

from router.observe.metrics import MULTIPROCESS_DIR_ENV, use_multiprocess_metrics

WORKER_ENV = "PINCH_ROUTER_WORKER"
READY_FD_ENV = "PINCH_ROUTER_READY_FD"  # the pipe a worker writes one byte to once it listens
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


# A slot whose worker dies before it listens this many times in a row stops the group.
MAX_STARTUP_FAILURES = 5
# Back-off before a slot's worker is started again, doubling per failure in a row (a start-up
# failure, or a death within QUICK_DEATH_SECONDS of listening), up to MAX_BACKOFF_SECONDS.
FIRST_BACKOFF_SECONDS = 0.25
MAX_BACKOFF_SECONDS = 10.0
QUICK_DEATH_SECONDS = 10.0


class _Slot:
    """One of the N workers: its process, whether it has said it listens, and its failures in a row."""

    def __init__(self) -> None:
        self.process: _Forked | None = None
        self.ready_fd: int | None = None
        self.ready_at: float | None = None
        self.startup_failures = 0
        self.quick_deaths = 0
        self.restart_at: float | None = None

    def poll_ready(self) -> None:
        """Read the worker's one-byte "listening" (its end of the pipe closes with it)."""
        if self.ready_fd is None or self.ready_at is not None:
            return
        try:
            said = os.read(self.ready_fd, 1)
        except BlockingIOError:
            return
        if said:
            self.ready_at = time.monotonic()
            self.startup_failures = 0
        self._close_pipe()

    def _close_pipe(self) -> None:
        if self.ready_fd is not None:
            os.close(self.ready_fd)
            self.ready_fd = None

    def died(self) -> float:
        """Count the death of its worker; the back-off before the next start."""
        self.poll_ready()  # it may have said so just before it died
        self._close_pipe()
        now = time.monotonic()
        if self.ready_at is None:
            self.startup_failures += 1
            failures = self.startup_failures
        else:
            self.quick_deaths = self.quick_deaths + 1 if now - self.ready_at < QUICK_DEATH_SECONDS else 0
            failures = self.quick_deaths
        self.process = None
        return 0.0 if failures == 0 else min(FIRST_BACKOFF_SECONDS * 2 ** (failures - 1), MAX_BACKOFF_SECONDS)


async def report_ready(_config: object) -> None:
    """In a worker, once it listens (a ``serve`` after-listening hook): tell the supervisor, one
    byte down the pipe it was given."""
    fd = int(os.environ.get(READY_FD_ENV, "-1") or -1)
    if fd < 0:
        return
    try:
        os.write(fd, b"1")
        os.close(fd)
    except OSError:
        pass
    os.environ.pop(READY_FD_ENV, None)


class _Forked:
    """A worker forked from the supervisor, seen as ``subprocess.Popen`` shows a child: ``pid``,
    ``poll()`` (its exit status once it exited, negative for a signal), ``send_signal``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, signum)


def _preload() -> None:
    """What every worker needs that ``serve`` imports only as it runs: imported once here, so a
    forked worker starts without importing anything (a restart in a fraction of a second, not
    the seconds the imports take on a busy machine)."""
    import router.server.registry  # noqa: F401  (the stages)

    try:
        import uvloop  # noqa: F401
    except ImportError:
        pass


def _become_worker(run: Callable[[list[str]], int], args: list[str], env: dict[str, str], close: list[int], mask: set[signal.Signals]) -> NoReturn:
    """In the forked child: the worker's own signal handling and environment, then ``serve``; never returns."""
    code = 1
    try:
        for fd in close:
            os.close(fd)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        # SIGHUP stays ignored until the worker installs its reload handler: a reload asked for while
        # it starts must not kill it (it reads the config as it starts, and its file watch sees an edit)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.environ.update(env)
        use_multiprocess_metrics()
        code = run(args)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def supervise(argv: Sequence[str], workers: int, port: int, run: Callable[[list[str]], int]) -> int:
    """Run ``workers`` serving processes until stopped; a worker that dies is started again.

    Each worker is forked from this process and runs ``run`` (the command line's ``main``) on
    :func:`worker_argv`: it loads the config file as it is then, as a single ``serve`` does.
    Returns the worst exit status once a signal stopped the group (every worker drained), or 1
    when a slot's worker failed to start :data:`MAX_STARTUP_FAILURES` times in a row.
    """
    metrics_dir = tempfile.mkdtemp(prefix="pinch-router-metrics-")
    env = {WORKER_ENV: "1", SUPERVISOR_ENV: str(os.getpid()), MULTIPROCESS_DIR_ENV: metrics_dir}
    args = worker_argv(argv, port)
    slots = [_Slot() for _ in range(workers)]
    _preload()

    def start(slot: _Slot) -> None:
        read, write = os.pipe()
        os.set_blocking(read, False)
        # no handler of the supervisor's may run in the child between the fork and its own handlers
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
        pid = os.fork()
        if pid == 0:
            others = [s.ready_fd for s in slots if s.ready_fd is not None]
            _become_worker(run, args, {**env, READY_FD_ENV: str(write)}, [read, *others], mask)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.close(write)
        slot.process = _Forked(pid)
        slot.ready_fd, slot.ready_at, slot.restart_at = read, None, None

    stop = {"signalled": False, "gave_up": False}
    codes: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if signum != signal.SIGHUP:
            stop["signalled"] = True
        for slot in slots:
            if slot.process is not None and slot.process.poll() is None:
                slot.process.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED}
    for slot in slots:
        start(slot)
    say(f"{workers} workers on port {port} (pids {', '.join(str(s.process.pid) for s in slots if s.process)})")
    try:
        while True:
            now = time.monotonic()
            for slot in slots:
                slot.poll_ready()
                process = slot.process
                if process is not None and (code := process.poll()) is not None:
                    mark_process_dead(process.pid, metrics_dir)  # its live gauges leave the sums
                    wait = slot.died()
                    if stop["signalled"] or stop["gave_up"]:
                        codes.append(abs(code))  # how it ended its drain: the group's status
                        continue
                    if slot.startup_failures >= MAX_STARTUP_FAILURES:
                        stop["gave_up"] = True
                        say(
                            f"a worker failed to start {MAX_STARTUP_FAILURES} times in a row (last {_exit(code)}; "
                            "its own line above says why); stopping the group"
                        )
                        for other in slots:
                            if other.process is not None and other.process.poll() is None:
                                other.process.send_signal(signal.SIGTERM)
                        continue
                    how = "before it was listening" if slot.startup_failures else "while serving"
                    say(f"worker {process.pid} {_exit(code)} {how}; starting another{f' in {wait:g} s' if wait else ''}")
                    slot.restart_at = now + wait
                if slot.process is None and slot.restart_at is not None and now >= slot.restart_at and not (stop["signalled"] or stop["gave_up"]):
                    start(slot)
                    say(f"worker {slot.process.pid} started")  # type: ignore[union-attr]
            if all(slot.process is None for slot in slots) and (stop["signalled"] or stop["gave_up"]):
                return 1 if stop["gave_up"] else max(codes, default=0)
            time.sleep(0.02)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for slot in slots:
            slot._close_pipe()
        shutil.rmtree(metrics_dir, ignore_errors=True)


def say(line: str) -> None:
    print(f"pinch-router: {line}", file=sys.stderr, flush=True)


def _exit(code: int) -> str:
    return f"was killed by {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals() else f"exited with status {code}"
