"""``server.api_keys`` as tenants (issue #45): plain keys and key objects, their names and roles,
what is refused at load, a ``key_env`` read at start; who may see whose requests."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from router.cli import main
from router.config import ConfigError, config_secrets, parse_config
from router.core.fingerprint import client_key_id
from router.core.limits import KeyLimits
from router.core.tenants import Tenant, may_see, owner_scope, plain_key_name
from router.server.doctor import key_findings
from tests.support.config import model_entry

ROOT = Path(__file__).resolve().parents[3]


def config_with(keys: Any, environ: dict[str, str] | None = None):
    raw = {
        "middlewares": ["capability-gate", "upstream-forward"],
        "providers": {"mock": {"base_url": "http://127.0.0.1:9/v1"}},
        "models": [model_entry("main")],
        "server": {"api_keys": keys},
    }
    return parse_config(raw, environ or {})


def error_of(keys: Any) -> str:
    with pytest.raises(ConfigError) as info:
        config_with(keys)
    return str(info.value)


def test_the_keys_pages_team_example_loads_as_it_says(monkeypatch):
    page = (ROOT / "docs" / "keys.md").read_text(encoding="utf-8")
    [block] = re.findall(r"```yaml\n(.*?)```", page, re.S)
    keys = yaml.safe_load(block)["server"]["api_keys"]
    config = config_with(keys, {"CI_ROUTER_KEY": "ci-secret-123"})
    for variable, value in (("ALICE_ROUTER_KEY", "alice-secret"), ("BOB_ROUTER_KEY", "bob-secret"), ("OPS_ROUTER_KEY", "ops-secret")):
        monkeypatch.setenv(variable, value)
    assert config.server.client_keys() == [
        (Tenant("alice"), "alice-secret"),
        (Tenant("bob"), "bob-secret"),
        (Tenant("ci"), "ci-secret-123"),
        (Tenant("ops", "admin"), "ops-secret"),
    ]
    assert config.server.key_names() == ["alice", "bob", "ci", "ops"]
    assert config.server.key_limits() == {
        "alice": KeyLimits(usd_per_day=5, usd_per_month=60),
        "bob": KeyLimits(usd_per_day=5, usd_per_month=60),
        "ci": KeyLimits(requests_per_minute=30, tokens_per_minute=400_000, usd_per_day=20),
        "ops": KeyLimits(),
    }
    assert {"alice-secret", "ops-secret", "ci-secret-123"} <= set(config_secrets(config))  # redacted wherever the proxy writes
    monkeypatch.delenv("BOB_ROUTER_KEY")
    with pytest.raises(ConfigError, match=r"key 'bob': \$BOB_ROUTER_KEY is not set"):
        config.server.client_keys()
    failing = [f for f in key_findings(config) if not f.ok]
    assert [f.check for f in failing] == ["key BOB_ROUTER_KEY"] and "serve refuses to start" in failing[0].detail


def test_a_plain_key_is_a_user_named_after_a_digest_of_it():
    config = config_with(["first-key-0123", "second-key-4567"])
    assert config.server.client_keys() == [(Tenant(plain_key_name("first-key-0123")), "first-key-0123"), (Tenant(plain_key_name("second-key-4567")), "second-key-4567")]
    name = plain_key_name("first-key-0123")
    assert name == "key-" + client_key_id("first-key-0123")[:6] and re.fullmatch(r"key-[0-9a-f]{6}", name)
    assert "first-key" not in name


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ([{"name": "alice"}], "server.api_keys[0]: key 'alice': give one of key or key_env"),
        ([{"name": "alice", "key": "k", "key_env": "K"}], "server.api_keys[0]: key 'alice': give one of key or key_env"),
        ([{"name": "alice", "key": " "}], "server.api_keys[0]: key 'alice': the key is empty"),
        (["k1", {"key": "k2"}], "server.api_keys[1].name: Field required"),
        ([{"name": "al ice", "key": "k"}], "server.api_keys[0].name: String should match pattern"),
        ([{"name": "alice", "key": "k", "role": "root"}], "server.api_keys[0].role: Input should be 'user' or 'admin'"),
        ([{"name": "alice", "key": "k", "requests_per_minute": 5}], "server.api_keys[0].requests_per_minute: Extra inputs are not permitted"),
        ([{"name": "alice", "key": "k1"}, {"name": "alice", "key": "k2"}], "server.api_keys: two keys are named 'alice'"),
        (["same-key", "same-key"], "server.api_keys: two keys are named"),
        ([{"name": "alice", "key": "k1"}, {"name": "bob", "key": "k1"}], "server.api_keys: the same key is listed twice"),
        ([5], "server.api_keys[0]: a key, or an object {name, key | key_env, role, limits}"),
        ([""], "server.api_keys: an API key is empty"),
    ],
)
def test_what_is_refused_at_load_names_the_entry(keys, message):
    assert message in error_of(keys)


def test_a_key_read_from_its_variable_that_is_another_key_is_refused_at_start(monkeypatch):
    monkeypatch.setenv("SECOND_ROUTER_KEY", "first-key-0123")
    config = config_with(["first-key-0123", {"name": "second", "key_env": "SECOND_ROUTER_KEY"}])
    with pytest.raises(ConfigError, match=f"keys '{plain_key_name('first-key-0123')}' and 'second' are the same key"):
        config.server.client_keys()


def test_serve_refuses_to_start_when_a_keys_variable_is_unset(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("NOBODY_SET_THIS_KEY", raising=False)
    path = tmp_path / "config.yaml"
    raw = yaml.safe_load((ROOT / "config.yaml").read_text())
    raw["server"]["api_keys"] = [{"name": "alice", "key_env": "NOBODY_SET_THIS_KEY"}]
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(SystemExit) as stopped:
        main(["serve", "--config", str(path), "--port", "0", "--state-dir", str(tmp_path / "state")])
    assert stopped.value.code == 2
    assert "server.api_keys: key 'alice': $NOBODY_SET_THIS_KEY is not set" in capsys.readouterr().err


def test_a_user_sees_its_own_an_admin_everyones_and_without_keys_everything_is_everyones():
    alice, ops = Tenant("alice"), Tenant("ops", "admin")
    assert (owner_scope(alice), owner_scope(ops), owner_scope(None)) == ("alice", None, None)
    assert may_see(alice, "alice") and not may_see(alice, "bob") and not may_see(alice, None)
    assert may_see(ops, "bob") and may_see(ops, None)
    assert may_see(None, "bob") and may_see(None, None)
