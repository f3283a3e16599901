"""What each command does: the engine calls behind the protocol.

A command declared with an Engine method (hebbs.protocol, `@declare(engine=...)`) needs no code here:
`engine_call` calls that method with the request's fields, its ShortId fields resolved to full ids,
through the vault's write slot when it writes; over several vaults (a `vaults` field) when the
declaration says how their answers merge; one declared with `daemon=` (ping, status, shutdown, panel)
calls that method of the Daemon with the fields (and the request's vault, for one that may name one).
The commands below are the rest: export (streamed), subscriptions, and the markdown-vault runs
(indexing.py).

A request that is one engine call on one vault (declared `direct`) is also described by
`Handlers.direct`: the connection's own thread runs that call itself when the vault is open, without
the two thread hand-offs of going through the event loop and a worker (server.py).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Protocol

import msgspec

from hebbs.recall import brains
from hebbs.protocol import Export, ExportChunk, ExportDone, Request, _Command
from hebbs.schema import RecallResults

from .calls import engine_call
from .indexing import IndexHandlers
from .subscriptions import Connection, SubscriptionHandlers
from .vaults import VaultPool

if TYPE_CHECKING:
    from hebbs.engine import Engine

EXPORT_CHUNK_BYTES = 4 * 1024 * 1024
EXPORT_CHUNK_ITEMS = 1000


class Work(NamedTuple):
    """One engine call on one vault (or, for a request without one, a call given None), and whether
    it writes (then the change listeners hear of it)."""

    call: Callable[[Any], Any]
    writes: bool = False
    on_vault: bool = True


class Daemon(Protocol):
    """What the handlers need of the server that owns them (server.Daemon)."""

    version: str
    pool: VaultPool
    change_listeners: list[Callable[[Request], None]]

    def notify_change(self, request: Request) -> None: ...

    def stop(self) -> None: ...

    # And the methods declarations name with `daemon=` (pong, status, stop_after_reply, ensure_panel), called
    # with the request's fields.


class Handlers(IndexHandlers, SubscriptionHandlers):
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.pool = daemon.pool
        self._push_checks = set()

    async def dispatch(self, conn: Connection, request: Request) -> Any:
        command = request.command
        handler: Callable[..., Any] | None = getattr(self, "_" + command.tag(), None)
        if handler is not None:
            data = await handler(conn, request, command)
        elif command.spec.daemon is not None:
            data = self._daemon_call(command, request.vault_path)
            if inspect.isawaitable(data):
                data = await data
        elif _over_vaults(command):
            answers = await self._each_vault(request, command.vaults, engine_call(command))
            data = command.spec.merge(answers, command)
        elif command.spec.writes:
            data = await self._reply_write(request, engine_call(command))
        else:
            data = await self._call(request, engine_call(command))
        self.daemon.notify_change(request)
        return data

    def direct(self, request: Request) -> Work | None:
        """The engine call a request comes to, when it is one call on one vault (a command declared
        `direct`, on one vault) or needs nothing of the daemon's loop (`direct` with `daemon=`:
        ping), for a connection's own thread to run; None for any other."""
        command = request.command
        if command.spec.direct and command.spec.daemon is not None:
            return Work(lambda _: self._daemon_call(command), on_vault=False)
        if command.spec.direct and not _over_vaults(command):
            return Work(engine_call(command), writes=command.spec.writes)
        return None

    def _daemon_call(self, command: _Command, vault_path: str | None = None) -> Any:
        """The Daemon's own method a command's declaration names (`daemon=`), given its fields, and the
        request's vault when the command may name one (declared `vault=None`: status)."""
        fields = msgspec.structs.asdict(command)
        if command.spec.vault is None:
            fields["vault_path"] = vault_path
        return getattr(self.daemon, command.spec.daemon)(**fields)

    async def _call(self, request: Request, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run fn(engine, ...) on the request's vault, off the event loop."""
        return await self.call_at(request.vault_path, fn, *args, **kwargs)

    async def call_at(self, vault_path: str | None, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run fn(engine, ...) on that vault, off the event loop (the daemon's status, the panel's views)."""
        slot = self.pool.slot(vault_path)
        async with self.pool.use(slot) as engine:
            return await self.pool.run(fn, engine, *args, **kwargs)

    async def _reply_write(self, request: Request, fn: Callable[["Engine"], Any]) -> Any:
        """fn(engine) for a write. Writers that come through the loop take a worker one at a time per vault
        (slot.loop_writers), so that a burst of them waits in the loop, not in worker threads blocked on
        the engine's lock; the next one goes as soon as the batch before it is written, to join its WAL
        sync (write_durably)."""
        slot = self.pool.slot(request.vault_path)
        async with self.pool.use(slot) as engine:
            await slot.loop_writers.acquire()
            written = functools.partial(asyncio.get_running_loop().call_soon_threadsafe, slot.loop_writers.release)
            try:
                future = self.pool.submit(write_durably, fn, engine, written)
            except BaseException:
                slot.loop_writers.release()
                raise
            return await future

    # Memories -------------------------------------------------------------------------------

    async def _export(self, conn: Connection, request: Request, command: Export) -> ExportDone:
        slot = self.pool.slot(request.vault_path)
        count = 0
        async with self.pool.use(slot) as engine:
            items = (engine.export_records() if command.records
                     else engine.memories(include_revisions=command.include_revisions))
            while chunk := await self.pool.run(_take_chunk, items):
                await conn.progress(request.id, ExportChunk(records=chunk) if command.records
                                    else ExportChunk(memories=chunk))
                count += len(chunk)
        return ExportDone(count=count)

    # Commands over several vaults ------------------------------------------------------------

    async def _each_vault(self, request: Request, extra: list[str],
                          fn: Callable[["Engine"], RecallResults]) -> list[brains.VaultRecall]:
        """fn on the request's vault and each extra one, concurrently; labelled for hebbs.recall.brains."""
        paths: list[str] = []
        for path in [request.vault_path, *extra]:
            slot = self.pool.slot(path)
            if str(slot.path) not in paths:
                paths.append(str(slot.path))
        home = self.pool.home.resolve()
        found = await asyncio.gather(*(self.call_at(path, fn) for path in paths))
        return [brains.VaultRecall(label=brains.GLOBAL if Path(path) == home else brains.PROJECT, path=path,
                                   found=answer) for path, answer in zip(paths, found)]


def _over_vaults(command: _Command) -> bool:
    """Whether a request names more vaults than its own (and its declaration says how their answers merge)."""
    return command.spec.merge is not None and getattr(command, "vaults", None) is not None


def write_durably(fn: Callable[["Engine"], Any], engine: "Engine", written: Callable[[], Any]) -> Any:
    """fn(engine), then `written()` (the next writer may start, and its batch join this one's WAL
    sync), then waiting for this one's durability."""
    try:
        with engine.deferred_sync(wait=False) as deferral:
            result = fn(engine)
    finally:
        written()
    engine.wait_durable(deferral.seq)
    return result




def _take_chunk(memories: Iterator[Any]) -> list[Any]:
    """The next export chunk: up to a size that keeps every frame far below the 16 MiB limit."""
    chunk: list[Any] = []
    size = 0
    for memory in memories:
        chunk.append(memory)
        size += len(msgspec.json.encode(memory))
        if size >= EXPORT_CHUNK_BYTES or len(chunk) >= EXPORT_CHUNK_ITEMS:
            break
    return chunk
