"""The mock upstream as the classifier: it answers from the turn's words (router/tools/mock_classifier.py)."""

from __future__ import annotations

import orjson
import pytest

from router.core.classification import ClassifierAnswer, classifier_messages, parse_classifier_answer
from router.core.turn_text import TurnText
from router.tools.mock_classifier import classification
from router.tools.mock_upstream import DEFAULT_JSON, Behaviour, json_answer

CATEGORIES = {"coding_general": "code", "debugging": "bugs", "docs_writing": "prose"}
TIERS = [1, 2, 3]


def classify(task: str, step: str = "", categories: dict[str, str] = CATEGORIES) -> ClassifierAnswer:
    system, user = classifier_messages(categories, TIERS, TurnText(task, step))
    answer = classification(str(system["content"]), str(user["content"]))
    assert answer is not None
    parsed = parse_classifier_answer(answer, categories, TIERS)
    assert isinstance(parsed, ClassifierAnswer)
    return parsed


@pytest.mark.parametrize(
    ("task", "category", "tier", "reason"),
    [
        ("list the files here", "coding_general", 1, "a short routine turn"),
        ("pytest fails with a Traceback in test_parser", "debugging", 2, "debugging words: traceback, fails"),
        ("write the README section on installing", "docs_writing", 1, "docs words: readme"),
        ("refactor the storage layer into a plugin architecture", "coding_general", 3, "architectural words: architecture, refactor"),
        ("add a flag " + "and handle its value carefully " * 60, "coding_general", 3, "a long task"),
        ("add a --verbose flag to the CLI and print each step as it runs, with timings; keep the default output as it is and add a test " * 2, "coding_general", 2, "an ordinary change"),
    ],
)
def test_the_answer_follows_the_turns_words_and_says_why(task, category, tier, reason):
    answer = classify(task)
    assert (answer.category, answer.tier) == (category, tier)
    assert reason in answer.reason


def test_only_configured_categories_are_answered():
    assert classify("the build fails", categories={"code": "code", "review": "review"}).category == "code"


def test_a_request_that_is_no_classifier_prompt_gets_the_default_json_and_a_scripted_answer_wins():
    plain = {"messages": [{"role": "system", "content": "answer in JSON"}, {"role": "user", "content": "the build fails"}]}
    assert json_answer(plain, Behaviour()) == DEFAULT_JSON
    system, user = classifier_messages(CATEGORIES, TIERS, TurnText("the build fails", ""))
    prompt = {"messages": [system, user]}
    assert orjson.loads(json_answer(prompt, Behaviour()))["category"] == "debugging"
    assert json_answer(prompt, Behaviour(json_text='{"category": "x"}')) == '{"category": "x"}'
