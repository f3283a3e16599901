"""Use: what an agent (or a person in the panel) actually used is reinforced, and memories used
together are linked (workflows/associate.py). Recall itself only logs the query, and reinforces what
it returned only when the caller asks (docs/honesty.md)."""

from __future__ import annotations

import bisect
import logging
import os
import time
import weakref
from collections.abc import Sequence

from .. import validate
from ..errors import DiskFull, InvalidInput, NotFound
from ..recall.pipeline import Request
from ..schema import Access, Memory, MemoryKind, QueryLogEntry, RecallResult
from ..store import access_log
from ..core.open_vault import OpenVault, now_us
from ..store.storage import WriteSet, decode, encode
from . import associate, decay

log = logging.getLogger("hebbs.reinforce")

# The query log is trimmed to config recall.query_log_keep / query_log_days every so many appends (a
# tenth of what it keeps, at most TRIM_EVERY), in a batch of its own: the entries a trim deletes are
# about those appended since the last one, and a log passes its bound by that many at most. A trim
# reads the keys it deletes and deletes them as one range from the log's first key: a delete per key
# made the trimming recall pay for every entry (bench/bench_query_log.py); reading a
# hundred keys costs it a tenth of a thousand.
TRIM_EVERY = 100
# At most this many entries deleted by one trim: a log grown large before it was bounded is brought
# down over several trims, not in one long stall of the recall that finds it.
TRIM_MAX = 5000
# The log's entry count, with its first and last keys, in the meta family, written in the batch of every
# append and every trim: RocksDB applies a batch whole or not at all, so after any crash the count is
# the log's, and the first recall after an open reads it instead of counting the log, which grows
# with the log. It is trusted only while the log's first and last keys are the ones it names: a
# log written by a version before it, or changed beside it, is counted again, once.
COUNT_META = "query_log_count"
_log_state: "weakref.WeakKeyDictionary[OpenVault, _LogState]" = weakref.WeakKeyDictionary()


class _LogState:
    """One open vault's query log count (None on a vault shared by several daemons, whose others append
    too: counted at each trim there) and its first and last keys; changed under the append lock."""

    __slots__ = ("entries", "first", "last", "until_trim")

    def __init__(self, entries: int | None, first: bytes | None, last: bytes | None) -> None:
        self.entries, self.first, self.last = entries, first, last
        # The first append after an open trims: entries may have aged past query_log_days meanwhile.
        self.until_trim = 1


def reinforce(vault: OpenVault, ids: Sequence[str] | str, via: str = access_log.USED) -> list[Memory]:
    """Count these memories as used: access_count + 1 and last access now, which raises their
    reinforcement score and slows their decay; used together, they are linked. `via` names the use in
    their access log ("used", or "panel": a person opened it). NotFound if an id does not exist; an
    id named twice counts once."""
    if isinstance(ids, str):
        ids = [ids]
    wanted = list(dict.fromkeys(validate.memory_id(i) for i in ids))
    if not wanted:
        raise InvalidInput("reinforce needs at least one memory id")
    access_log.check_via(via)
    with vault.writing():
        for mid in wanted:
            entry = vault.entry(mid)
            if entry is None or entry.kind == MemoryKind.REVISION:
                raise NotFound(f"memory {mid} does not exist" if entry is None
                               else f"memory {mid} is a revision record; reinforce the memory it belongs to")
        writes = WriteSet()
        stamp = now_us()
        used = _count_use(vault, writes, wanted, stamp, via)
        # Used together: linked (docs/consolidation.md, "Association by use").
        associate.strengthen(writes, vault.store, wanted, stamp, vault.config.decay)
        vault.apply(writes, saved=used)
        return used


def record_recall(vault: OpenVault, request: Request, results: list[RecallResult], *, reinforce: bool,
                  started: float) -> None:
    """Log the query and, only when asked, count what was returned as used: one batch."""
    with vault.write_lock if reinforce else vault.append_lock:
        if vault.closed:
            return
        stamp = now_us()
        writes = WriteSet()
        used = _count_use(vault, writes, [r.memory.id for r in results], stamp, access_log.RECALL) if reinforce else []
        asked = request.options
        entry = QueryLogEntry(at=stamp, cue=asked.cue, strategies=sorted(request.names), weights=asked.weights,
                              result_count=len(results), latency_ms=round((time.perf_counter() - started) * 1000, 3),
                              entity_id=asked.entity_id)
        key = stamp.to_bytes(8, "big") + os.urandom(4)
        writes.put("query_log", key, encode(entry))
        state = _state(vault)
        if state.entries is not None:
            counted = [state.entries + 1, min(key, state.first or key), max(key, state.last or key)]
            writes.put_meta(COUNT_META, counted)
        # Nobody is told these were kept: no reason to make a recall wait for a disk sync.
        try:
            vault.apply(writes, saved=used, durable=False)
        except DiskFull:
            if reinforce:
                raise  # the caller asked for a write: it is told it was not kept
            # A read needs no space: the query log is best effort (`hebbs queries` misses this one).
            log.warning("vault %s: the disk is full: this recall is not in the query log", vault.path)
            return
        if state.entries is not None:
            state.entries, state.first, state.last = counted
        state.until_trim -= 1
        if state.until_trim <= 0:
            settings = vault.config.recall
            state.until_trim = max(1, min(TRIM_EVERY, settings.query_log_keep // 10))
            try:
                trim_query_log(vault, state, settings.query_log_keep, settings.query_log_days, stamp)
            except DiskFull:
                log.warning("vault %s: the disk is full: the query log was not trimmed", vault.path)


def _state(vault: OpenVault) -> _LogState:
    """The vault's query log state, read at its first append since the vault opened (COUNT_META)."""
    state = _log_state.get(vault)
    if state is not None:
        return state
    store = vault.store
    if store.shared:
        state = _LogState(None, None, None)
    else:
        first, last = store.ends("query_log")
        saved = store.get_meta(COUNT_META)
        if (isinstance(saved, list) and len(saved) == 3 and saved[1:] == [first, last]
                and isinstance(saved[0], int) and saved[0] >= (first is not None) + (first != last)):
            entries = saved[0]
        else:
            entries = store.count("query_log")
            log.info("vault %s: counted its query log (%d entries): no count was kept for it", vault.path, entries)
        state = _LogState(entries, first, last)
    _log_state[vault] = state
    return state


def trim_query_log(vault: OpenVault, state: _LogState, keep: int, days: float, now: int) -> int:
    """Delete the query log's oldest entries past the newest `keep` and those older than `days` before
    `now`, at most TRIM_MAX of them, as one range; how many were deleted."""
    # Several daemons may append to one shared vault: its count is read at each trim there.
    entries = state.entries if state.entries is not None else vault.store.count("query_log")
    excess = entries - keep
    cutoff = max(0, now - int(days * 86_400_000_000)).to_bytes(8, "big")
    # The keys to delete are the first `excess` and any older than the cutoff past those: read as a
    # batch of keys (the first one kept included), and again, longer, while every key read goes.
    wanted = min(TRIM_MAX, max(excess, 0)) + 1
    while True:
        keys = vault.store.first_keys("query_log", wanted, state.first or b"")
        deleted = min(TRIM_MAX, max(min(excess, len(keys)), bisect.bisect_left(keys, cutoff)))
        if deleted < len(keys) or len(keys) < wanted or deleted >= TRIM_MAX:
            break
        wanted = min(TRIM_MAX + 1, wanted * 2)
    if not deleted:
        return 0
    kept = keys[deleted] if deleted < len(keys) else None
    writes = WriteSet()
    # Up to the first entry kept; when none is, up to the smallest key after the last one deleted.
    writes.delete_range("query_log", keys[0], kept if kept is not None else keys[deleted - 1] + b"\x00")
    remaining = 0 if kept is None else entries - deleted
    if state.entries is not None:
        if kept is not None and remaining < 1:
            # An entry is left past those deleted, so the count was short: the log's own, read once.
            remaining = vault.store.count("query_log") - deleted
        counted = [remaining, kept, state.last if kept is not None else None]
        writes.put_meta(COUNT_META, counted)
    vault.apply(writes, durable=False)
    if state.entries is not None:
        state.entries, state.first, state.last = counted
    return deleted


def recent_queries(vault: OpenVault, limit: int = 50) -> list[QueryLogEntry]:
    """The most recent recalls from the query log, newest first."""
    limit = validate.positive_int(limit, "limit", validate.MAX_QUERIES)
    out = []
    for _, raw in vault.store.scan("query_log", b"", reverse=True):
        out.append(decode(raw, QueryLogEntry))
        if len(out) >= limit:
            break
    return out


def accesses(vault: OpenVault, memory_id: str) -> list[Access]:
    """The memory's logged accesses, newest first (the latest access_log.KEEP of them)."""
    return access_log.read(vault.store, validate.memory_id(memory_id))


def _count_use(vault: OpenVault, writes: WriteSet, ids: Sequence[str], stamp: int, via: str) -> list[Memory]:
    """One use of each memory, counted and logged in the same batch."""
    used = []
    for mid in ids:
        current = vault.memory(mid)
        if current is None:
            continue
        current.access_count += 1
        current.last_accessed_at = stamp
        current.decay_score = decay.decay_value(current, stamp, vault.config.decay)
        writes.put_memory(current)
        used.append(current)
    access_log.record(vault.store, writes, [m.id for m in used], stamp, via)
    return used
