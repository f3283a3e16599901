"""When a write counts as done: after its write-ahead log is synced to disk, shared by concurrent writers.

Two modes (config `[store] durability`, docs/reliability.md):
- "sync" (default): a call returns only once the WAL holding its batch is fsynced, so an acknowledged
  write survives a power loss. Writers that commit while a sync runs wait for the next one and share
  it (group commit): eight concurrent writers cost about one fsync per round, not eight.
- "buffered": a call returns once RocksDB has written the batch to its WAL file in the OS page cache.
  It survives a kill of the process, not a crash of the machine; RocksDB still syncs at close.

A batch is written with sync off and then made durable by `wait(seq)`: the writer holds no lock of
the engine while it waits, which is what lets the next writer's batch join the same fsync.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from ..config import DURABILITY_MODES


class _Deferral:
    """The highest sequence number written by the calls inside one `GroupCommit.deferred()` block."""

    __slots__ = ("seq",)

    def __init__(self) -> None:
        self.seq = 0


class GroupCommit:
    """Makes written sequence numbers durable, one fsync for everyone who is waiting at the time."""

    def __init__(self, mode: str, latest_seq: Callable[[], int], sync_wal: Callable[[], None]) -> None:
        if mode not in DURABILITY_MODES:
            raise ValueError(f"durability must be one of {DURABILITY_MODES}, got {mode!r}")
        self.mode = mode
        self._latest_seq = latest_seq
        self._sync_wal = sync_wal
        self._cond = threading.Condition()
        self._synced = 0
        self._syncing = False
        self._local = threading.local()
        self.syncs = 0  # how many fsyncs ran: group commit shows as syncs < writes

    def written(self, seq: int) -> None:
        """A batch ending at seq was written: wait for it now, or at the end of the enclosing deferral."""
        deferral: _Deferral | None = getattr(self._local, "deferral", None)
        if deferral is not None:
            deferral.seq = max(deferral.seq, seq)
        else:
            self.wait(seq)

    @contextlib.contextmanager
    def deferred(self, *, wait: bool = True) -> Iterator[_Deferral]:
        """Collect this thread's writes into one wait. A block inside another joins the outer one.

        The outermost block waits as it ends normally (its caller's locks are released by then when
        the block wraps the locked call); with wait=False the caller waits later: `wait(d.seq)`."""
        outer: _Deferral | None = getattr(self._local, "deferral", None)
        if outer is not None:
            yield outer
            return
        deferral = _Deferral()
        self._local.deferral = deferral
        try:
            yield deferral
        finally:
            self._local.deferral = None
        if wait:
            self.wait(deferral.seq)

    def wait(self, seq: int) -> None:
        if self.mode != "sync" or seq <= 0:
            return
        with self._cond:
            while self._synced < seq:
                if self._syncing:
                    self._cond.wait()
                    continue
                # Lead one sync covering everything written so far, our batch included.
                self._syncing = True
                target = self._latest_seq()
                self._cond.release()
                try:
                    self._sync_wal()
                finally:
                    self._cond.acquire()
                    self._syncing = False
                    self._cond.notify_all()
                self._synced = max(self._synced, target)
                self.syncs += 1
