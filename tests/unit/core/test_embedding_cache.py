"""The embedding cache: bounded LRU keyed by model and content hash."""

from __future__ import annotations

import numpy as np
import pytest

from router.core.embedding_cache import (
    EmbeddingCache,
    cache_key,
    decode_vector,
    encode_vector,
    shared_key,
)


def vec(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float64)


def test_a_stored_vector_comes_back_for_the_same_model_and_text() -> None:
    cache = EmbeddingCache(10)
    cache.put("m", "ls output", vec(1, 2))
    found = cache.get("m", "ls output")
    assert found is not None
    assert found.tolist() == [1.0, 2.0]


def test_another_model_or_text_is_a_miss() -> None:
    cache = EmbeddingCache(10)
    cache.put("m", "text", vec(1))
    assert cache.get("other-model", "text") is None
    assert cache.get("m", "text ") is None


def test_key_is_a_digest_not_the_text() -> None:
    model, digest = cache_key("m", "x" * 100_000)
    assert model == "m"
    assert len(digest) == 32
    assert cache_key("m", "a") != cache_key("m", "b")


def test_lone_surrogates_in_text_can_be_keyed() -> None:
    cache = EmbeddingCache(2)
    cache.put("m", "bad \ud800 text", vec(1))
    assert cache.get("m", "bad \ud800 text") is not None


def test_least_recently_used_entry_is_dropped_when_full() -> None:
    cache = EmbeddingCache(2)
    cache.put("m", "a", vec(1))
    cache.put("m", "b", vec(2))
    cache.get("m", "a")  # a is now the most recently used
    cache.put("m", "c", vec(3))
    assert len(cache) == 2
    assert cache.get("m", "b") is None
    assert cache.get("m", "a") is not None
    assert cache.get("m", "c") is not None


def test_putting_again_replaces_and_renews() -> None:
    cache = EmbeddingCache(2)
    cache.put("m", "a", vec(1))
    cache.put("m", "b", vec(2))
    cache.put("m", "a", vec(9))
    cache.put("m", "c", vec(3))
    assert cache.get("m", "b") is None
    found = cache.get("m", "a")
    assert found is not None and found.tolist() == [9.0]


def test_stored_vectors_are_read_only_copies() -> None:
    cache = EmbeddingCache(2)
    original = vec(1, 2)
    cache.put("m", "a", original)
    original[0] = 99
    found = cache.get("m", "a")
    assert found is not None and found.tolist() == [1.0, 2.0]
    with pytest.raises(ValueError):
        found[0] = 5


def test_lookup_splits_a_batch_into_found_and_distinct_missing_texts_in_order() -> None:
    cache = EmbeddingCache(10)
    cache.put("m", "known", vec(1))
    lookup = cache.lookup("m", ["new-2", "known", "new-1", "new-2", "known"])
    assert list(lookup.found) == ["known"]
    assert lookup.missing == ["new-2", "new-1"]


def test_put_many_stores_each_text_with_its_vector() -> None:
    cache = EmbeddingCache(10)
    cache.put_many("m", ["a", "b"], [vec(1), vec(2)])
    lookup = cache.lookup("m", ["a", "b", "c"])
    assert {t: v.tolist() for t, v in lookup.found.items()} == {"a": [1.0], "b": [2.0]}
    assert lookup.missing == ["c"]


def test_put_many_needs_one_vector_per_text() -> None:
    with pytest.raises(ValueError):
        EmbeddingCache(10).put_many("m", ["a", "b"], [vec(1)])


def test_size_must_be_positive() -> None:
    with pytest.raises(ValueError):
        EmbeddingCache(0)


def test_vectors_a_shared_store_knew_are_learnt_and_the_rest_stay_missing():
    cache = EmbeddingCache(10)
    lookup = cache.lookup("m", ["a", "b", "c"])
    learnt = cache.learn("m", lookup, lookup.missing, [np.array([1.0, 0.0]), None, np.array([0.0, 1.0])])
    assert learnt.missing == ["b"] and sorted(learnt.found) == ["a", "c"]
    assert cache.get("m", "a") is not None and cache.get("m", "b") is None


def test_a_vector_survives_the_shared_codec_read_only():
    vector = np.array([0.25, -1.5, 3.0])
    decoded = decode_vector(encode_vector(vector))
    assert np.array_equal(decoded, vector) and not decoded.flags.writeable
    assert shared_key("m", "x") != shared_key("other", "x")
