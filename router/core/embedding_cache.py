"""A bounded LRU of embeddings, keyed by model and content hash. Pure.

Each old tool result is embedded once per session, not once per turn: a
100-turn session costs about one embedding per new tool result plus the
turn's changing query. The key is ``(model, sha256(text))`` so switching the
embedding model never mixes vector spaces, and the cache holds digests, not
the (possibly large) texts. Queries share the cache: a text embeds to the
same vector whatever its role, and the task part of the turn text (the last
user message) repeats on every turn of a tool loop.

Not thread-safe; it lives in one event loop. Two concurrent requests may both
miss on the same text and embed it twice, which is harmless.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float64]
CacheKey = tuple[str, bytes]


def cache_key(model: str, text: str) -> CacheKey:
    return model, hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


@dataclass(frozen=True, slots=True)
class CacheLookup:
    """What the cache knew about a batch of texts.

    ``found`` maps each known text to its vector; ``missing`` lists the
    distinct unknown texts in first-seen order — exactly what to embed.
    """

    found: dict[str, Vector]
    missing: list[str]


class EmbeddingCache:
    """Least recently used embeddings, at most ``max_entries`` of them."""

    def __init__(self, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self._entries: OrderedDict[CacheKey, Vector] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, model: str, text: str) -> Vector | None:
        """The cached vector (now the most recently used), or None."""
        key = cache_key(model, text)
        vector = self._entries.get(key)
        if vector is not None:
            self._entries.move_to_end(key)
        return vector

    def put(self, model: str, text: str, vector: Vector) -> None:
        """Store a read-only copy; the least recently used entry goes when full."""
        stored = np.array(vector, dtype=np.float64)
        stored.setflags(write=False)
        key = cache_key(model, text)
        self._entries[key] = stored
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def lookup(self, model: str, texts: Sequence[str]) -> CacheLookup:
        found: dict[str, Vector] = {}
        missing: dict[str, None] = {}  # an ordered set
        for text in texts:
            if text in found or text in missing:
                continue
            vector = self.get(model, text)
            if vector is None:
                missing[text] = None
            else:
                found[text] = vector
        return CacheLookup(found, list(missing))

    def learn(self, model: str, lookup: CacheLookup, texts: Sequence[str], vectors: Sequence[Vector | None]) -> CacheLookup:
        """``lookup`` once the vectors found elsewhere (a shared store; None: not there) for ``texts``, its
        missing texts, are known: those are stored here and no longer missing."""
        found, missing = dict(lookup.found), []
        for text, vector in zip(texts, vectors, strict=True):
            if vector is None:
                missing.append(text)
            else:
                self.put(model, text, vector)
                found[text] = vector
        return CacheLookup(found, missing)

    def put_many(self, model: str, texts: Sequence[str], vectors: Sequence[Vector]) -> None:
        for text, vector in zip(texts, vectors, strict=True):
            self.put(model, text, vector)


# --- shared between processes (state.backend: redis): the same keys, vectors as bytes ----------

SHARED_TTL_SECONDS = 7 * 24 * 3600  # an embedding never goes stale; the time to live only bounds the store


def shared_key(model: str, text: str) -> str:
    name, digest = cache_key(model, text)
    return f"{name}:{digest.hex()}"


def encode_vector(vector: Vector) -> bytes:
    return np.asarray(vector, dtype="<f8").tobytes()


def decode_vector(data: bytes) -> Vector:
    return np.frombuffer(data, dtype="<f8")  # read-only, like the vectors the cache holds
