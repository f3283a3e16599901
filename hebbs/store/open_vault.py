"""One open vault's state, and the small public API that recall strategies and workflows use.

A vault directory holds:
    db/          the RocksDB database (storage.py)
    index/       the HNSW snapshot written at clean close (vector_index.py)
    lexical/     the BM25 index (lexical_index.py)
    config.toml  optional settings (config.py)

RocksDB is the source of truth. The HNSW and lexical indexes are derived: each records the vault's
write sequence number (meta "write_seq", bumped in the same batch as every content change) and is
rebuilt from RocksDB when its number does not match, so a crash can never leave them silently stale.

`OpenVault` owns the store, both indexes, the in-memory catalog, the write lock, the config and the
embedder. Nothing outside this module touches their private names: readers use the methods below,
writers build a `WriteSet` under `writing()` and hand it to `apply`, which commits it and brings the
catalog and the indexes along.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from ..config import VaultConfig
from ..errors import InvalidInput, ModelMismatch, NotFound
from ..schema import Memory, MemoryKind, PendingContradiction
from .embed import Embedder
from .lexical_index import LexicalIndex
from .memory_text import lexical_text
from .storage import (TIMELINE_ENTITY, Store, WriteSet, decode, encode, id_bytes, id_str, temporal_prefix)
from .vector_index import VectorIndex

log = logging.getLogger("hebbs.store")

SCHEMA_VERSION = 1

Filter = Callable[[str], bool]
Hits = list[tuple[str, float]]


def now_us() -> int:
    return time.time_ns() // 1000


class CatalogEntry:
    """What recall filters and the composite score need about a memory, kept in memory so that
    ranking a few hundred candidates never touches disk: only the final top_k records are read."""

    __slots__ = ("entity_id", "created_at", "superseded_by", "kind", "importance", "access_count", "context_type",
                 "file", "words")

    def __init__(self, memory: Memory) -> None:
        self.entity_id = memory.entity_id
        self.created_at = memory.created_at
        self.superseded_by = memory.superseded_by
        self.kind = memory.kind
        self.importance = memory.importance
        self.access_count = memory.access_count
        kind = memory.context.get("type")  # its decay half-life is its recency window (recall/scoring.py)
        self.context_type = kind if isinstance(kind, str) else None
        self.file = memory.source.file_path if memory.source is not None else None
        self.words = len(memory.content.split())  # fusion weighs long memories differently (fusion.lexical_weight_for)


class OpenVault:
    """An open vault's state. Thread-safe: writes are serialized by `writing()`, reads run concurrently."""

    def __init__(self, path: Path, store: Store, embedder: Embedder, config: VaultConfig) -> None:
        self.path = path
        self.config = config
        self.embedder = embedder
        self.store = store
        self._write_lock = threading.RLock()
        self._catalog: dict[str, CatalogEntry] = {}
        self._pending_pairs: set[frozenset[str]] | None = None
        self._write_seq = int(store.get_meta("write_seq", 0))
        self._index: VectorIndex
        self._lexical: LexicalIndex
        self._closed = False

    # Opening and closing ---------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path, store: Store, embedder: Embedder, config: VaultConfig) -> "OpenVault":
        """Take over an open store: check its model, load the catalog, load or rebuild the indexes."""
        _check_model(store, path, embedder)
        vault = cls(path, store, embedder, config)
        vault._load()
        return vault

    def _load(self) -> None:
        for memory in self.store.memories():
            self._catalog[memory.id] = CatalogEntry(memory)
        index = VectorIndex.load(self.path / "index", self._write_seq, self.embedder.dim, self.config.index)
        if index is None:
            index = self._rebuild_vector_index()
        self._index = index
        self._lexical = LexicalIndex.open(self.path / "lexical")
        if self._lexical.applied_seq != self._write_seq:
            try:
                self.rebuild_lexical()
            except BaseException:
                self._lexical.close()  # its writer lock must not outlive a failed open
                raise

    def _rebuild_vector_index(self) -> VectorIndex:
        index = VectorIndex(self.embedder.dim, self.config.index, capacity=len(self._catalog) + 1024)
        ids: list[str] = []
        rows: list[np.ndarray] = []
        for memory_id, raw in self.store.vectors():
            ids.append(memory_id)
            rows.append(np.frombuffer(raw, dtype="<f4"))
            if len(ids) == 10_000:
                index.add(ids, np.vstack(rows))
                ids, rows = [], []
        if ids:
            index.add(ids, np.vstack(rows))
        return index

    def rebuild_lexical(self) -> None:
        """Re-tokenize every memory from the `default` family (after a crash, or if the index was deleted)."""
        with self._write_lock:
            items = ((id_bytes(m.id), lexical_text(m)) for m in self.store.memories()
                     if m.kind != MemoryKind.REVISION)
            self._lexical.rebuild(items, self._write_seq)

    def close(self) -> None:
        with self._write_lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._index.save(self.path / "index", self._write_seq)
            except OSError as exc:
                # The snapshot is derived: without it the next open rebuilds the index from RocksDB.
                log.warning("could not save the vector index snapshot of %s (%s); it will be rebuilt", self.path, exc)
            finally:
                self._lexical.close()
                self.store.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @closed.setter
    def closed(self, value: bool) -> None:
        # Tests simulate a crash this way: a vault marked closed refuses writes and close() saves nothing.
        self._closed = value

    @property
    def write_seq(self) -> int:
        return self._write_seq

    @property
    def vector_index(self) -> VectorIndex:
        return self._index

    @property
    def lexical_index(self) -> LexicalIndex:
        return self._lexical

    # Reading ---------------------------------------------------------------------------------

    def entry(self, memory_id: str) -> CatalogEntry | None:
        return self._catalog.get(memory_id)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._catalog

    def entries(self) -> list[tuple[str, CatalogEntry]]:
        """A snapshot of the catalog: safe to iterate while writers change it."""
        return list(self._catalog.items())

    def memory(self, memory_id: str) -> Memory | None:
        return self.store.get_memory(memory_id)

    def memories_of(self, ids: list[str]) -> list[Memory | None]:
        """These memories (None for one that does not exist), in one read."""
        return self.store.get_memories(ids) if ids else []

    def get(self, memory_id: str) -> Memory:
        memory = self.store.get_memory(memory_id)
        if memory is None:
            raise NotFound(f"memory {memory_id} does not exist")
        return memory

    def vector(self, memory_id: str) -> np.ndarray | None:
        raw = self.store.get_vector(memory_id)
        return None if raw is None else np.frombuffer(raw, dtype="<f4")

    def vectors_or_zeros(self, ids: list[str]) -> np.ndarray:
        """The vectors of these memories, one row each (zeros for a memory without one), in one read."""
        out = np.zeros((len(ids), self.embedder.dim), dtype=np.float32)
        for row, raw in enumerate(self.store.get_vectors(ids) if ids else []):
            if raw is not None:
                out[row] = np.frombuffer(raw, dtype="<f4")
        return out

    def vector_or_zeros(self, memory_id: str) -> np.ndarray:
        vector = self.vector(memory_id)
        return np.zeros(self.embedder.dim, dtype=np.float32) if vector is None else vector

    def vectors(self, ids: list[str]) -> np.ndarray:
        """The indexed vectors of these memories, one row each (zeros for one not indexed), in one read
        from the HNSW graph: recall's diversity step needs a few hundred at large top_k."""
        return self._index.vectors(ids)

    # Candidates ------------------------------------------------------------------------------

    def similar(self, vector: np.ndarray, k: int, allowed: Filter, narrow: bool = True) -> Hits:
        """The k nearest memories that pass `allowed`, as (id, cosine similarity), best first.
        `narrow`: the filter is selective (an entity or a time range), so oversample more."""
        # Oversample, then widen until enough memories pass the filter or the index is exhausted.
        # Without an entity or time filter nearly every hit passes: a small margin is enough, and
        # a 4x oversample (ef and k of 4x) made the graph search grow fastest with top_k.
        want = k
        factor = 4.0 if narrow else 1.25
        while True:
            ask = int(want * factor) + 8
            hits = self._index.search(vector, ask if want < len(self._index) else want,
                                      ef=max(self.config.index.ef_search, ask))
            kept = [(mid, sim) for mid, sim in hits if allowed(mid)]
            if len(kept) >= k or len(hits) >= len(self._index) or want >= len(self._index):
                return kept[:k]
            want *= 4

    def similar_wide(self, vector: np.ndarray, k: int, ef: int) -> Hits:
        """One HNSW search with an explicit breadth, unfiltered (callers filter and widen with `similar`)."""
        return self._index.search(vector, k, ef=ef)

    def indexed_count(self) -> int:
        """How many vectors the HNSW index holds."""
        return len(self._index)

    def lexical_hits(self, cue: str, k: int, allowed: Filter) -> Hits:
        """The k best BM25 matches that pass `allowed`, as (id, score), best first."""
        hits = self._lexical.search(cue, k, allowed=lambda raw: allowed(id_str(raw)))
        return [(id_str(raw), score) for raw, score in hits]

    def newest(self, entity_id: str | None, window: tuple[int, int] | None, k: int, allowed: Filter) -> list[str]:
        """Up to k memory ids, newest first, within the entity's timeline (or all of them) and the window."""
        start, end = window or (0, 2**63 - 1)
        ids: list[str] = []
        prefix = temporal_prefix(TIMELINE_ENTITY if entity_id is None else entity_id)
        seek = prefix + min(end, 2**64 - 1).to_bytes(8, "big") + b"\xff" * 16
        for key, raw in self.store.scan("temporal", prefix, reverse=True, start=seek):
            ts = int.from_bytes(key[len(prefix):len(prefix) + 8], "big")
            if ts < start or len(ids) >= k:
                break
            mid = id_str(raw)
            if allowed(mid):
                ids.append(mid)
        return ids

    def latest_episode_before(self, entity_id: str | None, created_at: int) -> tuple[int, str] | None:
        """The entity's newest episode at or before created_at, as (created_at, id)."""
        prefix = temporal_prefix(entity_id)
        start = prefix + created_at.to_bytes(8, "big") + b"\xff" * 16
        for key, raw in self.store.scan("temporal", prefix, reverse=True, start=start):
            entry = self._catalog.get(id_str(raw))
            if entry is not None and entry.kind != MemoryKind.EPISODE:
                continue
            ts = int.from_bytes(key[len(prefix):len(prefix) + 8], "big")
            return ts, id_str(raw)
        return None

    def neighbors(self, memory_id: str, k: int = 10) -> Hits:
        """The k memories nearest to this one's stored vector (itself, revisions and superseded ones excluded)."""
        vector = self.vector(memory_id)
        if vector is None:
            raise NotFound(f"memory {memory_id} has no vector")

        def allowed(mid: str) -> bool:
            entry = self._catalog.get(mid)
            return mid != memory_id and entry is not None and entry.superseded_by is None

        return self.similar(vector, k, allowed)

    # Writing ---------------------------------------------------------------------------------

    @property
    def write_lock(self) -> threading.RLock:
        """Held by every writer; hold it across a read-modify-write of several records."""
        return self._write_lock

    def check_open(self) -> None:
        if self._closed:
            raise InvalidInput(f"vault {self.path} is closed")

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """The write lock, on a vault that must still be open."""
        with self._write_lock:
            self.check_open()
            yield

    def apply(self, writes: WriteSet, *, saved: Iterable[Memory] = (), removed: Sequence[str] = (),
              vectors: tuple[list[str], np.ndarray] | None = None, reindexed: Sequence[Memory] = (),
              durable: bool = True) -> None:
        """Commit one batch (caller holds the write lock) and bring the derived state along: the catalog
        learns `saved` and forgets `removed`, HNSW takes `vectors`, BM25 re-reads `reindexed`. A batch that
        touches either index also bumps the write sequence, in the same RocksDB batch. durable=False: the
        batch is not waited for (hebbs/store/durability.py), for what nobody is told was kept."""
        touches_indexes = bool(removed) or vectors is not None or bool(reindexed)
        if touches_indexes:
            self._write_seq += 1
            writes.put_meta("write_seq", self._write_seq)
        self.store.commit(writes, durable=durable)
        for memory_id in removed:
            self._catalog.pop(memory_id, None)
        for memory in saved:
            self._catalog[memory.id] = CatalogEntry(memory)
        if not touches_indexes:
            return
        if removed:
            self._index.remove(list(removed))
        if vectors is not None:
            self._index.add(*vectors)
        if removed:
            self._lexical.remove(id_bytes(mid) for mid in removed)
        if reindexed:
            self._lexical.upsert((id_bytes(m.id), lexical_text(m)) for m in reindexed)
        self._lexical.commit(self._write_seq)

    # Contradiction candidates (the `pending` family) -----------------------------------------

    def add_pending(self, items: Sequence[PendingContradiction]) -> int:
        """Queue contradiction candidates; a pair already queued (or reviewed since the vault opened) is
        not queued twice. Returns how many were queued."""
        with self.writing():
            if self._pending_pairs is None:
                # Loaded once: remember checks every new memory, and a scan per call grows with the queue.
                self._pending_pairs = {frozenset((p.memory_a, p.memory_b)) for p in self.pending()}
            writes = WriteSet()
            for item in items:
                pair = frozenset((item.memory_a, item.memory_b))
                if pair in self._pending_pairs:
                    continue
                self._pending_pairs.add(pair)
                writes.put("pending", id_bytes(item.id), encode(item))
            self.store.commit(writes)
            return len(writes)

    def pending(self) -> list[PendingContradiction]:
        return [decode(raw, PendingContradiction) for _, raw in self.store.scan("pending")]


class HasVault(Protocol):
    """Anything that is a facade over one open vault (the Engine): workflows accept it or the vault itself."""

    @property
    def vault(self) -> OpenVault: ...


def vault_of(owner: "OpenVault | HasVault") -> OpenVault:
    return owner if isinstance(owner, OpenVault) else owner.vault


def _check_model(store: Store, path: Path, embedder: Embedder) -> None:
    recorded = store.get_meta("model_id")
    if recorded is None:
        writes = WriteSet()
        writes.put_meta("schema_version", SCHEMA_VERSION)
        writes.put_meta("model_id", embedder.model_id)
        writes.put_meta("model_dim", embedder.dim)
        writes.put_meta("model_spec", getattr(embedder, "spec", None) or embedder.model_id)
        store.commit(writes)
        return
    if recorded != embedder.model_id or store.get_meta("model_dim") != embedder.dim:
        raise ModelMismatch(
            f"vault {path} was built with model {recorded} ({store.get_meta('model_dim')}-d) but was opened with "
            f"{embedder.model_id} ({embedder.dim}-d). Open it with model={recorded!r}, or rebuild: "
            f"`hebbs export > memories.jsonl`, create a new vault with the new model, then `hebbs import memories.jsonl`.")
