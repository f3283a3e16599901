"""The HNSW vector index over a vault's `vectors` family (hnswlib, cosine space).

hnswlib knows integer labels only; this module keeps the label <-> memory id mapping. The index is
derived data: it is rebuilt from RocksDB when a vault opens, unless a snapshot written at the last
clean close carries the same write sequence number as the database (then it is provably current).
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import hnswlib
import msgspec
import numpy as np

from .fsutil import atomic_write

_SNAPSHOT_INDEX = "hnsw.bin"
_SNAPSHOT_META = "hnsw.meta"
_PARALLEL_ADD = 1000


class IndexParams(msgspec.Struct, kw_only=True, frozen=True):
    m: int = 16
    ef_construction: int = 200
    ef_search: int = 50


class _SnapshotMeta(msgspec.Struct):
    write_seq: int
    # hnswlib trusts the bytes it loads (a damaged file can crash the process), so they are checked first.
    sha256: str
    dim: int
    params: IndexParams
    ids: list[str | None]  # position = hnswlib label; None for a deleted label


class VectorIndex:
    """Thread-safe: hnswlib does not allow a query to run beside an add or resize, so one lock serializes them."""

    def __init__(self, dim: int, params: IndexParams, capacity: int = 1024,
                 loaded: hnswlib.Index | None = None) -> None:
        self.dim = dim
        self.params = params
        self._lock = threading.Lock()
        if loaded is None:
            loaded = hnswlib.Index(space="cosine", dim=dim)
            loaded.init_index(max_elements=max(capacity, 16), ef_construction=params.ef_construction,
                              M=params.m, allow_replace_deleted=False)
        self._index = loaded
        self._index.set_ef(params.ef_search)
        self._index.set_num_threads(1)
        self._label_of: dict[str, int] = {}
        self._id_of: list[str | None] = []

    def __len__(self) -> int:
        return len(self._label_of)

    def __contains__(self, memory_id: str) -> bool:
        return memory_id in self._label_of

    def add(self, ids: list[str], vectors: np.ndarray) -> None:
        if not ids:
            return
        with self._lock:
            fresh_ids, fresh_rows = [], []
            for row, memory_id in enumerate(ids):
                if memory_id in self._label_of:
                    # A changed vector: retire the old label; hnswlib cannot update a vector in place safely.
                    self._retire(memory_id)
                fresh_ids.append(memory_id)
                fresh_rows.append(row)
            needed = len(self._id_of) + len(fresh_ids)
            if needed > self._index.get_max_elements():
                self._index.resize_index(max(needed, self._index.get_max_elements() * 2))
            labels = np.arange(len(self._id_of), len(self._id_of) + len(fresh_ids), dtype=np.int64)
            # Bulk loads (opening a vault, a big remember_many) use every core; single adds stay on one
            # thread so they never compete with the embedding model for the CPU.
            threads = -1 if len(fresh_ids) >= _PARALLEL_ADD else 1
            self._index.add_items(np.ascontiguousarray(vectors[fresh_rows], dtype=np.float32), labels,
                                  num_threads=threads)
            for memory_id, label in zip(fresh_ids, labels.tolist()):
                self._label_of[memory_id] = label
                self._id_of.append(memory_id)

    def remove(self, ids: list[str]) -> None:
        with self._lock:
            for memory_id in ids:
                if memory_id in self._label_of:
                    self._retire(memory_id)

    def _retire(self, memory_id: str) -> None:
        label = self._label_of.pop(memory_id)
        self._id_of[label] = None
        self._index.mark_deleted(label)

    def search(self, vector: np.ndarray, k: int, *, ef: int | None = None) -> list[tuple[str, float]]:
        """The k nearest memories as (id, cosine similarity), most similar first."""
        with self._lock:
            live = len(self._label_of)
            if live == 0:
                return []
            k = min(k, live)
            ef_used = max(ef or self.params.ef_search, k)
            self._index.set_ef(ef_used)
            try:
                labels, distances = self._index.knn_query(vector.reshape(1, -1).astype(np.float32), k=k)
            except RuntimeError:
                # Raised when the graph cannot produce k live neighbours (many deletions): ask for fewer.
                labels, distances = self._index.knn_query(vector.reshape(1, -1).astype(np.float32),
                                                          k=max(1, k // 2))
            finally:
                self._index.set_ef(self.params.ef_search)
            return [(self._id_of[label], 1.0 - float(dist))
                    for label, dist in zip(labels[0].tolist(), distances[0].tolist())
                    if self._id_of[label] is not None]

    # Snapshots -------------------------------------------------------------------------------

    def save(self, directory: Path, write_seq: int) -> None:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        with self._lock:
            tmp_index = directory / f".{_SNAPSHOT_INDEX}.tmp"
            self._index.save_index(str(tmp_index))
            meta = msgspec.msgpack.encode(_SnapshotMeta(write_seq, _sha256(tmp_index), self.dim, self.params,
                                                        list(self._id_of)))
        with open(tmp_index, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp_index, directory / _SNAPSHOT_INDEX)
        # The meta names the write sequence and the index's checksum; written last, so a crash
        # between the two renames leaves a meta that does not match and the index is rebuilt.
        atomic_write(directory / _SNAPSHOT_META, meta)

    @classmethod
    def load(cls, directory: Path, write_seq: int, dim: int, params: IndexParams) -> "VectorIndex | None":
        """The snapshot if it matches this database state and these parameters exactly; otherwise None."""
        try:
            meta = msgspec.msgpack.decode((directory / _SNAPSHOT_META).read_bytes(), type=_SnapshotMeta)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None
        if meta.write_seq != write_seq or meta.dim != dim or meta.params != params:
            return None
        try:
            if _sha256(directory / _SNAPSHOT_INDEX) != meta.sha256:
                return None
        except OSError:
            return None
        raw = hnswlib.Index(space="cosine", dim=dim)
        try:
            raw.load_index(str(directory / _SNAPSHOT_INDEX), max_elements=max(len(meta.ids), 16))
        except (RuntimeError, OSError):
            return None
        if raw.get_current_count() != len(meta.ids):
            return None
        index = cls(dim, params, loaded=raw)
        index._id_of = meta.ids
        index._label_of = {memory_id: label for label, memory_id in enumerate(meta.ids) if memory_id is not None}
        return index


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
