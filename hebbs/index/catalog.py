"""The in-memory catalog: what recall filters and the composite score need about every memory, so
that ranking a few hundred candidates never touches disk (only the final top_k records are read).

Columnar, not one Python object per memory: the numbers live in one numpy structured array, the
few strings (entity, superseded_by, context type, file, author, agent, session) in lists where most
slots hold None or a shared (interned) string. A memory costs about 85 bytes here plus its id in the id -> row map,
where an object per memory cost about 400 and had to be built one by one at every open.

At a clean close the catalog is written to a file stamped with RocksDB's last sequence number; the
next open uses that file only if the database still ends at that very number (no write of any kind
since, by any writer), and otherwise rebuilds the catalog by scanning the `default` family.
"""

from __future__ import annotations

import logging
import sys
from itertools import repeat
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import xxhash

from ..fsutil import atomic_write
from ..schema import Memory, MemoryKind, Origin, decoder
from ..store.contract import RecordStore
from ..store.storage import MEMORY_PREFIX, id_str

log = logging.getLogger("hebbs.store")

_FILE = "catalog.bin"
_ID_CHARS = 26
_KINDS = tuple(MemoryKind)
_KIND_CODE = {kind: code for code, kind in enumerate(_KINDS)}
_REVISION = _KIND_CODE[MemoryKind.REVISION]
# created_at is unsigned like the temporal keys: a stored time may reach 2**64 - 1 (test_storage_values).
_NUMBERS = np.dtype([("created_at", "<u8"), ("importance", "<f8"), ("access_count", "<i8"), ("kind", "<i1"),
                     ("words", "<i4")])
_DIGEST = 16


class CatalogEntry:
    """One memory's catalog fields, built on demand from the columns (a copy: changing it changes nothing)."""

    __slots__ = ("entity_id", "created_at", "superseded_by", "kind", "importance", "access_count", "context_type",
                 "file", "words", "author", "agent", "session")

    entity_id: str | None
    created_at: int
    superseded_by: str | None
    kind: MemoryKind
    importance: float
    access_count: int
    context_type: str | None
    file: str | None
    words: int
    author: str | None
    agent: str | None
    session: str | None


class _SourceFile(msgspec.Struct):
    file_path: str


class _Fields(msgspec.Struct, kw_only=True):
    """The catalog's part of a stored Memory (same field names and defaults): decoding only these
    skips the rest of each record when the catalog is read back from RocksDB."""

    id: str
    content: str
    importance: float = 0.5
    context: dict[str, Any] = {}
    entity_id: str | None = None
    created_at: int = 0
    access_count: int = 0
    kind: MemoryKind = MemoryKind.EPISODE
    source: _SourceFile | None = None
    superseded_by: str | None = None
    author: str | None = None
    agent: str | None = None
    session: str | None = None


_decode_fields = msgspec.msgpack.Decoder(_Fields).decode


class _Snapshot(msgspec.Struct, array_like=True):
    db_seq: int
    ids: list[str]
    numbers: bytes
    superseded_by: list[str | None]
    # Entity, context type and file repeat across memories: each is stored as its distinct values
    # plus one int32 code per memory (index into them), decoded without a Python loop.
    entity_values: list[str | None]
    entity_codes: bytes
    context_type_values: list[str | None]
    context_type_codes: bytes
    file_values: list[str | None]
    file_codes: bytes
    # Who stored each memory (Origin's fields), coded the same way. Required: a snapshot saved before
    # they existed fails to decode, and the catalog is rebuilt from the records, which hold them.
    author_values: list[str | None]
    author_codes: bytes
    agent_values: list[str | None]
    agent_codes: bytes
    session_values: list[str | None]
    session_codes: bytes


def _intern(value: str | None) -> str | None:
    return None if value is None else sys.intern(value)


def _encode_column(column: list[str | None]) -> tuple[list[str | None], bytes]:
    codes: dict[str | None, int] = {None: 0}
    out = np.fromiter((codes.setdefault(v, len(codes)) for v in column), dtype="<i4", count=len(column))
    return list(codes), out.tobytes()


def _decode_column(values: list[str | None], codes: bytes, n: int) -> list[str | None] | None:
    array = np.frombuffer(codes, dtype="<i4")
    if len(array) != n or (n and (array.min() < 0 or array.max() >= len(values))):
        return None
    interned = np.array([_intern(v) for v in values] or [None], dtype=object)
    return interned[array].tolist()


class _Columns:
    """One generation of the columns. Compaction builds a new one and swaps it in whole, so a reader
    that took a generation finds its rows where its map says they are."""

    __slots__ = ("row", "ids", "numbers", "entity_id", "superseded_by", "context_type", "file", "author", "agent",
                 "session")

    def __init__(self, ids: list[str | None], numbers: np.ndarray, entity_id: list[str | None],
                 superseded_by: list[str | None], context_type: list[str | None], file: list[str | None],
                 origin: tuple[list[str | None], list[str | None], list[str | None]] | None = None) -> None:
        self.numbers = np.zeros(max(1024, len(ids) + len(ids) // 8), dtype=_NUMBERS)
        self.numbers[:len(ids)] = numbers
        self.ids = ids
        self.entity_id, self.superseded_by, self.context_type, self.file = entity_id, superseded_by, context_type, file
        self.author, self.agent, self.session = origin or ([None] * len(ids), [None] * len(ids), [None] * len(ids))
        self.row: dict[str, int] = dict(zip(ids, range(len(ids))))  # type: ignore[arg-type]
        self.row.pop(None, None)  # type: ignore[call-overload]

    def rows_of(self, ids: list[str]) -> list[int]:
        """The row of each id, -1 for an unknown one."""
        return list(map(self.row.get, ids, repeat(-1)))

    def entry(self, row: int) -> CatalogEntry:
        entry = CatalogEntry()
        entry.created_at, entry.importance, entry.access_count, kind, entry.words = self.numbers[row].item()
        entry.kind = _KINDS[kind]
        entry.entity_id = self.entity_id[row]
        entry.superseded_by = self.superseded_by[row]
        entry.context_type = self.context_type[row]
        entry.file = self.file[row]
        entry.author, entry.agent, entry.session = self.author[row], self.agent[row], self.session[row]
        return entry


class Catalog:
    """Writers are serialized by the vault's write lock; readers may run beside one writer and see a
    memory's old fields or its new ones."""

    def __init__(self) -> None:
        self._cols = _Columns([], np.zeros(0, dtype=_NUMBERS), [], [], [], [])

    def __len__(self) -> int:
        return len(self._cols.row)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._cols.row

    # Writing ---------------------------------------------------------------------------------

    def put(self, memory: Memory) -> None:
        cols = self._cols
        row = cols.row.get(memory.id)
        if row is None:
            row = len(cols.ids)
            if row == len(cols.numbers):
                # Grown in place of the old array: a reader holding the old one still finds every row it knows.
                cols.numbers = np.concatenate([cols.numbers, np.zeros(len(cols.numbers), dtype=_NUMBERS)])
            cols.ids.append(memory.id)
            cols.entity_id.append(None)
            cols.superseded_by.append(None)
            cols.context_type.append(None)
            cols.file.append(None)
            cols.author.append(None)
            cols.agent.append(None)
            cols.session.append(None)
        context_type = memory.context.get("type")  # its decay half-life is its recency window (recall/scoring.py)
        cols.entity_id[row] = _intern(memory.entity_id)
        cols.superseded_by[row] = memory.superseded_by
        cols.context_type[row] = _intern(context_type) if isinstance(context_type, str) else None
        cols.file[row] = _intern(memory.source.file_path) if memory.source is not None else None
        cols.author[row], cols.agent[row], cols.session[row] = (_intern(memory.author), _intern(memory.agent),
                                                                _intern(memory.session))
        # fusion weighs long memories differently (fusion.lexical_weight_for)
        cols.numbers[row] = (memory.created_at, memory.importance, memory.access_count, _KIND_CODE[memory.kind],
                             len(memory.content.split()))
        cols.row[memory.id] = row  # last: a reader never finds a row still being filled

    def remove(self, memory_id: str) -> None:
        cols = self._cols
        row = cols.row.pop(memory_id, None)
        if row is None:
            return
        cols.ids[row] = None
        dead = len(cols.ids) - len(cols.row)
        if dead > 1024 and dead > len(cols.row):
            self._compact()

    def _compact(self) -> None:
        cols = self._cols
        live = [row for row, memory_id in enumerate(cols.ids) if memory_id is not None]
        if len(live) == len(cols.ids):
            return
        self._cols = _Columns([cols.ids[r] for r in live], cols.numbers[live], [cols.entity_id[r] for r in live],
                              [cols.superseded_by[r] for r in live], [cols.context_type[r] for r in live],
                              [cols.file[r] for r in live], ([cols.author[r] for r in live],
                                                             [cols.agent[r] for r in live],
                                                             [cols.session[r] for r in live]))

    # Reading ---------------------------------------------------------------------------------

    def get(self, memory_id: str) -> CatalogEntry | None:
        cols = self._cols
        row = cols.row.get(memory_id)
        return None if row is None else cols.entry(row)

    def ranking_fields(self, ids: list[str]) -> list[tuple[int, float, int, str | None] | None]:
        """(created_at, importance, access_count, context_type) of each memory, None for an unknown id:
        what the composite score reads, without building an entry per candidate."""
        cols = self._cols
        rows = cols.rows_of(ids)
        if not rows:
            return []
        numbers = cols.numbers[[max(row, 0) for row in rows]][["created_at", "importance", "access_count"]].tolist()
        context_type = cols.context_type
        return [None if row < 0 else (*fields, context_type[row]) for row, fields in zip(rows, numbers)]

    def files_of(self, ids: list[str]) -> list[str | None]:
        """The source file of each memory (None for one without, or an unknown id)."""
        cols = self._cols
        file = cols.file
        return [None if row < 0 else file[row] for row in cols.rows_of(ids)]

    def words_of(self, ids: list[str]) -> list[int | None]:
        """The length in words of each memory (None for an unknown id)."""
        cols = self._cols
        rows = cols.rows_of(ids)
        if not rows:
            return []
        words = cols.numbers["words"][[max(row, 0) for row in rows]].tolist()
        return [None if row < 0 else count for row, count in zip(rows, words)]

    def in_scope(self, ids: list[str], entity_id: str | None, window: tuple[int, int] | None,
                 include_superseded: bool, origin: Origin | None = None) -> list[bool]:
        """For each id, whether recall may return it: a known memory, not a revision, not superseded
        (unless include_superseded), of this entity, created within this window and stored by this
        author, agent and session (each when given). One vectorized pass over the columns instead of
        an entry per candidate."""
        if not ids:
            return []
        cols = self._cols
        row_list = cols.rows_of(ids)
        rows = np.array(row_list, dtype=np.int64)
        numbers = cols.numbers[np.maximum(rows, 0)]
        keep = (rows >= 0) & (numbers["kind"] != _REVISION)
        if window is not None:
            created = numbers["created_at"]
            keep &= (created >= window[0]) & (created <= window[1])
        out = keep.tolist()
        if origin is not None and origin.narrowed:
            for wanted, column in ((origin.author, cols.author), (origin.agent, cols.agent),
                                   (origin.session, cols.session)):
                if wanted is not None:
                    out = [ok and column[row] == wanted for ok, row in zip(out, row_list)]
        if include_superseded and entity_id is None:
            return out
        superseded, entities = cols.superseded_by, cols.entity_id
        if entity_id is None:
            return [ok and superseded[row] is None for ok, row in zip(out, row_list)]
        return [ok and (include_superseded or superseded[row] is None) and entities[row] == entity_id
                for ok, row in zip(out, row_list)]

    def created_within(self, window: tuple[int, int], at_most: int) -> list[str] | None:
        """The ids of the memories created within `window` (any kind, superseded or not), or None when
        more than `at_most` are: one vectorized pass over the creation times, so that a search
        narrowed to a time with few memories can score just those (OpenVault.similar)."""
        cols = self._cols
        ids = cols.ids
        created = cols.numbers["created_at"][:len(ids)]
        rows = np.flatnonzero((created >= window[0]) & (created <= window[1]))
        if len(rows) > at_most:
            return None
        return [memory_id for memory_id in map(ids.__getitem__, rows.tolist()) if memory_id is not None]

    def items(self) -> list[tuple[str, CatalogEntry]]:
        """Every memory with its fields: a snapshot, safe to iterate while writers change the catalog."""
        cols = self._cols
        return [(memory_id, cols.entry(row)) for memory_id, row in list(cols.row.items())]

    @classmethod
    def from_store(cls, store: RecordStore) -> "Catalog":
        """Read the catalog back from the `default` family (no saved catalog, or a stale one). Built
        column by column in one pass: a put per memory took twice as long."""
        ids: list[str] = []
        numbers: list[tuple[int, float, int, int, int]] = []
        entity_id: list[str | None] = []
        superseded_by: list[str | None] = []
        context_type: list[str | None] = []
        file: list[str | None] = []
        origin: tuple[list[str | None], list[str | None], list[str | None]] = ([], [], [])
        for key, raw in store.scan("default", MEMORY_PREFIX, cached=False):
            try:
                m = _decode_fields(raw)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                # Like Store.memories: one bad record must not make the rest of the vault unreadable.
                log.warning("skipping undecodable memory %s in %s: %s", id_str(key[1:]), store.path, exc)
                continue
            ids.append(m.id)
            numbers.append((m.created_at, m.importance, m.access_count, _KIND_CODE[m.kind], len(m.content.split())))
            entity_id.append(_intern(m.entity_id))
            superseded_by.append(m.superseded_by)
            kind = m.context.get("type")
            context_type.append(_intern(kind) if isinstance(kind, str) else None)
            file.append(_intern(m.source.file_path) if m.source is not None else None)
            origin[0].append(_intern(m.author))
            origin[1].append(_intern(m.agent))
            origin[2].append(_intern(m.session))
        catalog = cls()
        catalog._cols = _Columns(ids, np.array(numbers, dtype=_NUMBERS) if numbers else np.zeros(0, dtype=_NUMBERS),
                                 entity_id, superseded_by, context_type, file, origin)  # type: ignore[arg-type]
        return catalog

    def refresh(self, store: RecordStore, keys: set[bytes]) -> None:
        """Bring these memories (keys of the `default` family) to what RocksDB holds now."""
        for key in list(keys):
            raw = store.get("default", key)
            memory_id = id_str(key[len(MEMORY_PREFIX):])
            if raw is None:
                self.remove(memory_id)
                continue
            try:
                self.put(decoder("msgpack", Memory).decode(raw))
            except (msgspec.DecodeError, msgspec.ValidationError):
                self.remove(memory_id)

    # Persisting ------------------------------------------------------------------------------

    def save(self, directory: Path, db_seq: int) -> None:
        """Write the catalog as of RocksDB sequence db_seq (no writer may run meanwhile)."""
        self._compact()
        cols = self._cols
        n = len(cols.ids)
        entity = _encode_column(cols.entity_id)
        context_type = _encode_column(cols.context_type)
        file = _encode_column(cols.file)
        origin = [part for column in (cols.author, cols.agent, cols.session) for part in _encode_column(column)]
        payload = msgspec.msgpack.encode(_Snapshot(db_seq, cols.ids, cols.numbers[:n].tobytes(),  # type: ignore[arg-type]
                                                   cols.superseded_by, *entity, *context_type, *file, *origin))
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(directory / _FILE, xxhash.xxh3_128_digest(payload) + payload)

    @classmethod
    def load(cls, directory: Path, db_seq: int) -> "Catalog | None":
        """The saved catalog if it was written at exactly this RocksDB sequence and is intact."""
        loaded = cls.load_stamped(directory)
        return loaded[0] if loaded is not None and loaded[1] == db_seq else None

    @classmethod
    def load_stamped(cls, directory: Path) -> "tuple[Catalog, int] | None":
        """The saved catalog, if intact, with the sequence it was saved at."""
        try:
            raw = (directory / _FILE).read_bytes()
        except OSError:
            return None
        payload = memoryview(raw)[_DIGEST:]
        if xxhash.xxh3_128_digest(payload) != raw[:_DIGEST]:
            return None
        try:
            snapshot = decoder("msgpack", _Snapshot).decode(payload)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        n = len(snapshot.ids)
        if len(snapshot.numbers) != n * _NUMBERS.itemsize \
                or len(snapshot.superseded_by) != n:
            return None
        entity = _decode_column(snapshot.entity_values, snapshot.entity_codes, n)
        context_type = _decode_column(snapshot.context_type_values, snapshot.context_type_codes, n)
        file = _decode_column(snapshot.file_values, snapshot.file_codes, n)
        author = _decode_column(snapshot.author_values, snapshot.author_codes, n)
        agent = _decode_column(snapshot.agent_values, snapshot.agent_codes, n)
        session = _decode_column(snapshot.session_values, snapshot.session_codes, n)
        if entity is None or context_type is None or file is None or author is None or agent is None \
                or session is None:
            return None
        catalog = cls()
        catalog._cols = _Columns(snapshot.ids, np.frombuffer(snapshot.numbers, dtype=_NUMBERS), entity,  # type: ignore[arg-type]
                                 snapshot.superseded_by, context_type, file, (author, agent, session))
        return catalog, snapshot.db_seq
