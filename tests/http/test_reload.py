"""Reload without restart: SIGHUP or a changed file swaps the chain; requests in flight finish on the old one."""

from __future__ import annotations

import pytest

import asyncio
import signal
import sqlite3
import subprocess
from pathlib import Path

import aiohttp
import orjson
import yaml
from prometheus_client.parser import text_string_to_metric_families

from bench.harness import free_port
from router.config import Config
from router.core.config_diff import changed_paths
from router.server.live import LIVE_KEY, load_serving_config
from tests.support.config import chat_body, model_entry
from tests.support.processes import mock_upstream, router, running, write_config

CHAT = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}


def rename_model(path: Path, name: str, **server) -> None:
    config = yaml.safe_load(path.read_text())
    config["models"][0]["name"] = name
    config["server"].update(server)
    path.write_text(yaml.safe_dump(config))


async def metrics(http: aiohttp.ClientSession, port: int) -> dict[str, list]:
    async with http.get(f"http://127.0.0.1:{port}/metrics") as resp:
        text = await resp.text()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


async def served_by(http: aiohttp.ClientSession, port: int) -> str:
    async with http.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=CHAT) as resp:
        assert resp.status == 200
        return resp.headers["x-router-model"]


async def served_is(http: aiohttp.ClientSession, port: int, name: str) -> bool:
    return await served_by(http, port) == name


async def eventually(check, seconds: float = 8.0):
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        result = await check()
        if result or asyncio.get_running_loop().time() > deadline:
            return result
        await asyncio.sleep(0.2)


@pytest.mark.system  # starts a process
async def test_sighup_mid_stream_old_stream_completes_next_request_uses_new_config_invalid_file_keeps_it(tmp_path: Path):
    with mock_upstream(event_delay=0.15, words=20) as upstream_port:  # a 3 s stream
        port = free_port()
        path = write_config(tmp_path, upstream_port, port, model="before")
        log = tmp_path / "proxy.log"
        with log.open("wb") as log_file, running(router(["serve", "--config", str(path)], stderr=log_file, stdout=subprocess.DEVNULL), port) as proxy:
            async with aiohttp.ClientSession() as http:
                before = await metrics(http, port)
                stream = await http.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={**CHAT, "stream": True})
                assert stream.headers["x-router-model"] == "before"
                await stream.content.readuntil(b"\n\n")

                rename_model(path, "after", port=free_port())  # the port change needs a restart
                proxy.send_signal(signal.SIGHUP)
                await asyncio.sleep(0.3)
                assert await served_by(http, port) == "after"  # a new request: the new chain
                async with http.get(f"http://127.0.0.1:{port}/v1/models") as resp:
                    assert [m["id"] for m in (await resp.json())["data"]] == ["after", "auto"]
                rest = await stream.read()  # the request in flight: finished on the old chain
                assert rest.endswith(b"data: [DONE]\n\n") and b"w19" in rest and b"error" not in rest
                reloaded = await metrics(http, port)

                path.write_text("models: [not, a, model]\n")
                proxy.send_signal(signal.SIGHUP)
                await asyncio.sleep(0.3)
                failed = await metrics(http, port)
                assert await served_by(http, port) == "after"  # the invalid file changed nothing

                write_config(tmp_path, upstream_port, port, model="edited")  # no signal this time: the file watch reloads
                assert await eventually(lambda: served_is(http, port, "edited"))
            proxy.send_signal(signal.SIGTERM)
            assert proxy.wait(15) == 0
    hash_before = before["pinch_router_config_info"][0].labels["config_hash"]
    hash_after = reloaded["pinch_router_config_info"][0].labels["config_hash"]
    assert hash_before != hash_after and len(reloaded["pinch_router_config_info"]) == 1
    assert reloaded["pinch_router_config_last_reload_successful"][0].value == 1
    assert failed["pinch_router_config_last_reload_successful"][0].value == 0
    assert failed["pinch_router_config_info"][0].labels["config_hash"] == hash_after  # still serving that one
    assert (
        reloaded["pinch_router_config_last_reload_success_timestamp_seconds"][0].value
        > before["pinch_router_config_last_reload_success_timestamp_seconds"][0].value
    )
    text = log.read_text()
    assert '"event":"config_reloaded"' in text and '"changed":["models"]' in text
    assert '"event":"config_change_needs_restart"' in text and '"key":"server.port"' in text
    assert '"event":"config_reload_failed"' in text and "models[0]" in text
    with sqlite3.connect(tmp_path / "decisions.sqlite3") as conn:
        streamed = conn.execute("SELECT model FROM decisions WHERE stream = 1").fetchall()
    assert streamed == [("before",)]


def test_changed_paths_name_each_changed_key_and_treat_lists_as_one_value():
    old = {"server": {"host": "a", "port": 1}, "models": [{"name": "x"}], "pinch": {"relevance": {"enabled": False}}}
    new = {"server": {"host": "a", "port": 2}, "models": [{"name": "y"}], "pinch": {"relevance": {"enabled": True}}, "extra": 1}
    assert changed_paths(old, new) == ("server.port", "models", "pinch.relevance.enabled", "extra")
    assert changed_paths(old, old) == ()


# --- in process: what a reload carries over, and what it refuses ---


def classified_config(path: Path, upstream_url: str, **routing) -> Config:
    raw = {
        "middlewares": ["session-fingerprint", "classification-cache", "classifier", "capability-gate", "upstream-forward"],
        "providers": {"mock": {"base_url": upstream_url}},
        "models": [model_entry("main")],
        "classifier": {"provider": "mock", "model": "small"},
        "session_cache": {"enabled": True},
        "routing": routing,
        "decision_log": {"path": ":memory:"},
    }
    path.write_text(yaml.safe_dump(raw))
    return load_serving_config(path)


async def source_of_turn(client) -> str:
    resp = await client.post("/v1/chat/completions", json=chat_body("fix the bug"), headers={"x-session-id": "s1"})
    assert resp.status == 200
    return resp.headers["x-router-source"]


async def test_a_reload_keeps_each_sessions_cached_classification(proxy, mock_upstream, tmp_path: Path):
    _, url = mock_upstream
    path = tmp_path / "config.yaml"
    client = await proxy(classified_config(path, url))
    assert await source_of_turn(client) == "classifier"
    classified_config(path, url, min_tool_proficiency=0.1)  # an unrelated change
    assert client.server.app[LIVE_KEY].reload(path).changed == ("routing.min_tool_proficiency",)
    assert await source_of_turn(client) == "cached"  # not reclassified: the session's model does not flip


async def test_a_reload_that_changes_the_categories_drops_the_cached_classifications(proxy, mock_upstream, tmp_path: Path):
    _, url = mock_upstream
    path = tmp_path / "config.yaml"
    client = await proxy(classified_config(path, url))
    assert await source_of_turn(client) == "classifier"
    categories = {"coding_general": "code", "debugging": "bugs", "docs_writing": "prose", "review": "reviewing"}
    classified_config(path, url, categories=categories)
    assert client.server.app[LIVE_KEY].reload(path).ok
    assert await source_of_turn(client) == "classifier"


async def test_a_reload_of_the_routing_settings_reaches_the_gate_and_the_override_check(proxy, mock_upstream, tmp_path: Path):
    """capability-gate and classifier read the routing settings once per generation: the next one has the new values."""
    _, url = mock_upstream
    path = tmp_path / "config.yaml"
    client = await proxy(classified_config(path, url))
    with_tools = chat_body("rename the helper", tools=[{"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}])
    review = {"x-router-category": "review", "x-router-tier": "2"}

    async def answer(body: dict, headers: dict[str, str] | None = None) -> tuple[int, str]:
        resp = await client.post("/v1/chat/completions", json=body, headers=headers or {})
        payload = await resp.json()
        return resp.status, payload.get("error", {}).get("code", "") or resp.headers.get("x-router-category", "")

    assert await answer(with_tools) == (200, "coding_general")
    assert await answer(chat_body("review this"), review) == (400, "invalid_override")
    categories = {"coding_general": "code", "debugging": "bugs", "docs_writing": "prose", "review": "reviewing"}
    classified_config(path, url, min_tool_proficiency=0.9, categories=categories)  # the model's proficiency is 0.6
    assert client.server.app[LIVE_KEY].reload(path).ok
    assert await answer(with_tools) == (400, "no_capable_model")
    assert await answer(chat_body("review this"), review) == (200, "review")


async def test_a_reload_with_an_unusable_chain_keeps_the_running_one(proxy, mock_upstream, tmp_path: Path):
    _, url = mock_upstream
    path = tmp_path / "config.yaml"
    client = await proxy(classified_config(path, url))
    raw = yaml.safe_load(path.read_text())
    raw["middlewares"] = ["capability-gate", "session-fingerprint", "upstream-forward"]
    path.write_text(yaml.safe_dump(raw))
    result = client.server.app[LIVE_KEY].reload(path)
    assert not result.ok and "capability-gate" in result.error
    assert await source_of_turn(client) == "classifier"  # the old chain, classifier included, still serves


async def test_a_reload_keeps_each_sessions_pinch_ledger_so_its_prompt_prefix_stays_the_same(proxy, mock_upstream, tmp_path: Path):
    from tests.stages.test_pinch_prune import URL, FakeClock, pinch_config, session

    mock, url = mock_upstream
    path = tmp_path / "config.yaml"
    config = pinch_config(url, budget_tokens=4000).model_dump(mode="json", exclude_unset=True)
    path.write_text(yaml.safe_dump(config))
    clock = FakeClock()
    client = await proxy(load_serving_config(path), clock=clock)
    assert (await client.post(URL, json={"model": "auto", "messages": session(6)})).status == 200
    sent_first = mock.received[-1].body["messages"]

    config["routing"] = {"min_tool_proficiency": 0.1}  # an unrelated change
    path.write_text(yaml.safe_dump(config))
    assert client.server.app[LIVE_KEY].reload(path).changed == ("routing.min_tool_proficiency",)
    clock.advance(10)  # the next turn, cache warm
    assert (await client.post(URL, json={"model": "auto", "messages": session(10)})).status == 200
    sent_second = mock.received[-1].body["messages"]
    # the same bytes for every old result: the ledger outlived the reload (a lost one would batch afresh)
    assert orjson.dumps(sent_second[: len(sent_first)]) == orjson.dumps(sent_first)
