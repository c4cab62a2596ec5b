"""`pinch-router doctor` and the start-up checks, against a mock Ollama on loopback."""

from __future__ import annotations

import asyncio
import re
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from bench.harness import ROOT, free_port, wait_for_port
from router.server.doctor import Finding, key_findings, pull_commands
from tests.support.servers import loopback_server
from tests.support.config import make_config, model_entry
SHIPPED = ROOT / "config.yaml"
SHIPPED_MODELS = ["qwen2.5-coder:7b", "qwen3:14b", "llama3.2-vision:11b", "qwen2.5:3b"]


@pytest.fixture
async def ollama() -> AsyncIterator[tuple[list[str], str]]:
    """A mock Ollama: /api/tags lists the names in the yielded list; /api/chat answers as a classifier would."""
    from router.tools.mock_upstream import MockUpstream

    pulled: list[str] = []
    mock = MockUpstream(record=False, identify=False)  # standing in for a real Ollama: its model list is what counts
    mock.ollama_models = pulled
    async with loopback_server(mock.app()) as url:
        yield pulled, url


async def run_cli(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "router", *args, cwd=ROOT, env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode, out.decode(), err.decode()


async def test_doctor_names_the_missing_model_with_its_pull_command_and_exits_1(ollama, tmp_path: Path):
    pulled, url = ollama
    pulled += [m for m in SHIPPED_MODELS if m != "qwen3:14b"]
    code, out, _ = await run_cli("doctor", "--config", str(SHIPPED), "--state-dir", str(tmp_path), env={"OLLAMA_URL": url})
    assert code == 1
    assert "FAIL  model qwen3:14b" in out
    assert "model qwen3:14b: ollama pull qwen3:14b" in out  # the fix
    assert "ollama pull qwen2.5-coder:7b" not in out
    assert "ok    classifier" in out  # one real call, answered
    assert "ok    state" in out
    assert "1 problem" in out


async def test_doctor_passes_when_everything_is_there(ollama, tmp_path: Path):
    pulled, url = ollama
    pulled += SHIPPED_MODELS
    code, out, _ = await run_cli("doctor", "--config", str(SHIPPED), "--state-dir", str(tmp_path), env={"OLLAMA_URL": url})
    assert code == 0, out
    assert "FAIL" not in out and "all checks passed" in out


async def test_doctor_reports_ollama_down_with_how_to_start_it(tmp_path: Path):
    url = f"http://127.0.0.1:{free_port()}/v1"
    code, out, _ = await run_cli("doctor", "--config", str(SHIPPED), "--state-dir", str(tmp_path), env={"OLLAMA_URL": url})
    assert code == 1
    assert "FAIL  provider ollama" in out and "cannot connect" in out and "ollama serve" in out


async def test_serve_warns_once_per_problem_at_start_up_and_serves_anyway(ollama, tmp_path: Path):
    pulled, url = ollama
    pulled += [m for m in SHIPPED_MODELS if m != "qwen3:14b"]
    port = free_port()
    log = tmp_path / "serve.log"
    env = {**os.environ, "OLLAMA_URL": url, "PINCH_ROUTER_STATE_DIR": str(tmp_path)}
    with log.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "router", "serve", "--config", str(SHIPPED), "--port", str(port), cwd=ROOT, env=env,
            stdout=asyncio.subprocess.DEVNULL, stderr=sink,
        )  # fmt: skip
        try:
            await asyncio.get_running_loop().run_in_executor(None, wait_for_port, port, 30)
            for _ in range(50):
                if "doctor_problem" in log.read_text():
                    break
                await asyncio.sleep(0.1)
        finally:
            process.terminate()
            assert await asyncio.wait_for(process.wait(), 15) == 0
    problems = [line for line in log.read_text().splitlines() if "doctor_problem" in line]
    assert len(problems) == 1 and "qwen3:14b" in problems[0] and "ollama pull qwen3:14b" in problems[0]


def test_key_findings_flag_each_unset_variable(monkeypatch):
    monkeypatch.setenv("PINCH_TEST_SET_KEY", "sk-1")
    monkeypatch.delenv("PINCH_TEST_UNSET_KEY", raising=False)
    config = make_config(
        providers={
            "mock": {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "PINCH_TEST_SET_KEY"},
            "other": {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "PINCH_TEST_UNSET_KEY"},
        }
    )
    assert [(f.check, f.ok) for f in key_findings(config)] == [("key PINCH_TEST_SET_KEY", True), ("key PINCH_TEST_UNSET_KEY", False)]
    unset = key_findings(config)[1]
    assert isinstance(unset, Finding) and "providers.other.api_key_env" in unset.detail


def test_pull_commands_cover_chat_models_and_the_classifier_of_the_shipped_config():
    from router.config import load_config

    assert pull_commands(load_config(SHIPPED, environ={})) == [f"ollama pull {m}" for m in SHIPPED_MODELS]


async def test_doctor_makes_one_real_embeddings_call_when_relevance_is_on(ollama, tmp_path: Path):
    import yaml

    pulled, url = ollama
    pulled += [*SHIPPED_MODELS, "nomic-embed-text:latest"]  # the config names it without a tag
    config = yaml.safe_load(SHIPPED.read_text())
    config["pinch"]["relevance"]["enabled"] = True
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    code, out, _ = await run_cli("doctor", "--config", str(path), "--state-dir", str(tmp_path), env={"OLLAMA_URL": url})
    assert code == 0, out
    assert re.search(r"ok    model nomic-embed-text +available", out)
    assert re.search(r"ok    embeddings +nomic-embed-text: 64 dimensions", out)


async def test_doctor_checks_the_local_embedder_in_process_and_names_the_fix_when_it_is_missing(ollama, tmp_path: Path):
    import yaml

    pulled, url = ollama
    pulled += SHIPPED_MODELS
    config = yaml.safe_load(SHIPPED.read_text())
    config["pinch"]["relevance"].update(enabled=True, api="local")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    code, out, err = await run_cli("doctor", "--config", str(path), "--state-dir", str(tmp_path), env={"OLLAMA_URL": url})
    assert code == 0, out + err
    assert re.search(r"ok    embeddings \(pinch.relevance\) +all-MiniLM-L6-v2-static in-process \(api: local\), installed", out)
    assert re.search(r"ok    embeddings +all-MiniLM-L6-v2-static: 384 dimensions", out)
    config["pinch"]["relevance"]["local_model"] = "minilm"
    path.write_text(yaml.safe_dump(config))
    code, out, err = await run_cli("doctor", "--config", str(path), "--state-dir", str(tmp_path), env={"OLLAMA_URL": url})
    assert code == 0, out + err
    assert re.search(r"ok    embeddings +all-MiniLM-L6-v2-int8: 384 dimensions", out)
    config["pinch"]["relevance"]["local_model_path"] = str(tmp_path / "no-model")
    path.write_text(yaml.safe_dump(config))
    code, out, err = await run_cli("doctor", "--config", str(path), "--state-dir", str(tmp_path), env={"OLLAMA_URL": url})
    assert code == 1 and "Traceback" not in out + err
    assert re.search(r"FAIL  embeddings \(pinch.relevance\) +the local embedder's file .*no-model/model.onnx is missing", out)
    assert "pip install 'pinch-router[local-embeddings]', or set pinch.relevance.enabled: false" in out


async def test_doctor_checks_an_openai_compatible_provider_against_its_model_list(mock_upstream, monkeypatch, tmp_path: Path):
    from router.server.doctor import run_doctor

    monkeypatch.delenv("PINCH_TEST_UNSET_KEY", raising=False)
    mock, url = mock_upstream  # GET /v1/models lists "mock"
    mock.identity = {}  # standing in for a real provider, whose list is what counts
    config = make_config(
        url,
        providers={"mock": {"base_url": url, "api_key_env": "PINCH_TEST_UNSET_KEY"}},
        models=[model_entry("listed", upstream_model="mock"), model_entry("unlisted", upstream_model="gpt-x")],
    )
    findings = {f.check: f for f in await run_doctor(config, tmp_path, call_timeout=5)}
    assert findings["provider mock"].ok and findings["model mock"].ok
    assert not findings["model gpt-x"].ok and "does not list it" in findings["model gpt-x"].detail
    assert not findings["key PINCH_TEST_UNSET_KEY"].ok


@pytest.mark.parametrize("base_path", ["", "/v1"])
async def test_doctor_checks_an_anthropic_provider_against_its_v1_model_list(mock_upstream, tmp_path: Path, base_path: str):
    """Anthropic lists its models at /v1/models whether base_url ends in /v1 or not (as chat goes to /v1/messages)."""
    from router.server.doctor import run_doctor

    _, url = mock_upstream  # GET /v1/models lists "mock"
    root = url.removesuffix("/v1")
    config = make_config(
        url,
        providers={"claude": {"base_url": root + base_path, "api": "anthropic"}},
        models=[model_entry("listed", provider="claude", upstream_model="mock")],
    )
    findings = {f.check: f for f in await run_doctor(config, tmp_path, call_timeout=5)}
    assert findings["provider claude"].ok, findings["provider claude"].detail
    assert findings["provider claude"].detail.startswith(f"{root}/v1/models: ")
    assert findings["model mock"].ok


async def test_doctor_names_the_status_and_the_error_type_of_a_model_list_it_cannot_read(tmp_path: Path):
    """A provider refusing the listing is a finding with the status and the error's type, never the message it
    echoed (it may hold the key) and never a crash of the check."""
    from router.server.doctor import run_doctor

    async def refuse(request: web.Request) -> web.Response:
        return web.json_response({"error": {"type": "authentication_error", "message": "bad key sk-secret"}}, status=401)

    app = web.Application()
    app.router.add_get("/v1/models", refuse)
    async with loopback_server(app) as url:
        config = make_config(url, providers={"claude": {"base_url": url.removesuffix("/v1"), "api": "anthropic"}}, models=[model_entry("m", provider="claude")])
        finding = {f.check: f for f in await run_doctor(config, tmp_path, call_timeout=5)}["provider claude"]
    assert not finding.ok
    assert finding.detail == f"{url}/models answered 401: type authentication_error"


async def test_doctor_against_mock_upstream_says_it_is_the_mock_and_exits_0(tmp_path: Path):
    """A first-time user tries the shipped config on `pinch-router mock-upstream`: no FAIL for its model list."""
    from router.server import doctor
    from router.tools import mock_upstream

    assert doctor.MOCK_HEADER == mock_upstream.MOCK_HEADER  # two names for one header (the server never imports the tools)
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "router", "mock-upstream", "--port", str(port), cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        await asyncio.to_thread(wait_for_port, port, 30)
        code, out, _ = await run_cli("doctor", "--config", str(SHIPPED), "--state-dir", str(tmp_path), env={"OLLAMA_URL": f"http://127.0.0.1:{port}/v1"})
    finally:
        process.kill()
        await process.wait()
    assert code == 0, out
    assert "FAIL" not in out and "all checks passed" in out
    assert "the upstream is pinch-router mock-upstream" in out
    assert "ok    classifier" in out
