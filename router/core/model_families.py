"""What a requested model name means for routing: a catalogue model (pinned), an alias, a model
family (routed, with a tier hint), or unknown. Pure.

Agents send their own default model names (Claude Code ``claude-opus-5-5`` and, on side requests,
a haiku model; Codex ``gpt-…``; Gemini CLI ``gemini-…-pro`` and a flash-lite router call). Those
names route out of the box through ``routing.model_families``: glob patterns (``fnmatch``, matched
case-insensitively, first match wins) mapped to a tier hint — a tier of ``routing.tiers`` (the
client asked for that class of model: a haiku-class name is a cheap side request, an opus-class
name asks for the top tier), or ``auto`` (route on the classified tier, as an alias does).

The order of precedence, one rule for every stage: a catalogue model's name pins it; an alias
(``routing.aliases``, ``"*"`` aside) routes; then the families, in order; then ``"*"`` routes any
other name; anything else is unknown (the gate answers 404). A tier hint is applied after the
classification and before escalation, and a client's ``x-router-tier`` override wins over it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from fnmatch import translate

from router.core.frozen import frozen
from router.core.results import ClassificationSource

ANY_NAME = "*"
AUTO_TIER = "auto"  # a family's hint that says "route on the classified tier"
_REMEMBERED = 1024  # requested names whose resolution is kept (agents send a handful)


@frozen
class FamilyHint:
    """The model family a requested name belongs to: the pattern it matched and the tier it hints
    (None: the classified tier)."""

    pattern: str
    tier: int | None

    def describe(self) -> str:
        """``claude-*opus* → tier 3``, for the decision row, ``top`` and ``explain``."""
        return f"{self.pattern} → " + (f"tier {self.tier}" if self.tier is not None else "the classified tier")


@frozen
class RequestedModel:
    """How a request's ``model`` routes: ``pinned`` (a catalogue model), ``family`` (routed with that
    hint), ``unknown`` (neither: refused); none of them set: routed (an alias, or no name at all)."""

    pinned: str | None = None
    family: FamilyHint | None = None
    unknown: bool = False


ROUTED = RequestedModel()


class ModelFamilies:
    """The routing meaning of requested names, for one configuration (built once per generation)."""

    def __init__(self, models: Collection[str], aliases: Collection[str], families: Mapping[str, int | str]) -> None:
        self._models = frozenset(models)
        self._aliases = frozenset(a for a in aliases if a != ANY_NAME)
        self._route_any = ANY_NAME in aliases
        self._families = tuple(
            (re.compile(translate(pattern.lower())), FamilyHint(pattern, tier if isinstance(tier, int) else None))
            for pattern, tier in families.items()
        )
        self._resolved: dict[str, RequestedModel] = {}

    def resolve(self, requested: str | None) -> RequestedModel:
        """What ``requested`` means (see the module doc)."""
        if requested is None:
            return ROUTED
        known = self._resolved.get(requested)
        if known is None:
            known = self._resolve(requested)
            if len(self._resolved) >= _REMEMBERED:
                self._resolved.clear()
            self._resolved[requested] = known
        return known

    def _resolve(self, requested: str) -> RequestedModel:
        if requested in self._models:
            return RequestedModel(pinned=requested)
        if requested in self._aliases:
            return ROUTED
        lowered = requested.lower()
        for pattern, hint in self._families:
            if pattern.match(lowered):
                return RequestedModel(family=hint)
        return ROUTED if self._route_any else RequestedModel(unknown=True)


def hinted_tier(tier: int, source: ClassificationSource | None, family: FamilyHint | None) -> int:
    """The tier to route on before escalation: the family's hint, unless the client overrode the tier
    itself (``x-router-tier``) or the family hints none."""
    if family is None or family.tier is None or source is ClassificationSource.OVERRIDE:
        return tier
    return family.tier
