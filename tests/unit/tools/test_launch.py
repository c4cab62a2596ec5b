"""``pinch-router launch``'s wiring with plain data (#47): every agent points at the proxy's address with
the key, for its own process only (environment, flags, a temporary file), never the user's files."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest
import yaml

from router.tools.launch import AGENTS, KEY_ENV, context_window, launch, list_agents, proxy_of
from router.config import load_config
from tests.support.config import make_config

ROOT, KEY = "http://127.0.0.1:9999", "sk-team-1"


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_each_agent_is_pointed_at_the_proxy_with_the_key_and_nothing_outside_its_folder(name: str, tmp_path: Path) -> None:
    wiring = AGENTS[name].wire(ROOT, KEY, tmp_path)
    everything = " ".join([*wiring.argv, *wiring.env.values(), *wiring.files.values(), *(wiring.setup or [])])
    assert ROOT in everything and KEY in everything
    assert wiring.argv[0] == AGENTS[name].program
    for path in [v for v in wiring.env.values() if v.startswith("/")]:
        assert Path(path).is_relative_to(tmp_path)  # a file or folder of launch's own, in its temporary folder
    for path in [*wiring.argv, *(wiring.setup or [])]:
        assert not path.startswith("/") or Path(path).is_relative_to(tmp_path)  # a folder given on the command line: launch's


def test_the_agents_own_config_formats() -> None:
    codex = AGENTS["codex"].wire(ROOT, KEY, Path("/t"))
    assert codex.argv == [
        "codex", "-c", 'model_provider="pinch"', "-c", 'model_providers.pinch.name="pinch-router"',
        "-c", f'model_providers.pinch.base_url="{ROOT}/v1"', "-c", 'model_providers.pinch.wire_api="responses"',
        "-c", f'model_providers.pinch.env_key="{KEY_ENV}"',
    ]  # fmt: skip
    assert codex.env == {KEY_ENV: KEY}
    opencode = AGENTS["opencode"].wire(ROOT, KEY, Path("/t"))
    config = orjson.loads(opencode.files["opencode.json"])
    assert config["model"] == "pinch-router/auto" and config["provider"]["pinch-router"]["options"] == {"baseURL": f"{ROOT}/v1", "apiKey": KEY}
    assert opencode.env == {"OPENCODE_CONFIG": "/t/opencode.json"}
    cn = AGENTS["continue"].wire(ROOT, KEY, Path("/t"))
    assert cn.argv == ["cn", "--config", "/t/continue.yaml"]
    assert yaml.safe_load(cn.files["continue.yaml"])["models"][0] | {"roles": None} == {
        "name": "pinch-router", "provider": "openai", "model": "auto", "apiBase": f"{ROOT}/v1", "apiKey": KEY, "roles": None, "capabilities": ["tool_use"],
    }  # fmt: skip
    # Cline keeps its provider in its settings folder: set up in a temporary one, or (--persist) in ~/.cline
    cline = AGENTS["cline"].wire(ROOT, KEY, Path("/t"))
    assert cline.argv == ["cline", "--config", "/t/cline"] and cline.setup == [*cline.persist, "--config", "/t/cline"]
    assert cline.persist == ["cline", "auth", "-p", "openai", "-k", KEY, "-m", "auto", "-b", f"{ROOT}/v1"] and cline.persisted_argv == ["cline"]
    pi = AGENTS["pi"].wire(ROOT, KEY, Path("/t"))
    assert pi.env == {"PI_CODING_AGENT_DIR": "/t/pi-agent"} and "pi-agent/models.json" in pi.files
    # without an auth type, Gemini CLI 0.61.0 takes GOOGLE_GEMINI_BASE_URL for "gateway" auth and exits 41
    gemini = AGENTS["gemini"].wire(ROOT, KEY, Path("/t"))
    assert gemini.env["GEMINI_CLI_SYSTEM_SETTINGS_PATH"] == "/t/gemini-settings.json"
    assert orjson.loads(gemini.files["gemini-settings.json"]) == {"security": {"auth": {"selectedType": "gemini-api-key"}}}


def test_the_address_and_key_come_from_the_config_the_environment_winning() -> None:
    config = make_config(server={"host": "0.0.0.0", "port": 8800, "api_keys": [{"name": "dev", "key": "k-dev"}], "allow_unauthenticated_remote": False})
    assert proxy_of(config, {}) == proxy_of(config, {}).__class__("http://127.0.0.1:8800", "k-dev")
    assert proxy_of(config, {"PINCH_ROUTER_PORT": "9000", KEY_ENV: "mine"}).root == "http://127.0.0.1:9000"
    assert proxy_of(config, {KEY_ENV: "mine"}).key == "mine"
    assert proxy_of(make_config(), {}).key == "unused"  # a proxy without keys takes any


def test_launch_refuses_what_it_cannot_do_with_a_clear_word(tmp_path: Path) -> None:
    config = make_config()
    err = io.StringIO()
    assert launch("vim", [], config, tmp_path / "c.yaml", out=err, environ={"PATH": ""}) == 2 and "no agent 'vim'" in err.getvalue()
    err = io.StringIO()
    assert launch("claude", [], config, tmp_path / "c.yaml", out=err, environ={"PATH": str(tmp_path)}) == 127
    assert "claude is not installed" in err.getvalue()


def test_list_names_every_agent_and_how_it_is_wired() -> None:
    out = io.StringIO()
    assert list_agents(out) == 0
    text = out.getvalue()
    assert all(f"{name} " in text for name in AGENTS) and "ANTHROPIC_BASE_URL" in text and "--persist" in text  # Cline's


def test_claude_code_compacts_before_the_largest_window_of_the_configs_models() -> None:
    """Claude Code assumes 200k tokens for a model name it does not know; launch tells it the routed models' window."""
    shipped = load_config(Path(__file__).resolve().parents[3] / "config.yaml", environ={})
    assert context_window(shipped) == max(m.context_window for m in shipped.models) == 40960
    # Claude Code 2.1.332 reads a window under 100k as 100k (and prints so): launch leaves the shipped 40,960 unsaid
    assert (AGENTS["claude"].window_env, AGENTS["claude"].window_floor) == ("CLAUDE_CODE_AUTO_COMPACT_WINDOW", 100_000)
