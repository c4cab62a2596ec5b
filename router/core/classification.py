"""Task classification (ARCHITECTURE §7). Pure.

Three small pieces the classifier stage is made of:

* :func:`classifier_messages` — the prompt: the configured categories with
  their descriptions, the tiers, and the current turn's text (``turn_text``,
  already cut to ``classifier.max_input_chars`` per part by the edge).
* :func:`parse_classifier_answer` — tolerant in what it reads, strict in what
  it accepts. ``<think>…</think>`` blocks, code fences and prose around the
  answer are ignored: the first JSON object in what is left is the answer.
  That object must name a configured category (exact spelling) and a
  configured tier (a JSON integer, not ``"2"`` or ``2.0``); anything else is
  an :class:`InvalidAnswer` and the caller falls back. ``required_context_tokens``
  is optional: missing, not an integer, or negative ⇒ None, never a failure; so is
  ``reason`` (a few words on why, kept for the decision row, cut to :data:`MAX_REASON_CHARS`).
  A guess larger than the biggest configured context window is capped to it,
  so a hallucinated estimate steers towards big windows but can never make a
  servable request unservable.
* :func:`parse_override` — the client's ``x-router-category`` /
  ``x-router-tier`` headers, validated against the config. A header alone
  overrides only its value; the other comes from ``routing.fallback_category``
  / ``fallback_tier`` (an override never calls the classifier, so there is no
  other source). A blank header counts as absent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeGuard

from router.core.results import Classification, ClassificationSource
from router.core.content import Message
from router.core.turn_text import TurnText

CATEGORY_HEADER = "x-router-category"
TIER_HEADER = "x-router-tier"

# A sane answer is a few dozen characters; reasoning models may think at length
# first. Beyond this the answer is cut, which bounds the JSON scan below.
MAX_ANSWER_CHARS = 50_000
# The classifier's reason as kept (decision row, trace): a few words are asked for.
MAX_REASON_CHARS = 200

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_THINK_END = re.compile(r"</think>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think>.*", re.DOTALL | re.IGNORECASE)
_INTEGER = re.compile(r"[+-]?\d+")
_decoder = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class ClassifierAnswer:
    """A valid classifier answer."""

    category: str
    tier: int
    required_context_tokens: int | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class InvalidAnswer:
    """Why an answer was rejected (goes into the trace)."""

    reason: str


@dataclass(frozen=True, slots=True)
class InvalidOverride:
    """A client override header the config does not allow; answered with a 400."""

    header: str
    message: str


def classifier_messages(categories: Mapping[str, str], tiers: Sequence[int], turn: TurnText) -> list[Message]:
    """The chat messages asking the classifier for ``{category, tier, required_context_tokens}``."""
    category_lines = "\n".join(f"- {name}: {description}" for name, description in categories.items())
    ordered = sorted(tiers)
    system = (
        "You classify the current turn of a coding agent's session so a router can pick a model.\n"
        "Answer with exactly one JSON object and nothing else:\n"
        '{"category": "<category name>", "tier": <tier>, "required_context_tokens": <integer or null>, "reason": "<a few words>"}\n\n'
        f"Categories (use the name exactly as written):\n{category_lines}\n\n"
        f"Tiers, from easiest to hardest: {', '.join(str(t) for t in ordered)}. "
        f"{ordered[0]} is a small routine change; {ordered[-1]} needs deep reasoning across many files.\n\n"
        "required_context_tokens: your estimate of the context window the whole task needs, "
        "or null if you cannot tell."
    )
    user = (
        f"<task>\n{turn.task or '(no user message)'}\n</task>\n\n"
        f"<current_step>\n{turn.step or '(none yet)'}\n</current_step>"
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_classifier_answer(
    text: str,
    categories: Collection[str],
    tiers: Collection[int],
    max_context_tokens: int | None = None,
) -> ClassifierAnswer | InvalidAnswer:
    """Find the JSON object in a model's answer and validate it strictly (see module docstring)."""
    found = _first_json_object(_strip_thinking(text[:MAX_ANSWER_CHARS]))
    if found is None:
        return InvalidAnswer("no JSON object in the answer")
    category = found.get("category")
    if not isinstance(category, str):
        return InvalidAnswer(f"category is {_describe(category)}, not a string")
    if category not in categories:
        return InvalidAnswer(f"unknown category {category[:60]!r}")
    tier = found.get("tier")
    if not _is_int(tier):
        return InvalidAnswer(f"tier is {_describe(tier)}, not an integer")
    if tier not in tiers:
        return InvalidAnswer(f"tier {tier} is not one of {sorted(tiers)}")
    reason = found.get("reason")
    reason = " ".join(reason.split())[:MAX_REASON_CHARS] if isinstance(reason, str) else ""
    return ClassifierAnswer(category, tier, _context_tokens(found.get("required_context_tokens"), max_context_tokens), reason)


def parse_override(
    category: str | None,
    tier: str | None,
    categories: Collection[str],
    tiers: Collection[int],
    fallback_category: str,
    fallback_tier: int,
) -> Classification | InvalidOverride | None:
    """The client's override from its header values, or None when it sent none."""
    category = category.strip() if category else None
    tier = tier.strip() if tier else None
    if not category and not tier:
        return None
    if category and category not in categories:
        return InvalidOverride(
            CATEGORY_HEADER,
            f"{CATEGORY_HEADER}: {category[:60]!r} is not a configured category (categories: {', '.join(categories)})",
        )
    tier_value = fallback_tier
    if tier:
        if len(tier) > 9 or not _INTEGER.fullmatch(tier) or int(tier) not in tiers:  # int() refuses 4,300+ digits
            return InvalidOverride(
                TIER_HEADER, f"{TIER_HEADER}: {tier[:20]!r} is not a configured tier (tiers: {sorted(tiers)})"
            )
        tier_value = int(tier)
    return Classification(category or fallback_category, tier_value, ClassificationSource.OVERRIDE)


def _strip_thinking(text: str) -> str:
    text = _THINK_BLOCK.sub("", text)
    # A reply that starts mid-thought (the template opened <think>) ends it with a lone </think>.
    parts = _THINK_END.split(text)
    text = parts[-1]
    # An unclosed <think> is reasoning cut off; nothing after it is an answer.
    return _THINK_OPEN.sub("", text)


def _first_json_object(text: str) -> dict[str, object] | None:
    """The first decodable JSON object in ``text``; fences and prose around it are skipped."""
    start = text.find("{")
    while start != -1:
        try:
            value, _ = _decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def _is_int(value: object) -> TypeGuard[int]:
    """A JSON integer: ``true`` is a bool in Python, and ``2.0`` or ``"2"`` are not integers."""
    return isinstance(value, int) and not isinstance(value, bool)


def _context_tokens(value: object, cap: int | None) -> int | None:
    if not _is_int(value) or value < 0:
        return None
    return value if cap is None else min(value, cap)


def _describe(value: object) -> str:
    if value is None:
        return "missing"
    return f"{type(value).__name__} {str(value)[:40]!r}"
