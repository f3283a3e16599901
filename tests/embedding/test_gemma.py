"""EmbeddingGemma-300m through hebbs' own ONNX graph (hebbs/embedding/gemma_onnx.py), against vectors
computed once with torch and transformers (scripts/embeddinggemma_reference.py, the fixture
data/embeddinggemma_reference.json).

The model is large (1.2 GB of weights, a 1.2 GB graph): every test here shares the suite's one copy
(tests/gemma_cache.py), which the first run downloads and assembles and whose graph it builds (minutes);
later runs check its sha256 and load the cached graph. A module-scoped fixture: the module runs on one
xdist worker.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hebbs.embedding.embed import Embedder
from gemma_cache import MODEL, gemma_cache

# The first run downloads 1.15 GB, assembles it and builds the graph inside the first test's setup:
# about 7 minutes on a loaded 2-core machine, past the suite's 600 s per test.
pytestmark = pytest.mark.timeout(1800)
REFERENCE = json.loads((Path(__file__).parent / "data" / "embeddinggemma_reference.json").read_text())


@pytest.fixture(scope="module")
def gemma() -> Embedder:
    return Embedder.load(MODEL, cache_dir=gemma_cache())


def test_the_graph_matches_transformers_reference(gemma: Embedder) -> None:
    texts = REFERENCE["texts"]
    queries = [t["text"] for t in texts if t["kind"] == "query"]
    documents = [t["text"] for t in texts if t["kind"] == "document"]
    ours = np.concatenate([gemma.embed_queries(queries), gemma.embed_documents(documents)])
    kinds = [t["kind"] for t in texts]
    reference = np.array(REFERENCE["vectors"], dtype=np.float32)
    reference = np.concatenate([reference[[k == "query" for k in kinds]], reference[[k == "document" for k in kinds]]])
    cosines = np.sum(ours * reference, axis=1)
    assert cosines.min() >= 0.999, cosines
    assert ours.shape == (len(texts), 768)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_prompts_and_a_relevant_passage(gemma: Embedder) -> None:
    assert gemma.query_prompt == "task: search result | query: "
    assert gemma.document_prompt == "title: none | text: "
    cue = gemma.embed_query("Which planet is known as the Red Planet?")
    passages = gemma.embed_documents([
        "Mars, known for its reddish appearance, is often referred to as the Red Planet.",
        "The committee approved the budget for the new library wing.",
    ])
    scores = passages @ cue
    assert scores[0] > scores[1] + 0.2
    # a single text and the same text in a padded batch get one vector (right padding is masked)
    np.testing.assert_allclose(gemma.embed(["short"])[0], gemma.embed(["short", "a much longer text " * 8])[0], atol=2e-5)
