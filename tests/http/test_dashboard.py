"""The dashboard under /ui/ (issue #46), in-process: its pages need no key and load nothing from
elsewhere; its figures under /ui/api/ take the client keys as every endpoint does — a user key sees
its own sessions and requests only, another's answered as ones that do not exist — and equal the
decision rows the requests through the proxy left."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from router.http.dashboard import ASSETS, PAGE_FILES
from router.server.live import LIVE_KEY
from tests.support.config import chat_body, make_config, model_entry

URL = "/v1/chat/completions"
ALICE, BOB, ADMIN = "alice-key-0123456789", "bob-key-9876543210", "ops-key-5555555555"
KEYS = [{"name": "alice", "key": ALICE}, {"name": "bob", "key": BOB}, {"name": "ops", "key": ADMIN, "role": "admin"}]
PRICE = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}
OPUS = {"input": 15.0, "output": 75.0}
# uPlot as vendored (docs/decisions.md): the npm package's dist/uPlot.iife.min.js and dist/uPlot.min.css of 1.6.32
UPLOT_VERSION = "1.6.32"
UPLOT_SHA256 = {
    "vendor/uPlot.iife.min.js": "19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f",
    "vendor/uPlot.min.css": "df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04",
}


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def dashboard_config(url: str, **sections: Any):
    return make_config(
        url,
        models=[model_entry("main", cost_per_mtok=PRICE)],
        dashboard={"reference_prices": {"claude-opus-4": OPUS}, "reference_model": "claude-opus-4"},
        **sections,
    )


async def send(client, key: str | None, session: str, text: str = "fix the failing test", **body: Any) -> dict[str, str]:
    headers = {"x-session-id": session, **(auth(key) if key else {})}
    response = await client.post(URL, json=chat_body(text, **body), headers=headers)
    assert response.status == 200, await response.text()
    return dict(response.headers)


async def get(client, path: str, api_key: str | None = None, **query: str) -> Any:
    response = await client.get(path, params=query, headers=auth(api_key) if api_key else {})
    assert response.status == 200, await response.text()
    return await response.json()


# ---- the pages ----------------------------------------------------------------------------------------------


async def test_the_pages_need_no_key_and_say_where_everything_may_come_from(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(dashboard_config(url, server={"api_keys": KEYS}))
    for name in PAGE_FILES:
        response = await client.get("/ui/" + name)
        assert response.status == 200, name
        assert await response.read() == (ASSETS / PAGE_FILES[name]).read_bytes()
        csp = response.headers["Content-Security-Policy"]
        assert "default-src 'none'" in csp and "connect-src 'self'" in csp and "script-src 'self'" in csp
        assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert (await client.get("/ui/")).content_type == "text/html"
    assert (await client.get("/ui/dashboard.js")).content_type == "text/javascript"  # a module needs a JS type
    moved = await client.get("/ui", allow_redirects=False)
    assert (moved.status, moved.headers["Location"]) == (308, "/ui/")
    assert (await client.get("/ui/nothing-here.js")).status == 401  # not a page: as any other path, a key first


async def test_the_access_check_needs_no_key_and_every_figure_does(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(dashboard_config(url, server={"api_keys": KEYS}))
    assert await get(client, "/ui/api/access") == {"keys": True}
    for path in ("viewer", "overview", "sessions", "session?key=x", "decision?id=x", "health"):
        refused = await client.get(f"/ui/api/{path}")
        assert refused.status == 401, path
        assert (await client.get(f"/ui/api/{path}", headers=auth("not-a-key"))).status == 401
    # a key in the URL is no key
    assert (await client.get("/ui/api/overview", params={"key": ALICE})).status == 401


def test_every_file_the_page_loads_is_in_the_package_and_none_comes_from_another_host():
    html = (ASSETS / "index.html").read_text()
    loaded = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sorted(u for u in loaded if not u.startswith(("#", "data:"))) == sorted(n for n in PAGE_FILES if n and not n.endswith("LICENSE"))
    for name in ("index.html", "dashboard.css", "dashboard.js"):
        text = (ASSETS / name).read_text()
        assert not re.search(r"https?:|//[a-z]|@import|url\(", text), name
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert '"http/dashboard_ui/*"' in pyproject and '"http/dashboard_ui/vendor/*"' in pyproject


def test_the_vendored_chart_library_is_the_pinned_uplot_with_its_licence():
    for name, digest in UPLOT_SHA256.items():
        assert hashlib.sha256((ASSETS / name).read_bytes()).hexdigest() == digest, name
    assert (ASSETS / "vendor/uPlot.iife.min.js").read_text().startswith(f"/*! https://github.com/leeoniya/uPlot (v{UPLOT_VERSION}) */")
    licence = (ASSETS / "vendor/uPlot.LICENSE").read_text()
    assert "The MIT License (MIT)" in licence and "Leon Sorokin" in licence


async def test_a_disabled_dashboard_serves_nothing(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(make_config(url, dashboard={"enabled": False}))
    for path in ("/ui/", "/ui/dashboard.js", "/ui/api/access", "/ui/api/overview"):
        response = await client.get(path)
        assert response.status == 404, path
        assert (await response.json())["error"]["code"] == "dashboard_disabled"


async def test_without_the_decision_log_the_figures_say_why(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(make_config(url, decision_log={"enabled": False}))
    response = await client.get("/ui/api/overview")
    assert response.status == 404
    assert (await response.json())["error"]["code"] == "decision_log_disabled"


async def test_an_unknown_window_is_a_400_naming_the_parameter(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    response = await client.get("/ui/api/overview", params={"window": "year"})
    assert response.status == 400
    assert (await response.json())["error"]["param"] == "window"


# ---- the figures --------------------------------------------------------------------------------------------


def bill(row: dict[str, Any], price: dict[str, float]) -> float:
    """A row's dollars written out: the uncached prompt, cache reads and writes, the answer."""
    cached, written = row["cached_tokens"] or 0, row["cache_write_tokens"] or 0
    fresh = row["prompt_tokens"] - cached - written
    read, write = price.get("cache_read", price["input"]), price.get("cache_write", price["input"])
    return (fresh * price["input"] + cached * read + written * write + row["completion_tokens"] * price["output"]) / 1e6


async def test_the_overview_equals_the_decision_rows_the_requests_left(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(dashboard_config(url))
    for i in range(3):
        await send(client, None, "one", "fix the failing test " * (20 + i))
    await send(client, None, "two", "write the docs", model="main")  # pinned: compared with main itself
    rows = (await get(client, "/v1/decisions", limit="100"))["data"]
    o = await get(client, "/ui/api/overview", window="hour")
    assert o["requests"] == len(rows) == 4
    assert o["tokens_in"] == sum(r["prompt_tokens"] for r in rows)
    assert o["tokens_out"] == sum(r["completion_tokens"] for r in rows)
    spent = sum(bill(r, PRICE) for r in rows)
    assert o["spent"] == pytest.approx(spent, abs=1e-9)
    # the routed requests against opus (the provider reported no cache figures: opus prices no writes, and
    # its cache serves a session's previous prompt within 5 minutes); the pinned one against itself: 0
    routed = [r for r in rows if r["requested_model"] == "auto"]
    routed.sort(key=lambda r: r["ts"])
    reference = sum(bill({**r, "cached_tokens": min(r["prompt_tokens"], p["prompt_tokens"])}, OPUS) for p, r in zip([{"prompt_tokens": 0}, *routed], routed))
    assert o["saved_by_routing"] == pytest.approx(reference - sum(bill(r, PRICE) for r in routed), abs=1e-9)
    assert o["saved_by_pinch"] == 0  # pinch is not in the chain
    assert o["models"] == [{"model": "main", **{k: o[k] for k in ("requests", "errors", "tokens_in", "tokens_out", "pinch_tokens_saved", "spent", "saved_by_pinch", "saved_by_routing")}}]
    assert sum(o["timeline"]["requests"]) == 4
    sessions = (await get(client, "/ui/api/sessions", window="hour"))["data"]
    assert [s["requests"] for s in sessions] == [1, 3]  # latest first
    assert sum(s["spent"] for s in sessions) == pytest.approx(spent, abs=1e-9)


async def test_a_sessions_turns_and_a_decision_are_their_rows(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(dashboard_config(url))
    answers = [await send(client, None, "one", "fix it " * (10 + i)) for i in range(3)]
    session = answers[0]["x-router-session"]
    turns = (await get(client, "/ui/api/session", key=session))["data"]
    assert [t["request_id"] for t in turns] == [a["x-router-request-id"] for a in answers]
    assert turns[-1]["spent_so_far"] == pytest.approx(sum(t["cost"] for t in turns))
    decision = await get(client, "/ui/api/decision", id=answers[1]["x-router-request-id"])
    assert decision["session"] == session
    assert [s["stage"] for s in decision["stages"]] == ["session-fingerprint", "capability-gate", "upstream-forward"]
    assert decision["cost"] == pytest.approx(turns[1]["cost"])
    for path, query, code in (("session", {"key": "nope"}, "session_not_found"), ("decision", {"id": "req_nope"}, "request_not_found")):
        missing = await client.get(f"/ui/api/{path}", params=query)
        assert missing.status == 404
        assert (await missing.json())["error"]["code"] == code


async def test_a_user_key_never_sees_another_keys_sessions_or_requests(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(dashboard_config(url, server={"api_keys": KEYS}))
    alice = [await send(client, ALICE, "shared-name") for _ in range(2)]
    bob = [await send(client, BOB, "shared-name"), await send(client, BOB, "bobs-own")]
    assert alice[0]["x-router-session"] != bob[0]["x-router-session"]  # one name, two users: two sessions

    assert await get(client, "/ui/api/viewer", ALICE) | {"windows": None, "reference_model": None} == {
        "name": "alice", "role": "user", "sees": "own", "keys": True, "windows": None, "reference_model": None,
    }  # fmt: skip
    assert (await get(client, "/ui/api/viewer", ADMIN))["sees"] == "everyone"

    mine = (await get(client, "/ui/api/sessions", ALICE))["data"]
    assert [(s["session"], s["client"], s["requests"]) for s in mine] == [(alice[0]["x-router-session"], "alice", 2)]
    assert (await get(client, "/ui/api/overview", ALICE))["requests"] == 2
    assert (await get(client, "/ui/api/overview", BOB))["requests"] == 2
    everyone = (await get(client, "/ui/api/sessions", ADMIN))["data"]
    assert sorted(s["client"] for s in everyone) == ["alice", "bob", "bob"]
    assert (await get(client, "/ui/api/overview", ADMIN))["requests"] == 4

    # another key's session and request answer as ones that never existed: the same 404, byte for byte
    for path, theirs, unknown in (
        ("session", {"key": bob[0]["x-router-session"]}, {"key": "0" * 24}),
        ("decision", {"id": bob[0]["x-router-request-id"]}, {"id": "req_" + "0" * 32}),
    ):
        refused = await client.get(f"/ui/api/{path}", params=theirs, headers=auth(ALICE))
        never = await client.get(f"/ui/api/{path}", params=unknown, headers=auth(ALICE))
        assert refused.status == never.status == 404
        assert await refused.read() == await never.read()
        assert (await client.get(f"/ui/api/{path}", params=theirs, headers=auth(ADMIN))).status == 200
        assert (await client.get(f"/ui/api/{path}", params=theirs, headers=auth(BOB))).status == 200


async def test_health_names_providers_and_models_but_no_url_or_key(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(dashboard_config(url, server={"api_keys": KEYS}))
    health = await get(client, "/ui/api/health", ALICE)
    assert health["status"] == "ok"
    assert health["providers"] == [{"name": "mock", "api": "openai", "down": False, "retry_in_seconds": None}]
    assert health["models"][0]["cost_per_mtok"] == {**PRICE}
    text = str(health)
    assert url.split("/v1")[0] not in text and "127.0.0.1" not in text
    assert not any(key in text for key in (ALICE, BOB, ADMIN))


async def test_the_figures_follow_a_reloaded_configs_prices(proxy, mock_upstream, tmp_path):
    """Rows keep tokens, not dollars: they are priced at the prices serving now."""
    _, url = mock_upstream
    client = await proxy(dashboard_config(url))
    await send(client, None, "one")
    before = (await get(client, "/ui/api/overview"))["spent"]
    doubled = make_config(url, models=[model_entry("main", cost_per_mtok={k: 2 * v for k, v in PRICE.items()})])
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(doubled.model_dump(mode="json")))
    assert client.app[LIVE_KEY].reload(path).ok
    assert (await get(client, "/ui/api/overview"))["spent"] == pytest.approx(2 * before)


def scraped(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """A metric's samples in a /metrics text, by their labels."""
    samples = {}
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}\{{(.*)\}} (\S+)", line)
        if match:
            samples[tuple(sorted(re.findall(r'(\w+)="([^"]*)"', match[1])))] = float(match[2])
    return samples


async def test_the_metrics_count_the_dollars_the_dashboard_shows(proxy, mock_upstream):
    """One pricing serves both: /metrics' dollars spent and saved, by model and key name, add up to the overview's."""
    _, url = mock_upstream
    client = await proxy(dashboard_config(url, server={"api_keys": KEYS}))
    for i in range(3):
        await send(client, ALICE, "one", "fix the failing test " * (20 + i))
    await send(client, BOB, "two", "write the docs", model="main")
    text = await (await client.get("/metrics", headers=auth(ADMIN))).text()
    o = await get(client, "/ui/api/overview", ADMIN, window="hour")
    cost = scraped(text, "pinch_router_cost_usd_total")
    saved = scraped(text, "pinch_router_saved_usd")
    assert set(cost) == {(("client", "alice"), ("model", "main")), (("client", "bob"), ("model", "main"))}
    assert o["spent"] > 0 and sum(cost.values()) == pytest.approx(o["spent"], abs=1e-9)
    routing = {labels: v for labels, v in saved.items() if ("by", "routing") in labels}
    assert o["saved_by_routing"] > 0 and sum(routing.values()) == pytest.approx(o["saved_by_routing"], abs=1e-9)
    assert routing[(("by", "routing"), ("client", "bob"), ("model", "main"))] == 0  # it asked for main
    assert sum(v for labels, v in saved.items() if ("by", "pinch") in labels) == pytest.approx(o["saved_by_pinch"], abs=1e-9)


async def test_without_prices_the_metrics_have_no_dollars(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    await send(client, None, "one")
    text = await (await client.get("/metrics")).text()
    assert scraped(text, "pinch_router_cost_usd_total") == {} and scraped(text, "pinch_router_saved_usd") == {}
