"""What a requested model name means for routing (router/core/model_families.py)."""

from __future__ import annotations

from router.core.model_families import ROUTED, FamilyHint, ModelFamilies, RequestedModel, hinted_tier
from router.core.results import ClassificationSource

FAMILIES = {"claude-*haiku*": 1, "claude-*": "auto", "gpt-*-mini*": 1, "gpt-*": "auto", "o[0-9]*": 3}


def test_names_resolve_in_order_catalogue_alias_family_then_star():
    families = ModelFamilies(["claude-local", "auto-like"], ["auto"], FAMILIES)
    assert families.resolve("claude-local") == RequestedModel(pinned="claude-local")  # the catalogue wins over a family
    assert families.resolve("auto") is ROUTED and families.resolve(None) is ROUTED
    assert families.resolve("claude-haiku-4-5").family == FamilyHint("claude-*haiku*", 1)  # the first match wins
    assert families.resolve("CLAUDE-SONNET-4-5").family == FamilyHint("claude-*", None)
    assert families.resolve("gpt-5.1-codex-mini").family == FamilyHint("gpt-*-mini*", 1)
    assert families.resolve("o3").family == FamilyHint("o[0-9]*", 3)
    assert families.resolve("llama3").unknown and families.resolve("ollama").unknown
    assert ModelFamilies([], ["auto", "*"], FAMILIES).resolve("llama3") is ROUTED  # "*" comes after the families
    assert ModelFamilies([], ["auto", "*"], FAMILIES).resolve("gpt-4o").family == FamilyHint("gpt-*", None)


def test_the_hint_replaces_the_classified_tier_unless_overridden_or_auto():
    hint = FamilyHint("claude-*opus*", 3)
    assert hinted_tier(1, ClassificationSource.CLASSIFIER, hint) == 3
    assert hinted_tier(1, ClassificationSource.CACHED, hint) == 3
    assert hinted_tier(1, None, hint) == 3
    assert hinted_tier(1, ClassificationSource.OVERRIDE, hint) == 1
    assert hinted_tier(2, ClassificationSource.CLASSIFIER, FamilyHint("gpt-*", None)) == 2
    assert hinted_tier(2, ClassificationSource.CLASSIFIER, None) == 2
    assert hint.describe() == "claude-*opus* → tier 3" and FamilyHint("gpt-*", None).describe() == "gpt-* → the classified tier"
