"""Relevance of old tool results to the current turn (ARCHITECTURE §6). Pure.

:func:`order_by_relevance` ranks pinch's trim candidates by cosine similarity
to the turn's query vectors, least relevant first, so pinch compresses from
the front of that order and stops once the budget is met.
:func:`embeddings_matrix` checks an embeddings answer before anything ranks
with it: a wrong count, ragged dimensions or a NaN must not quietly reorder
what survives.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float64]

# Similarities equal to this many decimals are ties, so parallel vectors of
# different lengths (equal in exact arithmetic) stay in age order despite
# rounding in the last bits of a float64.
TIE_DECIMALS = 12
_TINY = np.finfo(np.float64).tiny


class InvalidEmbeddings(ValueError):
    """An embeddings answer that cannot be ranked with; the message says why."""


def order_by_relevance(query_embedding: Any, candidate_embeddings: Any) -> list[int]:
    """Candidate indexes sorted by relevance, ascending: index 0 is the least relevant.

    ``query_embedding`` is one vector (1-D) or several (2-D, one per row);
    with several, a candidate's score is its best cosine similarity over them.
    ``candidate_embeddings`` is 2-D, one row per candidate (an empty sequence
    gives ``[]``). A zero vector, query or candidate, has similarity 0 to
    everything. Ties keep the candidates' order, older (lower index) first, so
    among equally relevant results the older one is compressed first.

    Raises ValueError on mismatched dimensions, a wrong shape, no query, or a
    NaN or infinite value.
    """
    queries = _as_matrix(query_embedding, "query embedding", allow_vector=True)
    if len(candidate_embeddings) == 0:
        return []
    candidates = _as_matrix(candidate_embeddings, "candidate embeddings", allow_vector=False)
    if queries.shape[0] == 0:
        raise ValueError("no query embedding")
    if queries.shape[1] != candidates.shape[1]:
        raise ValueError(
            f"dimension mismatch: queries have {queries.shape[1]}, candidates have {candidates.shape[1]}"
        )
    similarities = _unit_rows(candidates) @ _unit_rows(queries).T  # (candidates, queries)
    scores = np.round(similarities.max(axis=1), TIE_DECIMALS)
    return [int(i) for i in np.argsort(scores, kind="stable")]


def embeddings_matrix(vectors: Any, expected_count: int) -> Vectors:
    """Validate an endpoint's embeddings (a list of number lists) into a 2-D array.

    Checks, in order: a list of ``expected_count`` vectors, each a non-empty
    list of numbers (booleans are not numbers), all of one dimension, all
    finite. Raises :class:`InvalidEmbeddings` naming the first problem.
    """
    if not isinstance(vectors, list):
        raise InvalidEmbeddings(f"expected a list of vectors, got {type(vectors).__name__}")
    if len(vectors) != expected_count:
        raise InvalidEmbeddings(f"expected {expected_count} vectors, got {len(vectors)}")
    if expected_count == 0:
        return np.zeros((0, 0))
    dimension: int | None = None
    for i, vector in enumerate(vectors):
        if not isinstance(vector, list) or not vector:
            raise InvalidEmbeddings(f"vector {i} is not a non-empty list of numbers")
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vector):
            raise InvalidEmbeddings(f"vector {i} holds something other than numbers")
        if dimension is None:
            dimension = len(vector)
        elif len(vector) != dimension:
            raise InvalidEmbeddings(f"vector {i} has {len(vector)} dimensions, vector 0 has {dimension}")
    matrix = np.asarray(vectors, dtype=np.float64)
    if not np.isfinite(matrix).all():
        bad = int(np.flatnonzero(~np.isfinite(matrix).all(axis=1))[0])
        raise InvalidEmbeddings(f"vector {bad} holds a NaN or infinite value")
    return matrix


def _as_matrix(vectors: Any, what: str, *, allow_vector: bool) -> Vectors:
    try:
        matrix = np.asarray(vectors, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: not a rectangular array of numbers (mismatched dimensions?)") from None
    if allow_vector and matrix.ndim == 1:
        matrix = matrix[np.newaxis, :]
    if matrix.ndim != 2:
        raise ValueError(f"{what}: expected {'1-D or ' if allow_vector else ''}2-D, got {matrix.ndim}-D")
    if matrix.shape[1] == 0 and matrix.shape[0] > 0:
        raise ValueError(f"{what}: vectors have no dimensions")
    if not np.isfinite(matrix).all():
        raise ValueError(f"{what}: holds a NaN or infinite value")
    return matrix


def _unit_rows(matrix: Vectors) -> Vectors:
    """Each row scaled to length 1; zero rows stay zero (similarity 0 to anything).

    Rows are first divided by their largest magnitude, so huge values do not
    overflow the norm nor tiny ones underflow it; dividing by at least
    ``_TINY`` leaves zero rows zero instead of NaN.
    """
    peak = np.abs(matrix).max(axis=1, keepdims=True)
    scaled = matrix / np.maximum(peak, _TINY)
    norms = np.sqrt(np.einsum("ij,ij->i", scaled, scaled))[:, np.newaxis]
    return scaled / np.maximum(norms, _TINY)
