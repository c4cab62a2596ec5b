"""The mock upstream as the classifier: an answer read from the turn's own words. Pure.

The proxy's classifier prompt (:func:`router.core.classification.classifier_messages`) names the
configured categories and tiers and holds the turn in ``<task>`` / ``<current_step>``. The mock
answers it the way a small model roughly would, so a demo on the mock shows requests routed
differently: debugging words ⇒ ``debugging``, documentation words ⇒ ``docs_writing`` (when those
categories are configured; else the first category), an architectural or a long task ⇒ the
hardest tier, a failure ⇒ the middle one, documentation and short routine turns ⇒ the easiest,
anything else the middle one.
The answer says why in its ``reason``, which the decision row keeps.
"""

from __future__ import annotations

import re

import orjson

DEBUGGING_WORDS = ("traceback", "exception", "error", "fails", "failing", "failure", "failed", "bug", "crash", "broken", "stack trace", "segfault", "fix ")
DOCS_WORDS = ("docstring", "documentation", "docs", "readme", "changelog", "comment", "tutorial", "write-up")
ARCHITECTURE_WORDS = ("architecture", "architectural", "redesign", "design", "refactor", "migrate", "migration", "across the codebase", "subsystem")
LONG_TASK_CHARS = 1200  # a task this long is a big one
SHORT_TASK_CHARS = 200  # a task this short, with no other sign, is routine

_TASK = re.compile(r"<task>\n?(.*?)\n?</task>", re.DOTALL)
_STEP = re.compile(r"<current_step>\n?(.*?)\n?</current_step>", re.DOTALL)
_CATEGORY = re.compile(r"^- ([^:\n]+):", re.MULTILINE)
_TIERS = re.compile(r"Tiers, from easiest to hardest: ([0-9, ]+)\.")
CLASSIFIER_PROMPT = "You classify the current turn"


def classification(system: str, user: str) -> str | None:
    """The JSON answer to a classifier prompt (its system and user text); None when it is none."""
    if CLASSIFIER_PROMPT not in system:
        return None
    categories = _CATEGORY.findall(system.split("Categories", 1)[-1].split("\n\n", 1)[0])
    tiers_line = _TIERS.search(system)
    tiers = sorted(int(t) for t in tiers_line.group(1).replace(" ", "").split(",") if t) if tiers_line else [1, 2, 3]
    task = _TASK.search(user)
    step = _STEP.search(user)
    text = (task.group(1) if task else user).strip()
    words = f"{text}\n{step.group(1) if step else ''}".lower()
    category, tier, reason = _classify(text, words, categories, tiers)
    return orjson.dumps({"category": category, "tier": tier, "required_context_tokens": None, "reason": reason}).decode()


def _found(words: str, vocabulary: tuple[str, ...]) -> list[str]:
    return [w.strip() for w in vocabulary if re.search(r"\b" + re.escape(w.strip()), words)]


def _classify(task: str, words: str, categories: list[str], tiers: list[int]) -> tuple[str, int, str]:
    easiest, middle, hardest = tiers[0], tiers[len(tiers) // 2], tiers[-1]
    general = "coding_general" if "coding_general" in categories else (categories[0] if categories else "coding_general")
    debugging, docs, architecture = _found(words, DEBUGGING_WORDS), _found(words, DOCS_WORDS), _found(words, ARCHITECTURE_WORDS)
    if debugging and "debugging" in categories:
        category, reasons = "debugging", [f"debugging words: {', '.join(debugging[:3])}"]
    elif docs and "docs_writing" in categories:
        category, reasons = "docs_writing", [f"docs words: {', '.join(docs[:3])}"]
    else:
        category, reasons = general, []
    if architecture:
        tier = hardest
        reasons.append(f"architectural words: {', '.join(architecture[:3])}")
    elif len(task) > LONG_TASK_CHARS:
        tier = hardest
        reasons.append(f"a long task ({len(task):,} characters)")
    elif debugging:  # a failure to find, whether or not `debugging` is a configured category
        tier = middle
        reasons.append("a failure to find")
    elif category == "docs_writing" or len(task) <= SHORT_TASK_CHARS:
        tier = easiest
        reasons.append("prose" if category == "docs_writing" else "a short routine turn")
    else:
        tier = middle
        reasons.append("an ordinary change")
    return category, tier, "; ".join(reasons)
