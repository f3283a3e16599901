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

from ..config import IndexParams
from ..fsutil import atomic_write

_SNAPSHOT_INDEX = "hnsw.bin"
_SNAPSHOT_META = "hnsw.meta"
_PARALLEL_ADD = 1000


class _SnapshotMeta(msgspec.Struct):
    write_seq: int
    # hnswlib trusts the bytes it loads (a damaged file can crash the process), so they are checked first.
    sha256: str
    dim: int
    params: IndexParams
    ids: dict[int, str]  # hnswlib label -> memory id, live labels only
    next_label: int


class VectorIndex:
    """Thread-safe: hnswlib does not allow a query to run beside an add or resize, so one lock serializes them."""

    def __init__(self, dim: int, params: IndexParams, capacity: int = 1024,
                 loaded: hnswlib.Index | None = None) -> None:
        self.dim = dim
        self.params = params
        self._lock = threading.Lock()
        if loaded is None:
            loaded = hnswlib.Index(space="cosine", dim=dim)
            # Forgotten memories leave deleted slots; new memories reuse them instead of growing the index.
            loaded.init_index(max_elements=max(capacity, 16), ef_construction=params.ef_construction,
                              M=params.m, allow_replace_deleted=True)
        self._index = loaded
        self._index.set_ef(params.ef_search)
        self._index.set_num_threads(1)
        self._label_of: dict[str, int] = {}
        self._id_of: dict[int, str] = {}
        # Labels are never reused: hnswlib keeps a deleted element's label mapped until its slot is
        # taken, so handing that label to another element would corrupt its lookup table.
        self._next_label = 0

    def __len__(self) -> int:
        return len(self._label_of)

    def __contains__(self, memory_id: str) -> bool:
        return memory_id in self._label_of

    @property
    def raw(self) -> hnswlib.Index:
        """The hnswlib index itself, for tests and benches that compare recall with plain vector search."""
        return self._index

    def ids_by_label(self) -> dict[int, str]:
        with self._lock:
            return dict(self._id_of)

    def add(self, ids: list[str], vectors: np.ndarray) -> None:
        """Add memories, or update the vectors of ones already indexed (in place: same label, no leak)."""
        if not ids:
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        with self._lock:
            updated = [row for row, memory_id in enumerate(ids) if memory_id in self._label_of]
            fresh = [row for row, memory_id in enumerate(ids) if memory_id not in self._label_of]
            if updated:
                # replace_deleted=True would put an existing label into a vacant slot and leave its old
                # element live under the same label: updates must go through the plain path.
                self._index.add_items(vectors[updated], np.asarray([self._label_of[ids[r]] for r in updated]),
                                      num_threads=1, replace_deleted=False)
            if fresh:
                labels = np.arange(self._next_label, self._next_label + len(fresh), dtype=np.int64)
                self._next_label += len(fresh)
                needed = self._index.get_current_count() + len(fresh)
                if needed > self._index.get_max_elements():
                    self._index.resize_index(max(needed, self._index.get_max_elements() * 2))
                # Bulk loads (opening a vault, a big remember_many) use every core; single adds stay on
                # one thread so they never compete with the embedding model for the CPU.
                threads = -1 if len(fresh) >= _PARALLEL_ADD else 1
                self._index.add_items(vectors[fresh], labels, num_threads=threads, replace_deleted=True)
                for row, label in zip(fresh, labels.tolist()):
                    self._label_of[ids[row]] = label
                    self._id_of[label] = ids[row]

    def remove(self, ids: list[str]) -> None:
        with self._lock:
            for memory_id in ids:
                if memory_id in self._label_of:
                    self._retire(memory_id)

    def _retire(self, memory_id: str) -> None:
        label = self._label_of.pop(memory_id)
        del self._id_of[label]
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
                    for label, dist in zip(labels[0].tolist(), distances[0].tolist()) if label in self._id_of]

    def vectors(self, ids: list[str]) -> np.ndarray:
        """The stored (unit) vectors of these memories, one row each; a row of zeros for an id not indexed.

        Read from the graph in one call: recall's diversity step needs a few hundred at large top_k,
        and reading them one by one from RocksDB grew with top_k."""
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        with self._lock:
            rows = [(row, self._label_of[memory_id]) for row, memory_id in enumerate(ids) if memory_id in self._label_of]
            if rows:
                found = self._index.get_items([label for _, label in rows], return_type="numpy")
                out[[row for row, _ in rows]] = found
        return out

    # Snapshots -------------------------------------------------------------------------------

    def save(self, directory: Path, write_seq: int) -> None:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        with self._lock:
            tmp_index = directory / f".{_SNAPSHOT_INDEX}.tmp"
            self._index.save_index(str(tmp_index))
            meta = msgspec.msgpack.encode(_SnapshotMeta(write_seq, _sha256(tmp_index), self.dim, self.params,
                                                        dict(self._id_of), self._next_label))
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
            raw.load_index(str(directory / _SNAPSHOT_INDEX), max_elements=max(len(meta.ids), 16),
                           allow_replace_deleted=True)
        except (RuntimeError, OSError):
            return None
        index = cls(dim, params, loaded=raw)
        index._id_of = meta.ids
        index._label_of = {memory_id: label for label, memory_id in meta.ids.items()}
        index._next_label = meta.next_label
        return index


def snapshot_intact(directory: Path) -> bool:
    """Whether the snapshot's index file matches the checksum its meta recorded."""
    try:
        meta = msgspec.msgpack.decode((directory / _SNAPSHOT_META).read_bytes(), type=_SnapshotMeta)
        return _sha256(directory / _SNAPSHOT_INDEX) == meta.sha256
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return False


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
