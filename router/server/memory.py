"""Giving memory back to the system once a burst of large request bodies is over.

A parsed body takes ~4–5× its size while its request lives. Python frees it when the request
is done, but the C allocator (glibc's malloc) keeps most of what it freed for the process —
pages in the middle of its heap, and the large blocks it now serves from the heap instead of
fresh mappings (its mmap threshold rises as they are freed) — so after one burst of 30 MB bodies
the process stayed at 5× its idle size (75 MiB idle, 819 MiB at the peak, 369 MiB for good).

:class:`MemoryReturn` watches the bodies in flight (:class:`~router.http.request_body.BodyBudget`):
once at least ``after_bytes`` of large bodies (4 MB or more, :data:`~router.http.request_body.LARGE_BODY_BYTES`)
have been given back since it last acted and no large body is in flight any more, it calls glibc's
``malloc_trim(0)``, which hands every free page of every heap back to the system (a garbage
collection first freed nothing more: the proxy unlinks each request's objects so that reference
counting frees them). Measured on that burst: back to 79 MiB a second after it. Checked once a second; a trim
costs milliseconds and runs only after bursts. A burst's trim is followed by one more at the first check
that finds the process idle: a body's budget is given back as its handler returns, but its request
(the raw bytes aiohttp read) and its answer live until the answer is written, so a check between
the two trimmed before the last body was freed, and the process kept it (218 MiB of an idle 81 after
a burst of 30 MB bodies, until the idle spell's trim 30 s later). What no body budget sees grows the
process too — 38 upstream answers of 50 MB that were not JSON left 205 MiB of an idle 82 until the idle
spell's trim 30 s later — so the second check of an idle spell also trims when the resident size grew by
``after_bytes`` since the last trim (read from ``/proc/self/statm``: a few microseconds, once a spell).
Where the C library has no ``malloc_trim`` (musl, macOS) it does nothing.

The edges also keep the bodies they accepted last (``server.resent_bodies_mb`` each, parsed: ~5× that
in memory) for the next turn to resume from. Once the process has been idle — no request admitted
and none in flight — for ``server.resent_bodies_idle_seconds``, they are forgotten and the allocator
trimmed: after a burst of 1–5 MB bodies an idle proxy stayed at 138 MiB (78 before the burst). The
trim at the start of an idle spell also gives back what large upstream answers left in the heap.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
import time
from collections.abc import Callable

from router.http.request_body import BodyBudget
from router.translate.element_memo import forget_all

log = logging.getLogger("pinch_router.memory")

CHECK_SECONDS = 1.0
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
# Large bodies given back that make a burst worth a trim: two of the default 32 MB limit.
MEMORY_RETURN_AFTER_BYTES = 64 * 1024 * 1024


def resident_bytes() -> int | None:
    """This process's resident size, or None where ``/proc`` has none."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * PAGE_BYTES
    except (OSError, ValueError, IndexError):
        return None


def malloc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``, or None where the C library has none."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: trim(0)


class MemoryReturn:
    """Trims the allocator after a burst of large bodies (see the module doc)."""

    def __init__(self, budget: BodyBudget, after_bytes: int, quiet_bytes: int, idle_checks: int) -> None:
        """``after_bytes``: bodies given back that make a burst; ``quiet_bytes``: at most this much
        in flight counts as the burst being over (small requests go on meanwhile); ``idle_checks``:
        checks in a row with the process idle before the kept bodies are forgotten."""
        self.budget, self.after_bytes, self.quiet_bytes, self.idle_checks = budget, after_bytes, quiet_bytes, idle_checks
        self.trim = malloc_trim()
        self.resident = resident_bytes
        self.trimmed_at = self.resident()  # the resident size after the last trim (at the start: before any)
        self.seen = budget.released_large
        self.admitted = budget.reserved_count
        self.idle_for = 0  # checks in a row that found the process idle
        self.settle = False  # a burst was trimmed: trim once more when the process is first found idle
        self.trims = 0

    def check(self) -> bool:
        """Forget the kept bodies and trim as the process goes idle, or trim as a burst ends; whether it trimmed."""
        budget = self.budget
        idle = budget.held == 0 and budget.reserved_count == self.admitted
        self.admitted = budget.reserved_count
        self.idle_for = self.idle_for + 1 if idle else 0
        went_idle = self.idle_for == self.idle_checks  # once an idle spell, however long it lasts
        forgotten = sum(kept.clear() for kept in list(budget.kept)) if went_idle else 0
        if went_idle:  # the translations' memos hold the kept bodies' elements (and the chat views made of them)
            forget_all()
        burst_over = budget.released_large - self.seen >= self.after_bytes and budget.held <= self.quiet_bytes
        settled = idle and self.settle and not burst_over
        # the idle spell's second check (its requests' answers written, and freed, by then): grown since the last trim?
        grown = self.idle_for == 2 < self.idle_checks and self._grown()
        if self.trim is None or not (went_idle or burst_over or settled or grown):
            return False
        self.seen = budget.released_large
        self.settle = burst_over
        started = time.perf_counter()
        self.trim()
        self.trims += 1
        self.trimmed_at = self.resident()
        log.info("memory_returned", extra={"ms": round((time.perf_counter() - started) * 1000, 2), "forgotten_bytes": forgotten})
        return True

    def _grown(self) -> bool:
        resident, trimmed_at = self.resident(), self.trimmed_at
        return resident is not None and trimmed_at is not None and resident - trimmed_at >= self.after_bytes

    async def run(self) -> None:
        while True:
            await asyncio.sleep(CHECK_SECONDS)
            self.check()
