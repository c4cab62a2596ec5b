"""Two real proxy processes sharing session state on a real redis-server (started here, loopback).

One session alternating between the replicas is classified once and gets the same
pinched bytes from both — also behind nginx running the shipped deploy/nginx.conf;
failed outcomes reported to either escalate on both; an
outcome is accepted by the replica that did not serve the request. Then the faults:
Redis stopped, back, and paused (SIGSTOP) — no request fails, and none waits much
past the per-call timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from bench.harness import ROOT, free_port, wait_for_port
from router.tools.mock_upstream import MockUpstream
from tests.support.factories import assistant, system, tool, user
from tests.support.processes import redis_server_binary, router, running, start_redis, write_config

pytestmark = pytest.mark.skipif(redis_server_binary() is None, reason="redis-server is not installed (.ci/run installs it)")

TIMEOUT_MS = 250  # the default, for the fault tests
# Where sharing itself is tested, a slow call on a machine busy with other tests must not
# open the breaker and turn the test into a fault test.
GENEROUS_TIMEOUT_MS = 3000
CLASSIFIER_JSON = '{"category": "coding_general", "tier": 2, "required_context_tokens": 4000}'


def shared_config(directory: Path, upstream_port: int, proxy_port: int, redis_port: int, relevance: bool, timeout_ms: int) -> Path:
    """The classifier, the classification cache and the pinch ledger, state on Redis; tier 2 → mid, 3 → top.

    With ``relevance``, pinch-relevance too, on the mock's Ollama embeddings, and every request pruned
    afresh (no ledger): each one over the budget is ranked then, not only those that make a batch.
    """
    upstream = f"http://127.0.0.1:{upstream_port}/v1"
    ranking = {"ledger": False, "relevance": {"enabled": True, "api": "ollama", "base_url": upstream, "model": "emb"}} if relevance else {}
    model = {"provider": "mock", "upstream_model": "up", "context_window": 16_000, "max_output_tokens": 100, "supports": {"tools": True}}
    return write_config(
        directory,
        upstream_port,
        proxy_port,
        middlewares=[
            "session-fingerprint",
            "classification-cache",
            "classifier",
            *(["pinch-relevance"] if relevance else []),
            "pinch-prune",
            "capability-gate",
            "upstream-forward",
        ],
        providers={"mock": {"base_url": f"http://127.0.0.1:{upstream_port}/v1", "api": "ollama"}},
        models=[{"name": "mid", "tiers": [1, 2], **model}, {"name": "top", "tiers": [3], **model}],
        routing={"categories": {"coding_general": "code"}, "tiers": [1, 2, 3], "fallback_category": "coding_general", "fallback_tier": 2},
        classifier={"provider": "mock", "model": "tiny"},
        session_cache={"enabled": True},
        pinch={"enabled": True, "budget_tokens": 1500, "keep_last_turns": 1, "max_summarize_chars": 400, **ranking},
        escalation={"failures": 2, "window_minutes": 10},
        state={"backend": "redis", "redis": {"url": f"redis://127.0.0.1:{redis_port}/0", "timeout_ms": timeout_ms, "retry_seconds": 0.2}},
        decision_log={"path": str(directory / "decisions.sqlite3")},
    )


def transcript(turns: int) -> list[dict[str, Any]]:
    """An agent session ``turns`` tool rounds long; every tool result is large enough to be pinched."""
    messages = [system("You are a coding agent."), user("Fix the failing test in parser.py")]
    for i in range(turns):
        messages += [assistant(calls=[(f"c{i}", "read_file", orjson.dumps({"path": f"f{i}.py"}).decode())]), tool(f"c{i}", f"line {i}\n" * 1000)]
    return messages


@contextlib.contextmanager
def redis_on(port: int) -> Iterator[subprocess.Popen[bytes]]:
    with running(start_redis(port), port) as process:
        yield process


@contextlib.asynccontextmanager
async def recording_upstream() -> AsyncIterator[tuple[MockUpstream, int]]:
    """The mock upstream in this process, so the test reads every request the replicas sent."""
    mock = MockUpstream()
    runner = web.AppRunner(mock.app())
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield mock, port
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def replicas(
    tmp_path: Path, upstream_port: int, redis_port: int, relevance: bool = False, timeout_ms: int = GENEROUS_TIMEOUT_MS
) -> AsyncIterator[list[str]]:
    """Two `pinch-router serve` processes on one Redis; yields their base URLs."""
    urls, stack = [], contextlib.ExitStack()
    with stack:
        for name in ("a", "b"):
            directory = tmp_path / name
            directory.mkdir()
            port = free_port()
            config = shared_config(directory, upstream_port, port, redis_port, relevance, timeout_ms)
            log = (directory / "proxy.log").open("wb")
            stack.callback(log.close)
            process = router(["serve", "--config", str(config), "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
            stack.enter_context(running(process))
            urls.append(f"http://127.0.0.1:{port}")
        for url in urls:
            wait_for_port(int(url.rsplit(":", 1)[1]), 30)
        yield urls


async def chat(http: aiohttp.ClientSession, url: str, messages: list[dict[str, Any]], session: str = "s1") -> aiohttp.ClientResponse:
    body = {"model": "auto", "messages": messages}
    async with http.post(f"{url}/v1/chat/completions", json=body, headers={"x-router-session": session}) as response:
        response.content_text = (await response.read()).decode()  # type: ignore[attr-defined]
        return response


async def fallback_total(http: aiohttp.ClientSession, url: str) -> float:
    async with http.get(f"{url}/metrics") as response:
        text = await response.text()
    match = re.search(r"^pinch_router_state_backend_fallback_total (\S+)$", text, re.M)
    assert match is not None, "the fallback counter is exported"
    return float(match.group(1))


async def health(http: aiohttp.ClientSession, url: str) -> tuple[int, dict[str, Any]]:
    async with http.get(f"{url}/healthz") as response:
        return response.status, orjson.loads(await response.read())


async def until_healthy(http: aiohttp.ClientSession, url: str, seconds: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while True:
        _, body = await health(http, url)
        if body["status"] == "ok" or time.monotonic() > deadline:
            return body
        await asyncio.sleep(0.05)


async def test_a_session_alternating_between_replicas_is_classified_once_and_pinched_identically(tmp_path: Path) -> None:
    redis_port = free_port()
    with redis_on(redis_port):
        async with recording_upstream() as (mock, upstream_port), replicas(tmp_path, upstream_port, redis_port) as (a, b):
            async with aiohttp.ClientSession() as http:
                sources = []
                for turn in range(2, 8):  # one turn per request, the replica switching every time
                    response = await chat(http, (a, b)[turn % 2], transcript(turn), session="alternating")
                    assert response.status == 200, response.content_text  # type: ignore[attr-defined]
                    sources.append(response.headers["x-router-source"])
                    assert int(response.headers["x-router-pinch-saved"]) > 0
                classifier_calls = sum(1 for r in mock.received if r.path == "/api/chat")
                alternating = [r.body["messages"] for r in mock.received if r.path == "/v1/chat/completions"]
                mock.received.clear()
                for turn in range(2, 8):  # the same session on one replica: what a single proxy sends
                    assert (await chat(http, a, transcript(turn), session="one-replica")).status == 200
                one_replica = [r.body["messages"] for r in mock.received if r.path == "/v1/chat/completions"]
    assert sources == ["classifier"] + ["cached"] * 5
    assert classifier_calls == 1
    assert len(alternating) == len(one_replica) == 6
    for turn, (sent, reference) in enumerate(zip(alternating, one_replica, strict=True), start=2):
        assert orjson.dumps(sent) == orjson.dumps(reference), f"turn {turn}"


def nginx_binary() -> str | None:
    """``nginx`` (.ci/run installs it; Debian puts it in /usr/sbin, not on every user's PATH), else None."""
    return shutil.which("nginx", path=f"{os.environ.get('PATH', '')}:/usr/sbin")


def loopback_nginx_conf(directory: Path, listen_port: int, replica_ports: list[int]) -> Path:
    """deploy/nginx.conf with only its Docker specifics swapped: the replicas on loopback, not found by
    Docker's DNS; the listening port; temporary files and logs here. Each swapped line must be there."""
    text = (ROOT / "deploy" / "nginx.conf").read_text()
    temp = "".join(f"    {kind}_temp_path {directory / kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    swaps = {
        "    resolver 127.0.0.11 valid=10s ipv6=off;\n": "",
        "        server pinch-router:8787 resolve;\n": "".join(f"        server 127.0.0.1:{port};\n" for port in replica_ports),
        "listen 8080;": f"listen 127.0.0.1:{listen_port};",
        "http {\n": f"http {{\n    access_log off;\n{temp}",
    }
    for shipped, here in swaps.items():
        assert text.count(shipped) == 1, f"deploy/nginx.conf changed: {shipped!r}"
        text = text.replace(shipped, here)
    path = directory / "nginx.conf"
    path.write_text(text)
    return path


async def requests_served(http: aiohttp.ClientSession, url: str) -> float:
    async with http.get(f"{url}/metrics") as response:
        text = await response.text()
    return sum(float(v) for v in re.findall(r'^pinch_router_requests_total\{[^}]*status="200"[^}]*\} (\S+)$', text, re.M))


@pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed (.ci/run installs it)")
async def test_behind_the_shipped_nginx_config_a_session_spread_over_both_replicas_is_classified_once(tmp_path: Path) -> None:
    redis_port, port = free_port(), free_port()
    with redis_on(redis_port):
        async with recording_upstream() as (mock, upstream_port), replicas(tmp_path, upstream_port, redis_port) as urls:
            conf = loopback_nginx_conf(tmp_path, port, [int(url.rsplit(":", 1)[1]) for url in urls])
            binary = nginx_binary()
            assert binary is not None
            # one process, as the invoking user: no master, no switch to nginx's own user
            args = [binary, "-p", str(tmp_path), "-c", str(conf), "-e", str(tmp_path / "nginx-error.log"), "-g", f"daemon off; master_process off; pid {tmp_path / 'nginx.pid'};"]
            with running(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), port):
                async with aiohttp.ClientSession() as http:
                    sources = []
                    for turn in range(2, 8):
                        response = await chat(http, f"http://127.0.0.1:{port}", transcript(turn), session="behind-nginx")
                        assert response.status == 200, response.content_text  # type: ignore[attr-defined]
                        sources.append(response.headers["x-router-source"])
                    served = [await requests_served(http, url) for url in urls]
    assert sum(1 for r in mock.received if r.path == "/api/chat") == 1
    assert sources == ["classifier"] + ["cached"] * 5
    assert served == [3, 3]  # nginx's round robin: the session alternated between the replicas


async def test_a_replica_never_embeds_again_what_the_other_embedded_for_the_session(tmp_path: Path) -> None:
    redis_port = free_port()
    with redis_on(redis_port):
        async with recording_upstream() as (mock, upstream_port), replicas(tmp_path, upstream_port, redis_port, relevance=True) as (a, b):
            async with aiohttp.ClientSession() as http:
                assert (await chat(http, a, transcript(4))).status == 200
                by_a = {text for r in mock.received if r.path == "/api/embed" for text in r.body["input"]}
                mock.received.clear()
                assert (await chat(http, b, transcript(5))).status == 200
                by_b = {text for r in mock.received if r.path == "/api/embed" for text in r.body["input"]}
    assert len(by_a) >= 3  # the task and the old tool results
    assert by_b and not by_b & by_a  # only what the new turn added


async def test_failed_outcomes_reported_to_either_replica_escalate_on_both(tmp_path: Path) -> None:
    redis_port = free_port()
    with redis_on(redis_port):
        async with recording_upstream() as (_, upstream_port), replicas(tmp_path, upstream_port, redis_port) as (a, b):
            async with aiohttp.ClientSession() as http:
                served_by_a = await chat(http, a, transcript(1))
                served_by_b = await chat(http, b, transcript(1))
                assert (served_by_a.headers["x-router-tier"], served_by_b.headers["x-router-tier"]) == ("2", "2")
                # each replica is told about the request the *other* one served
                for url, served in ((b, served_by_a), (a, served_by_b)):
                    async with http.post(f"{url}/v1/outcome", json={"request_id": served.headers["x-router-request-id"], "success": False}) as r:
                        assert (r.status, (await r.json())["recorded"]) == (200, True)
                after = [await chat(http, url, transcript(2)) for url in (a, b)]
    assert [(r.headers["x-router-tier"], r.headers["x-router-model"]) for r in after] == [("3", "top"), ("3", "top")]


async def test_redis_stopped_mid_run_fails_no_request_and_recovery_needs_no_restart(tmp_path: Path) -> None:
    redis_port = free_port()
    redis = start_redis(redis_port)
    wait_for_port(redis_port, 10, redis)
    try:
        # a killed Redis refuses at once: the generous timeout keeps a busy machine from tripping the breaker early
        async with recording_upstream() as (mock, upstream_port), replicas(tmp_path, upstream_port, redis_port) as (a, b):
            async with aiohttp.ClientSession() as http:
                assert (await chat(http, a, transcript(1))).status == 200
                assert await health(http, a) == (200, {"status": "ok"})
                before = await fallback_total(http, a)
                redis.send_signal(signal.SIGKILL)
                redis.wait(5)
                statuses = [(await chat(http, url, transcript(2), session=f"down{i}")).status for i, url in enumerate((a, b, a, b))]
                assert statuses == [200] * 4
                assert await fallback_total(http, a) > before
                status, body = await health(http, a)
                assert (status, body["status"]) == (200, "degraded")
                assert f"127.0.0.1:{redis_port}" in body["problems"][0]

                redis = start_redis(redis_port)  # the same address: the replicas reconnect on their own
                wait_for_port(redis_port, 10, redis)
                assert await until_healthy(http, a) == {"status": "ok"}
                assert await until_healthy(http, b) == {"status": "ok"}
                classified = sum(1 for r in mock.received if r.path == "/api/chat")
                first, second = await chat(http, a, transcript(1), session="back"), await chat(http, b, transcript(2), session="back")
                assert (first.headers["x-router-source"], second.headers["x-router-source"]) == ("classifier", "cached")
                assert sum(1 for r in mock.received if r.path == "/api/chat") == classified + 1
    finally:
        if redis.poll() is None:
            redis.kill()
            redis.wait(5)


async def test_a_paused_redis_adds_at_most_the_timeout_to_each_request(tmp_path: Path) -> None:
    redis_port = free_port()
    with redis_on(redis_port) as redis:
        async with recording_upstream() as (_, upstream_port), replicas(tmp_path, upstream_port, redis_port, timeout_ms=TIMEOUT_MS) as (a, b):
            async with aiohttp.ClientSession() as http:
                await chat(http, a, transcript(1))
                redis.send_signal(signal.SIGSTOP)
                try:
                    took = []
                    for i, url in enumerate((a, b, a, b)):
                        started = time.monotonic()
                        response = await chat(http, url, transcript(2), session=f"paused{i}")
                        took.append(time.monotonic() - started)
                        assert response.status == 200
                    status, body = await health(http, b)
                    assert (status, body["status"]) == (200, "degraded")
                finally:
                    redis.send_signal(signal.SIGCONT)
                # a correctness bound, not a benchmark: one timeout per request at most, plus slack for a busy machine
                assert max(took) < TIMEOUT_MS / 1000 + 1.0, took
                assert await until_healthy(http, a) == {"status": "ok"}
