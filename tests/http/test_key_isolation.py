"""Keys as tenants (issue #45): a user key sees and acts on its own decisions, outcomes and sessions
only; an admin key on everyone's; without keys everything is everyone's, as before.

Two user keys and an admin key go through every endpoint that reads or writes decisions, outcomes
or sessions — ``GET /v1/decisions`` (every filter), ``POST /v1/outcome`` (and the escalation it
feeds), ``top``'s feed — with keys given as objects and as a plain list.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from router.core.tenants import plain_key_name
from router.observe import recorder as recorder_module
from router.observe.decision_log import COLUMNS, DecisionLog
from router.observe.decision_record import Decision
from router.state.remembered import RECENT_REQUESTS
from router.tools.top import DecisionFeed
from tests.support.config import chat_body, make_config, model_entry

URL = "/v1/chat/completions"
ALICE, BOB, ADMIN = "alice-key-0123456789", "bob-key-9876543210", "ops-key-5555555555"
SHARED_SESSION = {"x-session-id": "ses_shared"}  # both users name their session alike

OBJECT_KEYS = [{"name": "alice", "key": ALICE}, {"name": "bob", "key": BOB, "role": "user"}, {"name": "ops", "key": ADMIN, "role": "admin"}]
PLAIN_KEYS = [ALICE, BOB, {"name": "ops", "key": ADMIN, "role": "admin"}]  # the users as a plain list of keys
NAMES = {
    "objects": {ALICE: "alice", BOB: "bob", ADMIN: "ops"},
    "plain": {ALICE: plain_key_name(ALICE), BOB: plain_key_name(BOB), ADMIN: "ops"},
}


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def keyed(url: str, keys: list[Any], **sections: Any):
    return make_config(url, server={"api_keys": keys}, **sections)


@pytest.fixture(params=["objects", "plain"])
def style(request) -> str:
    return request.param


def keys_of(style: str) -> list[Any]:
    return OBJECT_KEYS if style == "objects" else PLAIN_KEYS


async def served(client, key: str, **headers: str) -> dict[str, str]:
    """One request of ``key``'s (the same body and session header for everyone); its answer's headers."""
    response = await client.post(URL, json=chat_body("fix the test"), headers={**SHARED_SESSION, **headers, **auth(key)})
    assert response.status == 200, await response.text()
    return dict(response.headers)


async def decisions(client, key: str, **query: str) -> list[dict]:
    response = await client.get("/v1/decisions", params={"limit": "1000", **query}, headers=auth(key))
    assert response.status == 200
    return (await response.json())["data"]


async def outcome(client, key: str, request_id: str, success: bool = False):
    return await client.post("/v1/outcome", json={"request_id": request_id, "success": success, "reason": "tests failed"}, headers=auth(key))


async def three_tenants(client) -> dict[str, list[dict[str, str]]]:
    """Two requests of each user's and one of the admin's, interleaved."""
    sent: dict[str, list[dict[str, str]]] = {ALICE: [], BOB: [], ADMIN: []}
    for key in (ALICE, BOB, ALICE, BOB, ADMIN):
        sent[key].append(await served(client, key))
    return sent


def ids(answers: list[dict[str, str]]) -> set[str]:
    return {a["x-router-request-id"] for a in answers}


async def test_each_user_key_lists_its_own_decisions_only_and_an_admin_key_every_one(proxy, mock_upstream, style):
    _, url = mock_upstream
    client = await proxy(keyed(url, keys_of(style)))
    sent = await three_tenants(client)
    names = NAMES[style]
    for key in (ALICE, BOB):
        rows = await decisions(client, key)
        assert {row["request_id"] for row in rows} == ids(sent[key])
        assert {row["client"] for row in rows} == {names[key]}  # the row records the key's name ...
        assert not any(k in str(rows) for k in (ALICE, BOB, ADMIN))  # ... never a key
    rows = await decisions(client, ADMIN)
    assert {row["request_id"] for row in rows} == ids(sent[ALICE]) | ids(sent[BOB]) | ids(sent[ADMIN])
    assert {row["client"] for row in rows} == set(names.values())


async def test_a_session_filter_finds_a_user_its_own_rows_only(proxy, mock_upstream, style):
    """By the session key the proxy reported (``x-router-session``) or the raw id sent: another key's
    session, even one named alike, is not found; the admin key finds any by its key."""
    _, url = mock_upstream
    client = await proxy(keyed(url, keys_of(style)))
    sent = await three_tenants(client)
    alice_session, bob_session = sent[ALICE][0]["x-router-session"], sent[BOB][0]["x-router-session"]
    assert alice_session != bob_session  # one name, two users: two sessions
    assert await decisions(client, ALICE, session=bob_session) == []
    assert await decisions(client, BOB, session=alice_session) == []
    for asked in (alice_session, "ses_shared"):
        assert {row["request_id"] for row in await decisions(client, ALICE, session=asked)} == ids(sent[ALICE])
    assert {row["request_id"] for row in await decisions(client, ADMIN, session=bob_session)} == ids(sent[BOB])
    assert {row["request_id"] for row in await decisions(client, ADMIN, session=alice_session)} == ids(sent[ALICE])


async def test_an_outcome_for_another_keys_request_is_refused_as_an_unknown_one_is(proxy, mock_upstream, style):
    _, url = mock_upstream
    client = await proxy(keyed(url, keys_of(style)))
    sent = await three_tenants(client)
    bobs = sent[BOB][0]["x-router-request-id"]
    refused = await outcome(client, ALICE, bobs)
    assert refused.status == 404
    # byte for byte what the same id gets from a proxy that never saw it
    fresh = await proxy(keyed(url, keys_of(style)))
    unknown = await outcome(fresh, ALICE, bobs)
    assert unknown.status == 404
    assert await refused.read() == await unknown.read()
    assert {k: v for k, v in refused.headers.items() if k != "Date"} == {k: v for k, v in unknown.headers.items() if k != "Date"}
    # and as any unknown id of that proxy: the body differs by the id echoed only
    guessed = await outcome(client, ALICE, bobs[:-4] + "0000")
    assert (await guessed.read()).replace(bobs[:-4].encode() + b"0000", bobs.encode()) == await refused.read()
    (row,) = [r for r in await decisions(client, ADMIN) if r["request_id"] == bobs]
    assert row["outcome"] is None  # nothing recorded
    # its own key, and the admin key, report it
    assert (await outcome(client, BOB, bobs)).status == 200
    assert (await outcome(client, ADMIN, sent[ALICE][0]["x-router-request-id"], success=True)).status == 200
    assert (await outcome(client, ALICE, sent[ALICE][1]["x-router-request-id"])).status == 200
    rows = {r["request_id"]: r["outcome"] for r in await decisions(client, ADMIN)}
    assert (rows[bobs], rows[sent[ALICE][0]["x-router-request-id"]], rows[sent[ALICE][1]["x-router-request-id"]]) == ("failure", "success", "failure")


async def test_an_outcome_found_in_the_decision_log_is_refused_to_another_key_too(proxy, mock_upstream, monkeypatch, style):
    """Once the remembered request ids are gone (a restart, or a day later) the decision log answers:
    it keeps the key's name as the remembered id does."""
    _, url = mock_upstream
    client = await proxy(keyed(url, keys_of(style)))
    sent = await three_tenants(client)
    forgotten = type(RECENT_REQUESTS)("request-forgotten", 1, 60, 10, RECENT_REQUESTS.encode, RECENT_REQUESTS.decode)
    monkeypatch.setattr(recorder_module, "RECENT_REQUESTS", forgotten)  # every lookup of a remembered id misses
    bobs = sent[BOB][0]["x-router-request-id"]
    refused, unknown = await outcome(client, ALICE, bobs), await outcome(client, ALICE, bobs[:-4] + "0000")
    assert refused.status == unknown.status == 404
    assert (await unknown.read()).replace(bobs[:-4].encode() + b"0000", bobs.encode()) == await refused.read()
    assert (await outcome(client, BOB, bobs)).status == 200
    assert (await outcome(client, ADMIN, sent[ALICE][0]["x-router-request-id"])).status == 200


async def test_another_user_key_cannot_escalate_a_users_session(proxy, mock_upstream, style):
    """The probe of #45: failed outcomes reported with another user's request ids raised that user's tier."""
    _, url = mock_upstream
    config = keyed(
        url,
        keys_of(style),
        models=[model_entry("easy", tiers=[1, 2], quality=0.9), model_entry("hard", tiers=[3], quality=0.5)],
        escalation={"failures": 2, "window_minutes": 10},
    )
    client = await proxy(config)
    bobs = [await served(client, BOB) for _ in range(2)]
    for answer in bobs:
        assert answer["x-router-model"] == "easy"
        assert (await outcome(client, ALICE, answer["x-router-request-id"])).status == 404
    assert (await served(client, BOB))["x-router-model"] == "easy"  # not escalated
    for answer in bobs:
        assert (await outcome(client, ADMIN, answer["x-router-request-id"])).status == 200
    assert (await served(client, BOB))["x-router-model"] == "hard"  # the admin's outcomes count
    assert (await served(client, ALICE))["x-router-model"] == "easy"  # alice's session, named alike, is her own


async def test_a_request_refused_at_the_edge_is_its_keys_row_too(proxy, mock_upstream, style):
    _, url = mock_upstream
    client = await proxy(keyed(url, keys_of(style)))
    refused = await client.post(URL, data=b"{not json", headers={"Content-Type": "application/json", **auth(BOB)})
    assert refused.status == 400
    (row,) = await decisions(client, BOB)
    assert (row["request_id"], row["client"]) == (refused.headers["x-router-request-id"], NAMES[style][BOB])
    assert await decisions(client, ALICE) == []


async def test_tops_feed_shows_a_user_key_its_own_decisions(proxy, mock_upstream, style):
    _, url = mock_upstream
    client = await proxy(keyed(url, keys_of(style)))
    sent = await three_tenants(client)
    base = str(client.make_url("")).rstrip("/")
    for key, expected in ((ALICE, ids(sent[ALICE])), (BOB, ids(sent[BOB])), (ADMIN, ids(sent[ALICE]) | ids(sent[BOB]) | ids(sent[ADMIN]))):
        feed = DecisionFeed(base, api_key=key)
        try:
            assert {row["request_id"] for row in await feed.fetch()} == expected
        finally:
            await feed.close()


async def test_the_client_key_names_label_the_per_client_metrics(proxy, mock_upstream, style):
    _, url = mock_upstream
    client = await proxy(keyed(url, keys_of(style)))
    await three_tenants(client)
    text = await (await client.get("/metrics", headers=auth(ALICE))).text()
    names = NAMES[style]
    for key, count in ((ALICE, 2), (BOB, 2), (ADMIN, 1)):
        assert f'pinch_router_client_requests_total{{client="{names[key]}",status="200"}} {count}.0' in text
    assert f'pinch_router_client_usage_tokens_total{{client="{names[ALICE]}",kind="prompt"}}' in text
    assert not any(k in text for k in (ALICE, BOB, ADMIN))


async def test_without_keys_everything_is_everyones_as_before(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    first, second = await served(client, "unused"), await served(client, "unused", **{"x-session-id": "other"})
    rows = (await (await client.get("/v1/decisions")).json())["data"]
    assert {row["request_id"] for row in rows} == ids([first, second]) and {row["client"] for row in rows} == {None}
    assert (await client.post("/v1/outcome", json={"request_id": first["x-router-request-id"], "success": True})).status == 200
    text = await (await client.get("/metrics")).text()
    assert "pinch_router_client_requests_total{" not in text  # no per-client series without keys


async def test_a_log_file_of_an_older_version_gains_the_client_column_and_its_index(tmp_path):
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as conn:
        old = [c for c in COLUMNS if c != "client"]
        conn.execute(f"CREATE TABLE decisions ({', '.join(old)}, outcome TEXT, outcome_reason TEXT, outcome_ts REAL)")
        conn.execute("INSERT INTO decisions (request_id, ts, status, duration_ms, stream) VALUES ('req_old', 1.0, 200, 1.0, 0)")
    log = DecisionLog(str(path))
    await log.start()
    try:
        log.submit(Decision(request_id="req_new", ts=2.0, status=200, duration_ms=1.0, client="alice"))
        assert [row["request_id"] for row in await log.recent(10, client="alice")] == ["req_new"]
        assert {row["request_id"] for row in await log.recent(10)} == {"req_old", "req_new"}
        assert (await log.request_of("req_old")).client is None
    finally:
        await log.close()
    with sqlite3.connect(path) as conn:
        assert "decisions_client" in {row[1] for row in conn.execute("PRAGMA index_list(decisions)")}


async def test_a_key_read_from_its_variable_authenticates_in_each_header_and_is_named_in_its_rows(proxy, mock_upstream, monkeypatch):
    _, url = mock_upstream
    monkeypatch.setenv("CAROL_ROUTER_KEY", "carol-key-0123456789")
    client = await proxy(keyed(url, [{"name": "carol", "key_env": "CAROL_ROUTER_KEY"}, *OBJECT_KEYS]))
    anthropic = {"model": "auto", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    answers = [
        await client.post(URL, json=chat_body(), headers=auth("carol-key-0123456789")),
        await client.post("/v1/messages", json=anthropic, headers={"x-api-key": "carol-key-0123456789"}),
    ]
    assert [a.status for a in answers] == [200, 200]
    rows = await decisions(client, "carol-key-0123456789")
    assert {row["request_id"] for row in rows} == {a.headers["x-router-request-id"] for a in answers}
    assert {row["client"] for row in rows} == {"carol"}
    assert (await client.post(URL, json=chat_body(), headers=auth("CAROL_ROUTER_KEY"))).status == 401  # the variable's name is no key
