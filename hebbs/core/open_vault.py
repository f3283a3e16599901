"""One open vault's state, and the small public API that recall strategies and workflows use.

A vault directory holds:
    db/          the RocksDB database (storage.py)
    index/       the HNSW checkpoint (vector_index.py) and the catalog saved at clean close (catalog.py)
    lexical/     the BM25 index (lexical_index.py)
    config.toml  optional settings (config.py)

RocksDB is the source of truth. The HNSW and lexical indexes are derived: each records the vault's
write sequence number (meta "write_seq", bumped in the same batch as every content change) and,
when it is behind, catches up by re-reading the memories the change log (changelog.py) names for
the writes it missed, or is rebuilt when the log does not reach back that far. A crash can
therefore never leave them silently stale, and recovering from one costs the writes since the
last checkpoint, not the vault.

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
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Protocol, TypeVar

import numpy as np

from ..config import VaultConfig
from ..errors import CorruptVault, InvalidInput, ModelMismatch, NotFound
from ..schema import Memory, MemoryKind, Origin, PendingContradiction
from ..store import changelog
from ..store.contract import RecordStore, VectorSearch
from ..index.catalog import Catalog, CatalogEntry
from ..embedding.embed import Embedder
from ..index.lexical import LexicalIndex, damaged_segment_files, tokenize
from ..store.locks import OwnedRLock
from .memory_text import lexical_text
from ..store.storage import (MEMORY_PREFIX, TIMELINE_ENTITY, Store, WriteSet, decode, decode_vector, decode_vectors, encode,
                      id_bytes, id_str, id_strs, memory_key, temporal_prefix)
from ..index.vector import VectorIndex

log = logging.getLogger("hebbs.store")
T = TypeVar("T")

SCHEMA_VERSION = 1
# Changed vectors between two checkpoints of the HNSW index: what a crash may leave to replay. A
# replayed vector costs what an insert costs (~1 ms at 100k on 2 cores, busy); a checkpoint costs one
# write of the index file with writers waiting (~0.3 s at 100k, ~3 s at 1M). So the interval is
# CHECKPOINT_EVERY, or 0.25% of the index when that is more: at 1M a checkpoint every 2,500 changes.
CHECKPOINT_EVERY = 500
# A search narrowed to a time window holding at most this many memories scores those memories
# exactly (and BM25 is restricted to them) instead of widening an HNSW search until enough of its
# hits fall in the window, which for a window of a few hundred memories among 10,000 meant searching
# most of the graph; past about 1,000 memories the widened search is the cheaper one.
EXACT_SEARCH_MAX = 512

# Vaults up to this many memories have their records checked inside the open (see _load).
VERIFY_INLINE_UP_TO = 20_000


def checkpoint_interval(indexed: int) -> int:
    return max(CHECKPOINT_EVERY, indexed // 400)

Filter = Callable[[str], bool]
Hits = list[tuple[str, float]]


def now_us() -> int:
    return time.time_ns() // 1000


class Scope:
    """The memories a recall may return: not revisions, not superseded (unless include_superseded), of
    one entity, within a time window and stored by one author, agent and session when given. A Filter
    like any other, which searches can also ask about many ids at once (`passing`): one vectorized pass
    over the catalog's columns."""

    __slots__ = ("_catalog", "entity_id", "window", "include_superseded", "origin")

    def __init__(self, catalog: Catalog, entity_id: str | None, window: tuple[int, int] | None,
                 include_superseded: bool, origin: Origin | None = None) -> None:
        self._catalog = catalog
        self.entity_id = entity_id
        self.window = window
        self.include_superseded = include_superseded
        self.origin = origin if origin is not None and origin.narrowed else None

    def __call__(self, memory_id: str) -> bool:
        entry = self._catalog.get(memory_id)
        if entry is None or entry.kind == MemoryKind.REVISION:
            return False
        if entry.superseded_by is not None and not self.include_superseded:
            return False
        if self.entity_id is not None and entry.entity_id != self.entity_id:
            return False
        if self.origin is not None and any(
                wanted is not None and wanted != have for wanted, have in (
                    (self.origin.author, entry.author), (self.origin.agent, entry.agent),
                    (self.origin.session, entry.session))):
            return False
        return self.window is None or self.window[0] <= entry.created_at <= self.window[1]

    def passing(self, ids: list[str]) -> list[bool]:
        return self._catalog.in_scope(ids, self.entity_id, self.window, self.include_superseded, self.origin)

    @property
    def narrowed(self) -> bool:
        """To an entity, a time or who stored it: most memories fail it, where a plain scope drops only
        revisions and superseded memories."""
        return self.entity_id is not None or self.window is not None or self.origin is not None

    def few(self, at_most: int) -> list[str] | None:
        """The memories this scope passes, when it is narrowed to a time window holding at most
        `at_most` memories; None otherwise (no window, or too many to list)."""
        if self.window is None or self.window[0] > self.window[1]:
            return [] if self.window is not None else None
        ids = self._catalog.created_within(self.window, at_most)
        if ids is None or not ids:
            return ids
        return [mid for mid, ok in zip(ids, self.passing(ids)) if ok]

    def within(self, start: int, end: int) -> "Scope":
        """This scope narrowed to memories created from start to end."""
        window = (start, end) if self.window is None else (max(start, self.window[0]), min(end, self.window[1]))
        return Scope(self._catalog, self.entity_id, window, self.include_superseded, self.origin)


def passing(allowed: Filter, ids: list[str]) -> list[bool]:
    """`allowed` asked about many ids: in one vectorized step when it is a Scope, one by one otherwise."""
    return allowed.passing(ids) if isinstance(allowed, Scope) else [allowed(mid) for mid in ids]


class OpenVault:
    """An open vault's state. Thread-safe: writes are serialized by `writing()`, reads run concurrently."""

    def __init__(self, path: Path, store: RecordStore, embedder: Embedder, config: VaultConfig) -> None:
        self.path = path
        self.config = config
        self.embedder = embedder
        self.store = store
        # The model the store records (checked against the embedder by _check_model at open, and again
        # when another daemon's writes are caught up): every vector written must be its.
        self.model_id: str = store.get_meta("model_id") or embedder.model_id
        self.model_dim: int = int(store.get_meta("model_dim") or embedder.dim)
        self._write_lock = OwnedRLock()  # this process's writers and derived state
        # A vault shared through PostgreSQL: writers of every daemon take the store's writer lock too.
        self._shared = store.shared
        self._writers = WriterLock(self._write_lock, store, self.catch_up) if self._shared else self._write_lock
        self._catalog = Catalog()
        self._pending_pairs: set[frozenset[str]] | None = None
        self._write_seq = store.head_seq()
        self._checkpointed_seq = -1  # the write sequence of the vector index's newest checkpoint on disk
        self._changes_since_checkpoint = 0
        self._checkpointer: threading.Thread | None = None
        # Held across a whole checkpoint (its file is written, checked and renamed in several steps);
        # taken before the write lock, never after it.
        self._checkpoint_lock = threading.Lock()
        self._verifier: threading.Thread | None = None
        self._lexical_check: threading.Thread | None = None
        self._damage: CorruptVault | None = None
        self._lexical_behind = False
        self._index: VectorSearch
        self._lexical: LexicalIndex
        self._closed = False
        # One thread that runs a recall's lexical search while the recall's own thread embeds the cue
        # (recall/fused.py); no thread until the first recall, stopped by close().
        self._beside = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hebbs-lexical")

    # Opening and closing ---------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path, store: RecordStore, embedder: Embedder, config: VaultConfig) -> "OpenVault":
        """Take over an open store: check its model, load the catalog, load or rebuild the indexes."""
        _check_model(store, path, embedder)
        vault = cls(path, store, embedder, config)
        vault._load()
        return vault

    def _load(self) -> None:
        if self._shared:
            self._load_shared()
            return
        catalog = Catalog.load(self.path / "index", self.store.latest_sequence_number())
        # Reading the catalog from RocksDB used to check every record's block at each open. That
        # check still runs: inside the open for a small vault (it costs ~30 ms at 20k: a damaged vault
        # is refused before any caller sees it), beside the first recalls for a large one, where the
        # first write waits for it: a damaged vault is refused (CORRUPT_VAULT) before anything is
        # written to it. It starts once the indexes are loaded: a thread iterating a million records
        # shares the GIL, and running beside the loads it made them take longer.
        verify_later = catalog is not None and len(catalog) > VERIFY_INLINE_UP_TO
        if catalog is None:
            catalog = Catalog.from_store(self.store)  # reads every record: damage shows here
        elif not verify_later:
            self._verify_records()
            if self._damage is not None:
                raise self._damage
        self._catalog = catalog
        self._index = self._open_vector_index()
        self._lexical = LexicalIndex.open(self.path / "lexical")
        self._lexical.repair = self.rebuild_lexical
        # A store opened read-only for want of space: the lexical index has no room to catch up either.
        # It answers from what it committed until the first write after space is back (apply).
        self._lexical_behind = self.store.read_only
        try:
            if not self._lexical_behind:
                self._catch_up_lexical()
        except BaseException:
            self._lexical.close()  # its writer lock must not outlive a failed open
            raise
        if verify_later:
            self._verifier = threading.Thread(target=self._verify_records, name="hebbs-verify", daemon=True)
            self._verifier.start()
        # A flipped block in a term dictionary or a fast field opens and answers, with other rankings:
        # only the segments' checksums show it. Checked beside the first calls, repaired on detection.
        self._lexical_check = threading.Thread(target=self._verify_lexical, name="hebbs-verify-lexical", daemon=True)
        self._lexical_check.start()
        if self._changes_since_checkpoint >= checkpoint_interval(len(self._index)) and not self.store.read_only:
            self._checkpoint_soon()

    def _load_shared(self) -> None:
        """A vault in PostgreSQL: this daemon's catalog and indexes, each caught up from the sequence it
        was saved at through the change log, then kept up by the store's wake-ups (postgres.py)."""
        loaded = Catalog.load_stamped(self.path / "index")
        touched = changelog.touched_since(self.store, loaded[1], self._write_seq) if loaded is not None else None
        if loaded is not None and touched is not None:
            self._catalog = loaded[0]
            self._catalog.refresh(self.store, {memory_key(mid) for mid in touched})
        else:
            self._catalog = Catalog.from_store(self.store)
        self._index = self._open_vector_index()
        self._lexical = LexicalIndex.open(self.path / "lexical")
        try:
            self._catch_up_lexical()
        except BaseException:
            self._lexical.close()
            raise
        if self._changes_since_checkpoint >= checkpoint_interval(len(self._index)):
            self._checkpoint_soon()
        self.store.listen(self.catch_up)

    def catch_up(self) -> int:
        """Bring the catalog and both indexes to the store's newest write (other daemons' writes to a
        shared vault). Returns how many memories were re-read."""
        with self._write_lock:
            if self._closed:
                return 0
            head = self.store.head_seq()
            if head <= self._write_seq:
                return 0
            if self._shared and self.store.get_meta("model_id") != self.model_id:
                # Another daemon moved the vault to another model (`hebbs reembed`): its vectors must not
                # meet this daemon's index or embedder. Writes are refused (check_vectors) until the vault
                # is opened again; recall keeps the vectors this daemon holds, all of one model.
                self.model_id = self.store.get_meta("model_id")
                self.model_dim = int(self.store.get_meta("model_dim") or 0)
                log.warning("vault %s was moved to model %s by another process: reopen it", self.path, self.model_id)
                return 0
            touched = changelog.touched_since(self.store, self._write_seq, head)
            if touched is None and self._shared:
                # Behind further than the store keeps its change log (postgres.KEEP_CHANGES): every
                # memory this daemon knows or the store holds is read again.
                touched = list(dict.fromkeys([*(mid for mid, _ in self._catalog.items()),
                                              *(memory.id for memory in self.store.memories())]))
            if touched is None:
                raise CorruptVault(f"vault {self.path}: the change log of its store no longer reaches back to "
                                   f"write {self._write_seq}; reopen the vault to rebuild its indexes")
            self._sync_ids(touched)
            self._write_seq = head
            self._lexical.commit(head)
            return len(touched)

    def _sync_ids(self, ids: list[str]) -> None:
        """These memories, in the catalog and both indexes, brought to what the store holds now."""
        if not ids:
            return
        memories = dict(zip(ids, self.store.get_memories(ids)))
        for memory_id, memory in memories.items():
            if memory is None:
                self._catalog.remove(memory_id)
            else:
                self._catalog.put(memory)
        self._index.sync(ids, self.store.get_vectors)
        self._lexical.remove(id_bytes(mid) for mid, m in memories.items() if m is None or m.kind == MemoryKind.REVISION)
        self._lexical.upsert((id_bytes(mid), lexical_text(m)) for mid, m in memories.items()
                             if m is not None and m.kind != MemoryKind.REVISION)
        self._pending_pairs = None
        self._changes_since_checkpoint += len(ids)

    def _open_vector_index(self) -> VectorSearch:
        if self.config.store.similar == "pgvector":
            remote = self.store.vector_search(self.embedder.dim, self.config.index.ef_search)
            if remote is not None:
                self._changes_since_checkpoint = 0
                return remote
        return self._open_local_vector_index()

    def _open_local_vector_index(self) -> VectorIndex:
        """The checkpoint, brought forward to the database's write sequence; a rebuild without one."""
        loaded = VectorIndex.load(self.path / "index", self._write_seq, self.embedder.dim, self.config.index)
        if loaded is not None:
            index, at = loaded
            touched = changelog.touched_since(self.store, at, self._write_seq)
            if touched is not None:
                if touched:
                    log.info("vault %s: bringing the vector index from write %d to %d (%d memories)",
                             self.path, at, self._write_seq, len(touched))
                    index.sync(touched, self.store.get_vectors)
                self._checkpointed_seq = at
                self._changes_since_checkpoint = len(touched)
                return index
        log.info("vault %s: rebuilding the vector index from the database", self.path)
        index = self._rebuild_vector_index()
        # Checkpoint it soon (at the end of the open), so that a crash does not pay this rebuild again.
        self._changes_since_checkpoint = len(index)
        return index

    def _catch_up_lexical(self) -> None:
        """Replay the changes the lexical index has not committed (a crash within its flush delay);
        a full rebuild when the log does not reach back that far."""
        applied = self._lexical.applied_seq
        if applied == self._write_seq:
            return
        touched = changelog.touched_since(self.store, applied, self._write_seq) if applied >= 0 else None
        if touched is None:
            self.rebuild_lexical()
            return
        with self._write_lock:
            memories = dict(zip(touched, (self.store.get_memory(mid) for mid in touched)))
            self._lexical.remove(id_bytes(mid) for mid, m in memories.items()
                                 if m is None or m.kind == MemoryKind.REVISION)
            self._lexical.upsert((id_bytes(mid), lexical_text(m)) for mid, m in memories.items()
                                 if m is not None and m.kind != MemoryKind.REVISION)
            self._lexical.commit(self._write_seq)

    def _rebuild_vector_index(self) -> VectorIndex:
        index = VectorIndex(self.embedder.dim, self.config.index, capacity=len(self._catalog) + 1024)
        ids: list[str] = []
        rows: list[np.ndarray] = []
        for memory_id, raw in self.store.vectors():
            ids.append(memory_id)
            rows.append(decode_vector(raw))
            if len(ids) == 10_000:
                index.add(ids, np.vstack(rows))
                ids, rows = [], []
        if ids:
            index.add(ids, np.vstack(rows))
        return index

    def _verify_lexical(self) -> None:
        directory = self.path / "lexical"

        def damaged() -> list[tuple[str, str]]:
            # A segment a merge removed while it was read is gone, not damaged.
            return [(n, p) for n, p in damaged_segment_files(directory) if (directory / n).exists()]

        try:
            if not damaged():
                return
            with self._write_lock:  # no commit moves the segments between this look and the rebuild
                found = damaged()
                if not found or self._closed:
                    return
                log.error("vault %s: lexical index segments fail their checksum (%s): rebuilding it from the "
                          "database", self.path, ", ".join(f"{n}: {p}" for n, p in found))
                self.rebuild_lexical()
        except Exception:  # noqa: BLE001 - a failed check leaves the index as it was, and says so
            log.exception("vault %s: checking the lexical index failed", self.path)

    def rebuild_lexical(self) -> None:
        """Re-tokenize every memory from the `default` family (after a crash, or if the index was deleted)."""
        with self._write_lock:
            self.check_open()
            items = ((id_bytes(m.id), lexical_text(m)) for m in self.store.memories()
                     if m.kind != MemoryKind.REVISION)
            self._lexical.rebuild(items, self._write_seq)

    def close(self) -> None:
        self._beside.shutdown(wait=True)  # a search it runs must not meet a closed index
        if self._verifier is not None:
            self._verifier.join()  # its iterator must not outlive the database
        if self._lexical_check is not None:
            self._lexical_check.join()  # a repair it started must not meet a closed index
        with self._checkpoint_lock, self._write_lock:
            if self._closed:
                return
            self._closed = True
            try:
                try:
                    if self._checkpointed_seq != self._write_seq:
                        self._index.save(self.path / "index", self._write_seq)
                        self._checkpointed_seq = self._write_seq
                except OSError as exc:
                    # The checkpoint is derived: without it the next open catches up from an older one or rebuilds.
                    log.warning("could not save the vector index checkpoint of %s (%s); it will be rebuilt",
                                self.path, exc)
                self._lexical.flush()
                if self._shared:
                    # Other daemons read the same change log: it is the store's to keep.
                    self._catalog.save(self.path / "index", self._write_seq)
                    return
                changelog.prune(self.store, min(self._checkpointed_seq, self._lexical.applied_seq))
                # Last write of the session: the catalog is stamped with the database's final sequence,
                # once the records written behind its back are read into it.
                untracked = self.store.untracked_memories
                if untracked is not None:
                    self._catalog.refresh(self.store, untracked)
                    self._catalog.save(self.path / "index", self.store.latest_sequence_number())
            except Exception as exc:  # noqa: BLE001 - all derived: the next open reads it back from RocksDB
                log.warning("could not save the catalog of %s (%s); the next open reads it from the database",
                            self.path, exc)
            finally:
                try:
                    self._lexical.close()
                except Exception as exc:  # noqa: BLE001 - derived: the next open catches it up from the database
                    log.warning("could not close the lexical index of %s (%s)", self.path, exc)
                finally:
                    # Whatever happened above: an open database keeps its lock, and the vault could
                    # not be opened again by this process.
                    self.store.close()

    def _checkpoint_soon(self) -> None:
        """Checkpoint the vector index in the background (caller holds the write lock), so that a crash
        replays at most about checkpoint_interval() changed memories instead of rebuilding the index."""
        if self._index.remote:
            return  # pgvector's index is the store's own
        if self._checkpointer is not None and self._checkpointer.is_alive():
            return
        self._checkpointer = threading.Thread(target=self._checkpoint, name="hebbs-checkpoint", daemon=True)
        self._checkpointer.start()

    def _checkpoint(self) -> None:
        directory = self.path / "index"
        with self._checkpoint_lock:
            try:
                # Writers wait only while hnswlib writes its file (a fraction of a second at 100k);
                # the checksum, fsync and renames run beside them.
                with self._write_lock:
                    if self._closed:
                        return
                    seq = self._write_seq
                    index = self._index
                    if not isinstance(index, VectorIndex):
                        return  # a remote index (_checkpoint_soon): nothing of it is held here
                    meta = index.dump(directory, seq)
                    self._changes_since_checkpoint = 0
                VectorIndex.publish(directory, meta)
                with self._write_lock:
                    if self._closed:
                        return
                    self._checkpointed_seq = seq
                    if not self._shared:
                        changelog.prune(self.store, min(seq, self._lexical.applied_seq))
            except Exception as exc:  # noqa: BLE001 - a failed checkpoint loses nothing: the log stays
                log.warning("could not checkpoint the vector index of %s (%s)", self.path, exc)

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
    def vector_index(self) -> VectorSearch:
        return self._index

    @property
    def lexical_index(self) -> LexicalIndex:
        return self._lexical

    # Reading ---------------------------------------------------------------------------------

    def entry(self, memory_id: str) -> CatalogEntry | None:
        return self._catalog.get(memory_id)

    def ranking_fields(self, ids: list[str]) -> list[tuple[int, float, int, str | None] | None]:
        """(created_at, importance, access_count, context type) of each memory, None for one that does
        not exist: what the composite score reads, for many candidates in one step."""
        return self._catalog.ranking_fields(ids)

    def files_of(self, ids: list[str]) -> list[str | None]:
        """The source file of each memory: None for one not indexed from a file, or that does not exist."""
        return self._catalog.files_of(ids)

    def words_of(self, ids: list[str]) -> list[int | None]:
        """The length in words of each memory's content, None for one that does not exist."""
        return self._catalog.words_of(ids)

    def scope(self, entity_id: str | None = None, window: tuple[int, int] | None = None,
              include_superseded: bool = False, origin: Origin | None = None) -> Scope:
        """The filter of what a recall may return (see Scope)."""
        return Scope(self._catalog, entity_id, window, include_superseded, origin)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._catalog

    def entries(self) -> list[tuple[str, CatalogEntry]]:
        """A snapshot of the catalog: safe to iterate while writers change it."""
        return self._catalog.items()

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
        return None if raw is None else decode_vector(raw)

    def vectors_or_zeros(self, ids: list[str]) -> np.ndarray:
        """The vectors of these memories, one row each (zeros for a memory without one), in one read."""
        dim = self.embedder.dim
        raws = self.store.get_vectors(ids) if ids else []
        together = decode_vectors(raws, dim)  # the usual case, in one step rather than a row at a time
        if together is not None:
            return together
        out = np.zeros((len(ids), dim), dtype=np.float32)
        for row, raw in enumerate(raws):
            if raw is not None:
                out[row] = decode_vector(raw)
        return out

    # Candidates ------------------------------------------------------------------------------

    def similar(self, vector: np.ndarray, k: int, allowed: Filter, narrow: bool = True) -> Hits:
        """The k nearest memories that pass `allowed`, as (id, cosine similarity), best first.
        `narrow`: the filter is selective (an entity or a time range), so oversample more."""
        # Oversample, then widen until enough memories pass the filter or the index is exhausted.
        # Without an entity or time filter nearly every hit passes: a small margin is enough, and
        # a 4x oversample (ef and k of 4x) made the graph search grow fastest with top_k. A smaller
        # margin, max(8, k/8), would save little time and its lower ef lost notes MRR@10
        # (bench_notes): the 1.25x also buys the ANN's accuracy.
        listed = allowed.few(EXACT_SEARCH_MAX) if isinstance(allowed, Scope) else None
        if listed is not None:
            return self._nearest_of(vector, k, listed)
        want = k
        factor = 4.0 if narrow else 1.25
        while True:
            ask = int(want * factor) + 8
            hits = self._index.search(vector, ask if want < len(self._index) else want,
                                      ef=max(self.config.index.ef_search, ask))
            kept = [hit for hit, keep in zip(hits, passing(allowed, [mid for mid, _ in hits])) if keep]
            if len(kept) >= k or len(hits) >= len(self._index) or want >= len(self._index):
                return kept[:k]
            want *= 4

    def _nearest_of(self, vector: np.ndarray, k: int, ids: list[str]) -> Hits:
        """The k of these memories nearest to `vector`, scored exactly from their stored copies (one
        multi-get; the graph's get_items builds a Python float per component and cost four times as
        much), most similar first; a memory without a vector is left out."""
        if not ids or k <= 0:
            return []
        stored = self.vectors_or_zeros(ids)
        norms = np.linalg.norm(stored, axis=1)
        query = vector.astype(np.float32, copy=False)
        sims = (stored @ query) / np.where(norms > 0, norms, 1.0) / max(float(np.linalg.norm(query)), 1e-12)
        order = [i for i in np.argsort(-sims, kind="stable").tolist() if norms[i] > 0][:k]
        return [(ids[i], float(sims[i])) for i in order]

    def similar_wide(self, vector: np.ndarray, k: int, ef: int) -> Hits:
        """One HNSW search with an explicit breadth, unfiltered (callers filter and widen with `similar`)."""
        return self._index.search(vector, k, ef=ef)

    def indexed_count(self) -> int:
        """How many vectors the HNSW index holds."""
        return len(self._index)

    def lexical_hits(self, cue: str, k: int, allowed: Filter) -> Hits:
        """The k best BM25 matches that pass `allowed`, as (id, score), best first."""
        return self.lexical_hits_weighted(dict.fromkeys(tokenize(cue), 1.0), k, allowed)

    def lexical_hits_weighted(self, weights: dict[str, float], k: int, allowed: Filter) -> Hits:
        """The k best BM25 matches of weighted index terms (lexical_index.tokenize output) that pass `allowed`."""
        listed = allowed.few(EXACT_SEARCH_MAX) if isinstance(allowed, Scope) else None
        if listed is not None and not listed:
            return []  # nothing in scope: paging through every match would only find that out
        named: dict[bytes, str] = {}  # each hit's id text, made once for the filter and kept for the answer

        def ask(raws: list[bytes]) -> list[bool]:
            ids = id_strs(raws)
            named.update(zip(raws, ids))
            return passing(allowed, ids)

        hits = self._lexical.search_terms(weights, k, only=None if listed is None else [id_bytes(mid) for mid in listed],
                                          passing=ask, narrow=not isinstance(allowed, Scope) or allowed.narrowed)
        return [(named.get(raw) or id_str(raw), score) for raw, score in hits]

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
    def write_lock(self) -> "OwnedRLock | WriterLock":
        """Held by every writer; hold it across a read-modify-write of several records."""
        return self._writers

    def beside(self, work: Callable[[], T]) -> Future[T] | None:
        """`work` started on the vault's helper thread, for the caller to overlap with its own; None when
        the calling thread holds the vault's lock (work that needs it, repairing a damaged index, would
        wait for the caller forever) or the vault is closing: the caller then runs it itself."""
        if self._write_lock.held():
            return None
        try:
            return self._beside.submit(work)
        except RuntimeError:  # shut down by close()
            return None

    @property
    def append_lock(self) -> OwnedRLock:
        """For a write that reads nothing back, an append (the query log): this process's lock alone. For
        a vault in PostgreSQL it spares a recall the writer lock shared by every daemon."""
        return self._write_lock

    def check_open(self) -> None:
        if self._closed:
            raise self.closed_error()

    def closed_error(self) -> InvalidInput:
        """What a call on this vault raises once close() has run."""
        return InvalidInput(f"vault {self.path} is closed")

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """The write lock, on a vault that must still be open (and whose records were found readable)."""
        self._wait_verified()
        with self._writers:
            self.check_open()
            yield

    def _verify_records(self) -> None:
        try:
            for count, _ in enumerate(self.store.scan("default", MEMORY_PREFIX, cached=False)):
                if count % 1024 == 0:
                    if self._closed:
                        return
                    # Hand the GIL over: without this, a recall arriving beside the check waited up to
                    # the interpreter's 5 ms switch interval each time it gave the GIL up.
                    time.sleep(0)
        except CorruptVault as exc:
            self._damage = exc
        except Exception as exc:  # noqa: BLE001 - a store closed under it: nothing left to guard
            log.debug("record check of %s stopped: %s", self.path, exc)

    def _wait_verified(self) -> None:
        verifier = self._verifier
        if verifier is not None:
            verifier.join()
        if self._damage is not None:
            raise self._damage

    def apply(self, writes: WriteSet, *, saved: Iterable[Memory] = (), removed: Sequence[str] = (),
              vectors: tuple[list[str], np.ndarray] | None = None, reindexed: Sequence[Memory] = (),
              durable: bool = True) -> None:
        """Commit one batch (caller holds the write lock) and bring the derived state along: the catalog
        learns `saved` and forgets `removed`, HNSW takes `vectors`, BM25 re-reads `reindexed`. A batch that
        touches either index also bumps the write sequence, in the same RocksDB batch. durable=False: the
        batch is not waited for (hebbs/store/durability.py), for what nobody is told was kept."""
        if vectors is not None:
            check_vectors(self, *vectors)
        touches_indexes = bool(removed) or vectors is not None or bool(reindexed)
        touched = [*removed, *(vectors[0] if vectors is not None else ()), *(m.id for m in reindexed)]
        if self._shared:
            # The store numbers the write; writes of other daemons numbered before it are caught up first.
            seq = self.store.commit(writes, durable=durable, touched=touched)
            if seq is not None:
                if seq > self._write_seq + 1:
                    gap = changelog.touched_since(self.store, self._write_seq, seq - 1)
                    self._sync_ids(gap or [])
                self._write_seq = max(self._write_seq, seq)
        else:
            if touches_indexes:
                self._write_seq += 1
                writes.put_meta("write_seq", self._write_seq)
                changelog.record(writes, self._write_seq, touched)
            try:
                self.store.commit(writes, durable=durable, tracked=True)
            except BaseException:
                if touches_indexes:
                    self._write_seq -= 1  # nothing was written (a full disk, say): the next batch takes this number
                raise
            if self._lexical_behind:
                # The first write since the store, opened read-only on a full disk, could write again.
                # The batch is committed: a failure here must not be reported as the write's.
                try:
                    self._catch_up_lexical()
                    self._lexical_behind = False
                except Exception as exc:  # noqa: BLE001 - derived: the next write tries again
                    log.warning("vault %s: the lexical index could not catch up yet (%s)", self.path, exc)
        for memory_id in removed:
            self._catalog.remove(memory_id)
        for memory in saved:
            self._catalog.put(memory)
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
        self._changes_since_checkpoint += len(removed) + (len(vectors[0]) if vectors is not None else 0)
        if self._changes_since_checkpoint >= checkpoint_interval(len(self._index)):
            self._checkpoint_soon()

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


def vault_model(config: VaultConfig, store: RecordStore) -> str | None:
    """The model to open a vault with: the one its store records (what its vectors are), else for a new
    vault the one its config names (None: the default). A config naming another model than the vault
    holds is a switch asked for and not made yet: `hebbs reembed` makes it."""
    recorded = store.get_meta("model_spec")
    if recorded is not None and config.model is not None and config.model != recorded:
        log.warning("vault %s holds %s vectors; its config names %s: `hebbs reembed` moves it there",
                    store.path, recorded, config.model)
    return recorded if recorded is not None else config.model


def open_store(path: Path, config: VaultConfig) -> RecordStore:
    """The vault's store: the embedded RocksDB in path/db, or the PostgreSQL its config names (imported
    only then: a RocksDB user never loads psycopg)."""
    if config.store.url is None:
        return Store.open(path / "db", durability=config.store.durability)
    try:
        from ..store.postgres import PgStore
    except ImportError as exc:
        raise InvalidInput(f"vault {path} lives in PostgreSQL ({config.store.name!r}), which needs "
                           f"`pip install 'hebbs[postgres]'` ({exc})") from None
    return PgStore.open(config.store.url, config.store.name or path.name, path,
                        read_url=config.store.read_url, pool_size=config.store.pool_size,
                        unreachable_after=config.store.unreachable_after)


class WriterLock:
    """The write lock of a shared vault: this process's lock, then the store's lock across daemons,
    taken once by the outermost holder (it is reentrant like an RLock); on taking it, the vault catches
    up with what other daemons wrote, so a read-modify-write reads their committed state."""

    def __init__(self, local: OwnedRLock, store: RecordStore, catch_up: Callable[[], int]) -> None:
        self._local = local
        self._store = store
        self._catch_up = catch_up
        self._depth = 0  # changed only by the thread holding `local`

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not self._local.acquire(blocking, timeout):
            return False
        if self._depth == 0:
            try:
                self._store.lock_writers()
            except BaseException:
                self._local.release()
                raise
            try:
                self._depth = 1
                self._catch_up()
            except BaseException:
                self._depth = 0
                self._store.unlock_writers()
                self._local.release()
                raise
        else:
            self._depth += 1
        return True

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._store.unlock_writers()
        self._local.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class HasVault(Protocol):
    """Anything that is a facade over one open vault (the Engine): workflows accept it or the vault itself."""

    @property
    def vault(self) -> OpenVault: ...


def vault_of(owner: "OpenVault | HasVault") -> OpenVault:
    return owner if isinstance(owner, OpenVault) else owner.vault


def _check_model(store: RecordStore, path: Path, embedder: Embedder) -> None:
    """Record the model a new vault is embedded with (name, dimension, how to load it, its files' sha256),
    or refuse an embedder that is not the recorded model: another name or dimension, or the same name
    with other files (weights of another version). A vault recorded before the hashes were gets them."""
    recorded = store.get_meta("model_id")
    writes = WriteSet()
    if recorded is None:
        writes.put_meta("schema_version", SCHEMA_VERSION)
        writes.put_meta("model_id", embedder.model_id)
        writes.put_meta("model_dim", embedder.dim)
        writes.put_meta("model_spec", getattr(embedder, "spec", None) or embedder.model_id)
        writes.put_meta("model_files", embedder.files)
        store.commit(writes)
        return
    if recorded != embedder.model_id or store.get_meta("model_dim") != embedder.dim:
        raise ModelMismatch(
            f"vault {path} was built with model {recorded} ({store.get_meta('model_dim')}-d) but was opened with "
            f"{embedder.model_id} ({embedder.dim}-d). Open it with model={recorded!r}, or move it to "
            f"{embedder.model_id} with `hebbs reembed --model {embedder.spec}` (docs/embedding.md).")
    files = store.get_meta("model_files")
    if files is None:
        if embedder.files and not store.read_only:
            writes.put_meta("model_files", embedder.files)
            store.commit(writes)
        return
    changed = sorted(name for name, digest in files.items() if embedder.files.get(name, digest) != digest)
    if changed:
        raise ModelMismatch(
            f"vault {path} was embedded with {recorded} from other files than the ones found now "
            f"({', '.join(changed)} differ: another version of the model). Install the version the vault was "
            f"made with, or move the vault to these files with `hebbs reembed --model {embedder.spec}`.")


def check_vectors(vault: OpenVault, ids: Sequence[str], vectors: np.ndarray) -> None:
    """Refuse vectors that are not the vault's model's: of another dimension, or embedded by an embedder
    other than the one the vault was opened with (swapped under it), or for a vault whose store moved to
    another model meanwhile (`hebbs reembed` by another daemon of a shared vault)."""
    shape = np.shape(vectors)
    if len(shape) != 2 or shape[0] != len(ids) or shape[1] != vault.model_dim:
        raise ModelMismatch(f"vault {vault.path} holds {vault.model_dim}-d vectors of {vault.model_id}; "
                            f"refusing {shape[1] if len(shape) == 2 else shape}-d vectors")
    if vault.embedder.model_id != vault.model_id or vault.embedder.dim != vault.model_dim:
        raise ModelMismatch(f"vault {vault.path} is embedded with {vault.model_id}; refusing vectors of "
                            f"{vault.embedder.model_id}")
