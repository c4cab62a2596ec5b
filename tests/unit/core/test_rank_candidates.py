"""The ranking pinch compresses in (issue #26): worth per token from evidence, size and age. Properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router.core.evidence import evidence_terms, lexical_evidence
from router.core.relevance import rank_candidates, rank_with_evidence
from router.core.turn_text import TurnText

sizes = st.lists(st.integers(0, 50_000), min_size=0, max_size=40)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 40), st.integers(1, 50_000))
def test_with_no_evidence_and_equal_sizes_it_is_the_recency_order(count: int, size: int) -> None:
    assert rank_candidates([size] * count) == list(range(count))
    assert rank_candidates([size] * count, [0.0] * count, [0.0] * count) == list(range(count))


@settings(max_examples=200, deadline=None)
@given(sizes)
def test_it_is_a_permutation_and_deterministic(saved: list[int]) -> None:
    order = rank_candidates(saved)
    assert sorted(order) == list(range(len(saved)))
    assert rank_candidates(saved) == order


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 30), st.data())
def test_a_named_result_outranks_every_unnamed_newer_one_of_the_same_size(count: int, data: st.DataObject) -> None:
    named = data.draw(st.integers(0, count - 2))
    lexical = [0.0] * count
    lexical[named] = data.draw(st.floats(0.5, 1.0))
    order = rank_candidates([1000] * count, lexical)
    assert order[-1] == named  # compressed last: kept longest
    assert order[:-1] == [i for i in range(count) if i != named]  # the rest in age order


def test_with_no_evidence_a_larger_saving_goes_first() -> None:
    assert rank_candidates([100, 5000, 100]) == [1, 0, 2]


def test_similarity_lifts_a_result_and_negative_similarity_counts_as_none() -> None:
    assert rank_candidates([1000] * 3, similarity=[0.9, 0.0, 0.0]) == [1, 2, 0]
    assert rank_candidates([1000] * 3, similarity=[-0.9, 0.0, 0.0]) == [0, 1, 2]


@pytest.mark.parametrize(
    ("lexical", "similarity", "message"),
    [([0.0], None, "expected 2 values"), ([float("nan"), 0.0], None, "NaN"), ([-1.0, 0.0], None, "negative"), (None, [0.0, float("inf")], "NaN or infinite")],
)
def test_bad_evidence_is_rejected(lexical: list[float] | None, similarity: list[float] | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rank_candidates([10, 10], lexical, similarity)


def test_evidence_terms_are_paths_identifiers_and_error_names_not_words() -> None:
    text = "Traceback: IntegrityError in src/app/models.py at parse_args; see self.cursor and the Fix now"
    assert evidence_terms(text) == {"IntegrityError", "src/app/models.py", "parse_args", "self.cursor"}


def test_lexical_evidence_weighs_names_the_agent_repeats_and_discounts_common_ones() -> None:
    candidates = [frozenset({"repo/setup.py"}), frozenset({"parse_args", "repo/setup.py"}), frozenset()]
    agent = [frozenset({"parse_args"}), frozenset({"parse_args", "repo/setup.py"})]
    evidence = lexical_evidence(candidates, agent, [*candidates, frozenset({"repo/setup.py"})])
    assert evidence[1] == 1.0 and 0 < evidence[0] < evidence[1] and evidence[2] == 0.0
    assert lexical_evidence(candidates, [], candidates) == [0.0, 0.0, 0.0]


def test_the_ranking_uses_the_recent_steps_words() -> None:
    texts = ["def parse_args(argv): ...\n" * 40, "unrelated output line\n" * 40]
    turn = TurnText(task="fix the CLI", step="bash(ls)", recent=("bash(grep -n parse_args cli/main.py)",))
    assert rank_with_evidence(texts, [], turn, 400).order == (1, 0)  # the named one is kept longer despite being older
    assert rank_with_evidence(texts, [], TurnText(task="fix the CLI", step="bash(ls)"), 400).order == (0, 1)
