"""The pure classification core: prompt, tolerant parse with strict validation, overrides."""

from __future__ import annotations

import pytest

from router.core.classification import (
    CATEGORY_HEADER,
    TIER_HEADER,
    ClassifierAnswer,
    InvalidAnswer,
    InvalidOverride,
    classifier_messages,
    parse_classifier_answer,
    parse_override,
)
from router.core.results import Classification, ClassificationSource
from router.core.turn_text import TurnText

CATEGORIES = {"coding_general": "writing or changing code", "debugging": "finding and fixing a failure"}
TIERS = [1, 2, 3]


def parse(text: str, cap: int | None = None) -> ClassifierAnswer | InvalidAnswer:
    return parse_classifier_answer(text, CATEGORIES, TIERS, cap)


def override(category: str | None = None, tier: str | None = None) -> Classification | InvalidOverride | None:
    return parse_override(category, tier, CATEGORIES, TIERS, "coding_general", 2)


# --- the prompt ---------------------------------------------------------------


def test_prompt_lists_every_category_with_its_description_and_the_tiers() -> None:
    system, _ = classifier_messages(CATEGORIES, [3, 1, 2], TurnText(task="fix it", step=""))
    assert system["role"] == "system"
    assert "- coding_general: writing or changing code" in system["content"]
    assert "- debugging: finding and fixing a failure" in system["content"]
    assert "from easiest to hardest: 1, 2, 3" in system["content"]
    assert "required_context_tokens" in system["content"]


def test_prompt_carries_the_task_and_the_current_step() -> None:
    _, user = classifier_messages(CATEGORIES, TIERS, TurnText(task="The test suite fails", step='bash({"cmd": "pytest"})'))
    assert user["role"] == "user"
    assert "<task>\nThe test suite fails\n</task>" in user["content"]
    assert '<current_step>\nbash({"cmd": "pytest"})\n</current_step>' in user["content"]


def test_prompt_says_so_when_there_is_no_step_yet() -> None:
    _, user = classifier_messages(CATEGORIES, TIERS, TurnText(task="hello", step=""))
    assert "(none yet)" in user["content"]


# --- tolerant parsing ---------------------------------------------------------

VALID = '{"category": "debugging", "tier": 3, "required_context_tokens": 12000}'


@pytest.mark.parametrize(
    "text",
    [
        VALID,
        f"```json\n{VALID}\n```",
        f"```\n{VALID}\n```",
        f"Sure! Here is the classification:\n{VALID}\nHope that helps.",
        f"<think>The user has a failing test. {{not json}} Maybe tier 2?</think>\n{VALID}",
        f"<THINK>reasoning</THINK>{VALID}",
        f"I weigh the options first.</think>\n\n{VALID}",  # the template opened <think> for the model
        f"Reasoning about {{braces}} first, then: {VALID}",
        f'  {VALID}  {{"category": "coding_general", "tier": 1}}',  # the first object wins
    ],
    ids=["bare", "json-fence", "plain-fence", "prose", "think-block", "think-upper", "lone-think-end", "brace-prose", "two-objects"],
)
def test_answer_is_found_inside_fences_thinking_and_prose(text: str) -> None:
    assert parse(text) == ClassifierAnswer("debugging", 3, 12000)


def test_json_inside_a_think_block_is_not_the_answer() -> None:
    assert isinstance(parse('<think>{"category": "debugging", "tier": 1}</think> no idea'), InvalidAnswer)


def test_context_estimate_is_optional() -> None:
    assert parse('{"category": "debugging", "tier": 1}') == ClassifierAnswer("debugging", 1, None)


@pytest.mark.parametrize("tokens", ["-5", "null", '"lots"', "12.5", "true", "[1]"])
def test_unusable_context_estimate_is_none_not_a_failure(tokens: str) -> None:
    assert parse(f'{{"category": "debugging", "tier": 1, "required_context_tokens": {tokens}}}') == ClassifierAnswer(
        "debugging", 1, None
    )


def test_context_estimate_is_capped_to_the_largest_window() -> None:
    answer = parse('{"category": "debugging", "tier": 1, "required_context_tokens": 900000000}', cap=128_000)
    assert answer == ClassifierAnswer("debugging", 1, 128_000)


# --- strict validation: a dozen malformed answers ---------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "no JSON object"),
        ("debugging, tier 3", "no JSON object"),
        ('["debugging", 3]', "no JSON object"),
        ('{"category": "debugging", "tier": 3', "no JSON object"),  # cut off
        ("<think>still thinking about {whether", "no JSON object"),  # unclosed think
        ('{"tier": 3}', "category is missing"),
        ('{"category": null, "tier": 3}', "category is missing"),
        ('{"category": ["debugging"], "tier": 3}', "not a string"),
        ('{"category": "cooking", "tier": 3}', "unknown category 'cooking'"),
        ('{"category": "Debugging", "tier": 3}', "unknown category"),  # exact spelling only
        ('{"category": "debugging"}', "tier is missing"),
        ('{"category": "debugging", "tier": "3"}', "not an integer"),
        ('{"category": "debugging", "tier": 3.0}', "not an integer"),
        ('{"category": "debugging", "tier": true}', "not an integer"),
        ('{"category": "debugging", "tier": 4}', "tier 4 is not one of [1, 2, 3]"),
        ('{"category": "debugging", "tier": 0}', "is not one of"),
    ],
)
def test_malformed_answer_is_invalid_with_a_reason(text: str, reason: str) -> None:
    result = parse(text)
    assert isinstance(result, InvalidAnswer)
    assert reason in result.reason


# --- overrides ----------------------------------------------------------------


def test_no_override_headers_means_no_override() -> None:
    assert override() is None
    assert override("  ", "") is None  # blank counts as absent


def test_both_headers_override_category_and_tier() -> None:
    assert override("debugging", "3") == Classification("debugging", 3, ClassificationSource.OVERRIDE)


def test_category_alone_takes_the_fallback_tier() -> None:
    assert override(category="debugging") == Classification("debugging", 2, ClassificationSource.OVERRIDE)


def test_tier_alone_takes_the_fallback_category() -> None:
    assert override(tier=" 1 ") == Classification("coding_general", 1, ClassificationSource.OVERRIDE)


@pytest.mark.parametrize(
    ("category", "tier", "header"),
    [
        ("cooking", None, CATEGORY_HEADER),
        ("cooking", "2", CATEGORY_HEADER),
        (None, "4", TIER_HEADER),
        (None, "two", TIER_HEADER),
        (None, "2.0", TIER_HEADER),
        ("debugging", "-1", TIER_HEADER),
    ],
)
def test_invalid_override_names_the_header(category: str | None, tier: str | None, header: str) -> None:
    result = override(category, tier)
    assert isinstance(result, InvalidOverride)
    assert result.header == header
    assert result.message.startswith(f"{header}: ")


def test_the_answers_reason_is_kept_in_a_few_words_and_is_optional():
    system, _ = classifier_messages(CATEGORIES, TIERS, TurnText(task="fix it", step=""))
    assert '"reason": "<a few words>"' in system["content"]
    said = parse('{"category": "debugging", "tier": 1, "reason": "a  failing\\n test"}')
    assert isinstance(said, ClassifierAnswer) and said.reason == "a failing test"
    assert parse('{"category": "debugging", "tier": 1, "reason": ' + '"x' * 1 + "y" * 500 + '"}').reason == "x" + "y" * 199
    assert parse('{"category": "debugging", "tier": 1, "reason": 7}').reason == ""
