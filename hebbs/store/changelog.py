"""Which memories each index-changing batch touched, so derived indexes catch up without a rebuild.

Every batch that changes an index (a vector added, updated or removed, a memory re-tokenized or
forgotten) bumps the vault's write sequence and, in the same RocksDB batch, records the ids it
touched under that sequence number in the `meta` family:

    meta:  b"changes/" + write_seq (u64 BE)  ->  the touched memory ids, 16 bytes each, concatenated

The HNSW checkpoint and the lexical index each know the write sequence they reflect. On open, an
index that is behind re-reads only the touched ids from RocksDB (the source of truth) and brings
each one to its current state: present, updated or gone. The entries are idempotent (an id is
synced to what RocksDB holds now, not to what the batch did), so replaying one twice is harmless.
Entries every index has caught up with are pruned at each checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable

from .contract import RecordStore
from .storage import CHANGES_PREFIX as PREFIX
from .storage import WriteSet, id_bytes


def key(seq: int) -> bytes:
    return PREFIX + seq.to_bytes(8, "big")


def record(writes: WriteSet, seq: int, ids: Iterable[str]) -> None:
    """Add the entry for batch `seq` to the batch itself, so it commits or vanishes with it."""
    writes.put("meta", key(seq), b"".join(id_bytes(mid) for mid in dict.fromkeys(ids)))


def touched_since(store: RecordStore, after: int, upto: int) -> list[str] | None:
    """The ids touched by batches after..upto (inclusive), oldest first, each once; None when the log
    does not hold every one of those batches (pruned, or written by a version without the log): the
    caller must then rebuild from scratch. Each store reads its own log (a vault in PostgreSQL: its
    hebbs.changes table)."""
    return store.touched_since(after, upto)


def prune(store: RecordStore, upto: int) -> None:
    """Drop the entries of batches up to `upto`: every index has them."""
    writes = WriteSet()
    for raw_key, _ in store.scan("meta", PREFIX):
        if int.from_bytes(raw_key[len(PREFIX):], "big") > upto:
            break
        writes.delete("meta", raw_key)
    # Not waited for: losing a prune on a power cut only leaves entries that are replayed harmlessly.
    store.commit(writes, durable=False)
