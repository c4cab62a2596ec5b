"""MkDocs hooks (mkdocs.yml ``hooks:``): the generated pages and pictures, and pages still on their way.

* ``benchmarks.md`` is generated from ``bench/results/*.txt`` (docs/gen_benchmarks.py);
* ``img/pinch/*.png`` are drawn from a replay (docs/gen_plots.py) for the pinch page;
* a page another open issue is adding (``PENDING``) stays out of the nav until its file exists,
  so the strict build fails on every other missing page but not on one that has not landed yet.
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # docs.gen_* and router, however mkdocs was started

from mkdocs.structure.files import File, Files  # noqa: E402

from docs.gen_benchmarks import render  # noqa: E402

log = logging.getLogger("mkdocs.hooks.pinch_router")
PENDING = {"wire-cost.md": "issue #30"}
PLOTS = "img/pinch"


def _without_pending(nav: Any, docs_dir: Path) -> Any:
    if isinstance(nav, list):
        kept = [_without_pending(item, docs_dir) for item in nav]
        return [item for item in kept if item is not None]
    if isinstance(nav, dict):
        kept = {title: _without_pending(value, docs_dir) for title, value in nav.items()}
        return {title: value for title, value in kept.items() if value is not None} or None
    if isinstance(nav, str) and nav in PENDING and not (docs_dir / nav).exists():
        log.info("%s (%s) is not in docs/ yet: left out of the nav", nav, PENDING[nav])
        return None
    return nav


def on_config(config: Any) -> Any:
    config["nav"] = _without_pending(config["nav"], Path(config["docs_dir"]))
    return config


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, "benchmarks.md", content=render()))
    from docs.gen_plots import draw  # matplotlib: the docs extra brings the plot extra

    with tempfile.TemporaryDirectory() as scratch:
        for path in draw(Path(scratch)):
            files.append(File.generated(config, f"{PLOTS}/{path.name}", content=path.read_bytes()))
    return files
