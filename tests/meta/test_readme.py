"""The README and the docs say what the code does: configuration table, commands, metrics, headers, layout, tests.

Each check reads the page a user would read (README.md is short; the reference lives in docs/, built
into the site by mkdocs.yml) and compares it with the code it names, so a key, option, metric, module
or test added, renamed or removed without the docs following fails here.
"""

from __future__ import annotations

import ast
import re
import typing
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from router.tools.launch import AGENTS
import yaml
from pydantic import BaseModel

from router.cli import build_parser
from router.config import Config, ProviderSettings, load_config
from router.wire.anthropic_messages.errors import ERROR_TYPES
from router.observe.metrics import Metrics
from router.server.registry import REGISTRY, STAGES
from router.http.unknown_paths import SUPPORTED_ENDPOINTS

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
# every page of the docs, by its path from the root; README.md first
PAGES = {"README.md": README} | {str(p.relative_to(ROOT)): p.read_text() for p in sorted((ROOT / "docs").glob("*.md"))}
ALL_TEXT = "\n".join(PAGES.values())
CODE_SPAN = re.compile(r"`([^`]+)`")
# where each reference section lives now
CONFIGURATION = "docs/configuration.md"
COMMANDS = "docs/operations.md"
OBSERVABILITY = "docs/observability.md"
REQUEST_FLOW = "docs/request-flow.md"
LAYOUT = "docs/layout.md"


def section(title: str, page: str) -> str:
    """The text of one `## title` section of ``page``, up to the next `## ` heading."""
    text = PAGES[page]
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def table_rows(text: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip().strip("|").split(" | ")] for line in text.splitlines() if line.startswith("| `")]


# ---- the configuration table -------------------------------------------------------------------------------------


def settings_keys(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    """Every leaf key of the settings classes, dotted as the docs write it, with its default ("—": required)."""
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


CODE_KEYS = settings_keys(REGISTRY.config_schema)  # what serve reads: the stages' own sections included


@cache
def documented_keys() -> dict[str, str]:
    """The config table (docs/configuration.md): key → its default cell's text for that key.

    A row may name several keys of one section (`` `pinch.ledger_ttl_minutes` / `ledger_max_sessions` ``) and give
    their defaults in the same order (``1440 / 10000``); a parenthesis after a default adds what the shipped config sets.
    """
    documented: dict[str, str] = {}
    for cells in table_rows(section("Configuration", CONFIGURATION)):
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
    """A default as the docs write it."""
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
    assert written == expected or _same_number(written, CODE_KEYS[key]), f"{key}: docs {documented!r}, code {CODE_KEYS[key]!r}"


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
    rows = {CODE_SPAN.findall(cells[0])[0].split()[1]: cells[0] for cells in table_rows(section("Commands", COMMANDS)) if len(CODE_SPAN.findall(cells[0])[0].split()) > 1}
    assert command in rows, f"pinch-router {command} has no row in the Commands table"
    options = [a.option_strings for a in subcommands()[command]._actions if a.option_strings and "--help" not in a.option_strings]
    assert [o[-1] for o in options if not any(re.search(rf"{re.escape(name)}\b", rows[command]) for name in o)] == []


COMMAND_RUNS = sorted({(page, m.group(1), m.group(0)) for page, text in PAGES.items() for m in re.finditer(r"pinch-router ([a-z][a-z-]*)([^`\n|]*)", text) if m.group(1) in subcommands()})


def test_the_docs_show_pinch_router_commands():
    assert len(COMMAND_RUNS) > 30


@pytest.mark.parametrize(("page", "command", "run"), COMMAND_RUNS)
def test_every_pinch_router_command_the_docs_show_uses_options_it_has(page, command, run):
    """A `pinch-router <command> --option` anywhere in the docs names options that command's parser has."""
    options = {o for a in subcommands()[command]._actions for o in a.option_strings}
    shown = run.split(command, 1)[1]
    if command == "launch":  # what follows the agent's name is the agent's own arguments
        shown = re.split(rf"\s(?:{'|'.join(AGENTS)})(?:\s|$)", shown, maxsplit=1)[0]
    assert [o for o in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", shown) if o not in options] == [], f"{page}: {run}"


def metric_names() -> set[str]:
    metrics = Metrics(["main"], ["coding_general"])
    names = {m.name for m in metrics.registry.collect()}
    return names | {"pinch_router_config_last_reload_successful", "pinch_router_config_last_reload_success_timestamp_seconds", "pinch_router_config_info"}


def test_every_metric_the_readme_names_exists():
    named = set(re.findall(r"\b(pinch_router_[a-z_]+)", ALL_TEXT))
    exists = metric_names()
    suffixes = ("_total", "_count", "_sum", "_bucket", "")
    unknown = sorted(n for n in named if not any(n.removesuffix(s) in exists for s in suffixes if n.endswith(s)))
    assert unknown == []


def test_the_readme_names_every_metric():
    named = {re.sub(r"_(total|count|sum|bucket)$", "", n) for n in re.findall(r"\b(pinch_router_[a-z_]+)", section("Observability", OBSERVABILITY))}
    assert sorted(metric_names() - named) == []


def test_the_reload_gauges_the_readme_names_are_registered_by_the_live_chain():
    source = (ROOT / "router" / "server" / "live.py").read_text()
    for name in ("pinch_router_config_last_reload_successful", "pinch_router_config_last_reload_success_timestamp_seconds", "pinch_router_config_info"):
        assert f'"{name}"' in source


def test_every_response_header_is_in_the_response_headers_section():
    emitted = set(re.findall(r'"(x-router-[a-z-]+)"', (ROOT / "router" / "observe" / "decision_headers.py").read_text()))
    text = section("Response headers", OBSERVABILITY)
    assert emitted and sorted(h for h in emitted if f"`{h}`" not in text) == []


def test_every_served_endpoint_is_in_the_endpoints_table():
    listed = {CODE_SPAN.findall(cells[0])[0] for cells in table_rows(section("Endpoints", REQUEST_FLOW))}
    listed_paths = {p.split("?")[0] for p in listed}
    assert sorted(e for e in SUPPORTED_ENDPOINTS if e not in listed_paths) == []
    assert sorted(listed_paths - set(SUPPORTED_ENDPOINTS) - {"GET /"}) == []  # the root lists the others


def test_every_anthropic_error_type_is_in_the_endpoints_section():
    text = section("Endpoints", REQUEST_FLOW)
    assert sorted({t for t in ERROR_TYPES.values() if f"`{t}`" not in text}) == []


def test_the_stage_table_lists_every_stage_in_order_with_its_fail_mode():
    flow = PAGES[REQUEST_FLOW]
    text = flow[flow.index("\n| stage | fail mode | what it does |"):]
    rows = [(CODE_SPAN.findall(cells[0])[0], cells[1]) for cells in table_rows(text.split("\n\n")[0])]
    stages = REGISTRY.by_name
    assert rows == [(name, str(stages[name].fail_mode.value).lower()) for name in REGISTRY.default_chain]


SCRIPT_RUNS = sorted({m.group(0) for m in re.finditer(r"-m (?:bench|docs)\.\w+[^`\n]*", ALL_TEXT)})


@pytest.mark.parametrize("run", SCRIPT_RUNS)
def test_every_bench_and_docs_script_the_readme_runs_exists_with_the_options_it_is_given(run):
    module = run.split()[1]
    path = ROOT / f"{module.replace('.', '/')}.py"
    assert path.is_file(), f"{run}: no {path.relative_to(ROOT)}"
    source = path.read_text()
    assert [o for o in re.findall(r"(--[a-z][a-z-]*)", run) if f'"{o}"' not in source] == []


def test_every_repository_path_the_readme_names_exists():
    paths = {m.rstrip(".,:;") for m in re.findall(r"(?<![\w/.-])(?:router|middlewares|bench|docs|deploy|tests|\.ci)/[\w./-]*", ALL_TEXT)}
    assert len(paths) > 30
    assert sorted(p for p in paths if not _names_a_file(p)) == []


def _names_a_file(path: str) -> bool:
    """``router/x.py``, ``router/x.py:12``, or ``router/core/errors.InvalidRequest`` (a name in router/core/errors.py)."""
    path = path.split(":")[0]
    return (ROOT / path).exists() or ("." in path and (ROOT / f"{path.rsplit('.', 1)[0]}.py").is_file())


# ---- the layout -----------------------------------------------------------------------------------------------------


def layout_blocks() -> dict[str, str]:
    """The Layout section's folders and their text (a folder's description runs until the next folder)."""
    text = section("Layout", LAYOUT)
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


# ---- the tests the docs name ---------------------------------------------------------------------------------------------


@cache
def functions_in(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text())
    return frozenset(n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test"))


def named_tests() -> list[tuple[str, str, str, str | None]]:
    """("page:line", as written, test file, name pattern or None) for every test a page names.

    Forms: `tests/test_x.py`, `tests/test_x.py::test_name`, `test_x.py::test_name[…]` (parametrized), a name cut short
    with `…` or `*`, and `…::test_name` or `…name_part…` for another test of the file named before it on the same line.
    """
    found = []
    current = None
    for page, number, line in ((page, n, line) for page, text in PAGES.items() for n, line in enumerate(text.splitlines(), 1)):
        if number == 1 or not line.strip():
            current = None  # a `…::name` refers to the file named before it in the same paragraph
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
            found.append((f"{page}:{number}", span, file, pattern))
            current = file
    return found


def readme_test_file(name: str) -> str:
    """A test file a page names without its folder (``test_x.py``), by its name under tests/."""
    found = sorted(ROOT.glob(f"tests/**/{name}"))
    return str(found[0].relative_to(ROOT)) if len(found) == 1 else f"tests/{name}"


NAMED_TESTS = named_tests()


def test_the_readme_names_the_tests_behind_its_guarantees():
    assert len(NAMED_TESTS) > 100  # the parse still finds the Reliability and WHAT-USERS-HIT tables' tests


@pytest.mark.parametrize(("line", "span", "file", "pattern"), NAMED_TESTS, ids=[where for where, *_ in NAMED_TESTS])
def test_every_test_the_readme_names_exists(line, span, file, pattern):
    assert file is not None, f"{line}: {span} follows no test file"
    path = ROOT / file
    assert path.is_file(), f"{line}: {file} does not exist"
    if pattern is None:
        return
    regex = re.escape(pattern.removesuffix("[…]")).replace("…", ".*").replace(r"\*", ".*")
    assert any(re.fullmatch(regex, name) for name in functions_in(path)), f"{line}: no test in {file} matches {span}"


# ---- the README is short, the site has every page ---------------------------------------------------------------------


def sh_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, re.S)


def test_the_readme_is_a_short_page():
    assert len(README.splitlines()) <= 220


def test_ci_runs_the_readmes_test_command():
    test_command = next(block.strip() for block in sh_blocks(section("Set up", "README.md")) if "pytest" in block)
    assert test_command in (ROOT / ".ci" / "run").read_text().replace("pip install -q ", "pip install ")  # -q: quieter, the same command


def nav_pages(nav: Any) -> list[str]:
    if isinstance(nav, list):
        return [p for item in nav for p in nav_pages(item)]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in nav_pages(value)]
    return [nav]


def test_every_page_is_in_the_sites_nav_and_every_nav_entry_is_a_page():
    nav = nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert sorted(set(pages) - set(nav)) == []
    generated = {"benchmarks.md"}  # docs/gen_benchmarks.py, by the build
    pending = {"wire-cost.md"}  # issue #30 adds it; until then the build's hook leaves it out (docs/hooks.py)
    assert sorted(set(nav) - set(pages) - generated - pending) == []


@pytest.mark.parametrize("page", sorted(p for p in PAGES if p != "README.md"))
def test_every_page_with_commands_says_how_they_were_checked(page):
    """A page showing a command says in its source (an HTML comment) whether a test runs it or it was run as shown."""
    text = PAGES[page]
    if "```" not in text and not re.search(r"\n\n    \S", text):  # a fenced or an indented code block
        return
    comments = " ".join(re.findall(r"<!--(.*?)-->", text, re.S))
    assert re.search(r"\btests?/|\btest_\w+|run as shown|\.ci/run", comments), f"{page}: no comment says how its snippets were checked"
