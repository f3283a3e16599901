"""kill -9 while memories are remembered, revised and forgotten: the next open brings the HNSW
checkpoint and the lexical index forward from the change log instead of rebuilding them, and then
every acknowledged memory is recallable and every acknowledged forget is gone, from both indexes.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np

from hebbs import Engine
from hebbs.store.storage import id_bytes

import processes

# Small, so that a child checkpoints several times before it is killed.
CHECKPOINT_EVERY = 15


def _writer(path: Path) -> str:
    return textwrap.dedent(f"""
        import random, sys
        from hebbs import Engine
        from hebbs.core import open_vault
        open_vault.CHECKPOINT_EVERY = {CHECKPOINT_EVERY}
        rng = random.Random(int(sys.argv[1]))
        eng = Engine.open({str(path)!r})
        print("open", flush=True)
        live = []
        n = int(sys.argv[1])
        while True:
            n += 1
            roll = rng.random()
            if live and roll < 0.2:
                victim = live.pop(rng.randrange(len(live)))
                print(f"forgetting {{victim}}", flush=True)
                eng.forget([victim])
                print(f"forgot {{victim}}", flush=True)
            elif live and roll < 0.3:
                target = rng.choice(live)
                print(f"revising {{target}} tok{{n}}x", flush=True)
                eng.revise(target, content=f"revised note tok{{n}}x about the {{n % 7}} garden")
                print(f"revised {{target}} tok{{n}}x", flush=True)
            elif roll < 0.4:
                batch = eng.remember_many([{{"content": f"batch note tok{{n}}y{{i}}x on the {{i}} harbour"}}
                                           for i in range(5)], check_contradictions=False)
                for i, m in enumerate(batch):
                    live.append(m.id)
                    print(f"remembered {{m.id}} tok{{n}}y{{i}}x", flush=True)
            else:
                m = eng.remember(f"single note tok{{n}}x about the {{n % 11}} orchard")
                live.append(m.id)
                print(f"remembered {{m.id}} tok{{n}}x", flush=True)
        """)


def _run_and_kill(path: Path, seed: int, acks_before_kill: int) -> list[str]:
    """A child writes until it has acknowledged `acks_before_kill` operations, then is SIGKILLed
    mid-write. Returns every line it printed (each printed line is an acknowledged operation)."""
    proc = processes.popen([sys.executable, "-c", _writer(path), str(seed)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "open"
    lines: list[str] = []
    enough = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            lines.append(line.strip())
            if len(lines) >= acks_before_kill:
                enough.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    while not enough.wait(0.2):
        assert proc.poll() is None, "the writer died before it was killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    reader.join(5)
    return lines


def _expected(lines: list[str], state: dict[str, str]) -> set[str]:
    """Fold acknowledged operations into id -> the unique token its current content holds. The child
    announces a forget or revise before it starts: the kill may land after the change is durable but
    before it is acknowledged, so that one memory may be found either way. Returns those ids, which
    are left out of `state`."""
    in_flight: set[str] = set()
    for line in lines:
        op, memory_id, *rest = line.split()
        if op in ("forgetting", "revising"):
            in_flight = {memory_id}
            continue
        in_flight = set()
        if op == "forgot":
            state.pop(memory_id, None)
        else:
            state[memory_id] = rest[0]
    for memory_id in in_flight:
        state.pop(memory_id, None)
    return in_flight


def test_kill_9_mid_writes_recovers_from_checkpoint_and_log(tmp_path, embedder, index_recovery):
    path = tmp_path / "vault"
    rng = random.Random(7)
    state: dict[str, str] = {}
    forgotten: set[str] = set()
    for round_ in range(3):
        lines = _run_and_kill(path, seed=1000 * (round_ + 1), acks_before_kill=rng.randint(40, 90))
        undecided = _expected(lines, state)
        forgotten |= {line.split()[1] for line in lines if line.startswith("forgot ")}
        forgotten -= undecided
        calls = index_recovery
        calls.update(rebuild=0, sync=0)
        with Engine.open(path, embedder=embedder) as eng:
            _check(eng, state, forgotten - set(state))
        if round_ > 0:
            # The clean close above left a checkpoint: only the child's writes since then are replayed
            # (none, if the kill landed just after one of the child's own checkpoints).
            assert calls["rebuild"] == 0 and calls["sync"] <= 1, calls


def _check(eng: Engine, state: dict[str, str], forgotten: set[str]) -> None:
    vault = eng.vault
    index = vault.vector_index
    stored_ids = {mid for mid, _ in vault.store.vectors()}
    indexed_ids = set(index.ids_by_label().values())
    assert indexed_ids == stored_ids, "the HNSW index and RocksDB disagree on which vectors exist"
    # Every indexed vector is the one RocksDB holds (a revision changes it).
    ids = sorted(stored_ids)
    stored = vault.vectors_or_zeros(ids)
    stored /= np.linalg.norm(stored, axis=1, keepdims=True)
    # RocksDB's copy is float16 (the index holds float32): the same vector within its rounding.
    assert np.allclose(index.vectors(ids), stored, atol=1e-3)
    for memory_id, token in state.items():
        assert memory_id in vault, f"acknowledged memory {memory_id} lost"
        assert token in vault.get(memory_id).content
        # Its own vector finds it: the HNSW graph reaches it.
        hits = vault.similar(vault.vector(memory_id), 5, allowed=lambda mid: True)
        assert memory_id in [mid for mid, _ in hits]
        # Its unique token finds it through BM25, and a recall by its content returns it.
        assert memory_id in [mid for mid, _ in vault.lexical_hits(token, 5, allowed=lambda mid: True)]
        assert memory_id in [r.memory.id for r in eng.recall(vault.get(memory_id).content, top_k=10)]
    for memory_id in forgotten:
        assert memory_id not in vault and memory_id not in index
        assert vault.store.get_vector(memory_id) is None
    lexical_ids = set(vault.lexical_index.search("note", 10_000, allowed=lambda raw: True))
    assert not {id_bytes(mid) for mid in forgotten} & {raw for raw, _ in lexical_ids}


def test_a_crash_while_a_checkpoint_is_published_leaves_a_usable_checkpoint(tmp_path):
    """publish() moves two files; a kill between any two of its steps must leave the old checkpoint
    or the new one loadable, never neither (which would cost a full rebuild)."""
    import os

    import msgspec

    from hebbs.config import IndexParams
    from hebbs.fsutil import atomic_write
    from hebbs.index import vector as vi

    rng = np.random.default_rng(3)
    directory = tmp_path / "index"
    index = vi.VectorIndex(8, IndexParams(), capacity=64)
    index.add([f"m{i}" for i in range(10)], rng.normal(size=(10, 8)).astype("float32"))
    vi.VectorIndex.publish(directory, index.dump(directory, 1))
    index.add([f"m{i}" for i in range(10, 20)], rng.normal(size=(10, 8)).astype("float32"))
    meta = index.dump(directory, 2)
    # The steps of publish, stopped after each one.
    tmp_index = directory / f".{vi._SNAPSHOT_INDEX}.tmp"
    decoded = msgspec.msgpack.decode(meta, type=vi._SnapshotMeta)
    decoded = vi.seal(decoded, tmp_index)
    atomic_write(directory / vi._NEXT_META, msgspec.msgpack.encode(decoded))
    assert vi.VectorIndex.load(directory, 2, 8, IndexParams())[1] == 1  # killed before the index moved
    os.replace(tmp_index, directory / vi._SNAPSHOT_INDEX)
    assert vi.VectorIndex.load(directory, 2, 8, IndexParams())[1] == 2  # killed before the meta moved
    os.replace(directory / vi._NEXT_META, directory / vi._SNAPSHOT_META)
    loaded, at = vi.VectorIndex.load(directory, 2, 8, IndexParams())
    assert at == 2 and len(loaded) == 20


def test_a_damaged_checkpoint_is_refused_and_a_damaged_header_never_reaches_hnswlib(tmp_path, monkeypatch):
    """The whole file is hashed while hnswlib loads it; hnswlib can crash on a damaged header, so the
    header's own checksum is checked before the load, and damage past it is caught once both end."""
    import msgspec

    from hebbs.config import IndexParams
    from hebbs.index import vector as vi

    rng = np.random.default_rng(5)
    directory = tmp_path / "index"
    index = vi.VectorIndex(8, IndexParams(), capacity=64)
    index.add([f"m{i}" for i in range(200)], rng.normal(size=(200, 8)).astype("float32"))
    index.save(directory, 7)
    path = directory / vi._SNAPSHOT_INDEX
    intact = path.read_bytes()
    loads: list[str] = []
    load_index = vi.hnswlib.Index.load_index_mapped
    monkeypatch.setattr(vi.hnswlib.Index, "load_index_mapped",
                        lambda self, *a, **kw: (loads.append(a[0]), load_index(self, *a, **kw))[1])

    loaded, at = vi.VectorIndex.load(directory, 7, 8, IndexParams())
    assert at == 7 and len(loaded) == 200 and len(loads) == 1

    for offset in (40, len(intact) // 2, len(intact) - 1):  # in the header, in the vectors, in the links
        damaged = bytearray(intact)
        damaged[offset] ^= 0xFF
        path.write_bytes(bytes(damaged))
        loads.clear()
        assert vi.VectorIndex.load(directory, 7, 8, IndexParams()) is None
        assert loads == ([] if offset < vi._HEAD_BYTES else [str(path)])

    path.write_bytes(intact)
    current = directory / vi._SNAPSHOT_META
    good = current.read_bytes()

    # Killed after the new index moved in, before its meta did, where the old checkpoint had the same
    # header (same count and entry point): the header vouches for both metas, the whole file for one.
    meta = msgspec.msgpack.decode(good, type=vi._SnapshotMeta)
    meta.write_seq, meta.checksum = 6, "0" * 32
    current.write_bytes(msgspec.msgpack.encode(meta))
    (directory / vi._NEXT_META).write_bytes(good)
    loads.clear()
    loaded, at = vi.VectorIndex.load(directory, 7, 8, IndexParams())
    assert at == 7 and len(loaded) == 200 and len(loads) == 1
    (directory / vi._NEXT_META).unlink()

    # A checkpoint written before head checksums were recorded is checked whole, then loaded.
    meta = msgspec.msgpack.decode(good, type=vi._SnapshotMeta)
    meta.head_checksum = ""
    current.write_bytes(msgspec.msgpack.encode(meta))
    loaded, at = vi.VectorIndex.load(directory, 7, 8, IndexParams())
    assert at == 7 and len(loaded) == 200
    assert loaded.search(rng.normal(size=8).astype("float32"), 5)
