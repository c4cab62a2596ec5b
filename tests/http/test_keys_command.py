"""``pinch-router keys`` (issue #45) against a running proxy: each key by name and role, what it used
against its limits, what it holds in flight; an admin key lists every key, a user key its own; a
proxy that cannot be asked is a message and exit 1, never a trace."""

from __future__ import annotations

import asyncio
import io

from bench.harness import free_port
from router.cli import main
from router.tools.keys_report import run_keys
from router.tools.mock_upstream import Behaviour
from tests.http.test_key_limits import ALICE, BOB, NOON, OPS, USAGE, WIRES, auth, limited_config, settled
from tests.support.classifier_fakes import FakeClock
from tests.support.config import make_config


async def keys_command(client, key: str | None, *flags: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    url = str(client.make_url("/"))
    code = await asyncio.to_thread(run_keys, url, key, "--json" in flags, out, err)  # a blocking client: off the loop the proxy runs on
    return code, out.getvalue(), err.getvalue()


async def test_an_admin_sees_every_key_against_its_limits_and_a_user_its_own(proxy, mock_upstream):
    mock, url = mock_upstream
    mock.default = Behaviour(usage=USAGE)
    client = await proxy(limited_config(url, {"requests_per_minute": 30, "usd_per_day": 5}), wall_clock=FakeClock(NOON))
    path, _, body, _ = WIRES["openai-chat"]
    for key in (ALICE, ALICE, BOB):
        assert (await client.post(path, json=body, headers=auth(key))).status == 200
    await settled(client)
    code, out, _ = await keys_command(client, OPS)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["key", "role", "requests/min", "tokens/min", "USD", "today", "USD", "this", "month", "in", "flight"]
    alice, bob, ops = (line.split() for line in lines[1:4])
    assert alice == ["alice", "user", "2", "/", "30", "200", "0.0003", "/", "5.0000", "0.0003", "-"]
    assert bob == ["bob", "user", "1", "100", "0.0001", "0.0001", "-"]
    assert ops[:2] == ["ops", "admin"]
    assert lines[-1].startswith("counts: the process that answered")
    assert ALICE not in out and BOB not in out
    code, out, _ = await keys_command(client, BOB)
    assert code == 0 and [line.split()[0] for line in out.splitlines()[1:-1]] == ["bob"]


async def test_a_proxy_without_client_keys_says_so(proxy, mock_upstream):
    _, url = mock_upstream
    assert await keys_command(await proxy(make_config(url)), None) == (0, "no client keys are configured (server.api_keys): nothing to list, nothing is limited\n", "")


async def test_a_refused_key_and_an_absent_proxy_are_a_message_and_exit_1(proxy, mock_upstream, capsys):
    _, url = mock_upstream
    client = await proxy(limited_config(url, None))
    code, out, err = await keys_command(client, "not-a-key")
    assert (code, out) == (1, "") and "answered 401: missing or invalid API key" in err
    assert await asyncio.to_thread(main, ["keys", "--url", f"http://127.0.0.1:{free_port()}", "--api-key", OPS]) == 1
    assert "cannot reach the proxy at http://127.0.0.1:" in capsys.readouterr().err
