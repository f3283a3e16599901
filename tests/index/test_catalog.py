"""The columnar catalog and the change log: a clean close saves the catalog, the next open uses it only
when the database has not moved since; an index behind the database catches up from the change log,
and rebuilds when the log does not reach back far enough."""

from __future__ import annotations

from hebbs import Engine
from hebbs.schema import Memory, MemoryKind, Source
from hebbs.store import changelog
from hebbs.index.catalog import Catalog
from hebbs.store.storage import Store, WriteSet, id_bytes, temporal_keys, vector_key

FIELDS = ("entity_id", "created_at", "superseded_by", "kind", "importance", "access_count", "context_type",
          "file", "words")


def _fields(catalog_items) -> dict[str, tuple]:
    return {mid: tuple(getattr(e, f) for f in FIELDS) for mid, e in catalog_items}


def _memory(n: int, **kw) -> Memory:
    from ulid import ULID
    base = dict(id=str(ULID()), content=f"memory number {n} " + "word " * n, importance=n / 100,
                created_at=1_700_000_000_000_000 + n, updated_at=1_700_000_000_000_000 + n)
    base.update(kw)
    return Memory(**base)


def test_a_saved_catalog_loads_with_every_field(tmp_path):
    catalog = Catalog()
    memories = [_memory(1, entity_id="acme", context={"type": "decision"}),
                _memory(2, superseded_by="01J0000000000000000000000A", kind=MemoryKind.REVISION),
                _memory(3, source=Source(file_path="notes/a.md"), access_count=7),
                _memory(4)]
    for m in memories:
        catalog.put(m)
    catalog.remove(memories[3].id)
    catalog.save(tmp_path, db_seq=42)
    loaded = Catalog.load(tmp_path, db_seq=42)
    assert loaded is not None
    assert _fields(loaded.items()) == _fields(catalog.items())
    entry = loaded.get(memories[0].id)
    assert (entry.entity_id, entry.context_type, entry.words) == ("acme", "decision", 4)
    assert loaded.get(memories[1].id).kind == MemoryKind.REVISION
    assert loaded.get(memories[2].id).file == "notes/a.md" and loaded.get(memories[2].id).access_count == 7
    assert memories[3].id not in loaded
    # Another sequence (the database moved on) or a damaged byte: not used.
    assert Catalog.load(tmp_path, db_seq=43) is None
    raw = bytearray((tmp_path / "catalog.bin").read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    (tmp_path / "catalog.bin").write_bytes(bytes(raw))
    assert Catalog.load(tmp_path, db_seq=42) is None


def test_compaction_after_many_forgets_keeps_the_rest(tmp_path):
    catalog = Catalog()
    memories = [_memory(n % 50, entity_id=f"e{n % 3}") for n in range(3000)]
    for m in memories:
        catalog.put(m)
    for m in memories[:2500]:
        catalog.remove(m.id)
    assert len(catalog) == 500
    assert {mid for mid, _ in catalog.items()} == {m.id for m in memories[2500:]}
    for m in memories[2500:]:
        assert catalog.get(m.id).entity_id == m.entity_id and catalog.get(m.id).created_at == m.created_at


def test_reopen_uses_the_saved_catalog_only_while_the_database_has_not_moved(tmp_path, embedder):
    path = tmp_path / "v"
    with Engine.open(path, embedder=embedder) as eng:
        a = eng.remember("the ferry leaves at noon", entity_id="harbour")
        b = eng.remember("the ferry now leaves at one", entity_id="harbour", supersedes=[a.id])
        before = _fields(eng.vault.entries())
    with Engine.open(path, embedder=embedder) as eng:
        assert _fields(eng.vault.entries()) == before
        assert eng.recall("ferry", entity_id="harbour").ids() == [b.id]
        assert set(eng.recall("ferry", entity_id="harbour", include_superseded=True).ids()) == {a.id, b.id}
    # A writer that is not this engine moves the database after the close: the saved catalog is stale.
    store = Store.open(path / "db")
    stray = _memory(5, entity_id="harbour", content="a stray record written behind the engine's back")
    writes = WriteSet()
    writes.put_memory(stray)
    for key in temporal_keys(stray.entity_id, stray.created_at, stray.id):
        writes.put("temporal", key, id_bytes(stray.id))
    writes.put("vectors", vector_key(stray.id), embedder.embed_one(stray.content).astype("<f4").tobytes())
    store.commit(writes)
    store.close()
    with Engine.open(path, embedder=embedder) as eng:
        assert eng.vault.entry(stray.id) is not None and eng.vault.entry(stray.id).entity_id == "harbour"


def test_an_index_behind_catches_up_from_the_log_and_rebuilds_without_it(tmp_path, embedder, index_recovery):
    path = tmp_path / "v"
    with Engine.open(path, embedder=embedder) as eng:
        eng.remember("first memory about tea")
    eng = Engine.open(path, embedder=embedder)
    later = eng.remember("a later memory about coffee")
    gone = eng.remember("a memory to forget about cocoa")
    eng.forget([gone.id])
    seq = eng.vault.write_seq
    # Simulate a crash: the database moves on, the checkpoint on disk does not.
    eng.vault.store.close()
    eng.vault.lexical_index.close()
    eng.vault.closed = True
    calls = index_recovery
    calls.update(rebuild=0, sync=0)
    with Engine.open(path, embedder=embedder) as eng:
        assert later.id in eng.vault.vector_index and gone.id not in eng.vault.vector_index
        assert eng.recall("coffee", strategies=["similarity"], top_k=1).ids() == [later.id]
    assert calls == {"rebuild": 0, "sync": 1}

    # Without the log entries (a vault written by a version without the log), the index is rebuilt.
    eng = Engine.open(path, embedder=embedder)
    extra = eng.remember("yet another memory about juice")
    eng.vault.store.close()
    eng.vault.lexical_index.close()
    eng.vault.closed = True
    store = Store.open(path / "db")
    assert changelog.touched_since(store, seq, seq + 1) is not None
    writes = WriteSet()
    for key, _ in store.scan("meta", changelog.PREFIX):
        writes.delete("meta", key)
    store.commit(writes)
    assert changelog.touched_since(store, seq, seq + 1) is None
    store.close()
    with Engine.open(path, embedder=embedder) as eng:
        assert extra.id in eng.vault.vector_index
        assert eng.recall("juice", top_k=1).ids() == [extra.id]
    assert calls == {"rebuild": 1, "sync": 1}
