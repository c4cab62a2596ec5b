"""The stage registry: every stage the proxy knows, in its default order (owned by the composition root).

Adding a stage: one module in ``middlewares/`` and its class in :data:`STAGES` (the chain list). The module
declares all the stage owns, and the places that serve every stage take it from the registry:

* its settings: the type of its constructor's ``settings``, under the config key ``section``. A section the
  base schema (:class:`router.config.Config`) lacks becomes a key of :meth:`StageRegistry.config_schema`,
  as strict as the rest (its unknown keys are errors naming their path); ``middlewares`` defaults to every
  registered stage, in this order;
* its result: a :class:`~router.core.results.Slot` in its module, named in its ``provides`` and read
  as ``ctx[SLOT]``; no two stages provide the same slot (``response`` aside: any stage may refuse);
* its decision columns: its ``columns`` (name → what it reads of the context), each a key of the decision
  record and a column of the decision log (:attr:`StageRegistry.columns`).

The built-in stages write their results into slots too (the ones the edges read declared beside their
types in :mod:`router.core.results`); they keep their sections on Config and their columns on Decision:
read by name across the proxy and its tools, those are the documented contract.

:meth:`StageRegistry.chain` is the one validation of a configured order. Every entry point calls it —
``check-config``, ``serve`` and ``reload`` when they load the file
(:func:`router.server.live.load_serving_config`), the app when it builds the chain, ``explain`` — and it
checks each order once: a registry never changes, so the answer for an order never does, and a later
caller (the app after the command line loaded the file, every worker, a reload that keeps the order)
trusts the first check.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import cache, cached_property
from pathlib import Path
from typing import Annotated, Any

import aiohttp
from pydantic import BaseModel, Field, create_model

from middlewares.capability_gate import CapabilityGate
from middlewares.classification_cache import ClassificationCache
from middlewares.classifier import Classifier
from middlewares.pinch_prune import PinchPrune
from middlewares.pinch_relevance import PinchRelevance
from middlewares.session_fingerprint import SessionFingerprint
from middlewares.upstream_forward import UpstreamForward
from router.config import Catalogue, Config, load_config, parse_config
from router.contract.chain import TERMINAL_STAGE, validate_order
from router.contract.stage import Stage, StageClass
from router.core.breaker import ProviderBreakers
from router.core.session_state import SessionReads
from router.core.tokens import TokenEstimator
from router.observe.decision_record import Column, Decision
from router.observe.metrics import OpenCount
from router.state.escalation import SessionEscalation
from router.state.limiter import KeyLimiter
from router.state.session_store import SessionStore

# The chain list: every stage the proxy knows, in the default order.
STAGES: tuple[StageClass, ...] = (SessionFingerprint, ClassificationCache, Classifier, PinchRelevance, PinchPrune, CapabilityGate, UpstreamForward)

SHARED_SLOTS = frozenset({"response"})  # any stage may refuse: the first to set it ends the chain
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")  # a config key, a decision column


def settings_model(stage: StageClass) -> type[BaseModel] | None:
    """The model of a stage's section: the type of its constructor's ``settings`` (None: it takes none)."""
    parameter = inspect.signature(stage.__init__, eval_str=True).parameters.get("settings")
    return None if parameter is None else parameter.annotation


def stage_columns(stage: StageClass) -> Mapping[str, Column]:
    """A stage's decision columns: name → what it reads of the context (none unless it declares ``columns``)."""
    return getattr(stage, "columns", {})


@dataclass(frozen=True)
class StageRegistry:
    """Stages by their configured name, in their default order, and what the central places take from
    their declarations. Checked when made: a name, a slot, a section or a column that two stages would
    share, or that a built-in place already has, is a ValueError naming both."""

    stages: tuple[StageClass, ...]

    def __post_init__(self) -> None:
        if problems := _declaration_problems(self.stages):
            raise ValueError("\n".join(problems))

    def with_stage(self, stage: StageClass, *, before: str = TERMINAL_STAGE) -> StageRegistry:
        """This registry and ``stage``, which comes in the default order just before the stage named ``before``."""
        at = [s.name for s in self.stages].index(before)
        return StageRegistry((*self.stages[:at], stage, *self.stages[at:]))

    @cached_property
    def by_name(self) -> dict[str, StageClass]:
        return {stage.name: stage for stage in self.stages}

    @property
    def default_chain(self) -> tuple[str, ...]:
        return tuple(stage.name for stage in self.stages)

    def chain(self, names: Sequence[str]) -> tuple[StageClass, ...]:
        """The stage classes of a configured order, in that order; ChainError names every problem
        (an unknown or repeated stage, one placed before what it needs, an end other than upstream-forward)."""
        return _checked(self, tuple(names))

    @cached_property
    def config_schema(self) -> type[Config]:
        """:class:`Config` with the registry's order as the default ``middlewares`` and, for each stage whose
        ``section`` Config lacks, that section (its settings model, its defaults when the file omits it)."""
        order = self.default_chain
        sections: dict[str, Any] = {}
        for stage in self.stages:
            model = settings_model(stage)
            if stage.section and stage.section not in Config.model_fields and model is not None:
                sections[stage.section] = (model, Field(default_factory=model))
        middlewares = (Annotated[list[str], Field(min_length=1)], Field(default_factory=lambda: list(order)))
        schema: type[Config] = create_model("Config", __base__=Config, __module__=Config.__module__, middlewares=middlewares, **sections)
        schema.__doc__ = Config.__doc__
        return schema

    def parse_config(self, raw: Any, environ: dict[str, str] | None = None) -> Config:
        return parse_config(raw, environ, self.config_schema)

    def load_config(self, path: str | Path, environ: dict[str, str] | None = None) -> Config:
        return load_config(path, environ, self.config_schema)

    @cached_property
    def columns(self) -> tuple[tuple[str, Column], ...]:
        """Every registered stage's decision columns, in stage order (a stage outside the chain reads None)."""
        return tuple(column for stage in self.stages for column in stage_columns(stage).items())


def _declaration_problems(stages: Sequence[StageClass]) -> list[str]:
    problems: list[str] = []
    named: dict[str, str] = {}  # stage name, provided slot, section or column → the stage that declares it
    base_sections = {name: f.annotation for name, f in Config.model_fields.items()}
    decision_fields = {f.name for f in fields(Decision)}
    for stage in stages:
        if stage.name in named:
            problems.append(f"stage {stage.name!r} is registered twice")
        named[stage.name] = stage.name
        for slot in sorted(stage.provides - SHARED_SLOTS):
            if (writer := named.get(f"slot {slot}")) is not None:
                problems.append(f"stage {stage.name!r} provides {slot!r}, which {writer!r} provides: a slot has one writer")
            named[f"slot {slot}"] = stage.name
        model = settings_model(stage)
        if stage.section is not None and model is not None:
            if not _NAME.match(stage.section):
                problems.append(f"stage {stage.name!r}: section {stage.section!r} is not a config key (lower case, digits, _)")
            elif not (isinstance(model, type) and issubclass(model, BaseModel)):
                problems.append(f"stage {stage.name!r}: its settings type {model!r} is not a settings model (pydantic)")
            elif (known := base_sections.get(stage.section, model)) is not model:
                problems.append(f"stage {stage.name!r}: section {stage.section!r} is {known.__name__} in the config, not {model.__name__}")
            base_sections[stage.section] = model
        for column in stage_columns(stage):
            if not _NAME.match(column) or column in decision_fields:
                problems.append(f"stage {stage.name!r}: decision column {column!r} is taken or not a column name (lower case, digits, _)")
            elif (owner := named.get(f"column {column}")) is not None:
                problems.append(f"stage {stage.name!r}: decision column {column!r} is {owner!r}'s")
            named[f"column {column}"] = stage.name
    return problems


@cache  # a failed check raises and is not kept: each caller gets the same error
def _checked(registry: StageRegistry, names: tuple[str, ...]) -> tuple[StageClass, ...]:
    return tuple(validate_order(names, registry.by_name))


REGISTRY = StageRegistry(STAGES)


@dataclass(frozen=True, slots=True)
class Offered:
    """What the composition root offers the stages of one generation. A stage names in its
    constructor the ones it uses (and ``settings``, its own config section) and gets only those."""

    catalogue: Catalogue
    http: aiohttp.ClientSession
    estimator: TokenEstimator
    clock: Callable[[], float]
    state: SessionStore  # the process's session state
    session_reads: SessionReads  # what session-fingerprint reads for the chain in one round trip
    escalation: SessionEscalation | None = None  # shared with POST /v1/outcome
    open_upstreams: OpenCount | None = None  # the answers being relayed right now
    breakers: ProviderBreakers | None = None  # the providers' circuit breakers (the app's, across reloads)
    limiter: KeyLimiter | None = None  # the client keys' limits and their counts (the app's, across reloads)


OFFERED_NAMES = frozenset(f.name for f in fields(Offered)) | {"settings"}


@cache
def wanted(stage: StageClass) -> tuple[str, ...]:
    """The dependencies ``stage``'s constructor names; TypeError naming any the server does not offer."""
    names = tuple(inspect.signature(stage).parameters)
    unknown = [name for name in names if name not in OFFERED_NAMES]
    if unknown:
        raise TypeError(f"stage {stage.name!r} asks for {', '.join(unknown)}: not offered (offered: {', '.join(sorted(OFFERED_NAMES))})")
    return names


def stage_builder(
    config: Config,
    *,
    http: aiohttp.ClientSession,
    clock: Callable[[], float],
    state: SessionStore,
    escalation: SessionEscalation | None = None,
    open_upstreams: OpenCount | None = None,
    breakers: ProviderBreakers | None = None,
    estimator: TokenEstimator | None = None,
    limiter: KeyLimiter | None = None,
) -> Callable[[StageClass], Stage]:
    """How each stage of one generation is built: with what it names of the offered dependencies,
    and its own section of ``config`` (its class's ``section``) as ``settings``. One
    :class:`SessionReads` per generation: its stages register what session-fingerprint reads for them."""
    offered = Offered(
        catalogue=Catalogue.of(config),
        http=http,
        estimator=estimator or TokenEstimator(config.tokens.image_tokens, config.tokens.per_message_overhead),
        clock=clock,
        state=state,
        session_reads=SessionReads(),
        escalation=escalation,
        open_upstreams=open_upstreams,
        breakers=breakers,
        limiter=limiter,
    )

    def build(stage: StageClass) -> Stage:
        settings = getattr(config, stage.section) if stage.section else None
        return stage(**{name: settings if name == "settings" else getattr(offered, name) for name in wanted(stage)})

    return build
