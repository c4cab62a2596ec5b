"""The dashboard in a real browser (issue #46): Debian's chromium driven by Playwright (never a downloaded
browser), against a proxy that served the demo's 80-turn session through the full chain of the shipped
config to the mock upstream (its simulated prompt cache reporting cached tokens), with client keys.

The page refuses without a key; with the admin key its overview shows the figures the decision rows
add up to (tokens, dollars to the cent, pinch's tokens as the replay's ``x-router-pinch-saved``
headers said), every page loads without a console error, a requested model name made of markup and
quotes is shown as text, a user key sees its own session only — and no request leaves the proxy's
origin (every request the browser makes is intercepted and checked).

``PINCH_ROUTER_SCREENSHOTS=docs .venv/bin/pytest tests/system/test_dashboard_browser.py`` also saves a
screenshot of each page, 1280 wide, as ``dashboard-<page>.png`` in that folder (the docs' are made so).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from router.config import Config, load_config
from router.core.pricing import RowCost, price_rows
from router.core.tokens import TokenEstimator
from router.observe.prices import prices_of
from router.server.app import create_app
from router.tools.demo import DEFAULT_SCENARIO, DEFAULT_TRANSCRIPT
from router.tools.eval_pinch import MODES, SCENARIOS, replay_config, serve, turn_truths
from router.tools.mock_upstream import MockUpstream, SimulatedPromptCache
from router.tools.transcripts import load_transcript

playwright = pytest.importorskip("playwright.async_api", reason="the test extra installs playwright")

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ALICE, BOB, ADMIN = "alice-key-0123456789", "bob-key-9876543210", "ops-key-5555555555"
KEYS = [{"name": "alice", "key": ALICE}, {"name": "bob", "key": BOB}, {"name": "ops", "key": ADMIN, "role": "admin"}]
# Every model priced alike (Anthropic-like, cache reads at a tenth), and Claude Code's model as the reference.
PRICE = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}
OPUS = {"input": 5.0, "output": 25.0, "cache_read": 0.5, "cache_write": 6.25}
EVIL_MODEL = """<img src=x onerror="alert('xss')"><script>alert("x")</script>'"&amp;"""

pytestmark = pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"), reason="no chromium on this machine (.ci/run installs it)")


def dashboard_config(upstream_url: str, log_path: Path) -> Config:
    """The demo's config (the shipped config.yaml on the full chain, every provider at the mock), with keys,
    prices, and every model name routed (so a made-up name is a routed request, as an agent's default is)."""
    scenario = next(s for s in SCENARIOS if s.name == DEFAULT_SCENARIO)
    mode = next(m for m in MODES if m.name == "uniform, ledger on")
    shipped = load_config(ROOT / "config.yaml")
    config = replay_config(shipped, scenario, mode, shipped.pinch.budget_tokens, upstream_url, own_embeddings=False, full_chain=True, decision_log=str(log_path))
    raw = config.model_dump(mode="json")
    raw["server"]["api_keys"] = KEYS
    raw["models"] = [{**m, "cost_per_mtok": PRICE} for m in raw["models"]]
    raw["routing"]["aliases"] = [*raw["routing"]["aliases"], "*"]
    raw["dashboard"] = {"reference_prices": {"claude-opus-4-5": OPUS}, "reference_model": "claude-opus-4-5"}
    return Config.model_validate(raw)


async def replay(client: TestClient, key: str, session: str, turns: int | None = None) -> list[dict[str, str]]:
    """The demo's transcript, turn by turn, as one session of ``key``'s: each answer's headers."""
    transcript = load_transcript(DEFAULT_TRANSCRIPT)
    truths = turn_truths(transcript, 4, TokenEstimator())[:turns]
    answers = []
    for truth in truths:
        response = await client.post("/v1/chat/completions", json=transcript.body(truth.messages), headers={"Authorization": f"Bearer {key}", "x-session-id": session})
        assert response.status == 200, await response.text()
        await response.read()
        answers.append(dict(response.headers))
    return answers


def bill(row: dict[str, Any], price: dict[str, float] = PRICE) -> float:
    """A row's dollars written out (the mock's cache reports reads, no writes)."""
    cached = row["cached_tokens"] or 0
    return ((row["prompt_tokens"] - cached) * price["input"] + cached * price["cache_read"] + row["completion_tokens"] * price["output"]) / 1e6


def saved(costs: list[RowCost]) -> tuple[float, float, float]:
    """Spent, saved by pinch, saved by routing: the core's spec (router.core.pricing) over the rows."""
    return (
        sum(c.cost or 0 for c in costs),
        sum(c.pinch_saved for c in costs),
        sum(c.routing_saved or 0 for c in costs),
    )


def cents(text: str, value: float) -> bool:
    """The page's dollars are ``value`` to the cent."""
    return abs(dollars(text) - value) < 0.005


def dollars(text: str) -> float:
    return float(text.replace("$", "").replace(",", ""))


def whole(text: str) -> int:
    return int(text.replace(",", ""))


class Browser:
    """One chromium; each page's console errors, page errors and dialogs collected, every request checked."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.requested: list[str] = []
        self.console_errors: list[str] = []
        self.page_errors: list[str] = []
        self.dialogs: list[str] = []

    async def page(self, browser: Any) -> Any:
        context = await browser.new_context(viewport={"width": 1280, "height": 900})

        async def only_the_proxy(route: Any) -> None:
            url = route.request.url
            self.requested.append(url)
            if url.startswith(self.origin + "/"):
                await route.continue_()
            else:
                await route.abort()

        await context.route("**/*", only_the_proxy)
        page = await context.new_page()
        page.on("console", lambda message: message.type == "error" and self.console_errors.append(message.text))
        page.on("pageerror", lambda error: self.page_errors.append(str(error)))

        async def dismiss(dialog: Any) -> None:
            self.dialogs.append(dialog.message)
            await dialog.dismiss()

        page.on("dialog", dismiss)
        return page


async def shot(page: Any, name: str) -> None:
    folder = os.environ.get("PINCH_ROUTER_SCREENSHOTS")
    if folder:
        await page.screenshot(path=str(Path(folder) / f"dashboard-{name}.png"), full_page=True)


async def loaded(page: Any, name: str, selector: str) -> None:
    await page.wait_for_selector(f'#page[data-loaded="{name}"] {selector}', timeout=30_000)


async def open_with_key(page: Any, url: str, key: str) -> None:
    await page.goto(url)
    await page.wait_for_selector("#key-form:not([hidden])")
    await page.fill("#key-input", key)
    await page.click("#key button[type=submit]")


async def test_the_dashboard_shows_the_decision_logs_figures_in_a_real_browser(tmp_path):
    from playwright.async_api import async_playwright

    mock = MockUpstream(retrieves=False)
    upstream, upstream_url = await serve(mock.app())
    mock.prompt_cache = SimulatedPromptCache(300.0, __import__("time").monotonic, TokenEstimator())
    app = await create_app(dashboard_config(f"{upstream_url}/v1", tmp_path / "decisions.sqlite3"))
    client = TestClient(TestServer(app, host="127.0.0.1"))
    await client.start_server()
    try:
        alice = await replay(client, ALICE, "demo-session")
        bob = await replay(client, BOB, "bobs-session", turns=3)
        evil = await client.post("/v1/chat/completions", json={"model": EVIL_MODEL, "messages": [{"role": "user", "content": "hi"}]}, headers={"Authorization": f"Bearer {ADMIN}"})
        assert evil.status == 200, await evil.text()
        evil_id = evil.headers["x-router-request-id"]
        rows = (await (await client.get("/v1/decisions", params={"limit": "1000"}, headers={"Authorization": f"Bearer {ADMIN}"})).json())["data"]
        assert len(rows) == len(alice) + 4 == 84
        # what the decision log says in dollars, row by row (the core's spec, in arrival order), for everyone and for alice's session
        prices = prices_of(dashboard_config(f"{upstream_url}/v1", tmp_path / "x"))
        arrived = sorted(rows, key=lambda r: r["ts"])
        everyone = saved(price_rows(arrived, prices))
        demo_rows = [r for r in arrived if r["client"] == "alice"]
        demo = saved(price_rows(demo_rows, prices))
        # the reference, written out: every answer reported its cache figures, so Opus reads what the model read
        assert all(r["cached_tokens"] is not None and not r["cache_write_tokens"] for r in rows)
        assert everyone[2] == pytest.approx(sum(bill(r, OPUS) - bill(r) for r in rows), abs=1e-9)
        overview = await (await client.get("/ui/api/overview", headers={"Authorization": f"Bearer {ADMIN}"})).json()
        origin = str(client.make_url("")).rstrip("/")
        url = origin + "/ui/"

        watch = Browser(origin)
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            try:
                page = await watch.page(browser)
                # no key: the form, and no figure
                await page.goto(url)
                await page.wait_for_selector("#key-form:not([hidden])")
                assert await page.inner_text("#page") == ""
                await page.fill("#key-input", "not-a-key")
                await page.click("#key button[type=submit]")
                await page.locator("#key-error", has_text="refused").wait_for()  # (a page function would be eval: the CSP refuses it)
                assert await page.inner_text("#page") == ""
                assert watch.console_errors and all("401" in e for e in watch.console_errors)  # the refused key's answer
                watch.console_errors.clear()

                # the admin key: everyone's figures, as the rows add up
                await page.fill("#key-input", ADMIN)
                await page.click("#key button[type=submit]")
                await loaded(page, "overview", "#card-spent")
                card = lambda name: page.inner_text(f"#card-{name} .value")  # noqa: E731
                assert whole(await card("requests")) == len(rows)
                assert whole(await card("tokens-in")) == sum(r["prompt_tokens"] for r in rows)
                assert whole(await card("tokens-out")) == sum(r["completion_tokens"] for r in rows)
                spent = sum(bill(r) for r in rows)
                assert spent > 0.1
                assert abs(dollars(await card("spent")) - spent) < 0.005  # to the cent
                assert cents(await card("saved-pinch"), everyone[1]) and cents(await card("saved-routing"), everyone[2])
                assert everyone[1] > 0.01 and everyone[2] > 0.01
                assert overview["saved_by_pinch"] == pytest.approx(everyone[1], abs=1e-9) and overview["saved_by_routing"] == pytest.approx(everyone[2], abs=1e-9)
                pinched = sum(int(a.get("x-router-pinch-saved", 0)) for a in [*alice, *bob])
                assert pinched > 0
                assert f"{pinched:,} tokens pinched" in await page.inner_text("#card-saved-pinch .note")
                cached = sum(r["cached_tokens"] or 0 for r in rows)
                assert await card("cache-share") == f"{100 * cached / sum(r['prompt_tokens'] for r in rows):.1f}%"
                assert await page.locator(".chart canvas").count() >= 3
                await shot(page, "overview")

                # the key is kept for the tab's session: a reload asks for nothing
                await page.reload()
                await loaded(page, "overview", "#card-spent")

                # sessions: three, the demo's first by its 80 requests when sorted by requests
                await page.click("#nav a[data-page=sessions]")
                await loaded(page, "sessions", "#sessions")
                assert await page.locator("#sessions tbody tr").count() == 3
                edge = await page.locator("#sessions th[data-key=errors]").bounding_box()  # every column in sight at 1280
                assert edge is not None and edge["x"] + edge["width"] <= 1280 - 16
                await page.click("#sessions th[data-key=requests]")
                await page.wait_for_selector("#sessions th.sorted-desc[data-key=requests]")
                first = page.locator("#sessions tbody tr").first
                assert "80" in await first.inner_text()
                # its dollars, to the cent
                heads = await page.locator("#sessions thead th").all_inner_texts()
                cells = await first.locator("td").all_inner_texts()
                shown = dict(zip(heads, cells, strict=True))
                assert whole(shown["tokens in"]) == sum(r["prompt_tokens"] for r in demo_rows)
                assert cents(shown["spent"], demo[0]) and cents(shown["pinch saved"], demo[1]) and cents(shown["routing saved"], demo[2])
                await shot(page, "sessions")
                await first.click()
                await loaded(page, "session", "#turns")
                assert await page.locator("#turns tbody tr").count() == 80
                facts = dict(zip(await page.locator("dl.facts dt").all_inner_texts(), await page.locator("dl.facts dd").all_inner_texts(), strict=True))
                assert cents(facts["spent"], demo[0]) and cents(facts["saved by pinch"], demo[1])
                assert await page.locator(".chart canvas").count() >= 2
                await shot(page, "session")

                # one request: its stage trace
                await page.locator("#turns tbody tr").nth(60).click()
                await loaded(page, "decision", "#trace")
                stages = await page.locator("#trace tbody td:first-child").all_inner_texts()
                assert stages == list(dashboard_config(f"{upstream_url}/v1", tmp_path / "x").middlewares)
                await shot(page, "decision")

                # a requested model name of markup and quotes is text
                await page.goto(f"{url}#/decision/{evil_id}")
                # its own heading: the decision page before it matches the same page name and selectors, and on
                # a loaded machine it was still the one shown when a wait for those alone returned
                await loaded(page, "decision", f'h2:has-text("Request {evil_id}")')
                assert EVIL_MODEL in await page.inner_text("#page dl")
                assert await page.locator("#page img, #page script").count() == 0
                assert watch.dialogs == []

                await page.click("#nav a[data-page=health]")
                await loaded(page, "health", "#providers")
                await shot(page, "health")

                # a user key: its own session only, and its own figures
                page = await watch.page(browser)
                await open_with_key(page, url, ALICE)
                await loaded(page, "overview", "#card-spent")
                assert whole(await card_of(page, "requests")) == len(alice)
                await page.goto(url + "#/sessions")
                await loaded(page, "sessions", "#sessions")
                assert await page.locator("#sessions tbody tr").count() == 1
                assert "80" in await page.inner_text("#sessions tbody")
            finally:
                await browser.close()

        assert watch.console_errors == []
        assert watch.page_errors == []
        assert watch.dialogs == []
        assert watch.requested and [u for u in watch.requested if not u.startswith(origin + "/ui/")] == []
        assert not any(key in u for u in watch.requested for key in (ALICE, BOB, ADMIN, "not-a-key"))
    finally:
        await client.close()
        await upstream.cleanup()


def card_of(page: Any, name: str) -> Any:
    return page.inner_text(f"#card-{name} .value")


def test_the_browser_is_the_systems_chromium_and_playwright_downloads_none():
    """.ci/run installs Debian's chromium; nothing in the repository runs `playwright install`."""
    assert CHROMIUM is not None
    commands = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if not line.lstrip().startswith("#")]
    assert any("apt-get install" in line and "chromium" in line for line in commands)
    assert not any(re.search(r"playwright\s+install", line) for line in commands)
