"""The HNSW vector index over a vault's `vectors` family (hnswlib, cosine space: hebbs_hnswlib, built
from vendor/hnswlib with a loader that maps a checkpoint where it lies instead of copying it).

hnswlib knows integer labels only; this module keeps the label <-> memory id mapping. The index is
derived data, checkpointed to disk (at every clean close, and while the vault is written, every few
thousand changed vectors: open_vault.py). A checkpoint records the write sequence it reflects; on
open, a checkpoint at the database's sequence is used as is, one behind it is brought forward by
re-reading only the memories changed since (changelog.py), and without one the index is rebuilt.
"""

from __future__ import annotations

import mmap
import os
import threading
from collections.abc import Callable
from pathlib import Path

import hebbs_hnswlib as hnswlib
import msgspec
import numpy as np
import xxhash

from ..config import IndexParams
from ..fsutil import atomic_write
from ..store.contract import settle_ties
from ..store.storage import decode_vector

_SNAPSHOT_INDEX = "hnsw.bin"
_SNAPSHOT_META = "hnsw.meta"
_NEXT_META = "hnsw.meta.next"
# hnswlib's header is 96 bytes; damage anywhere past it makes the load raise, not crash (it checks the
# file's layout against its size), so this much is checked before loading.
_HEAD_BYTES = 4096
_PARALLEL_ADD = 1000


class _SnapshotMeta(msgspec.Struct):
    write_seq: int
    # hnswlib trusts the bytes it loads (a damaged header can crash the process, and damage anywhere
    # can crash a search), so they are checked at every open: xxh3-128 reads several GB/s (sha256
    # took 0.4 s of a 100k vault's open).
    checksum: str
    dim: int
    params: IndexParams
    # The memory id of each label 0..next_label-1 ("": removed). A list, not a map: a list decodes and
    # inverts (two dict(zip(...))) far faster than a large map's entries.
    ids: list[str]
    next_label: int
    # xxh3-128 of the file's first _HEAD_BYTES ("" in checkpoints written before it was recorded).
    head_checksum: str = ""


class VectorIndex:
    """Thread-safe: hnswlib does not allow a query to run beside an add or resize, so one lock serializes them.
    A VectorSearch (store/contract.py) held in this process: checkpointed, not `remote`."""

    remote = False

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
        # memory id -> label; None until first needed (see _labels). Searches read _id_of only.
        self._label_of: dict[str, int] | None = {}
        self._live = 0  # how many labels hold a memory
        # The memory id of each label ("" once removed): a list, not a second map. At 1M memories an
        # int -> str dict cost ~70 MB (its table and a million int keys); the list costs 8 MB.
        # Labels are never reused: hnswlib keeps a deleted element's label mapped until its slot is
        # taken, so handing that label to another element would corrupt its lookup table. So the next
        # label is always len(self._id_of).
        self._id_of: list[str] = []

    def __len__(self) -> int:
        return self._live

    def __contains__(self, memory_id: str) -> bool:
        with self._lock:
            return memory_id in self._labels()

    def _labels(self) -> dict[str, int]:
        """The id -> label map (the caller holds the lock), built from _id_of on first need: a clean
        open answers searches without it, and at 1M memories building it took 0.35-0.45 s of the open."""
        labels = self._label_of
        if labels is None:
            labels = dict(zip(self._id_of, range(len(self._id_of))))  # in C; then the removed labels' "" taken out
            labels.pop("", None)
            self._label_of = labels
        return labels

    @property
    def raw(self) -> hnswlib.Index:
        """The hnswlib index itself, for tests and benches that compare recall with plain vector search."""
        return self._index

    def ids_by_label(self) -> dict[int, str]:
        with self._lock:
            return {label: memory_id for label, memory_id in enumerate(self._id_of) if memory_id}

    def add(self, ids: list[str], vectors: np.ndarray) -> None:
        """Add memories, or update the vectors of ones already indexed (in place: same label, no leak)."""
        if not ids:
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        with self._lock:
            label_of = self._labels()
            updated = [row for row, memory_id in enumerate(ids) if memory_id in label_of]
            fresh = [row for row, memory_id in enumerate(ids) if memory_id not in label_of]
            if updated:
                # replace_deleted=True would put an existing label into a vacant slot and leave its old
                # element live under the same label: updates must go through the plain path.
                self._index.add_items(vectors[updated], np.asarray([label_of[ids[r]] for r in updated]),
                                      num_threads=1, replace_deleted=False)
            if fresh:
                labels = np.arange(len(self._id_of), len(self._id_of) + len(fresh), dtype=np.int64)
                needed = self._index.get_current_count() + len(fresh)
                if needed > self._index.get_max_elements():
                    self._index.resize_index(max(needed, self._index.get_max_elements() * 2))
                # Bulk loads (opening a vault, a big remember_many) use every core; single adds stay on
                # one thread so they never compete with the embedding model for the CPU.
                threads = -1 if len(fresh) >= _PARALLEL_ADD else 1
                self._index.add_items(vectors[fresh], labels, num_threads=threads, replace_deleted=True)
                for row, label in zip(fresh, labels.tolist()):
                    label_of[ids[row]] = label
                    self._id_of.append(ids[row])
                self._live += len(fresh)

    def remove(self, ids: list[str]) -> None:
        with self._lock:
            label_of = self._labels()
            for memory_id in ids:
                label = label_of.pop(memory_id, None)
                if label is not None:
                    self._id_of[label] = ""
                    self._index.mark_deleted(label)
                    self._live -= 1

    def search(self, vector: np.ndarray, k: int, *, ef: int | None = None) -> list[tuple[str, float]]:
        """The k nearest memories as (id, cosine similarity), most similar first, equal ones by id."""
        return settle_ties(lambda n: self._search(vector, n, ef), k)

    def _search(self, vector: np.ndarray, k: int, ef: int | None) -> list[tuple[str, float]]:
        with self._lock:
            live = self._live
            if live == 0:
                return []
            k = min(k, live)
            ef_used = max(ef or self.params.ef_search, k)
            query = vector.reshape(1, -1).astype(np.float32, copy=False)
            # The index rests at params.ef_search: a search at that breadth (similarity-only's) sets nothing.
            widened = ef_used != self.params.ef_search
            if widened:
                self._index.set_ef(ef_used)
            try:
                labels, distances = self._index.knn_query(query, k=k)
            except RuntimeError:
                # Raised when the graph cannot produce k live neighbours (many deletions): ask for fewer.
                labels, distances = self._index.knn_query(query, k=max(1, k // 2))
            finally:
                if widened:
                    self._index.set_ef(self.params.ef_search)
            id_of = self._id_of
            return [(id_of[label], 1.0 - dist)
                    for label, dist in zip(labels[0].tolist(), distances[0].tolist()) if id_of[label]]

    def vectors(self, ids: list[str]) -> np.ndarray:
        """The stored (unit) vectors of these memories, one row each; a row of zeros for an id not indexed.

        Read from the graph in one call: recall's diversity step needs a few hundred at large top_k,
        and reading them one by one from RocksDB grew with top_k."""
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        with self._lock:
            label_of = self._labels()
            rows = [(row, label_of[memory_id]) for row, memory_id in enumerate(ids) if memory_id in label_of]
            if rows:
                found = self._index.get_items([label for _, label in rows], return_type="numpy")
                out[[row for row, _ in rows]] = found
        return out

    def sync(self, ids: list[str], stored: Callable[[list[str]], list[bytes | None]]) -> None:
        """Bring these memories to what RocksDB holds now (`stored` reads their vectors): indexed,
        re-indexed with a changed vector, or removed. A vector already indexed as stored is left alone."""
        for lo in range(0, len(ids), 10_000):
            chunk = ids[lo:lo + 10_000]
            raws = stored(chunk)
            gone = [mid for mid, raw in zip(chunk, raws) if raw is None]
            present = [(mid, decode_vector(raw)) for mid, raw in zip(chunk, raws) if raw is not None]
            self.remove(gone)
            if not present:
                continue
            wanted = np.vstack([vector for _, vector in present])
            indexed = self.vectors([mid for mid, _ in present])
            # hnswlib keeps cosine vectors normalized: compare directions, not raw values, within what
            # the stored float16 copy rounds away (under 5e-4 per component of a unit vector).
            norms = np.linalg.norm(wanted, axis=1, keepdims=True)
            same = np.all(np.abs(indexed - wanted / np.where(norms == 0, 1, norms)) < 2e-3, axis=1)
            changed = [row for row in range(len(present)) if not same[row]]
            if changed:
                self.add([present[row][0] for row in changed], wanted[changed])

    # Checkpoints -----------------------------------------------------------------------------

    def save(self, directory: Path, write_seq: int) -> None:
        """Write a checkpoint of the index as of write_seq (the caller keeps writers out meanwhile)."""
        self.publish(directory, self.dump(directory, write_seq))

    def dump(self, directory: Path, write_seq: int) -> bytes:
        """The slow half of a checkpoint that needs the index still: write it to a temporary file and
        return its meta. `publish` finishes it without holding anything."""
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        with self._lock:
            self._index.save_index(str(directory / f".{_SNAPSHOT_INDEX}.tmp"))
            ids = list(self._id_of)
            next_label = len(ids)
        return msgspec.msgpack.encode(_SnapshotMeta(write_seq, "", self.dim, self.params, ids, next_label))

    @staticmethod
    def publish(directory: Path, meta: bytes) -> None:
        tmp_index = directory / f".{_SNAPSHOT_INDEX}.tmp"
        decoded = seal(msgspec.msgpack.decode(meta, type=_SnapshotMeta), tmp_index)
        os.chmod(tmp_index, 0o600)  # hnswlib creates it with the umask's mode; a vault's files are the user's only
        with open(tmp_index, "rb") as f:
            os.fsync(f.fileno())
        # The new meta is written beside the old one before the index moves, so a crash at any point
        # leaves one meta whose checksum matches the index file (`load` tries both): the old checkpoint
        # before the rename, the new one after it. Never no checkpoint, which would mean a full rebuild.
        atomic_write(directory / _NEXT_META, msgspec.msgpack.encode(decoded))
        os.replace(tmp_index, directory / _SNAPSHOT_INDEX)
        os.replace(directory / _NEXT_META, directory / _SNAPSHOT_META)

    @classmethod
    def load(cls, directory: Path, upto: int, dim: int, params: IndexParams) -> "tuple[VectorIndex, int] | None":
        """The checkpoint and the write sequence it reflects, if that is at most `upto` (the database's)
        and it was built with these parameters; otherwise None."""
        metas = _metas(directory)
        if not metas:
            return None
        path = directory / _SNAPSHOT_INDEX
        # The whole file is hashed on the other core while it is loaded (both run without the GIL):
        # at 1M memories the hash alone takes 0.3-0.4 s. Only the header has to be known intact
        # before the load, and the index is used only once the whole file matches a meta.
        whole = _Checksumming(path)
        try:
            head = _head_checksum(path)
        except OSError:
            whole.result()
            return None
        vouched = next((m for m in metas if m.head_checksum == head and _usable(m, upto, dim, params)), None)
        raw, live = None, 0
        if vouched is not None:
            live = _live(vouched)
            raw = _load_raw(path, dim, live)
        checksum = whole.result()
        # Not necessarily `vouched`: two checkpoints can share a header (same count and entry point).
        meta = next((m for m in metas if m.checksum == checksum), None)
        if meta is None or not _usable(meta, upto, dim, params):
            return None
        if meta is not vouched:
            live = _live(meta)
            if vouched is None:  # a checkpoint older than head checksums: loaded now that the whole file is known good
                raw = _load_raw(path, dim, live)
        if raw is None:
            return None
        index = cls(dim, params, loaded=raw)
        index._id_of = meta.ids
        index._label_of = None
        index._live = live
        return index, meta.write_seq


def _usable(meta: _SnapshotMeta, upto: int, dim: int, params: IndexParams) -> bool:
    """Whether the checkpoint `meta` describes can serve a vault at database sequence `upto`."""
    return meta.write_seq <= upto and meta.dim == dim and meta.params == params and len(meta.ids) == meta.next_label


def _live(meta: _SnapshotMeta) -> int:
    """How many labels of the checkpoint hold a memory (a count over every label: once per open)."""
    return len(meta.ids) - meta.ids.count("")


def _load_raw(path: Path, dim: int, live: int) -> hnswlib.Index | None:
    raw = hnswlib.Index(space="cosine", dim=dim)
    try:
        # Mapped copy-on-write, not read: at 1M memories hnswlib's load_index spent 1.0-1.1 s copying
        # 1.7 GB into fresh memory, the mapped load 0.2-0.25 s (bench/results/history.md), and it runs
        # without the GIL. The file must not change in place while mapped: checkpoints are written
        # beside it and renamed over it, which leaves the mapped one intact. max_elements only sets
        # the capacity (at least the file's count).
        raw.load_index_mapped(str(path), max_elements=max(live, 16), allow_replace_deleted=True)
    except (RuntimeError, OSError, MemoryError):
        return None
    return raw


def seal(meta: _SnapshotMeta, path: Path) -> _SnapshotMeta:
    """`meta` with the checksums of the index file at `path`."""
    meta.checksum = _checksum(path)
    meta.head_checksum = _head_checksum(path)
    return meta


def snapshot_intact(directory: Path) -> bool:
    """Whether the checkpoint's index file matches the checksum its meta recorded."""
    return _matching_meta(directory) is not None


def _matching_meta(directory: Path) -> _SnapshotMeta | None:
    """The meta (current, or the next one a checkpoint crashed while publishing) whose checksum the
    index file has; None when neither does."""
    metas = _metas(directory)
    if not metas:
        return None
    try:
        checksum = _checksum(directory / _SNAPSHOT_INDEX)
    except OSError:
        return None
    return next((meta for meta in metas if meta.checksum == checksum), None)


def _metas(directory: Path) -> list[_SnapshotMeta]:
    """The current meta and the next one (left by a checkpoint that crashed while publishing), as present."""
    metas = []
    for name in (_SNAPSHOT_META, _NEXT_META):
        try:
            metas.append(msgspec.msgpack.decode((directory / name).read_bytes(), type=_SnapshotMeta))
        # ValueError: a flipped byte in a string is a UnicodeDecodeError, which msgspec lets through.
        except (OSError, ValueError, msgspec.DecodeError, msgspec.ValidationError):
            continue
    return metas


class _Checksumming:
    """The checksum of a file, computed on a thread of its own from the moment this is made."""

    def __init__(self, path: Path) -> None:
        self._checksum: str | None = None
        self._hashing = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(path,), name="hebbs-checksum", daemon=True)
        self._thread.start()
        # Until the thread is inside the hash (which runs without the GIL), it needs the GIL to get
        # there: a caller going straight into Python work, or into a load that holds the GIL, would
        # start the hash only once that was over.
        self._hashing.wait()

    def _run(self, path: Path) -> None:
        try:
            with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                digest = xxhash.xxh3_128()
                self._hashing.set()
                # One update over the whole mapping, so that the hash runs without the GIL from start
                # to end; reading block by block would take the GIL at every block.
                with memoryview(mapped) as view:  # a buffer, as xxhash's types name it
                    digest.update(view)
                self._checksum = digest.hexdigest()
        except (OSError, ValueError):  # ValueError: an empty file cannot be mapped
            self._checksum = None
        finally:
            self._hashing.set()

    def result(self) -> str | None:
        """The file's checksum; None when it could not be read."""
        self._thread.join()
        return self._checksum


def _head_checksum(path: Path) -> str:
    with open(path, "rb") as f:
        return xxhash.xxh3_128(f.read(_HEAD_BYTES)).hexdigest()


def _checksum(path: Path) -> str:
    digest = xxhash.xxh3_128()
    # One buffer read into again and again: a new 4 MB bytes per block left freed heap in the RSS.
    buffer = bytearray(1 << 22)
    view = memoryview(buffer)
    with open(path, "rb") as f:
        while read := f.readinto(buffer):
            digest.update(view[:read])
    return digest.hexdigest()
