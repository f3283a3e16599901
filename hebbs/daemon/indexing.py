"""The daemon's long runs over a vault and the notes an agent writes: the markdown-vault commands
(index, index_cancel, index_follow, list) and reembed, which stream progress frames (an index run may
be followed from another connection and cancelled from any, a reembed stops when its client goes);
note_read, note_write and note_append (hebbs/notes/write.py). A mixin of handlers.Handlers, which
gives it the pool."""

from __future__ import annotations

import asyncio
import shlex
import threading
import time
from pathlib import Path
from typing import Any, Callable

import msgspec

from hebbs.errors import Cancelled, IndexingInProgress, InvalidInput
from hebbs.paths import VAULT_DIR
from hebbs.protocol import (Index, IndexCancel, IndexCancelled, IndexFollow, List, NoteAppend, NoteRead, NoteWrite,
                            Reembed, Request, ScanSummary)
from hebbs.schema import NoteText, NoteWritten, ReembedSummary

from .calls import memories_by_id
from .subscriptions import Connection
from .vaults import VaultPool, VaultSlot

# Progress reports of one stage waiting for a slow client or a busy event loop, at most: a run's
# stage has a report per batch, and a terminal draws each one it gets.
PENDING_PER_STAGE = 8



class IndexHandlers:
    pool: VaultPool

    async def _index(self, conn: Connection, request: Request, command: Index) -> Any:
        from hebbs.notes import indexer as vault

        slot, root = self._notes_vault(request, command.path)
        if slot.reembedding is not None:
            raise IndexingInProgress(f"{slot.path} is being moved to the model {slot.reembedding}: index it once "
                                     f"`hebbs reembed` is done")
        if slot.indexing:
            raise IndexingInProgress(
                f"{root} is being indexed already: follow that run with `hebbs index --follow {_quote(root)}`, "
                f"or stop it with `hebbs index --cancel {_quote(root)}`")
        slot.indexing = True
        run = slot.index_run = asyncio.get_running_loop().create_future()
        run.add_done_callback(_retrieved)
        slot.index_cancel = threading.Event()
        try:
            async with self.pool.use(slot) as engine:
                if command.phase == 1:
                    plan = await self._stream(conn, request.id, slot, lambda progress: vault.scan_notes(
                        engine, root, paths=command.paths, progress=progress))
                    result: Any = ScanSummary(
                        files_scanned=plan.files_scanned, files_unchanged=plan.files_unchanged,
                        files_changed=plan.files_changed, files_removed=plan.files_removed,
                        pending=plan.pending(), skipped=plan.skipped, warnings=plan.warnings, seconds=plan.seconds)
                elif command.phase == 2:
                    result = await self._stream(conn, request.id, slot, lambda progress: vault.apply_plan(
                        engine, root, progress=progress))
                else:
                    result = await self._stream(conn, request.id, slot, lambda progress: vault.index_notes(
                        engine, root, progress=progress, ray=command.ray, full=command.full))
            run.set_result(result)
            return result
        except BaseException as exc:
            if not run.done():
                run.set_exception(exc if isinstance(exc, Exception) else Cancelled("the daemon stopped"))
            raise
        finally:
            slot.indexing = False
            slot.progress = None
            slot.index_run = None
            slot.index_cancel = None
            slot.index_stop_reason = None

    async def _reembed(self, conn: Connection, request: Request, command: Reembed) -> ReembedSummary:
        """Stage the new model's vectors while the vault serves with the old one, then switch with the vault
        closed for the moment it takes (requests wait for it), and open it again with the new model."""
        from hebbs.config import load_config
        from hebbs.workflows import reembed

        slot = self.pool.slot(request.vault_path)
        if slot.indexing or slot.reembedding is not None:
            raise IndexingInProgress(f"{slot.path} is being {'indexed' if slot.indexing else 'reembedded'} "
                                     f"already: run `hebbs reembed` again once that is done")
        started = time.monotonic()
        spec = command.model or load_config(slot.path).model
        target = await self.pool.run(self.pool.models.acquire, spec, slot.path)
        slot.reembedding = target.model_id
        slot.index_cancel = threading.Event()
        slot.index_stop_reason = None
        stopped = "`hebbs reembed` goes on from what it embedded"
        try:
            async with self.pool.use(slot) as engine:
                vault = engine.vault
                if vault.model_id == target.model_id and vault.store.get_meta("model_files") == target.files:
                    await self.pool.run(reembed.discard_staging, slot.path)
                    return ReembedSummary(model=target.model_id, previous=vault.model_id, dimension=target.dim,
                                          memories=await self.pool.run(engine.count))
                previous = vault.model_id
                memories, resumed, embedded = await self._stream(
                    conn, request.id, slot, lambda progress: reembed.stage(vault, target, progress), stopped=stopped)
            async with self.pool.closed(slot, reason="reembed"):
                _, memories, caught_up = await self._stream(
                    conn, request.id, slot, lambda progress: reembed.switch(slot.path, target, progress),
                    stopped=stopped)
            async with self.pool.use(slot) as engine:  # opened now, with the new model, before it is let go below
                dimension = engine.embedder.dim
            return ReembedSummary(model=target.model_id, previous=previous, dimension=dimension, memories=memories,
                                  resumed=resumed, embedded=embedded + caught_up, caught_up=caught_up,
                                  seconds=round(time.monotonic() - started, 2))
        finally:
            slot.reembedding = None
            slot.index_cancel = None
            slot.progress = None
            self.pool.models.release(target, slot.path)  # the reopened vault holds it on its own account

    async def _index_cancel(self, conn: Connection, request: Request, command: IndexCancel) -> IndexCancelled:
        slot, root = self._notes_vault(request, command.path)
        run, cancel = slot.index_run, slot.index_cancel
        if run is None or cancel is None:
            return IndexCancelled(path=str(root), cancelled=False)
        cancel.set()
        await asyncio.wait({run})  # answer once the run has stopped: a new run may start right away
        return IndexCancelled(path=str(root), cancelled=True)

    async def _index_follow(self, conn: Connection, request: Request, command: IndexFollow) -> Any:
        slot, _ = self._notes_vault(request, command.path)
        run = slot.index_run
        if run is None:
            return None
        follower = (conn, request.id)
        slot.followers.append(follower)
        try:
            await asyncio.wait({run})
        finally:
            slot.followers.remove(follower)
        if isinstance(run.exception(), ConnectionError):
            # Its own client left (Ctrl-C), which cancels it; a ConnectionError here would drop our client.
            raise Cancelled("the index run was cancelled: the client that started it went away")
        return run.result()

    async def _list(self, conn: Connection, request: Request, command: List) -> Any:
        from hebbs.notes.status import list_notes

        slot, root = self._notes_vault(request, command.path)
        async with self.pool.use(slot) as engine:
            # The engine tells which sections were revised away from their files (state "diverged").
            return await self.pool.run(list_notes, root, sections=command.sections,
                                       memory=lambda mid: memories_by_id(engine, [mid]).get(mid))

    async def _note_read(self, conn: Connection, request: Request, command: NoteRead) -> NoteText:
        from hebbs.notes.write import note_read

        _, root = self._written_notes(request)
        return await self.pool.run(note_read, root, command.path)

    async def _note_write(self, conn: Connection, request: Request, command: NoteWrite) -> NoteWritten:
        from hebbs.notes.write import note_write

        return await self._write_note(request, note_write, command)

    async def _note_append(self, conn: Connection, request: Request, command: NoteAppend) -> NoteWritten:
        from hebbs.notes.write import note_append

        return await self._write_note(request, note_append, command)

    async def _write_note(self, request: Request, write: Callable[..., NoteWritten],
                          command: NoteWrite | NoteAppend) -> NoteWritten:
        slot, root = self._written_notes(request)
        fields = msgspec.structs.asdict(command)
        async with self.pool.use(slot) as engine:
            return await self.pool.run(lambda: write(engine, root, fields.pop("path"), fields.pop("text"), **fields))

    def _written_notes(self, request: Request) -> tuple[VaultSlot, Path]:
        """The request's vault and its notes folder, where an agent's notes go: the global vault has none."""
        slot = self.pool.slot(request.vault_path)
        if slot.path.name != VAULT_DIR or slot.path.resolve() == self.pool.home.resolve():
            raise InvalidInput(f"the vault {slot.path} has no notes folder (only a project vault, FOLDER/.hebbs, "
                               f"has one): write notes to a project vault (`hebbs init FOLDER`)")
        return slot, slot.path.parent

    def _notes_vault(self, request: Request, path: str | None) -> tuple[VaultSlot, Path]:
        """The vault slot and notes folder of an index or list request: PATH/.hebbs, or vault_path's folder."""
        if path is not None:
            root = Path(path)
            if not root.is_absolute():
                raise InvalidInput(f"path must be absolute, got {path!r}")
            if not root.is_dir():
                raise InvalidInput(f"{root} is not a directory")
            return self.pool.slot(str(root / VAULT_DIR)), root
        slot = self.pool.slot(request.vault_path)
        return slot, slot.path.parent

    async def _stream(self, conn: Connection, request_id: Any, slot: VaultSlot,
                      run: Callable[[Callable[[Any], None]], Any], *, stopped: str | None = None) -> Any:
        """Run a blocking index job that reports progress, sending each report as a progress frame to
        the client and to whoever follows the run (index_follow).

        Reports arrive from a worker thread; when they come faster than the client reads, a stage
        keeps PENDING_PER_STAGE of them waiting, the newest replacing the last beyond that: a stage's
        last report (embedding 160/160) is never replaced by the next stage's first, so the client's
        line for it ends where the stage did, and a busy event loop that wakes once for several
        batches still sends each of them. A report is also where the job stops when cancelled (index_cancel, or the
        client went away): the indexer commits in batches and keeps its manifest marked dirty until
        it is done, so the next run adopts what was committed and does the rest.
        """
        loop = asyncio.get_running_loop()
        latest: list[Any] = []
        wake = asyncio.Event()
        cancel = slot.index_cancel

        def report(progress: Any) -> None:
            if cancel is not None and cancel.is_set():
                what = "reembed" if slot.reembedding is not None else "the index run"
                why = f"{what} was cancelled ({slot.index_stop_reason})" if slot.index_stop_reason \
                    else f"{what} was cancelled"
                raise Cancelled(f"{why}; what it committed stays, and "
                                + (stopped or f"`hebbs index {_quote(slot.path.parent)}` does the rest"))

            def put() -> None:
                same = 0
                while same < len(latest) and latest[-1 - same].stage == progress.stage:
                    same += 1
                if same >= PENDING_PER_STAGE:
                    latest[-1] = progress
                else:
                    latest.append(progress)
                if slot is not None:
                    slot.progress = progress  # what the panel's overview shows of a run in progress
                wake.set()
            loop.call_soon_threadsafe(put)

        job = asyncio.ensure_future(self.pool.run(run, report))
        client_alive = True
        while True:
            waiter = asyncio.ensure_future(wake.wait())
            await asyncio.wait({job, waiter}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            wake.clear()
            reports, latest[:] = [msgspec.to_builtins(pending) for pending in latest], []
            for progress in reports:
                if client_alive:
                    try:
                        await conn.progress(request_id, progress)
                    except ConnectionError:
                        client_alive = False
                        if cancel is not None:
                            cancel.set()  # nobody waits for this run any more (Ctrl-C, a killed watcher)
                for follower, follow_id in list(slot.followers):
                    try:
                        await follower.progress(follow_id, progress)
                    except ConnectionError:
                        pass  # that follower's own handler ends when its connection does
            if job.done():
                break
        if not client_alive:
            await asyncio.wait({job})
            raise ConnectionResetError("the client left during a streamed command")
        return job.result()


def _retrieved(run: "asyncio.Future[Any]") -> None:
    """A run nobody followed may fail: that is reported to its client, not as an unretrieved exception."""
    if not run.cancelled():
        run.exception()


def _quote(path: Path) -> str:
    return shlex.quote(str(path))
