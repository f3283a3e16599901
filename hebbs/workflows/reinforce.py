"""Use: what an agent (or a person in the panel) actually used is reinforced, and memories used
together are linked (workflows/associate.py). Recall itself only logs the query, and reinforces what
it returned only when the caller asks (docs/honesty.md)."""

from __future__ import annotations

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
from ..store.open_vault import OpenVault, now_us
from ..store.storage import WriteSet, decode, encode
from . import associate, decay

log = logging.getLogger("hebbs.reinforce")

# The query log is trimmed to config recall.query_log_keep / query_log_days every so many appends (a
# tenth of what it keeps, at most TRIM_EVERY), in a batch of its own: the entries a trim deletes are
# about those appended since the last one, so a recall pays a few deletes on average, and a log can
# pass its bound by that tenth at most. The entry count is read once per open and kept up to date.
TRIM_EVERY = 1000
# At most this many entries deleted by one trim: a log grown large before it was bounded is brought
# down over several trims, not in one long stall of the recall that finds it.
TRIM_MAX = 5000
_log_state: "weakref.WeakKeyDictionary[OpenVault, list[int | None]]" = weakref.WeakKeyDictionary()


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
        entry = QueryLogEntry(at=stamp, cue=request.cue, strategies=sorted(request.names), weights=request.weights,
                              result_count=len(results), latency_ms=round((time.perf_counter() - started) * 1000, 3),
                              entity_id=request.entity_id)
        writes.put("query_log", stamp.to_bytes(8, "big") + os.urandom(4), encode(entry))
        # Nobody is told these were kept: no reason to make a recall wait for a disk sync.
        try:
            vault.apply(writes, saved=used, durable=False)
        except DiskFull:
            if reinforce:
                raise  # the caller asked for a write: it is told it was not kept
            # A read needs no space: the query log is best effort (`hebbs queries` misses this one).
            log.warning("vault %s: the disk is full: this recall is not in the query log", vault.path)
            return
        _trim_when_due(vault, stamp)


def _trim_when_due(vault: OpenVault, stamp: int) -> None:
    """Count one more query log entry, and trim the log when its turn comes (TRIM_EVERY above)."""
    state = _log_state.get(vault)
    if state is None:
        state = _log_state[vault] = [None, 1]  # [entries, appends until the next trim]: trim at once
    elif state[0] is not None:
        state[0] += 1
    state[1] -= 1
    if state[1] > 0:
        return
    settings = vault.config.recall
    state[1] = max(1, min(TRIM_EVERY, settings.query_log_keep // 10))
    # Several daemons may append to one shared vault: its count is read again at each trim there.
    if state[0] is None or getattr(vault.store, "shared", False):
        state[0] = vault.store.count("query_log")
    try:
        state[0] -= trim_query_log(vault, settings.query_log_keep, settings.query_log_days, stamp, state[0])
    except DiskFull:
        log.warning("vault %s: the disk is full: the query log was not trimmed", vault.path)


def trim_query_log(vault: OpenVault, keep: int, days: float, now: int, entries: int) -> int:
    """Delete the query log's oldest entries past the newest `keep` and those older than `days` before
    `now` (of `entries` in all), at most TRIM_MAX of them; how many were deleted."""
    excess = entries - keep
    cutoff = max(0, now - int(days * 86_400_000_000)).to_bytes(8, "big")
    writes = WriteSet()
    deleted = 0
    for key, _ in vault.store.scan("query_log"):  # oldest first: the key starts with its time
        if deleted >= TRIM_MAX or (deleted >= excess and key >= cutoff):
            break
        writes.delete("query_log", key)
        deleted += 1
    if deleted:
        vault.apply(writes, durable=False)
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
