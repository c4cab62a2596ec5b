"""A stage built as the server builds it, from a config (its own section, the catalogue), for a test to drive."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from router.config import Config
from router.contract.stage import Stage
from router.core.tokens import TokenEstimator
from router.server.registry import stage_builder
from router.state.session_store import LocalStore, SessionStore

S = TypeVar("S", bound=Stage)


def build_stage(
    cls: Callable[..., S],
    config: Config,
    *,
    http: Any = None,
    estimator: TokenEstimator | None = None,
    clock: Callable[[], float] = time.monotonic,
    state: SessionStore | None = None,
    **deps: Any,
) -> S:
    """``cls`` built from ``config`` as a generation of the live chain builds it; ``estimator``
    replaces the one the config's token settings make, ``deps`` any other of the offered dependencies."""
    build = stage_builder(config, http=http, clock=clock, state=state if state is not None else LocalStore(), estimator=estimator, **deps)
    return build(cls)  # type: ignore[arg-type,return-value]
