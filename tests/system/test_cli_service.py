"""The command line as a new user meets it: start-up failures, state, init, config lookup, --version."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import signal
import stat
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
import yaml

from bench.harness import ROOT, free_port
from router.cli import MOCK_UPSTREAM_PORT, build_parser, main, starter_config
from router.config import ServerSettings
from router.server.locations import LocationError, find_config, state_dir, user_config_path
from router.server.service import event_loop_factory
from tests.support.processes import router, running, write_config


def run(args: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    process = router(args, **kwargs)
    out, err = process.communicate(timeout=60)
    return subprocess.CompletedProcess(args, process.returncode, out.decode(), err.decode())


def assert_one_line_exit_2(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "listening" not in result.stderr and "Traceback" not in result.stderr
    for text in expected:
        assert text in lines[0]


# --- start-up failures: one line naming the cause and the setting, exit 2, never "listening" ---


def test_port_in_use_is_one_line_and_exit_2(tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = write_config(tmp_path, free_port(), port)
        result = run(["serve", "--config", str(config)])
    assert_one_line_exit_2(result, f"cannot listen on 127.0.0.1:{port}", "address already in use", "server.port", "--port")


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["--host", "192.0.2.1", "--allow-unauthenticated-remote"], {}, ("cannot listen on 192.0.2.1:", "cannot assign requested address")),
        ([], {"PINCH_ROUTER_PORT": "80a"}, ("$PINCH_ROUTER_PORT must be a port number", "'80a'")),
    ],
    ids=["address-not-on-this-machine", "bad-port-variable"],
)
def test_other_start_up_failures_are_one_line_and_exit_2(tmp_path: Path, args, env, expected):
    config = write_config(tmp_path, free_port(), free_port())
    result = run(["serve", "--config", str(config), *args], env=env)
    assert_one_line_exit_2(result, *expected)


def test_a_port_flag_that_makes_a_provider_point_back_at_the_proxy_is_one_line_and_exit_2(tmp_path: Path):
    upstream = free_port()  # the file's provider is here; listening here too would loop every request
    config = write_config(tmp_path, upstream, free_port())
    result = run(["serve", "--config", str(config), "--port", str(upstream)])
    assert_one_line_exit_2(result, "providers.", "is this proxy itself", f"port {upstream}", "requests would loop")


def test_decision_log_in_a_missing_directory_is_one_line_and_exit_2(tmp_path: Path):
    missing = tmp_path / "no-such-dir" / "decisions.sqlite3"
    config = write_config(tmp_path, free_port(), free_port(), decision_log={"path": str(missing)})
    result = run(["serve", "--config", str(config)])
    assert_one_line_exit_2(result, f"cannot write the decision log {missing}", "decision_log.path")


def test_an_unusable_state_directory_is_one_line_and_exit_2(tmp_path: Path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    config = write_config(tmp_path, free_port(), free_port(), decision_log={"path": "decisions.sqlite3"})
    result = run(["serve", "--config", str(config), "--state-dir", str(blocker / "state")])
    assert_one_line_exit_2(result, "cannot create the state directory", "--state-dir")


# --- check-config ---


def test_check_config_catches_an_unwritable_decision_log_location(tmp_path: Path):
    config = write_config(tmp_path, free_port(), free_port(), decision_log={"path": str(tmp_path / "gone" / "d.sqlite3")})
    result = run(["check-config", "--config", str(config)])
    assert result.returncode == 2
    assert "cannot write the decision log" in result.stderr and ": ok" not in result.stdout


def test_check_config_warns_for_each_unset_key_variable_and_still_passes(tmp_path: Path):
    providers = {"mock": {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "PINCH_TEST_UNSET_KEY"}}
    config = write_config(tmp_path, free_port(), free_port(), providers=providers)
    env = {k: v for k, v in os.environ.items() if k != "PINCH_TEST_UNSET_KEY"}
    result = run(["check-config", "--config", str(config)], env=env)
    assert result.returncode == 0 and f"{config}: ok" in result.stdout
    assert "warning: providers.mock.api_key_env: PINCH_TEST_UNSET_KEY is not set" in result.stderr
    assert not (tmp_path / "decisions.sqlite3").exists()  # checking the location leaves no file behind
    result = run(["check-config", "--config", str(config)], env={"PINCH_TEST_UNSET_KEY": "sk-test"})
    assert "warning" not in result.stderr


# --- the state directory ---


@pytest.mark.parametrize(
    ("flag", "environ", "expected"),
    [
        ("/srv/flag", {"PINCH_ROUTER_STATE_DIR": "/srv/env", "XDG_STATE_HOME": "/xdg"}, "/srv/flag"),
        (None, {"PINCH_ROUTER_STATE_DIR": "/srv/env", "XDG_STATE_HOME": "/xdg"}, "/srv/env"),
        (None, {"XDG_STATE_HOME": "/xdg", "HOME": "/home/u"}, "/xdg/pinch-router"),
        (None, {"XDG_STATE_HOME": "relative/ignored", "HOME": "/home/u"}, "/home/u/.local/state/pinch-router"),
        (None, {"HOME": "/home/u"}, "/home/u/.local/state/pinch-router"),
    ],
)
def test_state_directory_order(flag, environ, expected):
    assert state_dir(flag, environ) == Path(expected)


# --- config lookup order ---


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    paths = {
        "flag": tmp_path / "flag.yaml",
        "env": tmp_path / "env.yaml",
        "cwd": tmp_path / "work" / "config.yaml",
        "user": tmp_path / "xdg" / "pinch-router" / "config.yaml",
    }
    for path in paths.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    return paths


@pytest.mark.parametrize(
    ("present", "expected"),
    [
        ({"flag", "env", "cwd", "user"}, "flag"),
        ({"env", "cwd", "user"}, "env"),
        ({"cwd", "user"}, "cwd"),
        ({"user"}, "user"),
    ],
)
def test_config_lookup_order(places, tmp_path, present, expected):
    flag = str(places["flag"]) if "flag" in present else None
    environ = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), **({"PINCH_ROUTER_CONFIG": str(places["env"])} if "env" in present else {})}
    if "cwd" not in present:
        places["cwd"].unlink()
    assert find_config(flag, environ, places["cwd"].parent) == places[expected]


def test_a_named_config_that_is_missing_is_an_error_not_a_reason_to_look_further(places, tmp_path):
    with pytest.raises(LocationError, match=r"nope\.yaml: no such config file \(from \$PINCH_ROUTER_CONFIG\)"):
        find_config(None, {"PINCH_ROUTER_CONFIG": "nope.yaml"}, places["cwd"].parent)


def test_no_config_anywhere_lists_where_it_looked(tmp_path: Path):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "PINCH_ROUTER_CONFIG": ""}
    result = run(["serve"], cwd=tmp_path, env=env)
    assert result.returncode == 2
    assert str(tmp_path / "config.yaml") in result.stderr
    assert str(user_config_path(env)) in result.stderr
    assert "$PINCH_ROUTER_CONFIG" in result.stderr and "pinch-router init" in result.stderr


# --- --version, init, the packaged starter config, mock-upstream's port ---


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert re.fullmatch(r"pinch-router \d+\.\d+\.\d+\S*\n", capsys.readouterr().out)


def test_the_packaged_starter_config_is_the_shipped_config_yaml():
    assert starter_config() == (ROOT / "config.yaml").read_text(encoding="utf-8")


def test_mock_upstream_defaults_to_the_port_the_shipped_config_expects():
    shipped = yaml.safe_load((ROOT / "config.yaml").read_text())["providers"]["ollama"]["base_url"]
    assert f"localhost:{MOCK_UPSTREAM_PORT}/" in shipped
    assert build_parser().parse_args(["mock-upstream"]).port == MOCK_UPSTREAM_PORT


def test_init_refuses_to_overwrite(tmp_path: Path):
    (tmp_path / "config.yaml").write_text("mine")
    result = run(["init"], cwd=tmp_path)
    assert result.returncode == 1 and "already exists" in result.stderr
    assert (tmp_path / "config.yaml").read_text() == "mine"


async def test_init_then_serve_from_an_empty_directory(tmp_path: Path):
    work, state = tmp_path / "work", tmp_path / "state"
    work.mkdir()
    result = run(["init"], cwd=work)
    assert result.returncode == 0
    for model in ("qwen2.5-coder:7b", "qwen3:14b", "llama3.2-vision:11b", "qwen2.5:3b"):
        assert f"ollama pull {model}" in result.stdout
    assert "pinch-router doctor" in result.stdout
    port = free_port()
    env = {
        "XDG_STATE_HOME": str(state),
        "PINCH_ROUTER_PORT": str(port),  # host and port from the environment
        "OLLAMA_URL": f"http://127.0.0.1:{free_port()}/v1",
        "PINCH_ROUTER_CONFIG": "",
    }
    with running(router(["serve"], cwd=work, env=env, stderr=subprocess.DEVNULL), port):
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
                assert resp.status == 200
    database = state / "pinch-router" / "decisions.sqlite3"
    assert stat.S_IMODE(database.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(database.stat().st_mode) == 0o600
    assert sorted(p.name for p in work.iterdir()) == ["config.yaml"]  # nothing else lands where it started


def test_a_relative_decision_log_path_lands_in_the_state_directory_with_its_folders(tmp_path: Path):
    from router.server.locations import place_state, prepare_state
    from tests.support.config import make_config
    state = tmp_path / "state"
    config = place_state(make_config(decision_log={"path": "logs/decisions.sqlite3"}), state)
    prepare_state(config, state)
    database = state / "logs" / "decisions.sqlite3"
    assert config.decision_log.path == str(database) and database.is_file()
    assert stat.S_IMODE(state.stat().st_mode) == 0o700


# --- server.event_loop: uvloop by default, asyncio's own on request or where uvloop is missing ----


@pytest.mark.parametrize(("setting", "loop_type"), [("uvloop", "uvloop.Loop"), ("asyncio", "asyncio.unix_events._UnixSelectorEventLoop")])
def test_serve_runs_on_the_configured_event_loop(setting, loop_type):
    factory = event_loop_factory(setting)
    loop = factory() if factory is not None else asyncio.new_event_loop()
    try:
        assert f"{type(loop).__module__}.{type(loop).__qualname__}" == loop_type
    finally:
        loop.close()


def test_uvloop_is_the_default_event_loop():
    assert ServerSettings().event_loop == "uvloop"


def test_without_uvloop_installed_serve_falls_back_to_asyncios_loop_and_says_so(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    assert event_loop_factory("uvloop") is None
    assert any(record.message == "uvloop_unavailable" for record in caplog.records)


def test_mock_upstream_on_a_busy_port_says_so_in_one_line_and_exits_2_and_its_banner_names_every_api():
    from tests.support.processes import router, running

    port = free_port()
    with running(router(["mock-upstream", "--port", str(port)]), port) as first:
        second = router(["mock-upstream", "--port", str(port)])
        out, err = second.communicate(timeout=30)
        assert second.returncode == 2
        assert err.decode().strip().splitlines() == [f"pinch-router: mock-upstream: cannot listen on 127.0.0.1:{port}: address already in use (choose another with --port)"]
        first.send_signal(signal.SIGINT)
        _, banner = first.communicate(timeout=30)
    said = banner.decode()
    assert all(api in said for api in ("OpenAI chat completions", "Responses", "Anthropic Messages", "Ollama", "embeddings"))
