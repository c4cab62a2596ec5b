"""The scale-out deployment files say what the code does: their configs load, and put state on Redis."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from bench.harness import ROOT
from router.server.registry import REGISTRY

DEPLOY = ROOT / "deploy"


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def k8s(kind: str, name: str) -> dict[str, Any]:
    found = [doc for path in sorted((DEPLOY / "k8s").glob("*.yaml")) for doc in documents(path) if doc["kind"] == kind and doc["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name)
    return found[0]


KUBERNETES = "1.30"


@pytest.mark.parametrize("version", [KUBERNETES, kubernetes_validate.latest_version()])
@pytest.mark.parametrize("path", sorted((DEPLOY / "k8s").glob("*.yaml")), ids=lambda p: p.name)
def test_each_k8s_manifest_is_valid_against_the_kubernetes_api_schema(path: Path, version: str) -> None:
    """Against an older and the newest API schema the package ships (offline); strict: a misspelt field is an error."""
    for doc in documents(path):
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_schema_check_rejects_a_misspelt_field() -> None:
    deployment = k8s("Deployment", "pinch-router")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError, match="readinesProbe"):
        kubernetes_validate.validate(deployment, KUBERNETES, strict=True)


def test_the_k8s_replicas_load_their_configmap_with_state_on_the_redis_service(tmp_path: Path) -> None:
    deployment = k8s("Deployment", "pinch-router")
    assert deployment["spec"]["replicas"] == 2
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    env = {item["name"]: item["value"] for item in container["env"]}
    config_file = tmp_path / "config.yaml"
    config_file.write_text(k8s("ConfigMap", "pinch-router-config")["data"]["config.yaml"])
    config = REGISTRY.load_config(config_file, environ=env)
    redis_service = k8s("Service", "pinch-router-redis")
    assert config.state.backend == "redis"
    assert config.state.redis.url == f"redis://{redis_service['metadata']['name']}:{redis_service['spec']['ports'][0]['port']}/0"
    assert k8s("Service", "pinch-router")["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_the_compose_replicas_run_the_shipped_config_on_redis_behind_nginx() -> None:
    compose = documents(DEPLOY / "compose.replicas.yaml")[0]["services"]
    proxy = compose["pinch-router"]
    assert proxy["deploy"]["replicas"] == 2
    assert "ports" not in proxy  # only nginx is published
    config = REGISTRY.load_config(ROOT / "config.yaml", environ=proxy["environment"])
    assert (config.state.backend, config.state.redis.url) == ("redis", "redis://redis:6379/0")
    assert "redis" in compose and "ollama" in compose
    assert "server pinch-router:8787" in (DEPLOY / "nginx.conf").read_text()


def test_the_shipped_config_keeps_state_in_memory_unless_told() -> None:
    assert REGISTRY.load_config(ROOT / "config.yaml", environ={}).state.backend == "memory"
