"""What every record store and every vector search must offer: the contracts the layers above rely on.

A vault's records live in a `RecordStore`: the embedded RocksDB database (storage.Store) or a vault in
PostgreSQL shared by several daemons (postgres.PgStore). Its similarity search is a `VectorSearch`:
this daemon's HNSW index (index/vector.py) or pgvector's, inside the store (postgres.PgVectorIndex).

The layers above call nothing else on them, and never ask which backend they hold: what differs is
declared here as a capability (`RecordStore.shared`, `RecordStore.vector_search`, `RecordStore.work_claims`,
`VectorSearch.remote`). mypy holds both backends to these Protocols (hebbs/core/_conformance.py,
[tool.mypy] in pyproject.toml, tests/test_contracts.py); docs/architecture.md, "Adding a store
backend", is the checklist for a new one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from ..schema import EdgeType, Memory
from .durability import GroupCommit
from .storage import WriteSet


Id = TypeVar("Id", str, bytes)


def settle_ties(search: Callable[[int], list[tuple[Id, float]]], k: int) -> list[tuple[Id, float]]:
    """The k best of `search(n)` (its n best hits, best first), hits of equal score in id order.

    An index orders equal scores by where it holds them (tantivy by document address, hnswlib by
    label), which is the order they were written in: a vault's own, and another order once its indexes
    are rebuilt from the store in key order (a migration, another daemon of a vault in PostgreSQL). So
    the search is asked one hit deeper, and deeper again while the last hit still ties with the k-th:
    which of the tied hits make the cut is then decided by id, the same on every store. Ids sort the
    same as text and as their 16 bytes (ULIDs)."""
    if k <= 0:
        return []
    ask = k + 1
    while True:
        hits = search(ask)
        if len(hits) < ask or hits[-1][1] != hits[k - 1][1]:
            return sorted(hits, key=lambda hit: (-hit[1], hit[0]))[:k]
        ask *= 2


class VectorSearch(Protocol):
    """The nearest memories to a vector, over the vault's stored vectors."""

    # Capability. True: the vectors are searched where the store keeps them (pgvector): nothing is held
    # here, so adding, removing and saving do nothing and the index is never checkpointed.
    remote: bool

    def __len__(self) -> int: ...

    def search(self, vector: np.ndarray, k: int, *, ef: int | None = None) -> list[tuple[str, float]]:
        """The k nearest memories as (id, cosine similarity), most similar first, equal similarities by id
        (settle_ties); ef: the search's breadth."""
        ...

    def ids_by_label(self) -> dict[int, str]:
        """Every indexed memory id, under a distinct integer label."""
        ...

    def vectors(self, ids: list[str]) -> np.ndarray:
        """The indexed vectors of these memories, one row each; zeros for one not indexed."""
        ...

    def add(self, ids: list[str], vectors: np.ndarray) -> None: ...

    def remove(self, ids: list[str]) -> None: ...

    def sync(self, ids: list[str], stored: Callable[[list[str]], list[bytes | None]]) -> None:
        """Bring these memories to what the store holds now (`stored` reads their stored vectors)."""
        ...

    def save(self, directory: Path, write_seq: int) -> None:
        """A checkpoint as of write_seq in directory (nothing for a remote index)."""
        ...


class Claims(Protocol):
    """Units of work (a note file at one version) that several indexers of one shared vault split among
    themselves (postgres.WorkClaims)."""

    def register(self, units: list[tuple[str, str]]) -> None: ...

    def take(self, units: list[tuple[str, str]], limit: int) -> list[tuple[str, str, int]]: ...

    def finish(self, units: list[tuple[str, str]]) -> None: ...

    def unfinished(self, units: list[tuple[str, str]]) -> list[tuple[str, str]]: ...

    def close(self) -> None: ...


class RecordStore(Protocol):
    """A vault's records: column families of keys and values (storage.py's key layouts), written in
    atomic batches (WriteSet), read by key, by prefix scan and by multi-get."""

    # Capability. True: several daemons share the store. Each keeps its own catalog and indexes and
    # catches them up from the store's change log (touched_since) when `listen` wakes it; writers
    # take lock_writers; the write sequence is the store's (commit returns it).
    shared: bool

    # Capability. True: opened read-only because its disk was full when it was opened (RocksDB): reads
    # are served, writes answer DiskFull until space returns, and nothing derived is written meanwhile.
    @property
    def read_only(self) -> bool: ...

    # Local directory the store's messages name the vault by (a RocksDB store's own files live there).
    path: Path
    # Durability of commits (durability.py): what deferred_sync and wait_durable wait on.
    group: GroupCommit
    # Memory records written by commits that did not say tracked=True, for the catalog saved at close;
    # None: not tracked (too many, or a store whose change log names every write).
    untracked_memories: set[bytes] | None

    @property
    def closed(self) -> bool: ...

    @property
    def where(self) -> str:
        """Where the vault lives, for status and the panel (no secret)."""
        ...

    def close(self) -> None: ...

    # Writing

    def commit(self, writes: WriteSet, *, durable: bool = True, tracked: bool = False,
               touched: Sequence[str] = ()) -> int | None:
        """Apply writes as one atomic batch. durable=False: not waited for. tracked=True: the caller keeps
        the catalog in step itself. touched: memory ids a shared store's change log must name. Returns
        the new write sequence of a shared store when the batch moved it, else None."""
        ...

    def deferred_sync(self, *, wait: bool = True) -> contextlib.AbstractContextManager[Any]:
        """Writes inside wait for durability once, at the end."""
        ...

    def lock_writers(self) -> None:
        """Take the writer lock shared with the other daemons of the store (nothing to take for one
        that a single process holds)."""
        ...

    def unlock_writers(self) -> None: ...

    def agreed_meta(self, name: str, proposed: Any) -> Any:
        """The meta value `name`: `proposed` if nobody set it yet, else what was set first."""
        ...

    # The write sequence and the change log

    def head_seq(self) -> int:
        """The vault's newest write sequence (meta "write_seq", bumped by every index-changing batch)."""
        ...

    def touched_since(self, after: int, upto: int) -> list[str] | None:
        """The ids touched by batches after..upto, oldest first, each once; None when the change log
        does not reach back that far (the caller rebuilds)."""
        ...

    def latest_sequence_number(self) -> int:
        """The number of the newest write of any kind: what the catalog saved at close is stamped with."""
        ...

    def listen(self, on_change: Callable[[], object], interval: float = 1.0) -> None:
        """Call on_change after other daemons' commits (never, for a store no other daemon writes)."""
        ...

    # Reading

    def get(self, family: str, key: bytes) -> bytes | None: ...

    def get_memory(self, memory_id: str) -> Memory | None: ...

    def get_memories(self, ids: list[str]) -> list[Memory | None]: ...

    def get_meta(self, name: str, default: Any = None) -> Any: ...

    def get_meta_many(self, names: list[str]) -> list[Any]:
        """get_meta of many names in one read (None for a missing one)."""
        ...

    def get_vector(self, memory_id: str) -> bytes | None: ...

    def get_vectors(self, ids: list[str]) -> list[bytes | None]: ...

    def scan(self, family: str, prefix: bytes = b"", *, reverse: bool = False,
             start: bytes | None = None, cached: bool = True) -> Iterator[tuple[bytes, bytes]]: ...

    def first_keys(self, family: str, n: int, start: bytes = b"") -> list[bytes]: ...

    def ends(self, family: str) -> tuple[bytes | None, bytes | None]:
        """The family's first and last keys (None, None when it is empty)."""
        ...

    def count(self, family: str, prefix: bytes = b"") -> int: ...

    def memories(self) -> Iterator[Memory]: ...

    def vectors(self) -> Iterator[tuple[str, bytes]]: ...

    def edges_from(self, memory_id: str) -> Iterator[tuple[EdgeType, str, float, int]]: ...

    def edges_to(self, memory_id: str) -> Iterator[tuple[EdgeType, str, float, int]]: ...

    # Capabilities a backend may not have

    def vector_search(self, dim: int, ef_search: int) -> VectorSearch | None:
        """The store's own similarity search over its vectors (pgvector); None: the daemon keeps an HNSW index."""
        ...

    def work_claims(self, lease: float) -> Claims | None:
        """Work claims shared by the indexers of every daemon on this store; None: no other indexer shares it."""
        ...

    def drop_vector_index(self) -> None:
        """Drop the store's own index over the vault's vectors (pgvector's, built for one dimension), before
        the vault moves to a model of another; vector_search builds it again. Nothing for a store without one."""
        ...
