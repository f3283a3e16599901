"""The stored copy of each vector: float16 behind a tag byte, and vaults written with float32 still read.

The HNSW index keeps the float32 vectors; RocksDB's copy serves rebuilding the index and recall's
reads (MMR, confidence). A vault from before the change holds float32 values (4*dim bytes): it opens,
rebuilds its index from them, recalls, and takes new float16 memories beside them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import rocksdict

from hebbs import Engine
from hebbs.store.storage import (COLUMN_FAMILIES, decode_vector, decode_vectors, encode_vector, id_str, id_strs,
                                 vector_key)

TEXTS = ["the deploy key rotates every ninety days", "lunch is at noon on Fridays",
         "the staging database lives in Frankfurt", "Dana prefers green tea to coffee"]


def test_encode_decode_round_trip() -> None:
    rng = np.random.default_rng(3)
    vector = rng.standard_normal(384).astype(np.float32)
    vector /= np.linalg.norm(vector)
    stored = encode_vector(vector)
    assert len(stored) == 1 + 2 * 384 and stored[:1] == b"\x10"
    back = decode_vector(stored)
    assert back.dtype == np.float32 and np.max(np.abs(back - vector)) < 5e-4
    # The float32 form written before: read exactly.
    assert np.array_equal(decode_vector(vector.astype("<f4").tobytes()), vector)
    both = [stored, vector.astype("<f4").tobytes()]
    assert decode_vectors(both, 384) is None  # mixed forms: the caller reads row by row
    assert np.allclose(decode_vectors([stored, stored], 384), np.vstack([back, back]))
    many = [encode_vector(rng.standard_normal(384).astype(np.float32)) for _ in range(50)]
    assert np.array_equal(decode_vectors(many, 384), np.vstack([decode_vector(raw) for raw in many]))


def test_ids_named_in_one_step_as_one_by_one() -> None:
    """id_strs (a lexical page's hits named at once) gives id_str's text for every 16-byte value,
    the extremes included, and id_str's error for a value of another length."""
    raws = [os.urandom(16) for _ in range(2000)] + [b"\0" * 16, b"\xff" * 16, bytes(range(16))]
    assert id_strs(raws) == [id_str(raw) for raw in raws]
    assert id_strs(raws[:3]) == [id_str(raw) for raw in raws[:3]]  # a few: one by one
    with pytest.raises(ValueError):
        id_strs(raws[:10] + [b"short"])


def _write_as_float32(db: Path, vectors: dict[str, np.ndarray]) -> None:
    """Store these vectors in the float32 form of vaults written before float16 (plain rocksdict)."""
    opts = rocksdict.Options(raw_mode=True)
    rdb = rocksdict.Rdict(str(db), options=opts, column_families={n: opts for n in COLUMN_FAMILIES[1:]})
    try:
        family = rdb.get_column_family("vectors")
        for memory_id, vector in vectors.items():
            family[vector_key(memory_id)] = vector.astype("<f4").tobytes()
        del family
    finally:
        rdb.close()


def test_a_float32_vault_opens_rebuilds_recalls_and_grows(tmp_path: Path, embedder) -> None:
    path = tmp_path / "v"
    with Engine.open(path, embedder=embedder) as eng:
        ids = [m.id for m in eng.remember_many([{"content": t} for t in TEXTS])]
        before = eng.recall("where is the staging database", top_k=1).results[0].memory.id
    want = embedder.embed_documents(TEXTS)
    _write_as_float32(path / "db", dict(zip(ids, want)))
    shutil.rmtree(path / "index")  # no checkpoint: the index is rebuilt from the float32 values

    with Engine.open(path, embedder=embedder) as eng:
        vault = eng.vault
        assert len(vault.store.get_vector(ids[0])) == 4 * embedder.dim
        old = vault.vectors_or_zeros(ids)
        assert np.allclose(old, want, atol=1e-6)  # float32 values read as they are
        assert eng.recall("where is the staging database", top_k=1).results[0].memory.id == before
        new = eng.remember("the office plants are watered on Mondays")
        raw = vault.store.get_vector(new.id)
        assert raw[:1] == b"\x10" and len(raw) == 1 + 2 * embedder.dim
        mixed = vault.vectors_or_zeros([ids[0], new.id, "0" * 26])
        assert np.allclose(mixed[0], want[0], atol=1e-6)
        assert np.allclose(mixed[1], embedder.embed_documents([new.content])[0], atol=1e-3)
        assert not mixed[2].any()
        assert eng.recall("when are the plants watered", top_k=1).results[0].memory.id == new.id


def test_index_rebuilt_from_float16_finds_what_the_float32_index_found(tmp_path: Path, embedder) -> None:
    path = tmp_path / "v"
    cues = ["how often is the deploy key rotated", "what does Dana drink", "when is lunch"]
    with Engine.open(path, embedder=embedder) as eng:
        eng.remember_many([{"content": t} for t in TEXTS])
        first = [eng.recall(c, strategies=["similarity"], top_k=4).results for c in cues]
        stored = eng.vault.store.get_vector(first[0][0].memory.id)
        assert stored[:1] == b"\x10"
    shutil.rmtree(path / "index")
    with Engine.open(path, embedder=embedder) as eng:
        again = [eng.recall(c, strategies=["similarity"], top_k=4).results for c in cues]
    for a, b in zip(first, again):
        assert [r.memory.id for r in a] == [r.memory.id for r in b]
        for x, y in zip(a, b):
            assert x.details["similarity"] == pytest.approx(y.details["similarity"], abs=2e-3)


def test_reopening_a_vault_keeps_two_rocksdb_info_logs(tmp_path: Path, embedder) -> None:
    """Each open starts a new info LOG; the old ones do not pile up in the vault."""
    for i in range(6):
        with Engine.open(tmp_path / "vault", embedder=embedder) as eng:
            eng.remember(f"fact number {i}")
    logs = sorted(p.name for p in (tmp_path / "vault" / "db").iterdir() if p.name.startswith("LOG"))
    assert 1 <= len(logs) <= 2, logs
    with Engine.open(tmp_path / "vault", embedder=embedder) as eng:
        assert eng.count() == 6


def _read(store, ids: list[str]) -> list[bytes | None]:
    """The stored vectors as RocksDB holds them now, past get_vectors' cache."""
    return store._views["vectors"].get([vector_key(mid) for mid in ids])


def test_vectors_read_once_are_kept_and_what_changes_them_is_not(tmp_path: Path, embedder) -> None:
    """get_vectors keeps what it read (a default recall reads its ~85 candidates' vectors, and they
    recur from cue to cue); a revision, a forget and a new memory are seen by the next read, and a read
    that raced with a commit writing a vector does not put back the vector that commit replaced."""
    with Engine.open(tmp_path / "v", embedder=embedder) as engine:
        ids = [m.id for m in engine.remember_many([{"content": t} for t in TEXTS])]
        store = engine.vault.store
        engine.recall("where does the staging database live", top_k=4)
        assert store.get_vectors(ids) == _read(store, ids) and set(ids) <= set(store._vectors)
        before = store.get_vectors(ids)
        engine.revise(ids[0], content="the staging database moved to Dublin")
        engine.forget(ids=[ids[1]])
        new = engine.remember("the deploy key is kept in the vault").id
        now = store.get_vectors(ids + [new])
        assert now == _read(store, ids + [new])
        assert now[0] != before[0] and now[1] is None and now[2:4] == before[2:4] and now[4] is not None
        assert engine.recall("which city did the staging database move to? Dublin", top_k=1).ids() == [ids[0]]

        # A commit that writes ids[2]'s vector while a read of it is between RocksDB and the cache.
        views = store._views
        real = views["vectors"]

        class Racing:
            def __init__(self, content: str) -> None:
                self.content = content

            def get(self, keys):
                raws = real.get(keys)
                views["vectors"] = real
                engine.revise(ids[2], content=self.content)
                return raws

        store._vectors.pop(ids[2])
        views["vectors"] = Racing("lunch moved to one o'clock on Fridays")
        stale = store.get_vectors([ids[2]])
        assert stale == before[2:3]  # what RocksDB held when it was read
        assert store.get_vectors([ids[2]]) == _read(store, [ids[2]]) != stale

        # The same race with the cache empty (the first recall after an open, or just after it was emptied).
        before = store.get_vectors([ids[2]])
        store._vectors.clear()
        views["vectors"] = Racing("lunch is at two on Fridays now")
        stale = store.get_vectors([ids[2]])
        assert stale == before
        assert store.get_vectors([ids[2]]) == _read(store, [ids[2]]) != stale
