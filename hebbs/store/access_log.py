"""Each memory's recent accesses: when it was used, returned by a recall that counted as use, or opened
in the Memory Palace, newest first.

A memory's `access_count` and `last_accessed_at` say how much and how lately it was used; this log
says when, and how. It is written in the very batch that reinforces the memory (so the log and the
count never disagree after a crash) and bounded: the newest `KEEP` accesses per memory.

Layout, in the meta family (no family of its own: the eight are fixed):
    "access/" + memory id (26-character ULID, UTF-8)  ->  msgpack [[at_us, via], ...], oldest first
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from ..errors import InvalidInput
from ..schema import Access
from .contract import RecordStore
from .storage import WriteSet

KEEP = 50
PREFIX = "access/"
# How a memory was accessed: `hebbs used` / reinforce(), a recall with reinforce=True, a page of the panel.
USED, RECALL, PANEL = "used", "recall", "panel"
VIA = (USED, RECALL, PANEL)
# What a caller of reinforce() may name (a recall's accesses are logged by the recall itself).
REINFORCE_VIA = (USED, PANEL)

_decode = msgspec.msgpack.Decoder(list[tuple[int, str]]).decode


def check_via(value: str) -> str:
    if value not in REINFORCE_VIA:
        raise InvalidInput(f"via must be one of {', '.join(REINFORCE_VIA)}, got {value!r}")
    return value


def _key(memory_id: str) -> str:
    return PREFIX + memory_id


def _entries(store: RecordStore, memory_id: str) -> list[tuple[int, str]]:
    raw = store.get("meta", _key(memory_id).encode())
    if raw is None:
        return []
    try:
        return _decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return []  # a damaged log is history lost, never a memory that cannot be used


def record(store: RecordStore, writes: WriteSet, memory_ids: Iterable[str], at_us: int, via: str) -> None:
    """Log one access of each memory into `writes`, dropping the oldest beyond KEEP.

    Call it under the vault's write lock, with each id once per batch: it reads the stored log and
    writes it back whole."""
    if via not in VIA:
        raise ValueError(f"unknown access kind {via!r}")
    for memory_id in dict.fromkeys(memory_ids):
        entries = _entries(store, memory_id)
        entries.append((at_us, via))
        writes.put_meta(_key(memory_id), entries[-KEEP:])


def read(store: RecordStore, memory_id: str, limit: int = KEEP) -> list[Access]:
    """The memory's logged accesses, newest first."""
    return [Access(at=at, via=via) for at, via in reversed(_entries(store, memory_id)[-limit:])]


def drop(writes: WriteSet, memory_id: str) -> None:
    """Forget a memory's log in the batch that forgets the memory."""
    writes.delete("meta", _key(memory_id).encode())
