"""docs/observability.md's /metrics excerpt is what /metrics says after five requests.

The excerpt was captured from a proxy on tests.support.config.make_config (model ``main`` on
provider ``mock``, no classifier: category ``none``) after five chat requests. This test makes
that run again and checks every line of the page's excerpt: HELP and TYPE lines as written,
every series present with its labels, and its value where it is a count (timings differ from
run to run, so a bucket's or a sum's value is not compared).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.config import chat_body, make_config

PAGE = Path(__file__).resolve().parents[2] / "docs" / "observability.md"
TIMED = ("_bucket", "_sum")


def excerpt() -> list[str]:
    block = next(b for b in re.findall(r"```\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S) if b.startswith("# HELP"))
    return block.splitlines()


def series(text: str) -> dict[str, str]:
    return dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))


async def test_every_line_of_the_pages_metrics_excerpt_is_on_metrics_after_five_requests(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(make_config(url))
    for _ in range(5):
        assert (await client.post("/v1/chat/completions", json=chat_body())).status == 200
    text = await (await client.get("/metrics")).text()
    found = series(text)
    lines = excerpt()
    assert len(lines) >= 5
    for line in lines:
        if line.startswith("#"):
            assert line in text.splitlines(), line
            continue
        name, value = line.rsplit(" ", 1)
        assert name in found, f"{name} is not on /metrics"
        if not name.split("{")[0].endswith(TIMED):
            assert float(found[name]) == float(value), line
