"""The layering, checked: import-linter's contracts (pyproject.toml) and every core importable without the framework."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE_MODULES = sorted(f"router.core.{p.stem}" for p in (ROOT / "router" / "core").glob("*.py") if p.stem != "__init__")
# What a pure core may import besides router.core: the standard library's pure parts and three data libraries.
CORE_MAY_IMPORT = {"orjson", "xxhash", "numpy", "__future__", "collections", "dataclasses", "enum", "typing", "re", "math",
                   "hashlib", "email", "types", "itertools", "functools", "bisect", "json", "heapq", "statistics", "string",
                   # the redactor's log filter rewrites records (and their tracebacks); no core emits a log line
                   "logging", "traceback"}


def test_the_import_linter_contracts_are_kept():
    result = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "3 kept, 0 broken" in result.stdout


def _contract(contract_id: str) -> dict:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["id"] == contract_id)


def test_every_server_module_is_held_to_the_no_tools_contract():
    """A module added to router/ is the server's unless it is the command line or a tool: the contract must name it."""
    top_level = {f"router.{p.stem if p.is_file() else p.name}" for p in (ROOT / "router").iterdir()
                 if (p.suffix == ".py" and p.stem not in ("__init__", "__main__")) or (p / "__init__.py").is_file()}
    server = top_level - {"router.cli", "router.tools"}
    contract = _contract("server-without-tools")
    assert set(contract["source_modules"]) == server | {"middlewares"}
    assert "router.tools" in contract["forbidden_modules"] and "textual" in contract["forbidden_modules"]


def test_every_package_folder_is_packaged_and_textual_is_only_an_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    folders = {".".join(p.parent.relative_to(ROOT).parts) for p in [*ROOT.glob("router/**/__init__.py"), ROOT / "middlewares" / "__init__.py"]}
    assert set(project["tool"]["setuptools"]["packages"]) == folders  # a folder left out would be missing from the wheel
    assert not any(d.startswith("textual") for d in project["project"]["dependencies"])
    assert any(d.startswith("textual") for d in project["project"]["optional-dependencies"]["tui"])


@pytest.mark.parametrize("module", CORE_MODULES)
def test_a_core_module_loads_without_aiohttp_asyncio_or_the_framework(module):
    check = (
        f"import {module}, sys; "
        "loaded = [m for m in ('aiohttp', 'asyncio', 'pydantic', 'router.config', 'router.contract.context', 'router.contract.stage', 'middlewares') if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    result = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]


def test_core_modules_import_only_core_the_pure_standard_library_and_data_libraries():
    graph = grimp.build_graph("router", include_external_packages=True, cache_dir=None)
    outside = {
        (module, imported)
        for module in graph.find_descendants("router.core") | {"router.core"}
        for imported in graph.find_modules_directly_imported_by(module)
        if not imported.startswith("router.core") and imported.split(".")[0] not in CORE_MAY_IMPORT
    }
    assert not outside
