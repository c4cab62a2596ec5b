"""Relevance of old tool results to the current turn (ARCHITECTURE §6). Pure.

:func:`rank_candidates` is the order pinch compresses in, least worth keeping
first: it weighs what keeping a result verbatim is worth (the session's
evidence that it is needed) against what it costs (the tokens compressing it
would save), with age as the tie-break. :func:`order_by_relevance` ranks by
cosine similarity alone; :func:`similarities` gives the similarity that
:func:`rank_candidates` takes as one piece of evidence.
:func:`embeddings_matrix` checks an embeddings answer before anything ranks
with it: a wrong count, ragged dimensions or a NaN must not quietly reorder
what survives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from router.core.evidence import evidence_terms, lexical_evidence
from router.core.frozen import frozen
from router.core.pinch import compression_saving
from router.core.tokens import CHARS_PER_TOKEN
from router.core.turn_text import TurnText

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
    if len(candidate_embeddings) == 0:
        _as_matrix(query_embedding, "query embedding", allow_vector=True)
        return []
    scores = np.round(similarities(query_embedding, candidate_embeddings), TIE_DECIMALS)
    return [int(i) for i in np.argsort(scores, kind="stable")]


@frozen
class RankWeights:
    """How :func:`rank_candidates` weighs its evidence (measured on the shared transcripts only; see docs/relevance.md).

    ``similarity``: the weight of the embedding similarity beside the lexical evidence (which weighs 1);
    ``floor``: the evidence every result has, so a result with none is still worth its age and its size;
    ``age``: how much newer counts, as a share of one e-fold of worth (small: a tie-break among results of
    about equal worth per token, never enough to outweigh evidence).
    """

    similarity: float = 0.5
    floor: float = 0.3
    age: float = 0.25


DEFAULT_WEIGHTS = RankWeights()


def rank_candidates(
    saved_tokens: Sequence[int],
    lexical: Sequence[float] | None = None,
    similarity: Sequence[float] | None = None,
    weights: RankWeights = DEFAULT_WEIGHTS,
) -> list[int]:
    """Candidate indexes (oldest first in the input) in the order to compress them: least worth keeping first.

    A result's worth per token is ``(floor + lexical + similarity × max(0, similarity)) / saved``, where
    ``saved`` is what compressing it would save (at least 1); the order ascends in
    ``log(worth per token) + age × recency``, recency going from 0 (oldest) to 1 (newest). So:

    * with no evidence and equal savings it is the recency order (oldest compressed first);
    * with no evidence, a larger saving goes first: the fewest results are lost for the tokens;
    * a result the session names (lexical evidence) outranks an unnamed newer one of the same size.

    ``lexical`` and ``similarity`` are per candidate (None: none); every value must be finite, ``lexical``
    not negative. Deterministic: ties keep the input order. Raises ValueError on a length mismatch
    or a non-finite value.
    """
    return order_by_worth(saved_tokens, candidate_evidence(len(saved_tokens), lexical, similarity, weights), weights)


def candidate_evidence(
    count: int, lexical: Sequence[float] | None = None, similarity: Sequence[float] | None = None, weights: RankWeights = DEFAULT_WEIGHTS
) -> tuple[float, ...]:
    """Each candidate's evidence that it is needed, ``floor + lexical + similarity × max(0, similarity)``
    (:func:`rank_candidates`; checks as it does): what :func:`order_by_worth` weighs against the saving."""
    evidence = np.full(count, weights.floor)
    for name, values, weight in (("lexical", lexical, 1.0), ("similarity", similarity, weights.similarity)):
        if values is None:
            continue
        array = np.asarray(values, dtype=np.float64)
        if array.shape != (count,):
            raise ValueError(f"{name}: expected {count} values, got shape {array.shape}")
        if not np.isfinite(array).all():
            raise ValueError(f"{name}: holds a NaN or infinite value")
        if name == "lexical" and (array < 0).any():
            raise ValueError("lexical: negative evidence")
        evidence += weight * np.maximum(array, 0.0)
    return tuple(float(x) for x in evidence)


def order_by_worth(saved_tokens: Sequence[int], evidence: Sequence[float], weights: RankWeights = DEFAULT_WEIGHTS) -> list[int]:
    """:func:`rank_candidates`' order from each candidate's saving and :func:`candidate_evidence` (positive,
    one per candidate; else ValueError). The ledger orders a batch so with the savings its steps really
    make (:func:`router.core.pinch_ledger.pinch_conversation`: a result first sight reduced saves less)."""
    count = len(saved_tokens)
    if len(evidence) != count:
        raise ValueError(f"evidence: expected {count} values, got {len(evidence)}")
    if count == 0:
        return []
    worths = np.asarray(evidence, dtype=np.float64)
    if not (np.isfinite(worths).all() and (worths > 0).all()):
        raise ValueError("evidence: every value must be positive and finite")
    saved = np.maximum(np.asarray(saved_tokens, dtype=np.float64), 1.0)
    recency = np.arange(count) / max(count - 1, 1)
    worth = np.round(np.log(worths) - np.log(saved) + weights.age * recency, TIE_DECIMALS)
    return [int(i) for i in np.argsort(worth, kind="stable")]


def similarities(query_embedding: Any, candidate_embeddings: Any) -> Vectors:
    """Each candidate's best cosine similarity over the queries (checks as :func:`order_by_relevance`)."""
    queries = _as_matrix(query_embedding, "query embedding", allow_vector=True)
    if len(candidate_embeddings) == 0:
        return np.zeros(0)
    candidates = _as_matrix(candidate_embeddings, "candidate embeddings", allow_vector=False)
    if queries.shape[0] == 0:
        raise ValueError("no query embedding")
    if queries.shape[1] != candidates.shape[1]:
        raise ValueError(
            f"dimension mismatch: queries have {queries.shape[1]}, candidates have {candidates.shape[1]}"
        )
    return np.asarray((_unit_rows(candidates) @ _unit_rows(queries).T).max(axis=1))


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


class Ranking(NamedTuple):
    """:func:`rank_with_evidence`'s answer: the order to compress the candidates in, and each one's
    evidence (:func:`candidate_evidence`), for a planner that knows better what compressing each saves."""

    order: tuple[int, ...]
    evidence: tuple[float, ...]


def rank_with_evidence(
    candidate_texts: Sequence[str],
    other_texts: Sequence[str],
    turn: TurnText,
    max_summarize_chars: int,
    similarity: Sequence[float] | None = None,
    terms: Callable[[str], frozenset[str]] = evidence_terms,
    weights: RankWeights = DEFAULT_WEIGHTS,
) -> Ranking:
    """The order to compress trim candidates in (:func:`rank_candidates`), from their texts, with the lexical
    evidence of the turn's task and steps (:func:`~router.core.evidence.lexical_evidence`), and that evidence.
    The saving is the candidate text's compression (its original: what the ledger compresses from).
    ``other_texts``: the request's other tool results (the protected turns'), for how common a name is;
    ``similarity``: per candidate (None: no embeddings); ``terms``: the term extractor (a
    :class:`~router.core.evidence.TermCache`'s, to memoise)."""
    candidates = [terms(text) for text in candidate_texts]
    results = [*candidates, *(terms(text) for text in other_texts)]
    step = terms(turn.step)
    recent = [terms(text) for text in turn.recent]
    lexical = lexical_evidence(candidates, [terms(turn.task), step, *recent], results)
    saved = [-(-compression_saving(len(text), max_summarize_chars) // CHARS_PER_TOKEN) for text in candidate_texts]
    evidence = candidate_evidence(len(saved), lexical, similarity, weights)
    return Ranking(tuple(order_by_worth(saved, evidence, weights)), evidence)
