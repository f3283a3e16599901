"""The vault's RocksDB database: eight column families, their key layouts, and atomic multi-family writes.

Key layouts (the on-disk format; tests read them back raw):
- default:   0x01 + memory_id(16)                              -> Memory, msgpack
- temporal:  entity_id UTF-8 + 0xFF + created_at_us (u64 BE) + memory_id(16) -> memory_id(16)
             (the trailing id keeps two memories of one entity at the same microsecond apart;
             UTF-8 never contains 0xFF, so the separator is unambiguous). Memories without an
             entity are under "__global__"; every memory is also under "__all__", the timeline.
- vectors:   0x00 + memory_id(16)                              -> 0x10 + float16 LE array (encode_vector;
             a value of 4*dim bytes, as written before, is a float32 LE array: decode_vector reads both)
- graph:     0xF0 + source(16) + edge_type(1) + target(16)     -> confidence f32 LE + created_at_us u64 LE
             0xF1 + target(16) + edge_type(1) + source(16)     -> same value (the reverse index)
- meta:      UTF-8 name                                        -> msgpack value
             (names by prefix: idem/ idempotency.py, access/ access_log.py, reflect_session: reflect.py)
- vectors_associative: 0x00 + memory_id(16)                    -> float32 LE structural vector
- query_log: at_us (u64 BE) + random(4)                        -> QueryLogEntry, msgpack
- pending:   pending_id(16)                                    -> PendingContradiction, msgpack
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import itertools
import json
import logging
import os
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import msgspec
import numpy as np
import rocksdict
from ulid import ULID

from .durability import GroupCommit
from .manifest import manifest_problem
from ..errors import CorruptVault, DiskFull, HebbsError, VaultBusy
from ..fsutil import atomic_write
from ..schema import EdgeType, Memory, decoder

COLUMN_FAMILIES = (
    "default", "temporal", "vectors", "graph", "meta", "vectors_associative", "query_log", "pending",
)
GLOBAL_ENTITY = "__global__"
# Every memory is also indexed under this entity: the whole vault's timeline, newest first in one scan.
TIMELINE_ENTITY = "__all__"
RESERVED_ENTITIES = (GLOBAL_ENTITY, TIMELINE_ENTITY)
MEMORY_PREFIX = b"\x01"
VECTOR_PREFIX = b"\x00"
GRAPH_FORWARD = b"\xf0"
GRAPH_REVERSE = b"\xf1"
ENTITY_SEPARATOR = b"\xff"
_EDGE_VALUE = struct.Struct("<fQ")
log = logging.getLogger("hebbs.storage")
_HOLDER_FILE = "holder.json"
_UNTRACKED_LIMIT = 100_000
# Stored vectors kept in memory once read, by memory id (about 0.9 KB each: 15 MB at most). A default
# recall reads the vectors of its candidates (neighbour support, MMR, confidence), a RocksDB multi-get
# that was a noticeable part of its CPU (bench/bench_recall_cpu.py times it with and without), and the
# memories that answer a vault's cues recur from cue to cue. Emptied when full: no bookkeeping on a hit.
VECTOR_CACHE_MAX = 16_384
# The change log (changelog.py) in the meta family: CHANGES_PREFIX + write_seq (u64 BE) -> the ids it touched.
CHANGES_PREFIX = b"changes/"
# Written beside db/ once the database exists: a vault that has one but no db/ lost its database,
# which must never pass for a new, empty vault.
MARKER_FILE = "vault.json"

_encode = msgspec.msgpack.Encoder().encode
_decode_memory = msgspec.msgpack.Decoder(Memory).decode
_decode_any = msgspec.msgpack.Decoder().decode


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Crockford's digits as the ones int(x, 32) reads; every other byte becomes "!", which int() refuses.
_TO_BASE32 = bytes(b"0123456789abcdefghijklmnopqrstuv"[_CROCKFORD.find(chr(c))] if chr(c) in _CROCKFORD else ord("!")
                   for c in range(256))
# Every 10-bit value as its two Crockford base32 digits: a ULID is 13 such pairs.
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]


def id_bytes(memory_id: str) -> bytes:
    """16 bytes of a ULID's text; canonical (upper-case) text takes a fast path through int(text, 32)
    (a recall turns dozens of ids into keys: bytes.translate costs a fifth of str.translate)."""
    if len(memory_id) == 26 and memory_id[0] <= "7":
        try:
            return int(memory_id.encode().translate(_TO_BASE32), 32).to_bytes(16, "big")
        except (ValueError, UnicodeEncodeError):
            pass  # not canonical: ulid reads it, or says why not
    return ULID.from_str(memory_id).bytes


def id_str(raw: bytes) -> str:
    """The 26-character ULID text of 16 id bytes: str(ULID(raw)), many times faster (recall converts
    every lexical hit it filters, hundreds per query at large top_k)."""
    if len(raw) != 16:
        return str(ULID.from_bytes(raw))  # let ulid raise its error
    # 13 pairs of 10 bits (the top 2 of 130 are zero), unrolled over two 64-bit halves: twice as fast
    # as a loop over one 128-bit int (a filtered lexical search converts a page of 200 ids).
    hi, lo = int.from_bytes(raw[:8], "big"), int.from_bytes(raw[8:], "big")
    p = _PAIRS
    return "".join((p[hi >> 56], p[(hi >> 46) & 1023], p[(hi >> 36) & 1023], p[(hi >> 26) & 1023],
                    p[(hi >> 16) & 1023], p[(hi >> 6) & 1023], p[((hi & 63) << 4) | (lo >> 60)],
                    p[(lo >> 50) & 1023], p[(lo >> 40) & 1023], p[(lo >> 30) & 1023], p[(lo >> 20) & 1023],
                    p[(lo >> 10) & 1023], p[lo & 1023]))


# For id_strs: Crockford's alphabet indexed by a 5-bit digit, the weights that read 5 bytes as one
# 40-bit number, and the shifts that cut such a number into its 8 digits, most significant first.
_CROCKFORD_CODES = np.frombuffer(_CROCKFORD.encode(), dtype=np.uint8)
_FIVE_BYTES = np.array([1 << 32, 1 << 24, 1 << 16, 1 << 8, 1], dtype=np.int64)
_EIGHT_DIGITS = np.arange(35, -1, -5, dtype=np.int64)


def id_strs(raws: list[bytes]) -> list[str]:
    """id_str of many 16-byte ids at once, in a few numpy steps instead of 13 lookups each: a lexical
    search names every hit of its page (70 at top_k 10), and one by one that cost a quarter of the
    search. Any id not 16 bytes long goes through id_str (and its error)."""
    if len(raws) < 8 or any(len(raw) != 16 for raw in raws):
        return [id_str(raw) for raw in raws]
    # A ULID's 26 digits split 130 bits (two leading zeros) from the top. Each id becomes 20 bytes:
    # shifted right by 2 bits (the two zeros first), then zeros; read 40 bits at a time, its first
    # 26 digits of 5 bits are the ULID's.
    ids = np.frombuffer(b"".join(raws), dtype=np.uint8).reshape(len(raws), 16)
    wide = np.zeros((len(raws), 20), dtype=np.uint8)
    wide[:, 0] = ids[:, 0] >> 2
    wide[:, 1:16] = (ids[:, :-1] << 6) | (ids[:, 1:] >> 2)
    wide[:, 16] = ids[:, 15] << 6
    groups = wide.reshape(-1, 5).astype(np.int64) @ _FIVE_BYTES
    digits = ((groups[:, None] >> _EIGHT_DIGITS) & 31).reshape(len(raws), 32)[:, :26]
    text = _CROCKFORD_CODES[digits].tobytes().decode("ascii")
    return [text[i:i + 26] for i in range(0, len(text), 26)]


def memory_key(memory_id: str) -> bytes:
    return MEMORY_PREFIX + id_bytes(memory_id)


def vector_key(memory_id: str) -> bytes:
    return VECTOR_PREFIX + id_bytes(memory_id)


# The stored copy of a memory's vector is float16: the HNSW index holds the float32 one, which every
# search reads. This copy serves rebuilding the index (crash recovery, a damaged checkpoint) and the
# reads of a recall (MMR, confidence), for which half the bytes change a cosine by about 1e-4; with
# float32 the vault kept every vector twice and was larger than Chroma's (docs/performance.md).
# A float16 value starts with this tag, so its length is odd; a float32 one (length 4*dim) never is.
_VECTOR_F16 = b"\x10"


def encode_vector(vector: Any) -> bytes:
    """The stored form of one vector."""
    return _VECTOR_F16 + np.asarray(vector, dtype="<f2").tobytes()


def decode_vector(raw: bytes) -> np.ndarray:
    """A stored vector as float32, in either form (float16 tagged, or float32 as vaults wrote before)."""
    if len(raw) % 2 and raw[:1] == _VECTOR_F16:
        return np.frombuffer(raw, dtype="<f2", offset=1).astype(np.float32)
    return np.frombuffer(raw, dtype="<f4").astype(np.float32)


def decode_vectors(stored: list[bytes | None], dim: int) -> np.ndarray | None:
    """Many stored vectors of `dim` as one float32 array, in one step when all have one form; None
    when some are missing or of another length (the caller decodes row by row)."""
    if not stored or any(raw is None for raw in stored):
        return None
    raws = cast(list[bytes], stored)
    width = 1 + 2 * dim
    if all(len(raw) == width and raw[0] == _VECTOR_F16[0] for raw in raws):
        # One join of the whole values, read past each tag by the row stride: half the cost of
        # slicing every tag off first (a recall decodes about a hundred).
        joined = b"".join(raws)
        return np.ndarray((len(raws), dim), dtype="<f2", buffer=joined, offset=1, strides=(width, 2)).astype(np.float32)
    if all(len(raw) == 4 * dim for raw in raws):
        return np.frombuffer(b"".join(raws), dtype="<f4").reshape(len(raws), dim).astype(np.float32)
    return None


def temporal_prefix(entity_id: str | None) -> bytes:
    return (entity_id or GLOBAL_ENTITY).encode() + ENTITY_SEPARATOR


def temporal_key(entity_id: str | None, created_at_us: int, memory_id: str) -> bytes:
    return temporal_prefix(entity_id) + created_at_us.to_bytes(8, "big") + id_bytes(memory_id)


def temporal_keys(entity_id: str | None, created_at_us: int, memory_id: str) -> tuple[bytes, bytes]:
    """The memory's key under its entity and under the vault-wide timeline."""
    return (temporal_key(entity_id, created_at_us, memory_id),
            temporal_key(TIMELINE_ENTITY, created_at_us, memory_id))


def edge_keys(source: str, edge_type: EdgeType, target: str) -> tuple[bytes, bytes]:
    s, t, e = id_bytes(source), id_bytes(target), bytes([int(edge_type)])
    return GRAPH_FORWARD + s + e + t, GRAPH_REVERSE + t + e + s


def edge_value(confidence: float, created_at_us: int) -> bytes:
    return _EDGE_VALUE.pack(confidence, created_at_us)


def parse_edge_value(raw: bytes) -> tuple[float, int]:
    confidence, created_at = _EDGE_VALUE.unpack(raw)
    return confidence, created_at


def storage_options(*, create: bool = True) -> rocksdict.Options:
    opts = rocksdict.Options(raw_mode=True)
    opts.create_if_missing(create)
    opts.create_missing_column_families(True)
    # Also RocksDB's default; stated because a checksum mismatch found while opening must stop the
    # open rather than let a damaged file be dropped.
    opts.set_paranoid_checks(True)
    # A record cut short at the end of the log is a write that never finished (a crash mid-write) and is
    # dropped; a damaged record before the end is damage, and the open must fail rather than replay
    # up to it and silently drop everything after it (RocksDB's default, point-in-time recovery).
    opts.set_wal_recovery_mode(rocksdict.DBRecoveryMode.tolerate_corrupted_tail_records())
    table = rocksdict.BlockBasedOptions()
    table.set_bloom_filter(10, False)
    table.set_block_cache(rocksdict.Cache(256 * 1024 * 1024))
    opts.set_block_based_table_factory(table)
    opts.set_compression_type(rocksdict.DBCompressionType.lz4())
    opts.set_bottommost_compression_type(rocksdict.DBCompressionType.zstd())
    # Every open starts a new info LOG (about 125 KB: the options of eight families) and RocksDB kept
    # the old ones by default up to 1,000: a vault the daemon opened a few dozen times grew by
    # megabytes of them (1.4 MB after ten opens, more than its BM25 index). The newest two are kept.
    opts.set_keep_log_file_num(2)
    return opts


class WriteSet:
    """Puts and deletes across families, applied by Store.commit as one RocksDB WriteBatch.

    Building plain lists and turning them into a WriteBatch only inside commit means no batch object
    outlives a write: rocksdict keeps the database lock while any batch is alive.
    """

    def __init__(self) -> None:
        self.ops: list[tuple[str, bytes, bytes | None]] = []
        # (family, begin, end): every key from begin up to end (excluded), deleted before `ops` apply.
        self.ranges: list[tuple[str, bytes, bytes]] = []

    def put(self, family: str, key: bytes, value: bytes) -> None:
        self.ops.append((family, key, value))

    def delete(self, family: str, key: bytes) -> None:
        self.ops.append((family, key, None))

    def delete_range(self, family: str, begin: bytes, end: bytes) -> None:
        """Delete every key from begin up to end, end excluded: one range tombstone in RocksDB where a
        delete per key writes one tombstone each (and a later scan from the start steps over them all)."""
        self.ranges.append((family, begin, end))

    def put_memory(self, memory: Memory) -> None:
        self.put("default", memory_key(memory.id), _encode(memory))

    def put_meta(self, name: str, value: Any) -> None:
        self.put("meta", name.encode(), _encode(value))

    def put_edge(self, source: str, edge_type: EdgeType, target: str, confidence: float, stamp: int) -> None:
        """Both keys of one edge (forward and reverse), so either end can find it."""
        forward, reverse = edge_keys(source, edge_type, target)
        value = edge_value(confidence, stamp)
        self.put("graph", forward, value)
        self.put("graph", reverse, value)

    def __len__(self) -> int:
        return len(self.ops) + len(self.ranges)


class Store:
    """One open RocksDB database with the vault's column families.

    Every read that fails inside RocksDB (a checksum mismatch, a missing file) raises CorruptVault
    naming the family: a scan never ends early as if the data ended there.

    A RecordStore (contract.py) that one process holds: not `shared`."""

    shared = False

    def __init__(self, path: Path, db: rocksdict.Rdict, durability: str = "sync") -> None:
        self.path = path
        self._db: rocksdict.Rdict | None = db
        self._handles: Any = {name: db.get_column_family_handle(name) for name in COLUMN_FAMILIES}
        self._views: Any = {name: db.get_column_family(name) for name in COLUMN_FAMILIES}
        self.group = GroupCommit(durability, lambda: self.db.latest_sequence_number(), lambda: self.db.flush_wal(True))
        # After a write failed for want of space RocksDB refuses every later write ("Writer has previous
        # error") until the database is opened again: the next write does that, once space is back.
        self._disk_full = False
        # Opened read-only for want of space (_open_read_only): it takes no lock and writes nothing.
        self._read_only = False
        self._reopening = False
        # Memory records written by commits the open vault did not make itself (workflows that write
        # records directly, tools, tests): the vault re-reads them before it saves its catalog.
        # None once too many to track: the saved catalog is then not trusted.
        self.untracked_memories: set[bytes] | None = set()
        # get_vectors' cache (VECTOR_CACHE_MAX). A commit that writes vectors drops theirs, and bumps
        # the generation so that a read that raced with it does not put back what it replaced.
        self._vectors: dict[str, bytes] = {}
        self._vectors_generation = 0
        self._vectors_lock = threading.Lock()

    @classmethod
    def open(cls, path: os.PathLike | str, *, durability: str = "sync") -> "Store":
        """Open the database at path (a vault's db/), creating it only for a vault that never had one."""
        path = Path(path)
        marker = path.parent / MARKER_FILE
        has_db = (path / "CURRENT").exists()
        if marker.exists() and not has_db:
            if path.is_dir() and any(f.suffix in (".sst", ".log") or f.name.startswith("MANIFEST")
                                     for f in path.iterdir()):
                raise CorruptVault(f"vault {path.parent} cannot be opened: its database {path} has lost its "
                                   f"CURRENT file. {DOCTOR_ADVICE.format(vault=path.parent)}")
            raise CorruptVault(missing_database_message(path, marker))
        if has_db:
            cut = manifest_problem(path)
            if cut is not None:
                # Opened, RocksDB would take the version before the cut and delete the table files
                # written after it as obsolete: refused, they stay for the doctor's repaired copy.
                raise CorruptVault(f"vault {path.parent} cannot be opened: its database's {cut[0].name} is "
                                   f"{cut[1]}. {DOCTOR_ADVICE.format(vault=path.parent)}")
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        opts = storage_options(create=not has_db)
        try:
            db = rocksdict.Rdict(str(path), options=opts, column_families={n: opts for n in COLUMN_FAMILIES[1:]})
        except Exception as exc:  # rocksdict raises plain Exception for every RocksDB status
            text = str(exc)
            if _held_elsewhere(text):
                raise VaultBusy(f"vault {path} is in use by {_describe_holder(path)}; "
                                "stop that process (or use the hebbs daemon, which shares one open vault)") from None
            if has_db and out_of_space(text):
                # Opening after a crash replays the log into a new table file: no room for it is no
                # damage. The database is read as it is (the log replayed in memory) until space is back.
                return cls._open_read_only(path, durability, text)
            if out_of_space(text):
                raise DiskFull(f"the disk holding vault {path.parent} is full: its database cannot be created "
                               f"until some space is freed ({text})") from None
            raise CorruptVault(f"vault {path.parent} cannot be opened: its database {path} is damaged ({text}). "
                               f"{DOCTOR_ADVICE.format(vault=path.parent)}") from None
        if not marker.exists():
            _write_marker(marker)
        _write_holder(path)
        return cls(path, db, durability)

    @classmethod
    def _open_read_only(cls, path: Path, durability: str, why: str) -> "Store":
        """The database opened read-only because the disk has no room to open it for writing: reads are
        served, every write is DiskFull until space is back, and the first write then opens it for writing
        (_recover_from_full_disk). DiskFull when even that fails."""
        opts = storage_options(create=False)
        try:
            db = rocksdict.Rdict(str(path), options=opts, column_families={n: opts for n in COLUMN_FAMILIES[1:]},
                                 access_type=rocksdict.AccessType.read_only(False))
        except Exception as exc:
            raise DiskFull(f"the disk holding vault {path.parent} is full, and the vault cannot be opened until "
                           f"some space is freed ({why}; read-only: {exc}); it is not damaged") from None
        log.warning("vault %s: the disk is full (%s): opened read-only; writes are refused until space is freed",
                    path.parent, why)
        store = cls(path, db, durability)
        store._disk_full = True
        store._read_only = True
        return store

    @property
    def db(self) -> rocksdict.Rdict:
        if self._db is None:
            if self._reopening:
                raise self._reopening_error()
            raise CorruptVault(f"vault {self.path} is closed")
        return self._db

    def _reopening_error(self) -> DiskFull:
        return DiskFull(f"vault {self.path.parent} is being reopened after its disk was full: try again")

    @property
    def read_only(self) -> bool:
        """Whether the database is open read-only because the disk was full when it was opened."""
        return self._read_only

    def _full(self, exc: BaseException) -> DiskFull | None:
        """DiskFull for a RocksDB status that says the disk is full (ENOSPC, or a quota: EDQUOT)."""
        if not out_of_space(str(exc)):
            return None
        return DiskFull(f"the disk holding vault {self.path.parent} is full: nothing of this write was kept and "
                        "the vault is not damaged; free some space and write again (reads go on meanwhile)")

    def _recover_from_full_disk(self) -> None:
        """Open the database again (RocksDB keeps refusing writes after ENOSPC until then), if space is
        back; DiskFull when it is not. Caller holds the vault's write lock (OpenVault.apply)."""
        stat = os.statvfs(self.path)
        if stat.f_bavail * stat.f_frsize < _SPACE_TO_REOPEN:
            raise self._full(OSError("No space left on device")) or DiskFull("disk full")
        old = self._db
        self._reopening = True
        try:
            self._views = _Reopening(self._reopening_error)
            self._handles = _Reopening(self._reopening_error)
            self._db = None
            if old is not None:
                with contextlib.suppress(Exception):  # "Writer has previous error": the failed write's
                    old.close()
                del old
            opts = storage_options(create=False)
            for attempt in range(50):  # a read in flight still holds the old database (and its lock)
                try:
                    db = rocksdict.Rdict(str(self.path), options=opts,
                                         column_families={n: opts for n in COLUMN_FAMILIES[1:]})
                    break
                except Exception as exc:
                    full = self._full(exc)
                    if full is not None:
                        self._open_for_reads(str(exc))
                        raise full from None
                    if attempt == 49 and _held_elsewhere(str(exc)):
                        # Read-only, it held no lock: another process took the vault meanwhile.
                        self._open_for_reads(str(exc))
                        raise VaultBusy(f"vault {self.path} is in use by {_describe_holder(self.path)}, which "
                                        "opened it while this process read it with the disk full; stop that "
                                        "process to write here again") from None
                    if attempt == 49:
                        raise CorruptVault(f"vault {self.path.parent} could not be opened again after "
                                                   f"its disk was full: {exc}") from None
                    gc.collect()
                    time.sleep(0.05)
            self._handles = {name: db.get_column_family_handle(name) for name in COLUMN_FAMILIES}
            self._views = {name: db.get_column_family(name) for name in COLUMN_FAMILIES}
            self._db = db
            self._disk_full = False
            self._read_only = False
            _write_holder(self.path)
            log.warning("vault %s: opened its database again after the disk was full", self.path.parent)
        finally:
            self._reopening = False

    def _open_for_reads(self, why: str) -> None:
        """The database read-only again after an open for writing found too little space (replaying the
        log needs room for a table file): reads go on, the next write tries again."""
        opts = storage_options(create=False)
        try:
            db = rocksdict.Rdict(str(self.path), options=opts, column_families={n: opts for n in COLUMN_FAMILIES[1:]},
                                 access_type=rocksdict.AccessType.read_only(False))
        except Exception as exc:  # reads are DiskFull until a write finds room to open it
            log.warning("vault %s: could not be opened read-only either (%s)", self.path.parent, exc)
            return
        self._handles = {name: db.get_column_family_handle(name) for name in COLUMN_FAMILIES}
        self._views = {name: db.get_column_family(name) for name in COLUMN_FAMILIES}
        self._db = db
        self._read_only = True
        log.warning("vault %s: too little space to open it for writing (%s): open read-only meanwhile",
                    self.path.parent, why)

    def close(self) -> None:
        if self._db is None:
            return
        db = self._db
        self._vectors.clear()
        # rocksdict holds the lock while any column-family view or handle lives: drop them all first.
        self._handles.clear()
        self._views.clear()
        self._db = None
        if not self._read_only:
            db.flush_wal(True)
        db.close()
        del db
        try:
            (self.path / _HOLDER_FILE).unlink()
        except FileNotFoundError:
            pass

    @property
    def closed(self) -> bool:
        return self._db is None

    @property
    def where(self) -> str:
        return "rocksdb"

    def commit(self, writes: WriteSet, *, durable: bool = True, tracked: bool = False,
               touched: Sequence[str] = ()) -> None:
        """Apply writes as one atomic batch. durable=False skips the WAL sync: for what can be lost on a
        power cut without anyone having been told it was kept (the query log, access counts).
        tracked=True: the caller keeps the catalog in step with these writes itself (OpenVault.apply).
        `touched` is a shared store's: here the open vault writes the change log into the batch itself."""
        if not writes.ops and not writes.ranges:
            return
        if self._disk_full:
            self._recover_from_full_disk()
        if not tracked and self.untracked_memories is not None:
            self.untracked_memories.update(key for family, key, _ in writes.ops if family == "default")
            if len(self.untracked_memories) > _UNTRACKED_LIMIT:
                self.untracked_memories = None
        batch = rocksdict.WriteBatch(raw_mode=True)
        for family, begin, end in writes.ranges:
            batch.delete_range(begin, end, self._handles[family])
        for family, key, value in writes.ops:
            handle = self._handles[family]
            if value is None:
                batch.delete(key, handle)
            else:
                batch.put(key, value, handle)
        try:
            self.db.write(batch)
        except DiskFull:
            raise
        except Exception as exc:
            full = self._full(exc)
            if full is not None:
                self._disk_full = True
                raise full from None
            raise CorruptVault(f"writing to vault {self.path.parent} failed: {exc}. "
                               f"{DOCTOR_ADVICE.format(vault=self.path.parent)}") from None
        finally:
            del batch
        self._forget_vectors(writes)
        if durable:
            self.group.written(self.db.latest_sequence_number())

    def _forget_vectors(self, writes: WriteSet) -> None:
        """Drop from get_vectors' cache what this commit wrote, and move its generation on, also with the
        cache empty: a read in flight may be about to fill it with what this commit replaced."""
        ranged = any(family == "vectors" for family, _, _ in writes.ranges)
        keys = [key for family, key, _ in writes.ops if family == "vectors"]
        if not ranged and not keys:
            return
        with self._vectors_lock:
            self._vectors_generation += 1
            if ranged or any(len(key) != 17 or key[:1] != VECTOR_PREFIX for key in keys):
                self._vectors.clear()
                return
            for key in keys:
                self._vectors.pop(id_str(key[1:]), None)

    def deferred_sync(self, *, wait: bool = True) -> contextlib.AbstractContextManager:
        """Writes inside wait for their WAL sync once, at the end (see hebbs/store/durability.py)."""
        return self.group.deferred(wait=wait)

    # What a shared store does across daemons, for the one process that holds this database ----

    def lock_writers(self) -> None:
        """Nothing to take: RocksDB's lock already keeps every other process out of the database."""

    def unlock_writers(self) -> None:
        """Nothing to release (lock_writers)."""

    def listen(self, on_change: Callable[[], object], interval: float = 1.0) -> None:
        """Nothing to listen for: no other process writes this database."""

    def agreed_meta(self, name: str, proposed: Any) -> Any:
        """The meta value `name`: `proposed` if it was not set yet (and set now), else the value set."""
        current = self.get_meta(name)
        if current is not None:
            return current
        writes = WriteSet()
        writes.put_meta(name, proposed)
        self.commit(writes)
        return proposed

    def work_claims(self, lease: float) -> None:
        """None: no indexer of another daemon shares this database's work."""
        return None

    def vector_search(self, dim: int, ef_search: int) -> None:
        """None: the open vault keeps the HNSW index of these vectors (index/vector.py)."""
        return None

    def drop_vector_index(self) -> None:
        """Nothing: the HNSW index is the open vault's, in the vault directory (workflows/reembed.py)."""

    # The write sequence and the change log (changelog.py) ------------------------------------

    def head_seq(self) -> int:
        return int(self.get_meta("write_seq", 0))

    def latest_sequence_number(self) -> int:
        """RocksDB's sequence number: moved by every write, whoever made it."""
        return self.db.latest_sequence_number()

    def touched_since(self, after: int, upto: int) -> list[str] | None:
        """The ids the change log names for batches after..upto (inclusive), oldest first, each once;
        None when it does not hold every one of those batches (pruned, or written by a version without
        the log)."""
        if upto <= after:
            return []
        expected = after + 1
        ids: dict[str, None] = {}
        start = CHANGES_PREFIX + (after + 1).to_bytes(8, "big")
        for raw_key, value in self.scan("meta", CHANGES_PREFIX, start=start):
            seq = int.from_bytes(raw_key[len(CHANGES_PREFIX):], "big")
            if seq > upto:
                break
            if seq != expected:
                return None
            expected += 1
            for offset in range(0, len(value), 16):
                ids[id_str(value[offset:offset + 16])] = None
        return list(ids) if expected == upto + 1 else None

    # Reads -----------------------------------------------------------------------------------

    def get(self, family: str, key: bytes) -> bytes | None:
        try:
            return self._views[family].get(key)
        except Exception as exc:  # a RocksDB status: corruption or I/O error
            raise self._read_error(family, exc) from None

    def _read_error(self, family: str, exc: BaseException) -> HebbsError:
        if isinstance(exc, DiskFull) or self._reopening:
            return exc if isinstance(exc, DiskFull) else self._reopening_error()
        return self._damage_error(family, exc)

    def _damage_error(self, family: str, exc: BaseException) -> CorruptVault:
        return CorruptVault(f"vault {self.path.parent} is damaged: reading its {family!r} column family failed "
                            f"({exc}). {DOCTOR_ADVICE.format(vault=self.path.parent)}")

    def get_memory(self, memory_id: str) -> Memory | None:
        raw = self.get("default", memory_key(memory_id))
        if raw is None:
            return None
        try:
            return _decode_memory(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise CorruptVault(f"memory {memory_id} in {self.path} cannot be decoded: {exc}") from None

    def get_meta(self, name: str, default: Any = None) -> Any:
        raw = self.get("meta", name.encode())
        return default if raw is None else _decode_any(raw)

    def get_meta_many(self, names: list[str]) -> list[Any]:
        """get_meta of many names in one RocksDB multi-get (None for a missing one)."""
        if not names:
            return []
        try:
            raws = self._views["meta"].get([name.encode() for name in names])
        except Exception as exc:
            raise self._read_error("meta", exc) from None
        return [None if raw is None else _decode_any(raw) for raw in raws]

    def scan(self, family: str, prefix: bytes = b"", *, reverse: bool = False,
             start: bytes | None = None, cached: bool = True) -> Iterator[tuple[bytes, bytes]]:
        """Items whose key starts with prefix, in key order (or reversed).

        RocksDB ends an iteration at a block it cannot read exactly as at the end of the data; only
        the iterator's status tells the two apart, and rocksdict's fast item iterator does not show
        it. So where a scan runs off its end, a fresh iterator is put at the same place and its
        status checked: a damaged block there fails again (a block that fails its checksum is never
        cached) and raises CorruptVault. A scan that stops at a key outside the prefix needs no check.
        (Cheaper than testing an explicit iterator at every step from Python: bench/bench_scan.py.)

        cached=False: the blocks read are not kept in the block cache, for a scan of the whole family
        that nobody reads again soon (at 1M memories, one filled the cache: 256 MB of RSS)."""
        view = self._views[family]
        options = None
        if not cached:
            options = rocksdict.ReadOptions()
            options.fill_cache(False)
        if reverse:
            # Seek past every key with this prefix: the prefix followed by 0xFF bytes sorts after them all.
            seek = start if start is not None else prefix + b"\xff" * 40
            items = view.items(backwards=True, from_key=seek, read_opt=options)
        else:
            seek = start if start is not None else prefix
            items = view.items(from_key=seek, read_opt=options)
        last: bytes | None = None
        try:
            for key, value in items:
                if not key.startswith(prefix):
                    return
                last = key
                yield key, value
        except Exception as exc:
            raise self._read_error(family, exc) from None
        finally:
            del items  # rocksdict keeps the database lock while any iterator lives
        self._check_stopped_at(family, seek, last, reverse)

    def keys(self, family: str, prefix: bytes = b"") -> Iterator[bytes]:
        """The keys that start with prefix, in key order, without their values: what a count or a trim
        needs (a third cheaper than scan's items). A damaged block ends it with CorruptVault, as scan."""
        items = self._views[family].keys(from_key=prefix)
        last: bytes | None = None
        try:
            for key in items:
                if not key.startswith(prefix):
                    return
                last = key
                yield key
        except Exception as exc:
            raise self._read_error(family, exc) from None
        finally:
            del items  # rocksdict keeps the database lock while any iterator lives
        self._check_stopped_at(family, prefix, last, False)

    def first_keys(self, family: str, n: int, start: bytes = b"") -> list[bytes]:
        """The family's first n keys from start (all of them when it holds fewer), read in one call from
        Python: a trim of the query log needs a thousand, and a Python loop over keys() doubled their
        cost. A start known to be the first key spares stepping over what range deletes left before it
        until a compaction drops it (each trim's thousand keys, so far)."""
        items = self._views[family].keys(from_key=start)
        try:
            keys = list(itertools.islice(items, n))
        except Exception as exc:
            raise self._read_error(family, exc) from None
        finally:
            del items
        if len(keys) < n:
            self._check_stopped_at(family, start, keys[-1] if keys else None, False)
        return keys

    def ends(self, family: str) -> tuple[bytes | None, bytes | None]:
        """The family's first and last keys (None, None when it is empty): two seeks."""
        it = self._views[family].iter()
        try:
            it.seek_to_first()
            first = it.key() if it.valid() else None
            it.seek_to_last()
            last = it.key() if it.valid() else None
            if first is None or last is None:
                it.status()  # an empty family, or a block that could not be read
            return first, last
        except Exception as exc:
            raise self._read_error(family, exc) from None
        finally:
            del it

    def _check_stopped_at(self, family: str, seek: bytes, last: bytes | None, reverse: bool) -> None:
        it = self._views[family].iter()
        try:
            if last is None:
                it.seek_for_prev(seek) if reverse else it.seek(seek)
            elif reverse:
                it.seek_for_prev(last)
                if it.valid():
                    it.prev()
            else:
                it.seek(last + b"\x00")  # the smallest key after last
            if not it.valid():
                it.status()
        except Exception as exc:
            raise self._read_error(family, exc) from None
        finally:
            del it

    def memories(self) -> Iterator[Memory]:
        """Every decodable record. An undecodable one is logged and skipped, never deleted: one bad
        record must not make the rest of the vault unreadable. Read past the block cache: a whole-family
        pass would fill it with blocks nobody reads again soon."""
        for key, raw in self.scan("default", MEMORY_PREFIX, cached=False):
            try:
                yield _decode_memory(raw)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                log.warning("skipping undecodable memory %s in %s: %s", id_str(key[1:]), self.path, exc)

    def get_vector(self, memory_id: str) -> bytes | None:
        return self.get("vectors", vector_key(memory_id))

    def get_memories(self, ids: list[str]) -> list[Memory | None]:
        """One RocksDB multi-get for many memories (a recall's results), in the order asked."""
        try:
            raws = self._views["default"].get([memory_key(mid) for mid in ids])
        except Exception as exc:
            raise self._read_error("default", exc) from None
        out: list[Memory | None] = []
        for memory_id, raw in zip(ids, raws):
            try:
                out.append(None if raw is None else _decode_memory(raw))
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise CorruptVault(f"memory {memory_id} in {self.path} cannot be decoded: {exc}") from None
        return out

    def get_vectors(self, ids: list[str]) -> list[bytes | None]:
        """Many stored vectors: those read before from memory (VECTOR_CACHE_MAX), the others in one
        RocksDB multi-get, far cheaper than a get per memory."""
        cache = self._vectors
        out = [cache.get(mid) for mid in ids]
        missing = [i for i, raw in enumerate(out) if raw is None]
        if not missing:
            return out
        generation = self._vectors_generation
        try:
            raws = self._views["vectors"].get([vector_key(ids[i]) for i in missing])
        except Exception as exc:
            raise self._read_error("vectors", exc) from None
        for i, raw in zip(missing, raws):
            out[i] = raw
        with self._vectors_lock:
            if generation == self._vectors_generation:  # no commit wrote vectors meanwhile
                if len(cache) + len(missing) > VECTOR_CACHE_MAX:
                    cache.clear()
                cache.update((ids[i], raw) for i, raw in zip(missing, raws) if raw is not None)
        return out

    def vectors(self) -> Iterator[tuple[str, bytes]]:
        for key, raw in self.scan("vectors", VECTOR_PREFIX, cached=False):
            yield id_str(key[1:]), raw

    def edges_from(self, memory_id: str) -> Iterator[tuple[EdgeType, str, float, int]]:
        """Outgoing edges: (type, target, confidence, created_at)."""
        prefix = GRAPH_FORWARD + id_bytes(memory_id)
        for key, raw in self.scan("graph", prefix):
            confidence, created_at = parse_edge_value(raw)
            yield EdgeType(key[17]), id_str(key[18:34]), confidence, created_at

    def edges_to(self, memory_id: str) -> Iterator[tuple[EdgeType, str, float, int]]:
        """Incoming edges: (type, source, confidence, created_at)."""
        prefix = GRAPH_REVERSE + id_bytes(memory_id)
        for key, raw in self.scan("graph", prefix):
            confidence, created_at = parse_edge_value(raw)
            yield EdgeType(key[17]), id_str(key[18:34]), confidence, created_at

    def count(self, family: str, prefix: bytes = b"") -> int:
        return sum(1 for _ in self.keys(family, prefix))


def decode_memory(raw: bytes) -> Memory:
    return _decode_memory(raw)


def encode(value: Any) -> bytes:
    return _encode(value)


def decode(raw: bytes, type_: Any = None) -> Any:
    return decoder("msgpack", type_).decode(raw) if type_ is not None else _decode_any(raw)


def _held_elsewhere(text: str) -> bool:
    """Whether a RocksDB open failed on the database's lock: "While lock file: .../LOCK" or "lock hold by
    current process"; a word of its own: "block checksum mismatch" is damage, and called the vault busy
    it sent users away."""
    return bool(re.search(r"\block\b", text, re.IGNORECASE)) and "No such file" not in text


def out_of_space(text: str) -> bool:
    """Whether a RocksDB status or OS error says the disk is full (ENOSPC, or a quota: EDQUOT)."""
    return "No space left on device" in text or "Disk quota exceeded" in text


# Free space a database needs to be opened again after a full disk (a new WAL, OPTIONS, LOG lines).
_SPACE_TO_REOPEN = 1 << 20


class _Reopening:
    """Stands in for the views and handles while the database is opened again: every use is DiskFull."""

    def __init__(self, error: Any) -> None:
        self._error = error

    def __getitem__(self, family: str) -> Any:
        raise self._error()


DOCTOR_ADVICE = ("Run `hebbs doctor --vault {vault}` to check every file and see what is readable, and "
                 "`hebbs doctor --vault {vault} --export FILE` to save it.")


def missing_database_message(db_path: Path, marker: Path) -> str:
    return (f"the database of vault {db_path.parent} is missing: {db_path} has no RocksDB database, but {marker} "
            "shows the vault had one. Restore db/ from a backup (or put it back if it was moved); to start this "
            f"vault over with no memories, delete {marker}.")


def _write_marker(marker: Path) -> None:
    created = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    atomic_write(marker, json.dumps({"format": 1, "database": "db", "created": created}).encode())


def _write_holder(path: Path) -> None:
    """Record who holds the vault so that a second opener can name them."""
    holder = {"pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(_cmdline())}
    # Only a hint for the message of a second opener (the lock itself is RocksDB's): a power cut may
    # lose it, and a full disk may have no room for it.
    try:
        atomic_write(path / _HOLDER_FILE, json.dumps(holder).encode(), durable=False)
    except OSError as exc:
        log.warning("could not record the holder of %s (%s)", path, exc)


def _describe_holder(path: Path) -> str:
    try:
        holder = json.loads((path / _HOLDER_FILE).read_text())
        return f"process {holder['pid']} on {holder['host']} ({holder['command'][:120]})"
    except (OSError, ValueError, KeyError):
        return "another process"


def _cmdline() -> list[str]:
    try:
        return Path("/proc/self/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return ["?"]
