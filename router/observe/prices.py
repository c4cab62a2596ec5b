"""The prices a config gives: what the dashboard, the metrics and the demo price requests with.

One :class:`~router.core.pricing.Prices` from the serving config (docs/dashboard.md "Dollars"): each
catalogue model's ``cost_per_mtok`` with its provider's prompt-cache lifetime, the prices of the model
names clients ask for (``dashboard.reference_prices``), and the reference model's. The dollars
themselves are :mod:`router.core.pricing`'s.
"""

from __future__ import annotations

from router.config import Config, Cost
from router.core.cache_timing import cache_lifetime
from router.core.pricing import DEFAULT_CACHE_LIFETIME_SECONDS, ModelPrice, Prices


def prices_of(config: Config) -> Prices:
    """The catalogue's prices (each with its provider's cache lifetime), the prices of the names clients
    ask for, and the reference model's (``dashboard``)."""
    models = {}
    for model in config.models:
        provider = config.providers[model.provider]
        models[model.name] = _price(model.cost_per_mtok, cache_lifetime(provider.api, provider.cache_lifetime_seconds))
    requested = {name: _price(cost, DEFAULT_CACHE_LIFETIME_SECONDS) for name, cost in config.dashboard.reference_prices.items()}
    name = config.dashboard.reference_model
    reference = None if name is None else models.get(name, requested.get(name))
    return Prices(models, requested, name if reference is not None else None, reference)


def priced(prices: Prices) -> bool:
    """Whether any request can cost or save a dollar at ``prices`` (a model or a reference with a price)."""
    every = [*prices.models.values(), *prices.requested.values(), *([prices.reference] if prices.reference else [])]
    return any(p.input or p.output or p.cache_read or p.cache_write for p in every)


def _price(cost: Cost, lifetime: float) -> ModelPrice:
    return ModelPrice(cost.input, cost.output, cost.cache_read, cost.cache_write, lifetime)
