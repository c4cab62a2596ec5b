"""The layering, checked: import-linter's contracts (pyproject.toml, written by folder), no import
cycle anywhere, and the shape the folders promise — a thin router/, a neutral core, sans-io formats,
a stage contract on one screen."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
PURE_FOLDERS = ("core", "wire", "translate")
PURE_MODULES = sorted(
    ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    for folder in PURE_FOLDERS
    for p in (ROOT / "router" / folder).rglob("*.py")
)
# What a pure module may import besides the pure folders: the standard library's pure parts and three data libraries.
PURE_MAY_IMPORT = {"orjson", "xxhash", "numpy", "__future__", "collections", "dataclasses", "enum", "typing", "re", "math",
                   "hashlib", "email", "types", "itertools", "functools", "operator", "bisect", "json", "heapq", "statistics", "string", "fnmatch",
                   "base64", "binascii",
                   # the redactor's log filter rewrites records (and their tracebacks); no core emits a log line
                   "logging", "traceback"}
FORMAT_WORDS = re.compile(r"anthropic|responses|openai|chat|ollama|gemini", re.IGNORECASE)


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_import_linter_contracts_are_kept():
    result = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    contracts = project()["tool"]["importlinter"]["contracts"]
    assert f"{len(contracts)} kept, 0 broken" in result.stdout


def _lists(value: object) -> list[list]:
    if isinstance(value, list):
        return [value, *(inner for item in value for inner in _lists(item))]
    if isinstance(value, dict):
        return [inner for item in value.values() for inner in _lists(item)]
    return []


def test_the_contracts_name_folders_not_lists_of_modules():
    """A new module is covered by the folder it lands in: no list in pyproject.toml names more than 12 modules."""
    importlinter = project()["tool"]["importlinter"]
    for contract in importlinter["contracts"]:
        for listed in _lists(contract):
            names = [n for item in listed if isinstance(item, str) for n in re.split(r"[|:]", item) if n.strip()]
            assert len(names) <= 12, (contract["id"], names)


def _graph() -> grimp.ImportGraph:
    return grimp.build_graph("router", "middlewares", cache_dir=None)  # type-checking imports included


def test_no_module_imports_itself_through_others():
    """Zero import cycles over the whole tree, the imports made for type checking included."""
    graph = _graph()
    imports = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    index, low, stack, on_stack, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = counter[0]
        counter[0] += 1
        stack.append(module)
        on_stack.add(module)
        for imported in imports[module]:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in sorted(imports):
        if module not in index:
            visit(module)
    assert cycles == []


def test_router_keeps_the_command_line_the_config_and_the_entry_points_only():
    modules = sorted(p.name for p in (ROOT / "router").glob("*.py"))
    assert len(modules) <= 6 and modules == ["__init__.py", "__main__.py", "cli.py", "config.py"]


def test_no_core_module_is_about_one_wire_format():
    """Neither a file under router/core/ nor a public name one defines names a wire format."""
    offending = []
    for path in sorted((ROOT / "router" / "core").glob("*.py")):
        if FORMAT_WORDS.search(path.stem):
            offending.append(str(path.relative_to(ROOT)))
        for node in ast.parse(path.read_text()).body:
            names = [node.name] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else [
                t.id for t in getattr(node, "targets", [getattr(node, "target", None)]) if isinstance(t, ast.Name)
            ]
            offending += [f"{path.stem}.{n}" for n in names if not n.startswith("_") and FORMAT_WORDS.search(n)]
    assert offending == []


def test_no_stage_imports_a_wire_format_or_a_translation():
    graph = _graph()
    stages = graph.find_children("middlewares")
    leaks = {(s, m) for s in stages for m in graph.find_modules_directly_imported_by(s) if m.startswith(("router.wire", "router.translate"))}
    assert leaks == set()


def test_the_stage_contract_is_one_folder_on_one_screen():
    """context, the stage protocol and its one failure boundary, the timeout, the chain: ~300 lines of code and docs."""
    contract = sorted((ROOT / "router" / "contract").glob("*.py"))
    assert [p.stem for p in contract] == ["__init__", "chain", "context", "stage", "timeout"]
    lines = sum(1 for p in contract for line in p.read_text().splitlines() if line.strip())
    assert lines <= 300


def test_every_package_folder_is_packaged_and_textual_is_only_an_extra():
    found = project()["tool"]["setuptools"]["packages"]["find"]
    for init in [*ROOT.glob("router/**/__init__.py"), ROOT / "middlewares" / "__init__.py"]:
        package = ".".join(init.parent.relative_to(ROOT).parts)
        assert any(package == pattern or (pattern.endswith(".*") and package.startswith(pattern[:-1])) for pattern in found["include"]), package
    dependencies = project()["project"]
    assert not any(d.startswith("textual") for d in dependencies["dependencies"])
    assert any(d.startswith("textual") for d in dependencies["optional-dependencies"]["tui"])


@pytest.mark.parametrize("module", PURE_MODULES)
def test_a_pure_module_loads_without_aiohttp_asyncio_or_the_framework(module):
    check = (
        f"import {module}, sys; "
        "loaded = [m for m in ('aiohttp', 'asyncio', 'pydantic', 'router.config', 'router.contract.context', 'router.contract.stage', 'middlewares') if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    result = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]


def test_pure_modules_import_only_the_pure_folders_the_pure_standard_library_and_data_libraries():
    graph = grimp.build_graph("router", include_external_packages=True, cache_dir=None)
    pure = tuple(f"router.{folder}" for folder in PURE_FOLDERS)
    outside = {
        (module, imported)
        for module in PURE_MODULES
        for imported in graph.find_modules_directly_imported_by(module)
        if not imported.startswith(pure) and imported.split(".")[0] not in PURE_MAY_IMPORT
    }
    assert not outside
