"""The README says what the code does: its configuration table, commands, metrics, headers, layout and tests.

Each check reads the README as a user would and compares it with the code it names, so a key, option,
metric, module or test added, renamed or removed without the README following fails here.
"""

from __future__ import annotations

import ast
import re
import typing
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from router.cli import build_parser
from router.config import DEFAULT_CHAIN, Config, ProviderSettings, load_config
from router.wire.anthropic_messages.errors import ERROR_TYPES
from router.observe.metrics import Metrics
from router.server.registry import STAGES, stage_registry
from router.http.unknown_paths import SUPPORTED_ENDPOINTS

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
CODE_SPAN = re.compile(r"`([^`]+)`")


def section(title: str) -> str:
    """The text of one `## title` section, up to the next `## ` heading."""
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end != -1 else None]


def table_rows(text: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip().strip("|").split(" | ")] for line in text.splitlines() if line.startswith("| `")]


# ---- the configuration table -------------------------------------------------------------------------------------


def settings_keys(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    """Every leaf key of the settings classes, dotted as the README writes it, with its default ("—": required)."""
    keys: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        if key == "providers":
            keys.update(settings_keys(ProviderSettings, "providers.<name>."))
            continue
        if key == "models":  # a list of entries, documented as one row naming each field
            keys["models[]"] = None
            continue
        nested = [t for t in (field.annotation, *typing.get_args(field.annotation)) if isinstance(t, type) and issubclass(t, BaseModel)]
        if nested:
            keys.update(settings_keys(nested[0], f"{key}."))
        else:
            keys[key] = "—" if field.is_required() else field.get_default(call_default_factory=True)
    return keys


CODE_KEYS = settings_keys(Config)


@cache
def documented_keys() -> dict[str, str]:
    """README config table: key → its default cell's text for that key.

    A row may name several keys of one section (`` `pinch.ledger_ttl_minutes` / `ledger_max_sessions` ``) and give
    their defaults in the same order (``1440 / 10000``); a parenthesis after a default adds what the shipped config sets.
    """
    documented: dict[str, str] = {}
    for cells in table_rows(section("Configuration")):
        names = CODE_SPAN.findall(cells[0])
        prefix = names[0].rsplit(".", 1)[0] + "." if "." in names[0] else ""
        keys = [names[0], *(prefix + n for n in names[1:])]
        defaults = cells[1].split(" / ")
        for i, key in enumerate(keys):
            documented[key] = defaults[i] if len(defaults) == len(keys) else cells[1]
    return documented


# Defaults the table describes in words rather than as a value.
DESCRIBED_DEFAULTS = {
    "middlewares": "all seven, in order",
    "routing.categories": "3 examples",
    "providers.<name>.cache_lifetime_seconds": "per `api` (300)",
    "pinch.relevance.base_url": "Ollama `/v1`",
    "models[]": "—",
}


def as_written(value: Any) -> str:
    """A default as the README writes it."""
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "none"
    if isinstance(value, (int, float)) or value == "—":
        return str(value)
    if isinstance(value, list):
        return f"`[{', '.join(str(v) for v in value)}]`"
    return f"`{value}`"


def test_every_setting_is_in_the_readmes_configuration_table():
    assert sorted(set(CODE_KEYS) - set(documented_keys())) == []


def test_every_key_in_the_readmes_configuration_table_is_a_setting():
    assert sorted(set(documented_keys()) - set(CODE_KEYS)) == []


@pytest.mark.parametrize("key", sorted(CODE_KEYS))
def test_the_configuration_table_gives_each_settings_real_default(key):
    documented = documented_keys()[key]
    if key in DESCRIBED_DEFAULTS:
        assert documented == DESCRIBED_DEFAULTS[key]
        return
    written = re.sub(r" \([^)]*\)$", "", documented).strip("`")  # "50000 (24000 shipped)": what config.yaml sets
    expected = as_written(CODE_KEYS[key]).strip("`")
    assert written == expected or _same_number(written, CODE_KEYS[key]), f"{key}: README {documented!r}, code {CODE_KEYS[key]!r}"


def _same_number(written: str, value: Any) -> bool:
    try:
        return not isinstance(value, bool) and float(written) == float(value)
    except (TypeError, ValueError):
        return False


def _leaves(raw: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(raw, dict):
        return {prefix.rstrip("."): raw}
    out: dict[str, Any] = {}
    for name, value in raw.items():
        out.update(_leaves(value, f"{prefix}{name}."))
    return out


def test_where_the_shipped_config_differs_from_a_default_the_table_says_so():
    shipped = load_config(ROOT / "config.yaml", environ={})
    raw = _leaves(yaml.safe_load((ROOT / "config.yaml").read_text()))
    differs = sorted(
        key for key in CODE_KEYS
        if "<name>" not in key and key != "models[]" and key in raw
        and (setting_at(shipped, key) != CODE_KEYS[key] or "${" in str(raw[key]))
        and key not in ("pinch.relevance.base_url",)  # ${OLLAMA_URL:-…}: the default itself unless set, like the provider's
    )
    unsaid = [key for key in differs if "shipped" not in documented_keys()[key]]
    assert unsaid == []


def setting_at(config: Config, key: str) -> Any:
    value: Any = config
    for part in key.split("."):
        value = getattr(value, part)
    return value


# ---- commands, metrics, headers, endpoints ----------------------------------------------------------------------------


def subcommands() -> dict[str, Any]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return dict(action.choices)


@pytest.mark.parametrize("command", sorted(subcommands()))
def test_the_commands_table_lists_every_option_of_each_command(command):
    rows = {CODE_SPAN.findall(cells[0])[0].split()[1]: cells[0] for cells in table_rows(section("Commands")) if len(CODE_SPAN.findall(cells[0])[0].split()) > 1}
    assert command in rows, f"pinch-router {command} has no row in the Commands table"
    options = [a.option_strings for a in subcommands()[command]._actions if a.option_strings and "--help" not in a.option_strings]
    assert [o[-1] for o in options if not any(re.search(rf"{re.escape(name)}\b", rows[command]) for name in o)] == []


def metric_names() -> set[str]:
    metrics = Metrics(["main"], ["coding_general"])
    names = {m.name for m in metrics.registry.collect()}
    return names | {"pinch_router_config_last_reload_successful", "pinch_router_config_last_reload_success_timestamp_seconds", "pinch_router_config_info"}


def test_every_metric_the_readme_names_exists():
    named = set(re.findall(r"\b(pinch_router_[a-z_]+)", README))
    exists = metric_names()
    suffixes = ("_total", "_count", "_sum", "_bucket", "")
    unknown = sorted(n for n in named if not any(n.removesuffix(s) in exists for s in suffixes if n.endswith(s)))
    assert unknown == []


def test_the_readme_names_every_metric():
    named = {re.sub(r"_(total|count|sum|bucket)$", "", n) for n in re.findall(r"\b(pinch_router_[a-z_]+)", section("Observability"))}
    assert sorted(metric_names() - named) == []


def test_the_reload_gauges_the_readme_names_are_registered_by_the_live_chain():
    source = (ROOT / "router" / "server" / "live.py").read_text()
    for name in ("pinch_router_config_last_reload_successful", "pinch_router_config_last_reload_success_timestamp_seconds", "pinch_router_config_info"):
        assert f'"{name}"' in source


def test_every_response_header_is_in_the_response_headers_section():
    emitted = set(re.findall(r'"(x-router-[a-z-]+)"', (ROOT / "router" / "http" / "headers.py").read_text()))
    text = README[README.index("\n### Response headers\n"):README.index("\n## Endpoints\n")]
    assert emitted and sorted(h for h in emitted if f"`{h}`" not in text) == []


def test_every_served_endpoint_is_in_the_endpoints_table():
    listed = {CODE_SPAN.findall(cells[0])[0] for cells in table_rows(section("Endpoints"))}
    listed_paths = {p.split("?")[0] for p in listed}
    assert sorted(e for e in SUPPORTED_ENDPOINTS if e not in listed_paths) == []
    assert sorted(listed_paths - set(SUPPORTED_ENDPOINTS) - {"GET /"}) == []  # the root lists the others


def test_every_anthropic_error_type_is_in_the_endpoints_section():
    text = section("Endpoints")
    assert sorted({t for t in ERROR_TYPES.values() if f"`{t}`" not in text}) == []


def test_the_stage_table_lists_every_stage_in_order_with_its_fail_mode():
    text = README[README.index("\n| stage | fail mode | what it does |"):]
    rows = [(CODE_SPAN.findall(cells[0])[0], cells[1]) for cells in table_rows(text.split("\n\n")[0])]
    stages = stage_registry()
    assert rows == [(name, str(stages[name].fail_mode.value).lower()) for name in DEFAULT_CHAIN]


SCRIPT_RUNS = sorted({m.group(0) for m in re.finditer(r"-m (?:bench|docs)\.\w+[^`\n]*", README)})


@pytest.mark.parametrize("run", SCRIPT_RUNS)
def test_every_bench_and_docs_script_the_readme_runs_exists_with_the_options_it_is_given(run):
    module = run.split()[1]
    path = ROOT / f"{module.replace('.', '/')}.py"
    assert path.is_file(), f"{run}: no {path.relative_to(ROOT)}"
    source = path.read_text()
    assert [o for o in re.findall(r"(--[a-z][a-z-]*)", run) if f'"{o}"' not in source] == []


def test_every_repository_path_the_readme_names_exists():
    paths = {m.rstrip(".,:;") for m in re.findall(r"(?<![\w/.-])(?:router|middlewares|bench|docs|deploy|tests|\.ci)/[\w./-]*", README)}
    assert len(paths) > 30
    assert sorted(p for p in paths if not (ROOT / p.split(":")[0]).exists()) == []


# ---- the layout -----------------------------------------------------------------------------------------------------


def layout_blocks() -> dict[str, str]:
    """The Layout section's folders and their text (a folder's description runs until the next folder)."""
    text = section("Layout")
    blocks: dict[str, str] = {}
    folder = None
    for line in text.splitlines():
        match = re.match(r"^([a-z_/]+/)\s", line)
        if match:
            folder = match.group(1)
            blocks[folder] = line[len(folder):]
        elif folder and line.startswith(" "):
            blocks[folder] += " " + line.strip()
    return blocks


# every package folder of the code, middlewares/ last
PACKAGES = sorted(f"{p.parent.relative_to(ROOT)}/" for p in (ROOT / "router").rglob("__init__.py")) + ["middlewares/"]


@pytest.mark.parametrize("folder", PACKAGES)
def test_every_module_is_in_the_layout(folder):
    text = layout_blocks()[folder]
    modules = sorted(p.stem for p in (ROOT / folder).glob("*.py") if p.stem not in ("__init__", "__main__"))
    if folder == "middlewares/":  # "one module per stage, named after it"
        assert modules == sorted(stage.name.replace("-", "_") for stage in STAGES)
        return
    assert [m for m in modules if not re.search(rf"\b{m}\b", text)] == []


@pytest.mark.parametrize("folder", PACKAGES[:-1])
def test_every_module_the_layout_names_exists(folder):
    names = set(re.findall(r"\b([a-z]+(?:_[a-z]+)+)\b", layout_blocks()[folder]))
    files = {p.stem for p in (ROOT / folder).glob("*.py")} | {p.name.split(".")[0] for p in (ROOT / folder).iterdir()}
    assert sorted(names - files) == []


# ---- the tests the README names -----------------------------------------------------------------------------------------


@cache
def functions_in(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text())
    return frozenset(n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test"))


def named_tests() -> list[tuple[int, str, str, str | None]]:
    """(line, as written, test file, name pattern or None) for every test the README names.

    Forms: `tests/test_x.py`, `tests/test_x.py::test_name`, `test_x.py::test_name[…]` (parametrized), a name cut short
    with `…` or `*`, and `…::test_name` or `…name_part…` for another test of the file named before it on the same line.
    """
    found = []
    for number, line in enumerate(README.splitlines(), 1):
        current = None
        for span in CODE_SPAN.findall(line):
            file = pattern = None
            if "::" in span:
                left, pattern = span.split("::", 1)
                file = current if left == "…" else left
            elif re.fullmatch(r"(tests/)?test_\w+\.py", span):
                file = span
            elif current and re.fullmatch(r"…[a-z0-9_]+…?(\[…\])?", span):
                file, pattern = current, span
            else:
                continue
            if file is not None and not file.startswith("tests/"):
                file = readme_test_file(file)
            found.append((number, span, file, pattern))
            current = file
    return found


def readme_test_file(name: str) -> str:
    """A test file the README names without its folder (``test_x.py``), by its name under tests/."""
    found = sorted(ROOT.glob(f"tests/**/{name}"))
    return str(found[0].relative_to(ROOT)) if len(found) == 1 else f"tests/{name}"


NAMED_TESTS = named_tests()


def test_the_readme_names_the_tests_behind_its_guarantees():
    assert len(NAMED_TESTS) > 100  # the parse still finds the Reliability and WHAT-USERS-HIT tables' tests


@pytest.mark.parametrize(("line", "span", "file", "pattern"), NAMED_TESTS, ids=[f"line{n}" for n, *_ in NAMED_TESTS])
def test_every_test_the_readme_names_exists(line, span, file, pattern):
    assert file is not None, f"README line {line}: {span} follows no test file"
    path = ROOT / file
    assert path.is_file(), f"README line {line}: {file} does not exist"
    if pattern is None:
        return
    regex = re.escape(pattern.removesuffix("[…]")).replace("…", ".*").replace(r"\*", ".*")
    assert any(re.fullmatch(regex, name) for name in functions_in(path)), f"README line {line}: no test in {file} matches {span}"
