"""How a provider lists its models, as each provider module declares it (``ProviderAdapter.models``):
what ``doctor`` checks the catalogue against, and how it tells what is missing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from router.config import ProviderSettings


def _not_listed(provider: ProviderSettings, url: str) -> str:
    return f"{url} does not list it"


def _same(model: str) -> str:
    return model


@dataclass(frozen=True, slots=True)
class ModelListing:
    """How a provider lists its models, for ``doctor``: ``names(listing)``, the model names its
    ``models_url`` answer (parsed JSON) lists (KeyError, TypeError or AttributeError: it is no model
    list); ``listed_name(model)``, how it lists a configured model; ``pull(model)``, the command that
    fetches a model it does not have (None: it has no such command); ``missing(provider, url)``, what
    doctor says of a model it does not list; ``start``, what to do when its list does not answer."""

    names: Callable[[Any], set[str]]
    listed_name: Callable[[str], str] = _same
    pull: Callable[[str], str] | None = None
    missing: Callable[[ProviderSettings, str], str] = _not_listed
    start: str = "check the URL and the network"
