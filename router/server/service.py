"""`serve` as a service: start-up that explains itself, stopping that drains, reload without restart.

Start-up binds the port and opens the decision log *before* saying
"listening"; any failure there is one line naming the cause and the setting
(:class:`StartupError`, exit 2), never a traceback.

Stopping (SIGINT or SIGTERM): the listening socket closes at once, idle
connections close, and the requests in flight get ``server.drain_timeout_seconds``
in total. A second signal, or the end of that time, cuts the streams still open:
each client gets an SSE error event and ``[DONE]``, each row says why
(``stream_error``; a non-stream request still running is recorded as 503
``server_shutdown``, not as a client that left). The decision log is flushed last.
The drain never waits past its timeout: the last ``grace`` seconds of it are
kept for ending the streams and closing.

Nothing here writes to stderr once serving has begun except through the log
writer's queue, so a stderr nobody reads can never block the loop or the exit.

Reload: SIGHUP, or a change of the config file (polled each second, applied once
it has stopped changing for half a second), reloads it through
:meth:`router.server.live.LiveChain.reload`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from router.server.app import create_app
from router.config import Config
from router.clients.drain import OPEN_STREAMS_KEY
from router.observe.recorder import RECORDER_KEY
from router.server.live import LIVE_KEY
from router.observe.logs import LineWriter

log = logging.getLogger("pinch_router.service")

CONFIG_POLL_SECONDS = 1.0
CONFIG_SETTLE_SECONDS = 0.5
# At most this much of the drain timeout is kept for cutting the streams still open and closing.
CUT_GRACE_SECONDS = 0.5


class StartupError(Exception):
    """Serving could not start; the message is the one line the user sees."""


@dataclass(frozen=True)
class ServeOptions:
    config_path: Path
    host: str
    port: int
    # Applied to every loaded config, at start-up and on reload (places the state files).
    prepare: Callable[[Config], Config] = lambda config: config
    # Hooks run as the app starts (after its own); coroutines run once it listens.
    on_startup: tuple[Callable[[web.Application], Awaitable[None]], ...] = ()
    after_listening: tuple[Callable[[Config], Awaitable[None]], ...] = ()
    # A worker of `serve --workers N`: the port is shared with the other workers (SO_REUSEPORT).
    reuse_port: bool = False


def serve(config: Config, options: ServeOptions, console: LineWriter) -> int:
    """Run until stopped; 0 after a clean stop, 2 when start-up failed (the line is printed)."""
    try:
        with asyncio.Runner(loop_factory=event_loop_factory(config.server.event_loop)) as runner:
            return runner.run(Service(config, options, console).run())
    except StartupError as error:
        print(f"pinch-router: {error}", file=sys.stderr, flush=True)
        return 2


def event_loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """``server.event_loop``: uvloop's loop, or None (asyncio's own) when asked for or where uvloop is not installed.

    uvloop is the default because it runs the same requests on less CPU (README,
    Benchmarks). Where it cannot be imported (Windows), the standard loop serves
    and a warning says so.
    """
    if name != "uvloop":
        return None
    try:
        import uvloop
    except ImportError:
        log.warning("uvloop_unavailable", extra={"detail": "server.event_loop: uvloop, but uvloop is not installed; serving on asyncio's loop"})
        return None
    return uvloop.new_event_loop


class Service:
    def __init__(self, config: Config, options: ServeOptions, console: LineWriter) -> None:
        self.config = config
        self.options = options
        self.console = console
        self.stop_signals = 0
        self._stop = asyncio.Event()
        self._stop_now = asyncio.Event()
        self._background: list[asyncio.Task[None]] = []
        # The end of the drain timeout kept for cutting what is still open and closing.
        self.grace = min(CUT_GRACE_SECONDS, config.server.drain_timeout_seconds / 4)

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, self._on_stop_signal)
        app = await create_app(self.config)
        app.on_startup.extend(self.options.on_startup)
        # handler_cancellation: a client that goes away cancels its upstream request.
        runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=self.grace / 4)
        await self._start(runner)
        host, port = self.options.host, runner.addresses[0][1]  # the bound port, also when 0 asked for any
        print(f"pinch-router listening on http://{host}:{port} (config {self.options.config_path})", file=sys.stderr, flush=True)
        loop.add_signal_handler(signal.SIGHUP, self._reload, app, "SIGHUP")
        self._background.append(asyncio.create_task(self._watch_config(app), name="config-watch"))
        for check in self.options.after_listening:
            self._background.append(asyncio.create_task(check(self.config), name="start-up-checks"))
        await self._stop.wait()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self._drain(runner, app, self.config.server.drain_timeout_seconds)
        return 0

    async def _start(self, runner: web.AppRunner) -> None:
        try:
            await runner.setup()  # opens the decision log
        except (sqlite3.Error, OSError) as error:
            await _quietly(runner.cleanup())
            path = self.config.decision_log.path
            raise StartupError(f"cannot open the decision log {path}: {error} (set decision_log.path or --state-dir)") from None
        server = self.config.server
        ensure_open_files(server.max_connections + self.config.upstream.max_connections)
        # a burst of connections waits in the kernel's queue rather than being dropped (aiohttp's default is 128)
        site = web.TCPSite(runner, self.options.host, self.options.port, reuse_port=self.options.reuse_port or None, backlog=server.max_connections)
        try:
            await site.start()
        except OSError as error:
            await _quietly(runner.cleanup())
            raise StartupError(f"{cannot_listen(self.options.host, self.options.port, error)} (set server.port, --port or $PINCH_ROUTER_PORT)") from None

    def _on_stop_signal(self) -> None:
        self.stop_signals += 1
        (self._stop if self.stop_signals == 1 else self._stop_now).set()

    async def _drain(self, runner: web.AppRunner, app: web.Application, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        for site in list(runner.sites):
            await site.stop()  # no new connections from here on
        server = runner.server
        assert server is not None
        server.pre_shutdown()  # idle keep-alive connections close now, busy ones after their answer
        streams = app[OPEN_STREAMS_KEY]
        self.console.say(
            f"pinch-router: stopping; draining {_count(len(streams), 'stream')} "
            f"(up to {timeout:g} s; press Ctrl-C again to stop now)"
        )
        why = await self._wait_idle(server, started + timeout - self.grace)
        if why:
            app[RECORDER_KEY].cutting_at_shutdown = True
            cut = streams.cut(f"the proxy is stopping ({why}); the stream was cut")
            self.console.say(f"pinch-router: {why}: ending {_count(cut, 'stream')} with an error event")
            await self._wait_idle(server, loop.time() + self.grace / 2)
        await runner.cleanup()  # cancels what is left, then flushes the decision log
        log.info("stopped", extra={"seconds": round(loop.time() - started, 3), "cut": bool(why)})
        self.console.say("pinch-router: stopped")

    async def _wait_idle(self, server: web.Server, deadline: float) -> str:
        """Wait until no connection is busy; '' when none is, else why waiting ended."""
        loop = asyncio.get_running_loop()
        while server.connections:
            if self._stop_now.is_set():
                return "stopped by a second signal"
            left = deadline - loop.time()
            if left <= 0:
                return "drain timeout reached"
            try:
                await asyncio.wait_for(self._stop_now.wait(), min(left, 0.05))
            except TimeoutError:
                pass
        return ""

    def _reload(self, app: web.Application, trigger: str) -> None:
        log.info("config_reload", extra={"trigger": trigger, "path": str(self.options.config_path)})
        app[LIVE_KEY].reload(self.options.config_path, self.options.prepare)

    async def _watch_config(self, app: web.Application) -> None:
        """Reload when the config file changes; an editor's several writes count as one change."""
        path = self.options.config_path
        seen = _stamp(path)
        while True:
            await asyncio.sleep(CONFIG_POLL_SECONDS)
            stamp = _stamp(path)
            if stamp == seen:
                continue
            while True:  # let it settle
                await asyncio.sleep(CONFIG_SETTLE_SECONDS)
                settled = _stamp(path)
                if settled == stamp:
                    break
                stamp = settled
            seen = stamp
            self._reload(app, "config file changed")


# Besides the client and upstream connections: the decision log, Redis, the config, stderr, the loop's own.
SPARE_FILES = 128


def ensure_open_files(connections: int) -> None:
    """Raise the process's soft limit on open files to hold ``connections`` sockets and the rest
    (up to the hard limit, which only root can raise); a warning says when even that is short."""
    try:
        import resource
    except ImportError:  # not on Windows
        return
    needed = connections + SPARE_FILES
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < needed:
        log.warning(
            "open_files_limit",
            extra={"detail": f"the open-files limit is {soft}, below the {needed} that server.max_connections and upstream.max_connections need; lower them or raise the limit (ulimit -n)"},
        )


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


async def _quietly(cleanup: Awaitable[None]) -> None:
    try:
        await cleanup
    except Exception:  # start-up already failed: its one line says why, not this
        pass


def cannot_listen(host: str, port: int, error: OSError) -> str:
    """One line for a failed bind: ``cannot listen on 127.0.0.1:8787: address already in use``."""
    # asyncio's bind error repeats the address in its text; the errno's own words are the cause
    reason = error.strerror if isinstance(error, socket.gaierror) else os.strerror(error.errno) if error.errno else str(error)
    return f"cannot listen on {host}:{port}: {str(reason).lower()}"
