"""Decay: how alive each memory still is, kept current by a background sweep.

    decay_score = importance * 2^(-age / half_life) * (1 + log2(1 + access_count) / log2(1 + cap))

age runs from the last time a recall returned the memory (last_accessed_at). The half-life depends
on the memory's context `type` (config.DecayConfig.half_life_days; the defaults and their reasons
are in docs/decay.md). A memory with context `pinned: true` never decays.

The sweep walks the `default` family in key order, a batch at a time, and records where it stopped
in `meta` ("decay_cursor") in the same RocksDB batch as the scores it wrote, so a process killed
mid-sweep resumes at the next unprocessed memory. Decay is not a content change: it takes the
engine's write lock but does not bump the write sequence, so the derived indexes stay valid.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .. import validate
from ..recall import scoring
from ..config import DecayConfig
from ..errors import DiskFull, InvalidInput
from ..schema import Memory, MemoryKind
from ..core.open_vault import HasVault, OpenVault, vault_of
from ..store.contract import RecordStore
from ..store.storage import MEMORY_PREFIX, WriteSet, decode_memory



class Forgetter(HasVault, Protocol):
    """What a sweep drives: the open vault, and forget() for config.decay.auto_forget (the Engine)."""

    def forget(self, ids: Sequence[str] | None = None) -> int: ...

    def consolidate(self, *, dry_run: bool = False) -> list[tuple[str, str]]: ...

CURSOR_META = "decay_cursor"
LAST_SWEEP_META = "decay_last_sweep"
# Scores written per RocksDB batch: the write lock is held for one commit at a time, never a whole sweep.
COMMIT_EVERY = 1_000

log = logging.getLogger("hebbs.decay")  # the name users filter on


def is_pinned(memory: Memory) -> bool:
    pinned = memory.context.get("pinned")
    return pinned is True or (isinstance(pinned, str) and pinned.strip().lower() == "true")


def half_life_days(memory: Memory, config: DecayConfig) -> float:
    """By the memory's context `type` (DecayConfig.half_life_for)."""
    kind = memory.context.get("type")
    return config.half_life_for(kind if isinstance(kind, str) else None)


def decay_value(memory: Memory, now_us: int, config: DecayConfig) -> float:
    """The memory's decay score at now_us. Pinned memories keep their age-free score."""
    if is_pinned(memory):
        return memory.importance * (1.0 + scoring.reinforcement(memory.access_count))
    return scoring.decay_score(memory.importance, memory.last_accessed_at, memory.access_count, now_us,
                               half_life_days(memory, config))


def is_candidate(memory: Memory, now_us: int, config: DecayConfig) -> bool:
    """Below the forget threshold, not pinned, and not a revision record (those go with their memory)."""
    return (memory.kind != MemoryKind.REVISION and not is_pinned(memory)
            and decay_value(memory, now_us, config) < config.forget_threshold)


def forget_candidates(owner: OpenVault | HasVault, now_us: int | None = None) -> list[Memory]:
    """Memories that have decayed below config.decay.forget_threshold, least alive first. Nothing is deleted."""
    vault = vault_of(owner)
    now_us = validate.timestamp_us(now_us, "now")
    now_us = _now() if now_us is None else now_us
    config = vault.config.decay
    found = [(decay_value(m, now_us, config), m) for m in vault.store.memories() if is_candidate(m, now_us, config)]
    found.sort(key=lambda pair: pair[0])
    for score, memory in found:
        memory.decay_score = score
    return [m for _, m in found]


def _now() -> int:
    return time.time_ns() // 1000


@dataclass
class SweepReport:
    processed: int = 0  # memories looked at
    updated: int = 0  # decay scores that changed and were written
    candidates: list[str] = field(default_factory=list)  # ids now below the forget threshold
    forgotten: int = 0  # removed because config.decay.auto_forget is on
    finished: bool = False  # this batch reached the end of the vault; the next starts over
    cursor: bytes | None = None  # where the next batch starts (None: the beginning)


def _memories_after(store: RecordStore, cursor: bytes | None) -> Iterator[tuple[bytes, bytes]]:
    # The cursor is the last key already processed; step past it.
    start = MEMORY_PREFIX if cursor is None else cursor + b"\x00"
    return store.scan("default", MEMORY_PREFIX, start=start)


def sweep(engine: Forgetter, batch: int | None = None, now: int | None = None) -> SweepReport:
    """Recompute decay for the next `batch` memories after the persisted cursor.

    Scores and the cursor are committed together every COMMIT_EVERY memories, under the write lock,
    with each record re-read inside the lock so a concurrent recall's reinforcement is never lost.
    """
    vault = engine.vault
    config = vault.config.decay
    batch = config.sweep_batch if batch is None else batch
    if batch < 1:
        raise InvalidInput(f"batch must be at least 1, got {batch}")
    now_us = _now() if now is None else now
    store = vault.store
    report = SweepReport(cursor=_load_cursor(store))
    keys: list[bytes] = []
    exhausted = True
    for key, _ in _memories_after(store, report.cursor):
        if len(keys) >= batch:
            exhausted = False
            break
        keys.append(key)
    for start in range(0, len(keys), COMMIT_EVERY):
        chunk = keys[start:start + COMMIT_EVERY]
        with vault.write_lock:
            if vault.closed:
                return report
            writes = WriteSet()
            for key in chunk:
                raw = store.get("default", key)
                if raw is None:
                    continue  # forgotten since the scan
                memory = decode_memory(raw)
                report.processed += 1
                score = decay_value(memory, now_us, config)
                if not math.isclose(score, memory.decay_score, rel_tol=1e-6, abs_tol=1e-12):
                    memory.decay_score = score
                    writes.put_memory(memory)
                    report.updated += 1
                if is_candidate(memory, now_us, config):
                    report.candidates.append(memory.id)
            last = chunk[-1]
            finished_now = exhausted and start + COMMIT_EVERY >= len(keys)
            report.cursor = None if finished_now else last
            writes.put_meta(CURSOR_META, report.cursor)
            if finished_now:
                writes.put_meta(LAST_SWEEP_META, now_us)
            store.commit(writes)
    if not keys:
        with vault.write_lock:
            if not vault.closed:
                writes = WriteSet()
                writes.put_meta(CURSOR_META, None)
                writes.put_meta(LAST_SWEEP_META, now_us)
                store.commit(writes)
        report.cursor = None
    report.finished = exhausted
    if config.auto_forget and report.candidates:
        report.forgotten = engine.forget(report.candidates)
    return report


def sweep_all(engine: Forgetter, batch: int | None = None, now: int | None = None,
              stop: threading.Event | None = None) -> SweepReport:
    """Batches until the sweep reaches the end of the vault (resuming wherever the cursor stands)."""
    total = SweepReport()
    while stop is None or not stop.is_set():
        report = sweep(engine, batch=batch, now=now)
        total.processed += report.processed
        total.updated += report.updated
        total.candidates += report.candidates
        total.forgotten += report.forgotten
        total.cursor = report.cursor
        if report.finished or engine.vault.closed:
            total.finished = report.finished
            break
    return total


def _load_cursor(store: RecordStore) -> bytes | None:
    value: Any = store.get_meta(CURSOR_META)
    return value if isinstance(value, bytes) and value else None


class DecaySweeper:
    """Runs sweep_all every config.decay.sweep_interval_seconds on a daemon thread until stopped.

    `clock` returns "now" in microseconds for each pass (tests inject one; the daemon uses the wall clock).
    """

    def __init__(self, engine: Forgetter, interval_seconds: float | None = None, batch: int | None = None,
                 clock: Callable[[], int] | None = None) -> None:
        self.engine = engine
        configured = engine.vault.config.decay.sweep_interval_seconds
        self.interval = configured if interval_seconds is None else interval_seconds
        self.batch = batch
        self.clock = clock or _now
        self.last_report: SweepReport | None = None
        # Wall-clock seconds when the last full pass ended (the panel shows it).
        self.last_pass_at: float | None = None
        self.passes = 0
        self._stop = threading.Event()
        self._pass_done = threading.Condition()
        self._thread: threading.Thread | None = None

    def start(self) -> "DecaySweeper":
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="hebbs-decay", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float | None = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def wait_for_pass(self, count: int = 1, timeout: float | None = None) -> bool:
        """Block until `count` full passes have finished; False on timeout."""
        with self._pass_done:
            return self._pass_done.wait_for(lambda: self.passes >= count, timeout)

    def __enter__(self) -> "DecaySweeper":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.is_set() and not self.engine.vault.closed:
            try:
                report = sweep_all(self.engine, batch=self.batch, now=self.clock(), stop=self._stop)
                # Consolidation rides the same schedule when the vault asks for it (docs/consolidation.md).
                if self.engine.vault.config.consolidation.on_sweep and not self._stop.is_set():
                    self.engine.consolidate()
                with self._pass_done:
                    self.last_report = report
                    self.last_pass_at = time.time()
                    self.passes += 1
                    self._pass_done.notify_all()
            except DiskFull as exc:  # no damage and nothing lost: the next pass after space is back resumes
                log.warning("decay sweep skipped: %s", exc)
            except Exception:  # a failed sweep must not kill the daemon; the cursor lets the next one resume
                log.exception("decay sweep failed")
            if self._stop.wait(self.interval):
                break
