"""The engine core on real RocksDB files and the real model: records, key layouts, crashes, scoring, history."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import msgspec
import numpy as np
import pytest
import rocksdict
from ulid import ULID

from hebbs import Engine, InvalidInput, MemoryKind, ModelMismatch, NotFound, ScoringWeights
from hebbs.store.storage import COLUMN_FAMILIES, Store, WriteSet, id_bytes

import processes

UTC = dt.timezone.utc


def raw_families(db_path: Path) -> dict[str, dict[bytes, bytes]]:
    """Every key and value of every column family, read with plain rocksdict (no hebbs code)."""
    opts = rocksdict.Options(raw_mode=True)
    db = rocksdict.Rdict(str(db_path), options=opts, column_families={n: opts for n in COLUMN_FAMILIES[1:]},
                         access_type=rocksdict.AccessType.read_only())
    try:
        out = {}
        for name in COLUMN_FAMILIES:
            view = db.get_column_family(name)
            out[name] = dict(view.items())
            del view
        return out
    finally:
        db.close()


def test_every_field_round_trips_and_survives_reopen(tmp_path, embedder):
    when = dt.datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    with Engine.open(tmp_path / "v", embedder=embedder) as eng:
        m = eng.remember("Acme uses Salesforce", importance=0.7, context={"stage": "discovery", "n": [1, 2.5, None]},
                         entity_id="acme_corp", created_at=when)
        assert eng.get(m.id) == m
    with Engine.open(tmp_path / "v", embedder=embedder) as eng:
        got = eng.get(m.id)
    assert got == m
    assert got.content == "Acme uses Salesforce" and got.importance == 0.7
    assert got.context == {"stage": "discovery", "n": [1, 2.5, None]}
    assert got.entity_id == "acme_corp" and got.kind == MemoryKind.EPISODE
    assert got.created_at == int(when.timestamp() * 1_000_000)
    assert got.updated_at >= got.created_at and got.last_accessed_at == got.updated_at
    assert got.access_count == 0 and got.decay_score == pytest.approx(0.7)
    assert len(ULID.from_str(got.id).bytes) == 16


def test_key_layouts_read_back_raw(tmp_path, embedder):
    when = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    with Engine.open(tmp_path / "v", embedder=embedder) as eng:
        a = eng.remember("first", entity_id="e1", created_at=when)
        b = eng.remember("second", entity_id="e1", created_at=when + dt.timedelta(seconds=1))
        c = eng.remember("no entity")
        eng.add_edge(a.id, "CAUSED_BY", c.id, 0.75)
        eng.recall("first", top_k=1)
    raw = raw_families(tmp_path / "v" / "db")
    assert set(raw) == set(COLUMN_FAMILIES)
    ida, idb, idc = (id_bytes(x.id) for x in (a, b, c))
    assert msgspec.msgpack.decode(raw["default"][b"\x01" + ida])["content"] == "first"
    ts = int(when.timestamp() * 1_000_000)
    assert raw["temporal"][b"e1\xff" + ts.to_bytes(8, "big") + ida] == ida
    assert raw["temporal"][b"e1\xff" + (ts + 1_000_000).to_bytes(8, "big") + idb] == idb
    assert any(k.startswith(b"__global__\xff") and v == idc for k, v in raw["temporal"].items())
    # The vault-wide timeline holds every memory, so recall without an entity is one reverse scan.
    assert raw["temporal"][b"__all__\xff" + ts.to_bytes(8, "big") + ida] == ida
    assert sorted(v for k, v in raw["temporal"].items() if k.startswith(b"__all__\xff")) == sorted([ida, idb, idc])
    # The stored copy is float16 behind a tag byte (the index holds the float32 one).
    stored = raw["vectors"][b"\x00" + ida]
    assert stored[:1] == b"\x10" and len(stored) == 1 + 2 * embedder.dim
    vec = np.frombuffer(stored, dtype="<f2", offset=1)
    assert vec.shape == (embedder.dim,) and abs(np.linalg.norm(vec.astype(np.float32)) - 1) < 2e-3
    conf = np.frombuffer(raw["graph"][b"\xf0" + ida + bytes([1]) + idc][:4], dtype="<f4")[0]
    assert conf == pytest.approx(0.75)
    assert b"\xf1" + idc + bytes([1]) + ida in raw["graph"]
    # The automatic FOLLOWED_BY edge (type 3) between consecutive memories of one entity.
    assert b"\xf0" + ida + bytes([3]) + idb in raw["graph"]
    assert msgspec.msgpack.decode(raw["meta"][b"model_id"]) == embedder.model_id
    assert msgspec.msgpack.decode(raw["meta"][b"model_dim"]) == embedder.dim
    assert len(raw["query_log"]) == 1


def test_recall_ordering_follows_each_weight(engine):
    now = dt.datetime.now(UTC)
    old = engine.remember("The deploy pipeline uses GitHub Actions", importance=0.9,
                         created_at=now - dt.timedelta(days=20))
    new = engine.remember("Lunch today was a sandwich", importance=0.1, created_at=now)
    popular = engine.remember("The office wifi password rotates monthly", importance=0.5,
                             created_at=now - dt.timedelta(days=10))
    for _ in range(5):
        engine.recall("office wifi password", strategies=["similarity"], top_k=1, reinforce=True)
    everything = dict(strategies=["temporal"], top_k=3, reinforce=False)

    def order(**weights) -> list[str]:
        w = ScoringWeights(**{"relevance": 0, "recency": 0, "importance": 0, "reinforcement": 0, **weights})
        return engine.recall(weights=w, **everything).ids()

    assert order(recency=1) == [new.id, popular.id, old.id]
    assert order(importance=1) == [old.id, popular.id, new.id]
    assert order(reinforcement=1)[0] == popular.id
    by_relevance = engine.recall("CI/CD deployment workflow", strategies=["similarity"], top_k=3, reinforce=False,
                                weights=ScoringWeights(relevance=1, recency=0, importance=0, reinforcement=0))
    assert by_relevance.ids()[0] == old.id
    r = by_relevance[0]
    assert r.score == pytest.approx(r.components.relevance)
    assert set(r.strategies) == {"similarity"}


def test_recall_reinforces_and_logs_unless_asked_not_to(engine):
    m = engine.remember("Bob prefers tea over coffee")
    engine.recall("what does Bob drink", top_k=1, reinforce=True)
    assert engine.get(m.id).access_count == 1
    engine.recall("what does Bob drink", top_k=1, reinforce=False)
    assert engine.get(m.id).access_count == 1
    log = engine.queries()
    assert [q.cue for q in log] == ["what does Bob drink"] * 2
    assert log[0].result_count == 1 and log[0].latency_ms > 0


def test_temporal_recall_is_newest_first_within_entity_and_range(engine):
    base = dt.datetime(2024, 3, 1, tzinfo=UTC)
    made = [engine.remember(f"event {i}", entity_id="proj", created_at=base + dt.timedelta(days=i)) for i in range(6)]
    engine.remember("other entity", entity_id="else", created_at=base + dt.timedelta(days=3))
    w = ScoringWeights(relevance=1, recency=0, importance=0, reinforcement=0)
    res = engine.recall(strategies=["temporal"], entity_id="proj", top_k=10, weights=w, reinforce=False)
    assert res.ids() == [m.id for m in reversed(made)]
    window = (base + dt.timedelta(days=1), base + dt.timedelta(days=3))
    res = engine.recall(strategies=["temporal"], entity_id="proj", time_range=window, weights=w, reinforce=False)
    assert res.ids() == [made[3].id, made[2].id, made[1].id]
    everywhere = engine.recall(strategies=["temporal"], top_k=2, weights=w, reinforce=False)
    assert everywhere.ids() == [made[5].id, made[4].id]
    sim = engine.recall("event", strategies=["similarity"], entity_id="else", reinforce=False)
    assert [r.memory.entity_id for r in sim] == ["else"]


def test_revise_keeps_history_and_same_id(engine):
    m = engine.remember("The API rate limit is 100 requests per minute", importance=0.4)
    r = engine.revise(m.id, content="The API rate limit is 500 requests per minute", importance=0.8)
    assert r.id == m.id and r.content.endswith("500 requests per minute") and r.importance == 0.8
    history = engine.history(m.id)
    assert [h.content for h in history] == ["The API rate limit is 100 requests per minute"]
    assert history[0].kind == MemoryKind.REVISION and history[0].revision_of == m.id
    assert any(e.edge_type == "REVISED_FROM" and e.target == history[0].id for e in engine.edges(m.id))
    hits = engine.recall("API rate limit", top_k=5, reinforce=False)
    assert hits.ids() == [m.id]  # the old text never competes with the new one
    assert "500" in hits[0].memory.content


def test_forget_leaves_no_trace_in_any_family(tmp_path, embedder):
    with Engine.open(tmp_path / "v", embedder=embedder) as eng:
        keep = eng.remember("keep me", entity_id="e")
        gone = eng.remember("forget me please", entity_id="e")
        eng.remember("do not forget me please", entity_id="e")  # a planted contradiction candidate
        assert eng.pending(), "the negation pair should have been queued"
        eng.revise(gone.id, content="forget me now")
        eng.add_edge(keep.id, "RELATED_TO", gone.id)
        revision_ids = [h.id for h in eng.history(gone.id)]
        assert eng.forget(ids=[gone.id]) == 1
        with pytest.raises(NotFound):
            eng.get(gone.id)
        assert eng.recall("forget me", strategies=["lexical"], reinforce=False).ids() == [] or \
            gone.id not in eng.recall("forget me", reinforce=False).ids()
    raw = raw_families(tmp_path / "v" / "db")
    needles = [id_bytes(gone.id)] + [id_bytes(r) for r in revision_ids]
    assert raw["pending"] == {}, "a contradiction candidate about the forgotten memory was left behind"
    for family, items in raw.items():
        if family in ("meta", "query_log"):
            continue
        for key, value in items.items():
            for needle in needles:
                assert needle not in key and needle not in value, f"trace of a forgotten memory in {family}"
    assert id_bytes(keep.id) in b"".join(raw["default"])


def test_forget_by_entity(engine):
    for i in range(3):
        engine.remember(f"note {i}", entity_id="tmp")
    other = engine.remember("stays", entity_id="kept")
    assert engine.forget(entity_id="tmp") == 3
    assert [m.id for m in engine.memories()] == [other.id]


@pytest.mark.parametrize("call, message", [
    (lambda e: e.remember(""), "must not be empty"),
    (lambda e: e.remember(42), "must be a string"),
    (lambda e: e.remember("x", importance=1.5), "from 0 to 1"),
    (lambda e: e.remember("x", importance="high"), "number"),
    (lambda e: e.remember("x", context={"f": object()}), "JSON"),
    (lambda e: e.remember("x", context=["not", "a", "dict"]), "JSON object"),
    (lambda e: e.remember("x", created_at=dt.datetime(2024, 1, 1)), "timezone-aware"),
    (lambda e: e.remember("x", supersedes=["not-an-id"]), "valid memory id"),
    (lambda e: e.remember("x", entity_id="__all__"), "reserved"),
    (lambda e: e.remember_many([{"content": "ok"}, {"content": ""}]), "must not be empty"),
    (lambda e: e.remember_many([{"content": "ok", "bogus": 1}]), "unknown fields"),
    (lambda e: e.recall("x", strategies=["telepathy"]), "unknown strategy"),
    (lambda e: e.recall("x", top_k=0), "top_k"),
    (lambda e: e.recall("x", top_k=10**9), "top_k"),
    (lambda e: e.recall("x", weights=ScoringWeights(relevance=-1)), "weights"),
    (lambda e: e.recall(strategies=["similarity"]), "need a cue"),
    (lambda e: e.revise("01ARZ3NDEKTSV4RRFFQ69G5FAV", content=""), "must not be empty"),
])
def test_bad_input_is_a_clear_error_and_changes_nothing(engine, call, message):
    """Each bad call raises InvalidInput naming the problem; memory count and write sequence stay the same."""
    engine.remember("already here")
    before = (engine.count(), engine.stats().write_seq)
    with pytest.raises(InvalidInput, match=message):
        call(engine)
    assert (engine.count(), engine.stats().write_seq) == before


def test_unknown_ids_are_not_found(engine):
    unknown = str(ULID())
    with pytest.raises(NotFound):
        engine.get(unknown)
    with pytest.raises(NotFound):
        engine.revise(unknown, content="x")
    with pytest.raises(NotFound):
        engine.remember("x", edges=[(unknown, "CAUSED_BY", 0.5)])
    assert engine.forget(ids=[unknown]) == 0
    assert engine.count() == 0


def test_second_process_gets_vault_busy_naming_the_holder(tmp_path, embedder):
    with Engine.open(tmp_path / "v", embedder=embedder):
        code = f"""
from hebbs.store.storage import Store
from hebbs.errors import VaultBusy
try:
    Store.open({str(tmp_path / 'v' / 'db')!r})
except VaultBusy as e:
    print(e)
"""
        out = processes.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert f"process {os.getpid()}" in out and "in use" in out
    # Closing released the lock: the same path opens again, in this process and in another.
    with Engine.open(tmp_path / "v", embedder=embedder):
        pass


def test_opening_with_another_model_says_how_to_move_it(tmp_path, embedder):
    Engine.open(tmp_path / "v", embedder=embedder).close()
    store = Store.open(tmp_path / "v" / "db")
    w = WriteSet()
    w.put_meta("model_id", "some-other-model")
    store.commit(w)
    store.close()
    with pytest.raises(ModelMismatch, match="hebbs reembed --model all-MiniLM-L6-v2"):
        Engine.open(tmp_path / "v", embedder=embedder)


def test_crash_mid_write_leaves_nothing_half_written(tmp_path, embedder):
    """A child process writes batches in a loop and is killed with SIGKILL mid-stream, three times."""
    path = tmp_path / "v"
    Engine.open(path, embedder=embedder).close()
    writer = textwrap.dedent(f"""
        import itertools, sys
        from hebbs import Engine
        with Engine.open({str(path)!r}) as eng:
            for i in itertools.count():
                eng.remember_many([{{"content": f"batch {{i}} item {{j}} about topic {{j % 7}}", "entity_id": f"e{{j % 3}}"}}
                                   for j in range(40)], consolidate=False)  # each round repeats batch 0
                if i == 1:
                    print("writing", flush=True)
        """)
    for round_ in range(3):
        proc = processes.popen([sys.executable, "-c", writer], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "writing"
        time.sleep(0.2 * round_)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    raw = raw_families(path / "db")
    memory_ids = {k[1:] for k in raw["default"]}
    vector_ids = {k[1:] for k in raw["vectors"]}
    temporal_ids = set(raw["temporal"].values())
    assert memory_ids and memory_ids == vector_ids == temporal_ids
    assert len(memory_ids) % 40 == 0, "a remember_many chunk was half-written"
    with Engine.open(path, embedder=embedder) as eng:
        n = eng.count()
        assert n == len(memory_ids)
        # Derived indexes were rebuilt to match: every memory is findable both ways.
        probe = next(iter(eng.memories()))
        assert probe.id in eng.recall(probe.content, strategies=["similarity"], top_k=50, reinforce=False).ids()
        assert probe.id in eng.recall(probe.content, strategies=["lexical"], top_k=50, reinforce=False).ids()


def test_vector_index_snapshot_is_reused_only_when_consistent(tmp_path, embedder):
    path = tmp_path / "v"
    with Engine.open(path, embedder=embedder) as eng:
        a = eng.remember("snapshots are written at close")
    assert (path / "index" / "hnsw.meta").exists()
    with Engine.open(path, embedder=embedder) as eng:
        assert eng.recall("written at close", strategies=["similarity"], top_k=1).ids() == [a.id]
        b = eng.remember("a write after the snapshot")
        # Simulate a crash: the database moves on, the snapshot on disk does not.
        eng.vault.store.close()
        eng.vault.lexical_index.close()
        eng.vault.closed = True
    with Engine.open(path, embedder=embedder) as eng:
        assert eng.recall("a write after the snapshot", strategies=["similarity"], top_k=1).ids() == [b.id]


def test_batched_remember_matches_single(engine):
    texts = [f"fact number {i} about the {w}" for i, w in enumerate(["moon", "sea", "forest", "city"])]
    batch = engine.remember_many([{"content": t, "entity_id": "b"} for t in texts])
    assert [m.content for m in batch] == texts
    for m in batch:
        assert engine.recall(m.content, strategies=["similarity"], top_k=1, reinforce=False).ids() == [m.id]


def test_remove_edge_deletes_both_keys_and_says_when_there_is_none(engine):
    a, b = engine.remember("cause"), engine.remember("effect")
    engine.add_edge(b.id, "CAUSED_BY", a.id, 0.9)
    engine.remove_edge(b.id, "CAUSED_BY", a.id)
    assert [e for e in engine.edges(b.id) if e.edge_type == "CAUSED_BY"] == []
    assert [e for e in engine.edges(a.id, "in") if e.edge_type == "CAUSED_BY"] == []
    with pytest.raises(NotFound):
        engine.remove_edge(b.id, "CAUSED_BY", a.id)


def test_revise_with_unchanged_text_keeps_no_revision(engine):
    m = engine.remember("The build takes four minutes")
    engine.revise(m.id, content="The build takes four minutes", importance=0.9)
    assert engine.history(m.id) == [] and engine.get(m.id).importance == 0.9


def test_corrupt_files_give_clear_errors_or_a_rebuild_and_lose_nothing(tmp_path, embedder):
    """Tried: garbage in the HNSW snapshot (rebuilt from RocksDB), one undecodable memory record
    (skipped when opening, a CorruptVault error when asked for, never deleted), and a garbage
    RocksDB CURRENT file (CorruptVault naming the vault, not a RocksDB trace)."""
    from hebbs import CorruptVault

    path = tmp_path / "v"
    with Engine.open(path, embedder=embedder) as eng:
        good = eng.remember("The release train leaves every second Tuesday")
        bad = eng.remember("This record will be damaged on disk")
    (path / "index" / "hnsw.bin").write_bytes(b"\x00garbage" * 1000)
    with Engine.open(path, embedder=embedder) as eng:
        assert eng.recall("release train", strategies=["similarity"], top_k=1).ids() == [good.id]
        w = WriteSet()
        w.put("default", b"\x01" + id_bytes(bad.id), b"\xc1 not msgpack")
        eng.vault.store.commit(w)
    with Engine.open(path, embedder=embedder) as eng:
        assert [m.id for m in eng.memories()] == [good.id]
        with pytest.raises(CorruptVault, match=bad.id):
            eng.get(bad.id)
    assert b"\xc1 not msgpack" in raw_families(path / "db")["default"].values()
    (path / "db" / "CURRENT").write_text("garbage\n")
    with pytest.raises(CorruptVault, match="cannot be opened"):
        Engine.open(path, embedder=embedder)


def test_the_vector_index_does_not_grow_with_revisions_and_reuses_forgotten_slots(engine):
    """Tried: 30 revisions of one memory, then forgetting 10 memories and remembering 10 new ones;
    the HNSW index keeps one element per live memory and every memory stays findable."""
    m = engine.remember("Version 0 of the release checklist")
    for i in range(1, 31):
        engine.revise(m.id, content=f"Version {i} of the release checklist")
    raw = engine.vault.vector_index.raw
    assert raw.get_current_count() == 1
    assert engine.recall("release checklist", strategies=["similarity"], top_k=5).ids() == [m.id]
    old = engine.remember_many([{"content": f"temporary note number {i}"} for i in range(10)])
    engine.forget(ids=[x.id for x in old])
    new = engine.remember_many([{"content": f"lasting note about topic {i}"} for i in range(10)])
    assert raw.get_current_count() == 11
    for x in new:
        assert engine.recall(x.content, strategies=["similarity"], top_k=1, reinforce=False).ids() == [x.id]


def test_a_snapshot_keeps_deleted_slots_reusable(tmp_path, embedder):
    path = tmp_path / "v"
    with Engine.open(path, embedder=embedder) as eng:
        made = eng.remember_many([{"content": f"snapshot note {i} on subject {w}"}
                                  for i, w in enumerate(["tea", "rain", "maps", "jazz", "bread"])])
        eng.forget(ids=[made[0].id, made[1].id])
    with Engine.open(path, embedder=embedder) as eng:
        assert eng.vault.vector_index.raw.get_current_count() == 5  # loaded from the snapshot, two slots deleted
        added = eng.remember_many([{"content": "snapshot note about chess"}, {"content": "snapshot note on kites"}])
        assert eng.vault.vector_index.raw.get_current_count() == 5
        for m in made[2:] + added:
            assert eng.recall(m.content, strategies=["similarity"], top_k=1, reinforce=False).ids() == [m.id]
        assert not {made[0].id, made[1].id} & set(eng.recall("snapshot note", strategies=["similarity"],
                                                              top_k=10, reinforce=False).ids())


def test_revise_many_is_all_or_none(engine):
    a = engine.remember("the staging database is postgres 14")
    b = engine.remember("the queue is rabbitmq")
    with pytest.raises(NotFound):
        engine.revise_many([{"id": a.id, "content": "the staging database is postgres 16"},
                           {"id": str(ULID()), "importance": 0.9}])
    assert engine.get(a.id).content == "the staging database is postgres 14"
    assert engine.history(a.id) == []
    # One memory named twice takes both changes, in order, and keeps both earlier texts.
    out = engine.revise_many([{"id": a.id, "content": "the staging database is postgres 15"},
                             {"id": b.id, "importance": 0.8},
                             {"id": a.id, "content": "the staging database is postgres 16", "importance": 0.7}])
    assert [m.id for m in out] == [a.id, b.id, a.id]
    now = engine.get(a.id)
    assert (now.content, now.importance) == ("the staging database is postgres 16", 0.7)
    assert [r.content for r in engine.history(a.id)] == ["the staging database is postgres 15",
                                                       "the staging database is postgres 14"]
    assert engine.get(b.id).importance == 0.8
    assert engine.recall("which postgres version is staging on", top_k=1).results[0].memory.id == a.id
