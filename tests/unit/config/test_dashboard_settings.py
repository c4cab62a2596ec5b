"""The dashboard's settings and the prices it reads (docs/dashboard.md): cache prices on a model's
cost_per_mtok, the reference model and the prices of names clients ask for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from router.config import ConfigError, parse_config
from router.observe.prices import prices_of
from tests.support.config import make_config, model_entry

ROOT = Path(__file__).resolve().parents[3]


def test_the_dashboard_pages_prices_example_loads_as_it_says():
    page = (ROOT / "docs" / "dashboard.md").read_text()
    example = yaml.safe_load(re.search(r"## Dollars.*?```yaml\n(.*?)```", page, re.S).group(1))
    raw = make_config().model_dump(mode="json") | {"models": [model_entry("main"), {**example["models"][0], "provider": "mock"}], "dashboard": example["dashboard"]}
    prices = prices_of(parse_config(raw, environ={}))
    sonnet = prices.models["sonnet"]
    assert (sonnet.input, sonnet.output, sonnet.cache_read, sonnet.cache_write) == (3.0, 15.0, 0.30, 3.75)
    assert sonnet.cache_lifetime_seconds == 300  # its provider's (api openai: 5 minutes)
    assert prices.reference_name == "claude-opus-4-5"
    assert prices.reference_for("claude-opus-4-5-20251101")[0] == "claude-opus-4-5"
    assert prices.reference_for("auto")[1].cache_write == 6.25


def test_cache_prices_default_to_none_meaning_the_input_price():
    price = prices_of(make_config(models=[model_entry("main", cost_per_mtok={"input": 2.0})])).models["main"]
    assert (price.input, price.output, price.cache_read, price.cache_write) == (2.0, 0.0, None, None)
    assert price.cost(1_000_000, 500_000, 250_000, 0) == 2.0


def test_a_reference_model_must_be_priced():
    with pytest.raises(ConfigError, match=r"dashboard\.reference_model: 'gpt-9' is neither a model of the catalogue nor a name in dashboard\.reference_prices"):
        make_config(dashboard={"reference_model": "gpt-9"})
    assert prices_of(make_config(dashboard={"reference_model": "main"})).reference_name == "main"


@pytest.mark.parametrize("cost", [{"cache_read": -1.0}, {"cache_write": "free"}, {"per_token": 1.0}])
def test_a_price_is_a_number_not_below_zero(cost):
    with pytest.raises(ConfigError, match="cost_per_mtok"):
        make_config(models=[model_entry("main", cost_per_mtok=cost)])


def test_a_provider_that_caches_nothing_has_a_lifetime_of_zero():
    config = make_config(providers={"mock": {"base_url": "http://127.0.0.1:9/v1", "cache_lifetime_seconds": 0}})
    assert prices_of(config).models["main"].cache_lifetime_seconds == 0
