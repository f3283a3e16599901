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
from hebbs.store.open_vault import OpenVault
from hebbs.store.storage import id_bytes
from hebbs.store.vector_index import VectorIndex

# Small, so that a child checkpoints several times before it is killed.
CHECKPOINT_EVERY = 15


def _watch_index_recovery(monkeypatch) -> dict[str, int]:
    """Count full rebuilds and catch-ups of the vector index (log records can be swallowed by another
    test's logging setup; these calls cannot)."""
    calls = {"rebuild": 0, "sync": 0}
    rebuild, sync = OpenVault._rebuild_vector_index, VectorIndex.sync

    def counted_rebuild(self):
        calls["rebuild"] += 1
        return rebuild(self)

    def counted_sync(self, ids, stored):
        calls["sync"] += 1
        return sync(self, ids, stored)

    monkeypatch.setattr(OpenVault, "_rebuild_vector_index", counted_rebuild)
    monkeypatch.setattr(VectorIndex, "sync", counted_sync)
    return calls


def _writer(path: Path) -> str:
    return textwrap.dedent(f"""
        import random, sys
        from hebbs import Engine
        from hebbs.store import open_vault
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
                eng.forget([victim])
                print(f"forgot {{victim}}", flush=True)
            elif live and roll < 0.3:
                target = rng.choice(live)
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
    proc = subprocess.Popen([sys.executable, "-c", _writer(path), str(seed)], stdout=subprocess.PIPE, text=True)
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


def _expected(lines: list[str], state: dict[str, str]) -> None:
    """Fold acknowledged operations into id -> the unique token its current content holds."""
    for line in lines:
        op, memory_id, *rest = line.split()
        if op == "forgot":
            state.pop(memory_id, None)
        else:
            state[memory_id] = rest[0]


def test_kill_9_mid_writes_recovers_from_checkpoint_and_log(tmp_path, embedder, monkeypatch):
    path = tmp_path / "vault"
    rng = random.Random(7)
    state: dict[str, str] = {}
    forgotten: set[str] = set()
    for round_ in range(3):
        lines = _run_and_kill(path, seed=1000 * (round_ + 1), acks_before_kill=rng.randint(40, 90))
        _expected(lines, state)
        forgotten |= {line.split()[1] for line in lines if line.startswith("forgot ")}
        calls = _watch_index_recovery(monkeypatch)
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
    assert np.allclose(index.vectors(ids), stored, atol=1e-5)
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
