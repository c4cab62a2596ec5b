"""After a burst of large bodies a real ``serve`` process gives its memory back (issue #27, item 7;
issue #42, item 2: upstream answers that are not JSON, and the bodies kept for the next turn).

16 bodies of 30 MB (an agent's transcript of 600 messages, tool results of ~100 KB each), sent
at once; the ones beyond ``server.max_bodies_in_flight_mb`` get a 503 and are sent again after
its ``Retry-After``, as a client does, until every one was served. Then the proxy's resident
memory must be back within 25 % of what it was idle before, within 10 s. Before, it stayed at
~5× (369 MiB after an idle 75 MiB).
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import random

import aiohttp
import orjson
from aiohttp import web
from yarl import URL

from bench.harness import free_port, rss_kib
from tests.support.processes import mock_upstream, router, running, write_config
from tests.support.servers import loopback_server

BODIES = 16


LARGE_WINDOW_MODEL = {"name": "m", "provider": "mock", "upstream_model": "up", "context_window": 50_000_000, "max_output_tokens": 100, "tiers": [1, 2, 3], "supports": {"tools": True}}


@contextlib.asynccontextmanager
async def warm_proxy(tmp_path: Path, upstream_port: int, warm: bool = True) -> AsyncIterator[tuple[subprocess.Popen[bytes], str, aiohttp.ClientSession]]:
    """A real ``serve`` on ``upstream_port``'s mock with a model of a large window, warmed by a few small
    requests (they build what every later one reuses); yields the process, its chat URL and a client."""
    port = free_port()
    # (write_config gives the upstream a generous connect timeout: the proxy's loop, busy with 30 MB bodies
    # on a loaded machine, saw its loopback connect to the mock complete past the default 5 s)
    config = write_config(tmp_path, upstream_port, port, models=[LARGE_WINDOW_MODEL], logging={"level": "warning"})
    with running(router(["serve", "--config", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), port) as served:
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as http:
            for _ in range(5 if warm else 0):
                async with http.post(url, json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]}) as resp:
                    assert resp.status == 200
            await asyncio.sleep(1)
            yield served, url, http


def transcript_of_30_mb() -> bytes:
    messages: list[dict] = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "fix the bug"}]
    for k in range(300):
        messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": f"c{k}", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "cat f"}'}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"line of output {k}\n" * 5000})
    return orjson.dumps({"model": "auto", "messages": messages})


async def test_after_a_burst_of_large_bodies_the_proxy_is_back_near_its_idle_size(tmp_path: Path) -> None:
    body = transcript_of_30_mb()
    assert 28e6 < len(body) < 31.5e6
    with mock_upstream() as upstream_port:
        async with warm_proxy(tmp_path, upstream_port) as (served, url, http):
            idle = rss_kib(served.pid)
            peak, refused = idle, 0

            async def send() -> None:
                nonlocal refused
                while True:
                    async with http.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
                        await resp.read()
                        if resp.status == 200:
                            return
                        assert resp.status == 503 and resp.headers["Retry-After"] == "1", await resp.text()
                        refused += 1
                    await asyncio.sleep(1)

            async def watch() -> None:
                nonlocal peak
                while True:
                    peak = max(peak, rss_kib(served.pid))
                    await asyncio.sleep(0.05)

            watching = asyncio.create_task(watch())
            await asyncio.gather(*[send() for _ in range(BODIES)])
            watching.cancel()
            done = time.monotonic()
            after = [rss_kib(served.pid)]
            while after[-1] > idle * 1.25 and time.monotonic() - done < 10:
                await asyncio.sleep(0.25)
                after.append(rss_kib(served.pid))
            back_in = time.monotonic() - done
    print(
        f"RSS: idle {idle / 1024:.0f} MiB, peak {peak / 1024:.0f} MiB during {BODIES} × {len(body) / 1e6:.1f} MB "
        f"({refused} refused with 503 first), {after[0] / 1024:.0f} MiB as the last answer came, "
        f"{after[-1] / 1024:.0f} MiB {back_in:.1f} s later"
    )
    assert after[-1] <= idle * 1.25, (idle, peak, after)


async def settled_rss(pid: int, idle: int, within_seconds: float) -> list[int]:
    """RSS samples from now until it is within 25 % of ``idle`` or ``within_seconds`` passed."""
    done = time.monotonic()
    after = [rss_kib(pid)]
    while after[-1] > idle * 1.25 and time.monotonic() - done < within_seconds:
        await asyncio.sleep(0.5)
        after.append(rss_kib(pid))
    return after


async def test_upstream_answers_that_are_not_json_leave_nothing_behind(tmp_path: Path) -> None:
    """38 answers of 50 MB of HTML with a 200: each fails its attempt, and its body goes with it.
    Before, each failed attempt's frames (the body among them) stayed in a reference cycle through
    the kept exception, freed only by a garbage collection that an idle process never runs: 3.9 GiB."""
    page = b"<html>" + b"x" * (50 * 1024 * 1024) + b"</html>"

    async def answer(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=page, content_type="text/html")

    upstream = web.Application()
    upstream.router.add_post("/v1/chat/completions", answer)
    async with loopback_server(upstream) as upstream_url:
        async with warm_proxy(tmp_path, URL(upstream_url).port or 0, warm=False) as (served, url, http):
            idle = rss_kib(served.pid)
            gate = asyncio.Semaphore(4)

            async def send() -> int:
                async with gate, http.post(url, json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]}) as resp:
                    await resp.read()
                    return resp.status

            statuses = await asyncio.gather(*[send() for _ in range(38)])
            after = await settled_rss(served.pid, idle, within_seconds=60)
    print(f"RSS: idle {idle / 1024:.0f} MiB; after 38 non-JSON answers of 50 MB {after[0] / 1024:.0f} MiB, {after[-1] / 1024:.0f} MiB at the end")
    assert set(statuses) == {502}
    assert after[-1] <= idle * 1.25, (idle, after)


def agent_body(megabytes: float, seed: int) -> bytes:
    """An agent's transcript of about ``megabytes``, its tool results random text (no two alike)."""
    rng = random.Random(seed)
    messages: list[dict] = [{"role": "system", "content": f"be brief {seed}"}, {"role": "user", "content": "fix the bug"}]
    size, k = 0, 0
    while size < megabytes * 1e6:
        output = "".join(rng.choice("abcdefgh \n") for _ in range(2000)) * 25
        messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": f"c{k}", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "cat f"}'}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": output})
        size, k = size + len(output), k + 1
    return orjson.dumps({"model": "auto", "messages": messages})


async def test_after_a_burst_of_agent_sized_bodies_an_idle_proxy_gives_the_kept_ones_back(tmp_path: Path) -> None:
    """Default settings: the edges keep the last bodies (``server.resent_bodies_mb``) for the next turn;
    once the proxy is idle (``server.resent_bodies_idle_seconds``) they go. Before: 78 → 138 MiB for good."""
    bodies = [agent_body(random.Random(i).uniform(1, 5), i) for i in range(12)]
    with mock_upstream() as upstream_port:
        async with warm_proxy(tmp_path, upstream_port) as (served, url, http):
            idle = rss_kib(served.pid)
            end, sent = time.monotonic() + 10, 0

            async def client(i: int) -> None:
                nonlocal sent
                while time.monotonic() < end:
                    async with http.post(url, data=bodies[(i * 5 + sent) % len(bodies)], headers={"Content-Type": "application/json"}) as resp:
                        await resp.read()
                        assert resp.status == 200
                        sent += 1

            await asyncio.gather(*[client(i) for i in range(4)])
            after = await settled_rss(served.pid, idle, within_seconds=60)
    print(f"RSS: idle {idle / 1024:.0f} MiB; after {sent} bodies of 1-5 MB {after[0] / 1024:.0f} MiB, {after[-1] / 1024:.0f} MiB {len(after) / 2:.0f} s later")
    assert after[0] > idle * 1.25  # the bodies were kept while it was busy
    assert after[-1] <= idle * 1.25, (idle, after)
