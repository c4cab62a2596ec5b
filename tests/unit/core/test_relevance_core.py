"""order_by_relevance and embeddings validation, with hand-built vectors (ARCHITECTURE §6)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from router.core.relevance import (
    InvalidEmbeddings,
    embeddings_matrix,
    order_by_relevance,
)

QUERY = [1.0, 0.0, 0.0]
PARALLEL = [3.0, 0.0, 0.0]
ORTHOGONAL = [0.0, 2.0, 0.0]
OPPOSITE = [-1.0, 0.0, 0.0]
NEAR_DUPLICATE = [1.0, 0.01, 0.0]
ZERO = [0.0, 0.0, 0.0]


def test_least_relevant_first_opposite_orthogonal_then_parallel() -> None:
    assert order_by_relevance(QUERY, [PARALLEL, OPPOSITE, ORTHOGONAL]) == [1, 2, 0]


def test_near_duplicate_ranks_just_below_parallel() -> None:
    assert order_by_relevance(QUERY, [NEAR_DUPLICATE, PARALLEL, ORTHOGONAL]) == [2, 0, 1]


def test_zero_candidate_scores_like_orthogonal_and_ties_keep_age_order() -> None:
    # zero and orthogonal both score 0: the older (lower index) is less relevant
    assert order_by_relevance(QUERY, [ZERO, PARALLEL, ORTHOGONAL]) == [0, 2, 1]
    assert order_by_relevance(QUERY, [ORTHOGONAL, PARALLEL, ZERO]) == [0, 2, 1]
    assert order_by_relevance(QUERY, [OPPOSITE, ZERO]) == [0, 1]


def test_zero_query_makes_everything_a_tie_in_age_order() -> None:
    assert order_by_relevance(ZERO, [PARALLEL, OPPOSITE, ORTHOGONAL]) == [0, 1, 2]


@pytest.mark.parametrize("scale", [1e-300, 1e-3, 1.0, 7.0, 1e200])
def test_parallel_vectors_of_any_length_are_exact_ties(scale: float) -> None:
    candidates = [[scale, 2 * scale, 3 * scale], [1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [-1.0, 0.0, 0.0]]
    assert order_by_relevance([1.0, 2.0, 3.0], candidates) == [3, 0, 1, 2]


def test_identical_candidates_keep_their_order() -> None:
    assert order_by_relevance(QUERY, [ORTHOGONAL] * 5) == [0, 1, 2, 3, 4]


def test_several_queries_score_each_candidate_by_its_best_similarity() -> None:
    task, step = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]
    about_task, about_step, about_neither = [1.0, 0.0, 0.2], [0.0, 1.0, 0.1], [0.0, 0.0, 1.0]
    order = order_by_relevance(np.array([task, step]), [about_task, about_neither, about_step])
    assert order[0] == 1  # related to neither query: compressed first
    assert set(order[1:]) == {0, 2}


def test_best_of_two_queries_is_not_the_average() -> None:
    # candidate 0 matches the step exactly and is opposite to the task (avg 0, max 1);
    # candidate 1 is moderately related to both (avg ≈ max ≈ 0.7)
    order = order_by_relevance([[1.0, 0.0], [0.0, 1.0]], [[-0.5, 1.0], [1.0, 1.0]])
    assert order == [1, 0]


def test_one_query_as_a_row_equals_the_vector() -> None:
    candidates = np.random.default_rng(7).normal(size=(20, 8))
    query = np.random.default_rng(8).normal(size=8)
    assert order_by_relevance(query, candidates) == order_by_relevance(query[np.newaxis, :], candidates)


def test_result_is_a_permutation_of_plain_ints() -> None:
    order = order_by_relevance(QUERY, np.random.default_rng(1).normal(size=(50, 3)))
    assert sorted(order) == list(range(50))
    assert all(type(i) is int for i in order)


def test_no_candidates_is_an_empty_order() -> None:
    assert order_by_relevance(QUERY, []) == []
    assert order_by_relevance(QUERY, np.zeros((0, 3))) == []


@pytest.mark.parametrize(
    ("query", "candidates", "message"),
    [
        ([1.0, 0.0], [[1.0, 0.0, 0.0]], "dimension mismatch"),
        ([[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0, 0.0]], "dimension mismatch"),
        (QUERY, [[1.0, 0.0, 0.0], [1.0, 0.0]], "rectangular"),
        (QUERY, [[math.nan, 0.0, 0.0]], "NaN or infinite"),
        (QUERY, [[math.inf, 0.0, 0.0]], "NaN or infinite"),
        ([-math.inf, 0.0, 0.0], [PARALLEL], "NaN or infinite"),
        ([[[1.0]]], [[1.0]], "3-D"),
        (QUERY, [1.0, 0.0, 0.0], "1-D"),
        (np.zeros((0, 3)), [PARALLEL], "no query"),
        ([], [PARALLEL], "no dimensions"),
        (QUERY, [["a", "b", "c"]], "rectangular"),
    ],
)
def test_unusable_vectors_are_rejected(query: Any, candidates: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        order_by_relevance(query, candidates)


def test_embeddings_matrix_accepts_ints_and_floats() -> None:
    matrix = embeddings_matrix([[1, 2.5], [0, -1]], 2)
    assert matrix.shape == (2, 2)
    assert matrix.dtype == np.float64


def test_embeddings_matrix_of_nothing_is_empty() -> None:
    assert embeddings_matrix([], 0).shape[0] == 0


@pytest.mark.parametrize(
    ("vectors", "count", "message"),
    [
        ({"embedding": [1.0]}, 1, "list of vectors"),
        ([[1.0, 2.0]], 2, "expected 2 vectors, got 1"),
        ([[1.0], [2.0], [3.0]], 2, "expected 2 vectors, got 3"),
        ([[1.0, 2.0], [1.0]], 2, "vector 1 has 1 dimensions"),
        ([[1.0, 2.0], []], 2, "vector 1 is not a non-empty list"),
        ([[1.0, 2.0], None], 2, "vector 1 is not a non-empty list"),
        ([[1.0, "2"]], 1, "other than numbers"),
        ([[1.0, True]], 1, "other than numbers"),
        ([[1.0, None]], 1, "other than numbers"),
        ([[1.0, 2.0], [math.nan, 0.0]], 2, "vector 1 holds a NaN"),
        ([[math.inf, 2.0]], 1, "vector 0 holds a NaN or infinite"),
        ([[1e308 * 10, 2.0]], 1, "NaN or infinite"),
    ],
)
def test_embeddings_matrix_rejects_a_bad_answer(vectors: Any, count: int, message: str) -> None:
    with pytest.raises(InvalidEmbeddings, match=message):
        embeddings_matrix(vectors, count)


def test_invalid_embeddings_is_a_value_error() -> None:
    assert issubclass(InvalidEmbeddings, ValueError)
