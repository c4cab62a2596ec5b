"""After a burst of large bodies a real ``serve`` process gives its memory back (issue #27, item 7).

16 bodies of 30 MB (an agent's transcript of 600 messages, tool results of ~100 KB each), sent
at once; the ones beyond ``server.max_bodies_in_flight_mb`` get a 503 and are sent again after
its ``Retry-After``, as a client does, until every one was served. Then the proxy's resident
memory must be back within 25 % of what it was idle before, within 10 s. Before, it stayed at
~5× (369 MiB after an idle 75 MiB).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import aiohttp
import orjson

from bench.harness import free_port, rss_kib
from tests.support.processes import mock_upstream, router, running, write_config

BODIES = 16


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
        port = free_port()
        model = {"name": "m", "provider": "mock", "upstream_model": "up", "context_window": 50_000_000, "max_output_tokens": 100, "tiers": [1, 2, 3], "supports": {"tools": True}}
        config = write_config(tmp_path, upstream_port, port, models=[model], logging={"level": "warning"})
        with running(router(["serve", "--config", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), port) as served:
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as http:
                for _ in range(5):  # warm: the first requests build what every later one reuses
                    async with http.post(url, json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]}) as resp:
                        assert resp.status == 200
                await asyncio.sleep(1)
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
