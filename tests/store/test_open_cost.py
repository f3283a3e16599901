"""What an open keeps and leaves behind: the vector index's label map after removals and a checkpoint
(and its id -> label map, left unbuilt until a write needs it),
a whole-family scan that stays out of RocksDB's block cache, and the record check of a large vault,
which runs after the indexes are loaded and still refuses writes to a damaged vault."""

from __future__ import annotations

import numpy as np

from hebbs.config import IndexParams
from hebbs.store.storage import Store, WriteSet
from hebbs.index.vector import VectorIndex


def test_labels_survive_removals_and_a_checkpoint(tmp_path):
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(12, 8)).astype("float32")
    index = VectorIndex(8, IndexParams(), capacity=16)
    ids = [f"m{i}" for i in range(12)]
    index.add(ids[:10], vectors[:10])
    index.remove(["m2", "m5", "m9"])
    VectorIndex.publish(tmp_path, index.dump(tmp_path, 7))
    loaded, at = VectorIndex.load(tmp_path, 7, 8, IndexParams())
    assert at == 7 and len(loaded) == 7
    assert loaded.ids_by_label() == index.ids_by_label()
    assert "m2" not in loaded and "m3" in loaded
    # A removed memory is never found again; new ones take new labels (labels are never reused).
    hits = loaded.search(vectors[2], 10)
    assert "m2" not in {mid for mid, _ in hits} and len(hits) == 7
    loaded.add(ids[10:], vectors[10:])
    assert sorted(loaded.ids_by_label()) == [0, 1, 3, 4, 6, 7, 8, 10, 11]
    assert loaded.search(vectors[11], 1)[0][0] == "m11"
    assert np.allclose(loaded.vectors(["m11"])[0], vectors[11] / np.linalg.norm(vectors[11]), atol=1e-6)


def test_a_loaded_index_searches_without_its_id_map_and_builds_it_for_writes(tmp_path):
    rng = np.random.default_rng(2)
    vectors = rng.normal(size=(8, 8)).astype("float32")
    index = VectorIndex(8, IndexParams(), capacity=16)
    ids = [f"m{i}" for i in range(8)]
    index.add(ids, vectors)
    index.remove(["m1"])
    VectorIndex.publish(tmp_path, index.dump(tmp_path, 3))
    loaded, _ = VectorIndex.load(tmp_path, 3, 8, IndexParams())
    assert len(loaded) == 7
    assert loaded.search(vectors[5], 1)[0][0] == "m5"
    assert loaded._label_of is None  # an open that only searches never builds the id -> label map
    loaded.remove(["m3"])
    loaded.add(["m4"], vectors[7:8])  # an update keeps its label
    assert len(loaded) == 6
    assert [mid for mid, _ in loaded.search(vectors[7], 2)] in (["m4", "m7"], ["m7", "m4"])
    assert "m3" not in {mid for mid, _ in loaded.search(vectors[3], 6)}


def test_an_uncached_scan_leaves_the_block_cache_alone(tmp_path):
    store = Store.open(tmp_path / "db")
    try:
        writes = WriteSet()
        for i in range(20_000):
            writes.put("default", b"\x01" + i.to_bytes(16, "big"), bytes(200))
        store.commit(writes)
        store.db.flush()
        usage = lambda: store.db.property_int_value("rocksdb.block-cache-usage")  # noqa: E731
        before = usage()
        assert sum(1 for _ in store.scan("default", b"\x01", cached=False)) == 20_000
        assert usage() - before < 64 * 1024
        assert sum(1 for _ in store.scan("default", b"\x01")) == 20_000
        assert usage() - before > 1_000_000  # the cached scan does fill it: the measure is live
    finally:
        store.close()


def test_a_large_vault_checks_its_records_after_the_open_and_refuses_writes_when_damaged(tmp_path, embedder,
                                                                                         monkeypatch):
    import sys
    from pathlib import Path

    import pytest

    from hebbs import CorruptVault, Engine
    from hebbs.core import open_vault

    sys.path.insert(0, str(Path(__file__).parents[1] / "reliability"))
    from storage_faults import damage, find_file

    vault = tmp_path / "vault"
    with Engine.open(vault, embedder=embedder) as eng:
        eng.remember_many([{"content": f"memory {i} about the harbour crane {i % 7}: " + "detail " * 30}
                           for i in range(300)], check_contradictions=False, consolidate=False)
    damage(find_file(vault, "sst"), "bitflip")
    # As for a vault above the inline limit: the check runs in the background, after the indexes load.
    monkeypatch.setattr(open_vault, "VERIFY_INLINE_UP_TO", 0)
    eng = Engine.open(vault, embedder=embedder)
    try:
        assert eng.vault._verifier is not None
        with pytest.raises(CorruptVault):
            eng.remember("written to a damaged vault")
    finally:
        eng.close()
