"""The daemon's open vaults: opened on first use, closed after an idle timeout.

Closing an idle vault releases its RocksDB lock, so a script can open it in-process while the
daemon sleeps. A vault in use (a request running on it, an index run) is never closed under it:
`use()` counts users before it waits, and the reaper only closes a slot nobody counts.

A connection's own thread may use an open vault directly (`try_use`, no trip through the event
loop): the count and the closing flag are kept under a lock, so that thread either sees the vault
closing and goes through the loop, or the reaper sees it counted and leaves the vault open.

A vault folder deleted or moved while the daemon holds it open is noticed at the next request on
its path: the daemon's handle still points at the old files, so a write through it would be
acknowledged and then lost (deleted) or land in the moved copy. The old vault is closed once the
requests already inside it are done, and the path is opened afresh, or refused when no vault is
there any more.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from hebbs.errors import InvalidInput, VaultBusy, VaultNotInitialized
from hebbs.paths import VAULT_DIR, is_vault_dir
from hebbs.protocol import SlotStatus

from .models import ModelPool

if TYPE_CHECKING:
    from hebbs.embedding.embed import Embedder
    from hebbs.workflows.decay import DecaySweeper
    from hebbs.engine import Engine

log = logging.getLogger("hebbs.daemon")
T = TypeVar("T")
# How long a request waits for the requests still running on a moved or deleted vault.
RETIRE_WAIT_S = 30.0


class VaultSlot:
    """One vault directory the daemon knows about, open or not."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.engine: "Engine | None" = None
        # Keeps decay scores current while the vault is open; stopped before the engine closes.
        self.sweeper: "DecaySweeper | None" = None
        # Guards opening and closing, so two first requests open the vault once.
        self.open_lock = asyncio.Lock()
        # Guards `users` and `closing` between the loop and connection threads.
        self.guard = threading.Lock()
        # Set while the vault closes: try_use then leaves the request to the loop, which waits.
        self.closing = False
        # Writers that come through the event loop take a worker one at a time, so that a burst of them
        # waits in the loop rather than in worker threads blocked on the engine's write lock. (A
        # connection thread's remember needs no turn here: the engine embeds outside its lock, writes
        # under it, and waits for durability after it, sharing the WAL sync with concurrent writers.)
        self.loop_writers = asyncio.Lock()
        self.users = 0
        # Of the users, those that hold the engine (the others wait for it to open).
        self.active = 0
        # What the vault's folder and database were when it was opened (see `moved`).
        self.identity: tuple[int, int, int] | None = None
        self._db_text = str(path / "db")
        self._path_text = str(path)
        self.indexing = False
        # The model a `hebbs reembed` in progress moves the vault to (handlers: _reembed).
        self.reembedding: str | None = None
        # The newest progress report of the index run in progress (hebbs.notes.indexer.Progress).
        self.progress: Any = None
        # The index run going on this vault: its outcome, its cancel flag (checked at each progress
        # report, in the worker thread) and the connections following it (index_follow).
        self.index_run: "asyncio.Future[Any] | None" = None
        self.index_cancel: "threading.Event | None" = None
        # Why index_cancel was set, when not by index_cancel itself (the daemon stopping).
        self.index_stop_reason: str | None = None
        self.followers: list[tuple[Any, Any]] = []
        self.last_used = time.monotonic()

    def current_identity(self) -> tuple[int, int, int] | None:
        """The device and inodes of the vault's folder and database now; None when either is gone."""
        try:
            root, db = os.stat(self._path_text), os.stat(self._db_text)
        except OSError:
            return None
        return root.st_dev, root.st_ino, db.st_ino

    def moved(self) -> bool:
        """Whether the open vault's folder was deleted, moved or replaced since it was opened."""
        return self.current_identity() != self.identity


def open_engine(path: Path, models: ModelPool) -> "Engine":
    """Open a vault with the warm embedder of its model (the one its store records; for a new vault the
    one its config names), loaded once per daemon and counted against its model memory budget."""
    from hebbs.engine import Engine

    taken: list["Embedder"] = []

    def load(spec: str | None) -> "Embedder":
        taken.append(models.acquire(spec, path))
        return taken[-1]

    try:
        return Engine.open(path, load_model=load)
    except BaseException:
        for embedder in taken:
            models.release(embedder, path)
        raise


def start_sweeper(engine: "Engine") -> "DecaySweeper":
    """The vault's background decay sweep, on the interval and batch its config.toml sets."""
    from hebbs.workflows.decay import DecaySweeper

    decay = engine.config.decay
    return DecaySweeper(engine, decay.sweep_interval_seconds, decay.sweep_batch).start()


class VaultPool:
    def __init__(self, home: Path, idle_timeout: float, executor: Executor, models: ModelPool | None = None,
                 opener: Callable[[Path, ModelPool], "Engine"] = open_engine) -> None:
        self.home = home
        self.idle_timeout = idle_timeout
        self._executor = executor
        self.models = models or ModelPool()
        self._opener = opener
        # Connection threads add slots too (slot()): walk it through list(), taken in one step.
        self._slots: dict[Path, VaultSlot] = {}
        self._slots_by_text: dict[str, VaultSlot] = {}

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking engine call on the worker pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    def submit(self, fn: Callable[..., T], *args: Any) -> "asyncio.Future[T]":
        """fn(*args) on the worker pool, started now: the future of its result, awaitable on the loop."""
        return asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def slot(self, vault_path: str | None) -> VaultSlot:
        """The slot for a request's vault_path, checking that a vault is there (without opening it)."""
        if not vault_path:
            raise InvalidInput("this command needs a vault_path")
        # A path already in its resolved form names the open slot directly: resolving it again is a
        # dozen system calls per request.
        slot = self._slots_by_text.get(vault_path)
        if slot is not None and slot.engine is not None:
            return slot
        path = Path(vault_path)
        if not path.is_absolute():
            raise InvalidInput(f"vault_path must be absolute, got {vault_path!r}")
        path = path.resolve()
        slot = self._slots.get(path)
        if slot is not None and slot.engine is not None:
            if str(path) == vault_path:
                self._slots_by_text[vault_path] = slot
            return slot
        if not is_vault_dir(path, self.home.resolve()):
            folder = path.parent if path.name == VAULT_DIR else path
            raise VaultNotInitialized(f"no hebbs vault at {path}; run `hebbs init {folder}` to create one")
        return self._slots.setdefault(path, VaultSlot(path))

    @contextlib.asynccontextmanager
    async def use(self, slot: VaultSlot) -> AsyncIterator["Engine"]:
        with slot.guard:
            slot.users += 1
        try:
            async with slot.open_lock:
                if slot.engine is not None and slot.moved():
                    await self._retire(slot)
                if slot.engine is None:
                    # Checked again here: the folder may have gone since slot() found it, and opening
                    # a missing vault would create an empty one in its place.
                    if not is_vault_dir(slot.path, self.home.resolve()):
                        folder = slot.path.parent if slot.path.name == VAULT_DIR else slot.path
                        raise VaultNotInitialized(f"no hebbs vault at {slot.path} any more; "
                                                  f"run `hebbs init {folder}` to create one")
                    log.info("opening vault %s", slot.path)
                    slot.engine = await self.run(self._opener, slot.path, self.models)
                    slot.identity = slot.current_identity()
                    slot.sweeper = start_sweeper(slot.engine)
                engine = slot.engine
                with slot.guard:
                    slot.active += 1
            try:
                yield engine
            finally:
                with slot.guard:
                    slot.active -= 1
        finally:
            with slot.guard:
                slot.users -= 1
                slot.last_used = time.monotonic()

    def try_use(self, slot: VaultSlot) -> "Engine | None":
        """The slot's engine, counted as used (release() it after), when it is open and not closing;
        None otherwise (then use() on the loop opens it, or waits for the close to finish)."""
        with slot.guard:
            if slot.engine is None or slot.closing:
                return None
            slot.users += 1
            slot.active += 1
        if slot.moved():
            self.release(slot)
            return None  # use() on the loop closes the old vault and opens what is there now
        return slot.engine

    def release(self, slot: VaultSlot) -> None:
        """Done with an engine try_use() gave."""
        with slot.guard:
            slot.users -= 1
            slot.active -= 1
            slot.last_used = time.monotonic()

    @staticmethod
    async def _drained(slot: VaultSlot) -> bool:
        """Whether the requests already running on the slot finished within RETIRE_WAIT_S; new direct
        requests meanwhile go through the loop and wait for open_lock (the caller holds it). On False
        the slot serves again as before."""
        with slot.guard:
            slot.closing = True
        deadline = time.monotonic() + RETIRE_WAIT_S
        while slot.active and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        if slot.active:
            with slot.guard:
                slot.closing = False
            return False
        return True

    async def _retire(self, slot: VaultSlot) -> None:
        """Close a vault whose folder was deleted or moved under it (the caller holds open_lock),
        once the requests already running on it are done."""
        log.warning("vault %s was deleted or moved while open: closing the old files", slot.path)
        if not await self._drained(slot):
            raise VaultBusy(f"the vault at {slot.path} was deleted or moved while {slot.active} request(s) "
                            f"still run on it; retry when they are done")
        try:
            await self._close_locked(slot, reason="moved")
        except Exception:  # noqa: BLE001 - its files are gone or elsewhere: what is there now is opened next
            log.exception("closing the moved or deleted vault %s failed", slot.path)

    @contextlib.asynccontextmanager
    async def closed(self, slot: VaultSlot, reason: str) -> AsyncIterator[None]:
        """The slot's vault closed once the requests inside it are done, and kept closed for the block:
        requests arriving meanwhile wait (use() takes open_lock) and find it opened afresh after."""
        async with slot.open_lock:
            if not await self._drained(slot):
                raise VaultBusy(f"{slot.active} request(s) still run on {slot.path}; retry when they are done")
            if slot.engine is not None:
                await self._close_locked(slot, reason)
            with slot.guard:
                slot.closing = False
            yield

    async def close_idle(self) -> None:
        if self.idle_timeout <= 0:
            return  # 0 = never, as for the daemon's own idle timeout
        now = time.monotonic()
        for slot in list(self._slots.values()):
            if slot.engine is not None and slot.users == 0 and now - slot.last_used >= self.idle_timeout:
                await self._close(slot, reason="idle")

    async def _close(self, slot: VaultSlot, reason: str) -> None:
        async with slot.open_lock:
            with slot.guard:
                # A request may have arrived while we waited for the lock.
                if slot.engine is None or (slot.users and reason == "idle"):
                    return
                slot.closing = True
            await self._close_locked(slot, reason)

    async def _close_locked(self, slot: VaultSlot, reason: str) -> None:
        """Close the slot's engine (the caller holds open_lock and has set slot.closing)."""
        assert slot.engine is not None
        log.info("closing vault %s (%s)", slot.path, reason)
        try:
            if slot.sweeper is not None:
                # A sweep mid-batch must finish its RocksDB commit before the database goes away.
                sweeper, slot.sweeper = slot.sweeper, None
                await self.run(sweeper.stop)
            await self.run(slot.engine.close)
        finally:
            # Only now: until the close is done the vault counts as open (its lock is still held).
            self.models.release(slot.engine.embedder, slot.path)
            slot.engine = None
            slot.identity = None
            slot.closing = False

    async def close_all(self) -> None:
        for slot in list(self._slots.values()):
            try:
                await self._close(slot, reason="shutdown")
            except Exception:
                log.exception("closing vault %s failed", slot.path)

    def stop_index_runs(self, reason: str) -> None:
        """Cancel every index run in progress: each stops at its next progress report (one batch of
        sections at most), keeping what it committed."""
        for slot in list(self._slots.values()):
            cancel = slot.index_cancel
            if cancel is not None:
                slot.index_stop_reason = reason
                cancel.set()

    def known(self) -> list[VaultSlot]:
        """Every vault a request has named since the daemon started, open or not."""
        return list(self._slots.values())

    def describe(self) -> list[SlotStatus]:
        now = time.monotonic()
        return [SlotStatus(path=str(s.path), idle_s=round(now - s.last_used, 3), in_use=s.users, indexing=s.indexing,
                           model=engine.embedder.model_id, reembedding=s.reembedding)
                for s in list(self._slots.values()) if (engine := s.engine) is not None]
