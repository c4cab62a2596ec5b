"""session-fingerprint through the proxy: the agents' session headers, the key every response reports."""

from __future__ import annotations

from typing import Any

import pytest

from middlewares.session_fingerprint import SESSION_STATE, SessionFingerprint
from router.config import DEFAULT_SESSION_HEADERS
from router.contract.stage import run_stage
from router.core.fingerprint import header_session_key
from router.core.results import Outcome, SESSION, SessionKey
from router.core.session_state import Space
from router.core.tokens import TokenEstimator
from router.state.session_store import LocalStore
from tests.support.agent_captures import captured, client_headers
from tests.support.config import chat_body, make_config
from tests.support.factories import make_ctx
from tests.support.stages import build_stage

URL = "/v1/chat/completions"


def test_the_default_session_headers_are_the_agents_in_a_documented_order():
    assert make_config().session.headers == [
        "x-router-session",
        "x-session-id",
        "x-session-affinity",  # opencode
        "x-claude-code-session-id",  # Claude Code
        "session-id",  # Codex
        "thread-id",  # Codex
    ]
    assert list(DEFAULT_SESSION_HEADERS) == make_config().session.headers


@pytest.mark.parametrize("header", DEFAULT_SESSION_HEADERS)
async def test_every_default_session_header_names_the_session(proxy, mock_upstream, header):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    response = await client.post(URL, json=chat_body(), headers={header: "ses_agent_42"})
    assert response.status == 200
    assert response.headers["x-router-session"] == header_session_key("ses_agent_42")
    rows = (await (await client.get("/v1/decisions")).json())["data"]
    assert rows[0]["session_source"] == "header"


async def test_an_earlier_header_in_the_list_wins(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    response = await client.post(URL, json=chat_body(), headers={"thread-id": "thread", "x-session-affinity": "affinity"})
    assert response.headers["x-router-session"] == header_session_key("affinity")


async def test_opencodes_real_headers_name_its_session(proxy, mock_upstream):
    _, url = mock_upstream
    title = captured("opencode")[0]
    client = await proxy(make_config(url))
    response = await client.post(URL, json=title.body, headers=client_headers(title))
    await response.read()
    assert response.headers["x-router-session"] == header_session_key(title.headers["x-session-id"])


async def test_a_fingerprinted_session_is_reported_too(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    first = await client.post(URL, json=chat_body("the same task"))
    second = await client.post(URL, json=chat_body("the same task"))
    assert first.headers["x-router-session"] == second.headers["x-router-session"]
    rows = (await (await client.get("/v1/decisions")).json())["data"]
    assert {row["session_source"] for row in rows} == {"fingerprint"}


@pytest.mark.parametrize("asked_by", ["raw id", "key"])
async def test_decisions_of_a_session_are_found_by_the_raw_id_or_the_key(proxy, mock_upstream, asked_by):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    mine = await client.post(URL, json=chat_body(), headers={"x-session-id": "ses_mine"})
    await client.post(URL, json=chat_body(), headers={"x-session-id": "ses_other"})
    session = "ses_mine" if asked_by == "raw id" else mine.headers["x-router-session"]
    rows = (await (await client.get("/v1/decisions", params={"session": session})).json())["data"]
    assert [row["request_id"] for row in rows] == [mine.headers["x-router-request-id"]]


class BrokenStore(LocalStore):
    async def get_many(self, reads: Any, now: float) -> list[Any]:
        raise RuntimeError("the state backend broke")


async def test_a_failed_read_of_the_sessions_state_keeps_its_key_and_leaves_the_reads_to_the_stages() -> None:
    stage = build_stage(SessionFingerprint, make_config(), estimator=TokenEstimator(), state=BrokenStore())  # type: ignore[arg-type]
    stage.reads.add(Space("notes", 1, 60.0, 10, str.encode, bytes.decode))
    ctx = make_ctx(headers={"x-router-session": "ses_1"})
    record = await run_stage(stage, ctx)
    assert record.outcome is Outcome.ERROR
    assert ctx[SESSION] == SessionKey(header_session_key("ses_1"), "header")
    assert ctx[SESSION_STATE] is None


# ---- issue #27, item 8: with client keys, the client's key is part of every session key ----------------------

KEYS = ["alice-key-0123456789", "bob-key-9876543210"]


def keyed(url: str):
    return make_config(url, server={"api_keys": KEYS})


@pytest.mark.parametrize(
    "headers",
    [{}, {"x-session-id": "ses_shared"}],
    ids=["fingerprint", "same-session-header"],
)
async def test_two_clients_with_different_keys_never_share_a_session(proxy, mock_upstream, headers):
    _, url = mock_upstream
    client = await proxy(keyed(url))
    seen = {}
    for name, key in (("alice", KEYS[0]), ("bob", KEYS[1]), ("alice again", KEYS[0])):
        response = await client.post(URL, json=chat_body("hi"), headers={**headers, "Authorization": f"Bearer {key}"})
        assert response.status == 200
        seen[name] = response.headers["x-router-session"]
    assert seen["alice"] != seen["bob"]  # the same opening (or session id), two users: two sessions
    assert seen["alice"] == seen["alice again"]  # and a user's session stays one
    for key, own in ((KEYS[0], seen["alice"]), (KEYS[1], seen["bob"])):  # each user key sees its own rows only (#45)
        rows = (await (await client.get("/v1/decisions", headers={"Authorization": f"Bearer {key}"})).json())["data"]
        assert {row["session"] for row in rows} == {own}
        assert not any(k in str(rows) for k in KEYS)  # the key itself is stored nowhere


async def test_an_anthropic_client_key_scopes_its_sessions_as_a_bearer_key_does(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(keyed(url))
    body = {"model": "auto", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    by_header = await client.post("/v1/messages", json=body, headers={"x-api-key": KEYS[1]})
    by_bearer = await client.post("/v1/messages", json=body, headers={"Authorization": f"Bearer {KEYS[1]}"})
    other = await client.post("/v1/messages", json=body, headers={"x-api-key": KEYS[0]})
    assert by_header.headers["x-router-session"] == by_bearer.headers["x-router-session"] != other.headers["x-router-session"]


async def test_without_client_keys_session_keys_are_what_they_were(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    response = await client.post(URL, json=chat_body(), headers={"x-session-id": "ses_1", "Authorization": "Bearer anything"})
    assert response.headers["x-router-session"] == header_session_key("ses_1")


async def test_a_raw_session_id_finds_the_asking_clients_own_session_only(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(keyed(url))
    for key in KEYS:
        await client.post(URL, json=chat_body(), headers={"x-session-id": "ses_shared", "Authorization": f"Bearer {key}"})
    found = {}
    for key in KEYS:
        listed = await client.get("/v1/decisions", params={"session": "ses_shared"}, headers={"Authorization": f"Bearer {key}"})
        found[key] = [row["session"] for row in (await listed.json())["data"]]
    assert len(found[KEYS[0]]) == len(found[KEYS[1]]) == 1 and found[KEYS[0]] != found[KEYS[1]]
