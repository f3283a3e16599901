"""Models trained with prompts get them: the query prompt before cues, the document prompt before memories."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from hebbs import Engine
from hebbs.embedding import embed as embed_mod
from hebbs.embedding.embed import Embedder, ModelError
from hebbs.models import load_registry

QUERY_PROMPT = "query: "
DOCUMENT_PROMPT = "passage: "


@pytest.fixture(scope="module")
def prompted_dir(tmp_path_factory: pytest.TempPathFactory, embedder) -> Path:
    """The shipped MiniLM graph and tokenizer, declared as a model that wants E5-style prompts."""
    directory = tmp_path_factory.mktemp("prompted-model")
    entry = load_registry()["models"]["all-MiniLM-L6-v2"]
    shutil.copy(embedder.onnx_path, directory / "model.onnx")
    shutil.copy(embed_mod._wheel_model_dir(entry) / "tokenizer.json", directory / "tokenizer.json")
    (directory / "hebbs_model.json").write_text(json.dumps(
        {"id": "minilm-prompted", "max_tokens": 256, "query_prompt": QUERY_PROMPT, "document_prompt": DOCUMENT_PROMPT}))
    return directory


@pytest.fixture(scope="module")
def prompted(prompted_dir: Path) -> Embedder:
    return Embedder.load(prompted_dir)


def test_prompts_are_read_from_hebbs_model_json(prompted: Embedder) -> None:
    assert (prompted.query_prompt, prompted.document_prompt) == (QUERY_PROMPT, DOCUMENT_PROMPT)


def test_cue_and_memory_embeddings_carry_their_prompts(prompted: Embedder, embedder) -> None:
    cue, memory = "when does the deploy key rotate", "the deploy key rotates every 90 days"
    np.testing.assert_allclose(prompted.embed_query(cue), embedder.embed_one(QUERY_PROMPT + cue), atol=1e-6)
    np.testing.assert_allclose(prompted.embed_queries([cue])[0], embedder.embed_one(QUERY_PROMPT + cue), atol=1e-6)
    np.testing.assert_allclose(prompted.embed_documents([memory])[0], embedder.embed_one(DOCUMENT_PROMPT + memory),
                               atol=1e-6)
    assert not np.allclose(prompted.embed_query(cue), embedder.embed_one(cue), atol=1e-3)
    np.testing.assert_allclose(prompted.embed([cue]), embedder.embed([cue]), atol=1e-6)  # plain embed: no prompt


def test_engine_embeds_memories_with_the_document_prompt_and_cues_with_the_query_prompt(
        prompted: Embedder, embedder, tmp_path: Path) -> None:
    with Engine.open(tmp_path / "vault", embedder=prompted) as eng:
        memory = eng.remember("the deploy key rotates every 90 days")
        # The vault keeps its copy of each vector as float16 (the index holds float32): 1e-4 is that rounding,
        # a tenth of what leaving the prompt out moves a component by (1e-3 above).
        stored = eng.vault.vector(memory.id)
        np.testing.assert_allclose(stored, embedder.embed_one(DOCUMENT_PROMPT + memory.content), atol=1e-4)
        assert not np.allclose(stored, embedder.embed_one(memory.content), atol=1e-3)
        asked: list[str] = []
        original = prompted.embed_query
        try:
            prompted.embed_query = lambda text: (asked.append(text), original(text))[1]  # type: ignore[method-assign]
            found = eng.recall("deploy key rotation", strategies=["similarity"], reinforce=False)
        finally:
            del prompted.embed_query
        assert asked == ["deploy key rotation"] and found.ids() == [memory.id]


def test_model_without_prompts_embeds_texts_as_they_are(embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    assert (embedder.query_prompt, embedder.document_prompt) == ("", "")
    monkeypatch.setattr(embedder, "cue_graph", "float32")  # the memories' graph: the same text, the same vector
    np.testing.assert_allclose(embedder.embed_query("a cue"), embedder.embed_one("a cue"), atol=1e-7)


def test_a_prompt_that_is_not_text_is_a_model_error(prompted_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(prompted_dir, bad)
    (bad / "hebbs_model.json").write_text(json.dumps({"query_prompt": 3}))
    with pytest.raises(ModelError, match="query_prompt"):
        Embedder.load(bad)


def test_prompts_are_read_from_a_registry_entry(embedder, tmp_path: Path) -> None:
    entry = {**load_registry()["models"]["all-MiniLM-L6-v2"], "query_prompt": QUERY_PROMPT,
             "document_prompt": DOCUMENT_PROMPT}
    model = Embedder._from_registry_dir(entry, embed_mod._wheel_model_dir(entry), embedder.onnx_path.parent, None)
    assert (model.query_prompt, model.document_prompt) == (QUERY_PROMPT, DOCUMENT_PROMPT)
    np.testing.assert_allclose(model.embed_query("x"), embedder.embed_query(QUERY_PROMPT + "x"), atol=1e-6)
