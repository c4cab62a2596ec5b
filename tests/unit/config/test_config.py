"""Configuration: strict models, env expansion, errors that name the key path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from router.cli import main
from router.config import ConfigError, load_config, parse_config
from router.server.registry import REGISTRY
from tests.support.config import model_entry

ROOT = Path(__file__).resolve().parents[3]


def base(**sections: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "middlewares": ["capability-gate", "upstream-forward"],
        "providers": {"mock": {"base_url": "http://127.0.0.1:9/v1"}},
        "models": [model_entry("main")],
    }
    raw.update(sections)
    return raw


def error_of(raw: Any, environ: dict[str, str] | None = None) -> str:
    """What loading ``raw`` for serving says (the stage registry's schema, as ``serve`` reads a file)."""
    with pytest.raises(ConfigError) as info:
        REGISTRY.parse_config(raw, environ or {})
    return str(info.value)


def test_shipped_config_loads_and_defaults_are_loopback():
    config = load_config(ROOT / "config.yaml", environ={})
    assert config.server.host == "127.0.0.1"
    assert config.middlewares[-1] == "upstream-forward"
    assert {m.provider for m in config.models} <= set(config.providers)


def test_unknown_key_is_an_error_naming_its_path():
    raw = base()
    raw["models"][0]["supports"]["telepathy"] = True
    assert "models[0].supports.telepathy: Extra inputs are not permitted" in error_of(raw)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda r: r["models"][0].update(context_window=-1), "models[0].context_window"),
        (lambda r: r["models"][0].update(provider="nowhere"), "models[0].provider: unknown provider 'nowhere'"),
        (lambda r: r["models"][0].update(tiers=[7]), "models[0].tiers"),
        (lambda r: r.update(server={"port": 70000}), "server.port"),
        (lambda r: r.update(server={"max_body_mb": 0}), "server.max_body_mb"),
        (lambda r: r.update(routing={"fallback_tier": 9}), "fallback_tier"),
        (lambda r: r.update(routing={"fallback_category": "poetry"}), "fallback_category"),
        (lambda r: r.update(upstream={"max_attempts": 0}), "upstream.max_attempts"),
        (lambda r: r.update(pinch={"relevance": {"enabled": True}}), "relevance.enabled: needs pinch.enabled"),
        (lambda r: r.update(providers={"mock": {"base_url": "not a url"}}), "providers.mock.base_url"),
        (lambda r: r.update(models=[model_entry("a"), model_entry("a")]), "models[1].name: duplicate"),
        (lambda r: r.update(models=[model_entry("auto")]), "models[0].name: 'auto' is also a routing alias"),
        (lambda r: r.update(models=[]), "models"),
    ],
)
def test_invalid_values_name_the_key(mutate, expected):
    raw = base()
    mutate(raw)
    assert expected in error_of(raw)


def test_env_vars_expand_with_defaults():
    raw = base(providers={"mock": {"base_url": "${UP:-http://127.0.0.1:1}/v1", "api_key_env": "${KEYVAR}"}})
    config = parse_config(raw, {"KEYVAR": "MY_KEY"})
    assert config.providers["mock"].url == "http://127.0.0.1:1/v1"
    assert config.providers["mock"].api_key_env == "MY_KEY"


def test_missing_env_var_names_the_key_and_the_variable():
    raw = base(server={"api_keys": ["${PROXY_KEY}"]})
    message = error_of(raw)
    assert "server.api_keys[0]" in message and "PROXY_KEY" in message


def test_the_default_chain_needs_the_classifier_provider():
    raw = base()
    del raw["middlewares"]  # every registered stage, in the registry's order: the classifier among them
    assert "classifier.provider: unknown provider 'ollama' (known: mock)" in error_of(raw)


def test_file_errors_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    bad.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(bad)


def test_check_config_prints_chain_and_catalogue(capsys):
    assert main(["check-config", "--config", str(ROOT / "config.yaml")]) == 0
    out = capsys.readouterr().out
    assert "upstream-forward" in out
    assert "local-coder" in out


def test_check_config_rejects_a_bad_file_with_exit_2(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text("providers: {mock: {base_url: 'http://127.0.0.1:9'}}\nmodels: []\nbogus: 1\n")
    with pytest.raises(SystemExit) as info:
        main(["check-config", "--config", str(path)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "bogus" in err and "models" in err


def test_check_config_rejects_a_bad_chain(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(
        "providers: {mock: {base_url: 'http://127.0.0.1:9'}}\n"
        "models: [{name: m, provider: mock, upstream_model: x, context_window: 10, max_output_tokens: 5, tiers: [1]}]\n"
        "middlewares: [upstream-forward, capability-gate]\n"
    )
    with pytest.raises(SystemExit):
        main(["check-config", "--config", str(path)])
    assert "must end with 'upstream-forward'" in capsys.readouterr().err


def test_serve_refuses_a_public_host_without_api_keys(tmp_path, capsys):
    assert main(["serve", "--config", str(ROOT / "config.yaml"), "--host", "0.0.0.0"]) == 2
    assert "api_keys" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("state", "path"),
    [
        ({"backend": "disk"}, "state.backend"),
        ({"redis": {"url": "http://127.0.0.1:6379"}}, "state.redis.url"),
        ({"redis": {"timeout_ms": 0}}, "state.redis.timeout_ms"),
        ({"redis": {"timeout_ms": 60_000}}, "state.redis.timeout_ms"),
        ({"redis": {"namespace": "two words"}}, "state.redis.namespace"),
        ({"redis": {"retry_seconds": 0}}, "state.redis.retry_seconds"),
    ],
)
def test_a_bad_state_setting_is_an_error_naming_its_key(state: dict[str, Any], path: str) -> None:
    assert path in error_of(base(state=state))


def test_state_defaults_to_memory_and_a_redis_url_may_come_from_the_environment() -> None:
    assert parse_config(base(), {}).state.backend == "memory"
    config = parse_config(base(state={"backend": "redis", "redis": {"url": "${REDIS_URL}"}}), {"REDIS_URL": "redis://:pw@cache:6380/2"})
    assert (config.state.redis.url, config.state.redis.timeout_ms) == ("redis://:pw@cache:6380/2", 250)
