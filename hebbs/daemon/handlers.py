"""What each command does: the engine calls behind the protocol.

Every handler takes the connection, the request and its decoded command, and returns the reply's
data (progress frames, where a command streams, go out through the connection as it runs).

A request that is one engine call on one vault (recall, prime, get, remember) is also described by
`Handlers.direct`: the connection's own thread runs that call itself when the vault is open, without
the two thread hand-offs of going through the event loop and a worker (server.py).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import os
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Protocol

import msgspec

from hebbs import validate
from hebbs.errors import Cancelled, InvalidInput, NotFound
from hebbs.paths import VAULT_DIR
from hebbs.recall import brains, scoring
from hebbs.protocol import (AddEdge, Close, Closed, ContradictionAuto, ContradictionCommit, ContradictionPrepare,
                            DaemonStatus, Edges, Export, ExportChunk, ExportDone, ImportRecords, Feed, Fed, Forget, ForgetCandidates,
                            Forgotten, Get, History, Index, IndexCancel, IndexCancelled, IndexFollow,
                            IndexingInProgress, Insights, Inspect, Inspection, List, Neighbors, Panel, PanelState, Ping,
                            Pong, Prime, Queries, Recall, Reflect, ReflectCommit, ReflectPrepare, Reinforce, Remember,
                            RememberItem, RemoveEdge, Removed, Request, Revise, ReviseItem, ReviseMany, ScanSummary,
                            ShowSource, Status, Stopping, Subscribe, Subscribed, SubscriptionPush, Unconsolidate,
                            Consolidate)
from hebbs.schema import Memory, RecallResults, ScoringWeights, SourceSection

from .vaults import VaultPool, VaultSlot

if TYPE_CHECKING:
    from hebbs.engine import Engine

FEED_TOP_K = 20
EXPORT_CHUNK_BYTES = 4 * 1024 * 1024
EXPORT_CHUNK_ITEMS = 1000
SHORT_ID_MIN = 6
ULID_LENGTH = 26


class Subscription:
    """What one subscribe asked for, and which memories it has already been sent."""

    def __init__(self, subscription_id: str, request_id: Any, slot: VaultSlot, entity_id: str | None,
                 threshold: float) -> None:
        self.id = subscription_id
        self.request_id = request_id
        self.slot = slot
        self.entity_id = entity_id
        self.threshold = threshold
        self.pushed: set[str] = set()


class Work(NamedTuple):
    """One engine call on one vault (or, for a request without one, a call given None), and whether
    it writes (then the change listeners hear of it)."""

    call: Callable[[Any], Any]
    writes: bool = False
    on_vault: bool = True


class Connection(Protocol):
    """The client a request came from (server.Connection): where progress frames and pushes go."""

    subscriptions: dict[str, Subscription]

    async def progress(self, request_id: Any, data: Any) -> None: ...


class Daemon(Protocol):
    """What the handlers need of the server that owns them (server.Daemon)."""

    version: str
    pool: VaultPool
    change_listeners: list[Callable[[Request], None]]

    def notify_change(self, request: Request) -> None: ...

    def status(self) -> DaemonStatus: ...

    def stop(self) -> None: ...


class Handlers:
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.pool = daemon.pool

    async def dispatch(self, conn: Connection, request: Request) -> Any:
        command = request.command
        handler: Callable[..., Any] = getattr(self, "_" + command.__struct_config__.tag)
        data = await handler(conn, request, command)
        self.daemon.notify_change(request)
        return data

    def direct(self, request: Request) -> Work | None:
        """The engine call a request comes to, when it is one call on one vault (recall and prime of a
        single vault, get, remember) or needs nothing of the daemon's loop (ping), for a connection's
        own thread to run; None for any other."""
        command = request.command
        if isinstance(command, Recall) and command.vaults is None:
            return Work(_recalling(command))
        if isinstance(command, Prime) and command.vaults is None:
            return Work(_priming(command))
        if isinstance(command, Get):
            return Work(_getting(command))
        if isinstance(command, Remember):
            return Work(_remembering(command), writes=True)
        if isinstance(command, Ping):
            return Work(lambda _: self._pong(), on_vault=False)
        return None

    async def _call(self, request: Request, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run fn(engine, ...) on the request's vault, off the event loop."""
        return await self._call_at(request.vault_path, fn, *args, **kwargs)

    async def _call_at(self, vault_path: str | None, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        slot = self.pool.slot(vault_path)
        async with self.pool.use(slot) as engine:
            return await self.pool.run(fn, engine, *args, **kwargs)

    async def _reply(self, conn: Connection, request: Request, fn: Callable[["Engine"], Any]) -> Any:
        """fn(engine) on the request's vault, on a worker thread; its result is the reply."""
        return await self._call(request, fn)

    async def _reply_write(self, conn: Connection, request: Request, fn: Callable[["Engine"], Any]) -> Any:
        """_reply for a write. Writers that come through the loop take a worker one at a time per vault
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

    # Daemon ---------------------------------------------------------------------------------

    async def _ping(self, conn: Connection, request: Request, command: Any) -> Any:
        return self._pong()

    def _pong(self) -> Pong:
        return Pong(version=self.daemon.version, pid=os.getpid())

    async def _status(self, conn: Connection, request: Request, command: Status) -> Any:
        status = self.daemon.status()
        if request.vault_path:
            status.vault = await self._call(request, lambda engine: engine.stats())
        return status

    async def _panel(self, conn: Connection, request: Request, command: Panel) -> PanelState:
        return await self.daemon.ensure_panel(command.port)

    async def _shutdown(self, conn: Connection, request: Request, command: Any) -> Any:
        # Stop once this reply is on its way, not before.
        asyncio.get_running_loop().call_later(0.05, self.daemon.stop)
        return Stopping(pid=os.getpid())

    # Memories -------------------------------------------------------------------------------

    async def _remember(self, conn: Connection, request: Request, command: Remember) -> Any:
        return await self._reply_write(conn, request, _remembering(command))

    async def _unconsolidate(self, conn: Connection, request: Request, command: Unconsolidate) -> Memory:
        return await self._reply_write(conn, request,
                                       lambda engine: engine.unconsolidate(resolve_id(engine, command.id)))

    async def _consolidate(self, conn: Connection, request: Request, command: Consolidate) -> list[tuple[str, str]]:
        return await self._reply_write(conn, request, lambda engine: engine.consolidate(dry_run=command.dry_run))

    async def _get(self, conn: Connection, request: Request, command: Get) -> Memory:
        return await self._reply(conn, request, _getting(command))

    async def _revise(self, conn: Connection, request: Request, command: Revise) -> Memory:
        def revise(engine: "Engine") -> Memory:
            entity = ... if command.entity_id is msgspec.UNSET else command.entity_id
            return engine.revise(resolve_id(engine, command.id), content=command.content,
                                 importance=command.importance, context=command.context, entity_id=entity,
                                 source=command.source)

        return await self._reply_write(conn, request, revise)

    async def _revise_many(self, conn: Connection, request: Request, command: ReviseMany) -> list[Memory]:
        return await self._reply_write(conn, request, lambda engine: engine.revise_many(
            [_revision(engine, item) for item in command.items]))

    async def _history(self, conn: Connection, request: Request, command: History) -> list[Memory]:
        return await self._reply(conn, request, lambda engine: engine.history(resolve_id(engine, command.id)))

    # Edges ----------------------------------------------------------------------------------

    async def _add_edge(self, conn: Connection, request: Request, command: AddEdge) -> Any:
        return await self._reply_write(conn, request, lambda engine: engine.add_edge(
            resolve_id(engine, command.source), command.edge_type, resolve_id(engine, command.target),
            command.confidence))

    async def _remove_edge(self, conn: Connection, request: Request, command: RemoveEdge) -> Removed:
        def remove_edge(engine: "Engine") -> Removed:
            engine.remove_edge(resolve_id(engine, command.source), command.edge_type,
                               resolve_id(engine, command.target))
            return Removed(removed=1)

        return await self._reply_write(conn, request, remove_edge)

    async def _edges(self, conn: Connection, request: Request, command: Edges) -> Any:
        return await self._reply(conn, request, lambda engine: engine.edges(resolve_id(engine, command.id),
                                                                     command.direction))

    async def _neighbors(self, conn: Connection, request: Request, command: Neighbors) -> Any:
        k = validate.top_k(command.k)
        return await self._reply(conn, request, lambda engine: engine.neighbors(resolve_id(engine, command.id), k))

    async def _forget(self, conn: Connection, request: Request, command: Forget) -> Forgotten:
        def forget(engine: "Engine") -> Forgotten:
            ids = None if command.ids is None else [resolve_id(engine, i) for i in command.ids]
            if ids is not None and not ids and command.entity_id is None:
                return Forgotten(forgotten=0)
            return Forgotten(forgotten=engine.forget(ids, entity_id=command.entity_id))

        return await self._reply_write(conn, request, forget)

    async def _inspect(self, conn: Connection, request: Request, command: Inspect) -> Inspection:
        def inspect(engine: "Engine") -> Inspection:
            memory = engine.get(resolve_id(engine, command.id))
            history = engine.history(memory.id)
            restated = [old.created_at for old in history if old.restatement_of == memory.id]
            return Inspection(memory=memory, edges=engine.edges(memory.id), history=history,
                              accesses=engine.accesses(memory.id), restatements=memory.restatements,
                              last_restated_at=max(restated, default=None))

        return await self._reply(conn, request, inspect)

    async def _source(self, conn: Connection, request: Request, command: ShowSource) -> SourceSection:
        def source(engine: "Engine") -> SourceSection:
            try:
                memory_id = resolve_id(engine, command.id)
            except NotFound:
                memory_id = command.id  # a forgotten memory: its kept original may still name it
            return engine.source(memory_id)

        return await self._reply(conn, request, source)

    async def _queries(self, conn: Connection, request: Request, command: Queries) -> Any:
        return await self._reply(conn, request, lambda engine: engine.queries(command.limit))

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

    async def _import_records(self, conn: Connection, request: Request, command: ImportRecords) -> Any:
        return await self._reply_write(conn, request, lambda engine: engine.import_records(command.records))

    # Reflection, contradictions, decay -------------------------------------------------------
    # Prepares and commits write (a session, a dropped candidate, insights, edges): one at a time per
    # vault. reflect and contradiction_auto wait minutes on an LLM: they run on the concurrent path so
    # they never hold the vault's write slot; the engine takes its own lock for the commit inside.

    async def _reflect_prepare(self, conn: Connection, request: Request, command: ReflectPrepare) -> Any:
        return await self._reply_write(conn, request, lambda engine: engine.reflect_prepare(
            entity_id=command.entity_id, since=command.since, max_memories=command.max_memories))

    async def _reflect_commit(self, conn: Connection, request: Request, command: ReflectCommit) -> Any:
        return await self._reply_write(conn, request,
                                       lambda engine: engine.reflect_commit(command.session_id, command.insights))

    async def _insights(self, conn: Connection, request: Request, command: Insights) -> Any:
        return await self._reply(conn, request, lambda engine: engine.insights(
            entity_id=command.entity_id, min_confidence=command.min_confidence, max_results=command.max_results))

    async def _contradiction_prepare(self, conn: Connection, request: Request, command: ContradictionPrepare) -> Any:
        return await self._reply_write(conn, request, lambda engine: engine.contradiction_prepare(command.max_results))

    async def _contradiction_commit(self, conn: Connection, request: Request, command: ContradictionCommit) -> Any:
        return await self._reply_write(conn, request, lambda engine: engine.contradiction_commit(command.verdicts))

    async def _reflect(self, conn: Connection, request: Request, command: Reflect) -> Any:
        return await self._reply(conn, request, lambda engine: engine.reflect(
            entity_id=command.entity_id, since=command.since, max_memories=command.max_memories))

    async def _contradiction_auto(self, conn: Connection, request: Request, command: ContradictionAuto) -> Any:
        return await self._reply(conn, request, lambda engine: engine.contradiction_auto(
            max_results=command.max_results, min_confidence=command.min_confidence))

    async def _forget_candidates(self, conn: Connection, request: Request, command: ForgetCandidates) -> Any:
        return await self._reply(conn, request, lambda engine: engine.forget_candidates(command.now))

    # Recall ---------------------------------------------------------------------------------

    async def _recall(self, conn: Connection, request: Request, command: Recall) -> Any:
        recall = _recalling(command)
        if command.vaults is None:
            return await self._reply(conn, request, recall)
        answers = await self._each_vault(request, command.vaults, recall)
        return brains.merge_recall(answers, scoring.check_weights(command.weights or ScoringWeights()),
                                   validate.top_k(command.top_k))

    async def _reinforce(self, conn: Connection, request: Request, command: Reinforce) -> list[Memory]:
        return await self._reply_write(conn, request, lambda engine: engine.reinforce(
            [resolve_id(engine, i) for i in command.ids], via=command.via))

    async def _prime(self, conn: Connection, request: Request, command: Prime) -> Any:
        prime = _priming(command)
        if command.vaults is None:
            return await self._reply(conn, request, prime)
        answers = await self._each_vault(request, command.vaults, prime)
        return brains.merge_prime(answers, ScoringWeights(), command.max_memories)

    async def _each_vault(self, request: Request, extra: list[str],
                          fn: Callable[[Engine], RecallResults]) -> list[brains.VaultRecall]:
        """fn on the request's vault and each extra one, concurrently; labelled for hebbs.recall.brains."""
        paths: list[str] = []
        for path in [request.vault_path, *extra]:
            slot = self.pool.slot(path)
            if str(slot.path) not in paths:
                paths.append(str(slot.path))
        home = self.pool.home.resolve()
        found = await asyncio.gather(*(self._call_at(path, fn) for path in paths))
        return [brains.VaultRecall(label=brains.GLOBAL if Path(path) == home else brains.PROJECT, path=path,
                                   found=answer) for path, answer in zip(paths, found)]

    # Subscriptions --------------------------------------------------------------------------

    async def _subscribe(self, conn: Connection, request: Request, command: Subscribe) -> Subscribed:
        slot = self.pool.slot(request.vault_path)
        threshold = validate.unit_float(command.confidence_threshold, "confidence_threshold")
        entity_id = validate.entity(command.entity_id)
        subscription = Subscription(secrets.token_hex(6), request.id, slot, entity_id, threshold)
        conn.subscriptions[subscription.id] = subscription
        return Subscribed(subscription_id=subscription.id, entity_id=entity_id, confidence_threshold=threshold)

    async def _feed(self, conn: Connection, request: Request, command: Feed) -> Fed:
        text = validate.content(command.text, "text")
        if command.subscription_id is not None:
            if command.subscription_id not in conn.subscriptions:
                raise NotFound(f"no subscription {command.subscription_id} on this connection")
            subscriptions = [conn.subscriptions[command.subscription_id]]
        else:
            subscriptions = list(conn.subscriptions.values())
        if not subscriptions:
            raise InvalidInput("feed needs a subscription on this connection: send subscribe first")
        pushed = 0
        for sub in subscriptions:
            async with self.pool.use(sub.slot) as engine:
                found = await self.pool.run(engine.recall, text, strategies=["similarity"], top_k=FEED_TOP_K,
                                            entity_id=sub.entity_id, reinforce=False)
            fresh = [r for r in found.results
                     if (r.confidence or 0.0) >= sub.threshold and r.memory.id not in sub.pushed]
            if fresh:
                sub.pushed.update(r.memory.id for r in fresh)
                await conn.progress(sub.request_id, SubscriptionPush(subscription_id=sub.id, matches=fresh))
                pushed += len(fresh)
        return Fed(pushed=pushed)

    async def _close(self, conn: Connection, request: Request, command: Close) -> Closed:
        if command.subscription_id is None:
            closed = len(conn.subscriptions)
            conn.subscriptions.clear()
            return Closed(closed=closed)
        if conn.subscriptions.pop(command.subscription_id, None) is None:
            raise NotFound(f"no subscription {command.subscription_id} on this connection")
        return Closed(closed=1)

    # Markdown vaults ------------------------------------------------------------------------

    async def _index(self, conn: Connection, request: Request, command: Index) -> Any:
        from hebbs.vault import indexer as vault

        slot, root = self._notes_vault(request, command.path)
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
                    plan = await self._stream(conn, request.id, slot, lambda progress: vault.scan_vault(
                        engine, root, paths=command.paths, progress=progress))
                    result: Any = ScanSummary(
                        files_scanned=plan.files_scanned, files_unchanged=plan.files_unchanged,
                        files_changed=plan.files_changed, files_removed=plan.files_removed,
                        pending=plan.pending(), warnings=plan.warnings, seconds=plan.seconds)
                elif command.phase == 2:
                    result = await self._stream(conn, request.id, slot, lambda progress: vault.apply_plan(
                        engine, root, progress=progress))
                else:
                    result = await self._stream(conn, request.id, slot, lambda progress: vault.index_vault(
                        engine, root, progress=progress))
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
        from hebbs.vault.status import list_vault

        _, root = self._notes_vault(request, command.path)
        return await self.pool.run(list_vault, root, sections=command.sections)

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
                      run: Callable[[Callable[[Any], None]], Any]) -> Any:
        """Run a blocking index job that reports progress, sending each report as a progress frame to
        the client and to whoever follows the run (index_follow).

        Reports arrive from a worker thread; when they come faster than the client reads, only the
        newest is sent. A report is also where the job stops when cancelled (index_cancel, or the
        client went away): the indexer commits in batches and keeps its manifest marked dirty until
        it is done, so the next run adopts what was committed and does the rest.
        """
        loop = asyncio.get_running_loop()
        latest: list[Any] = []
        wake = asyncio.Event()
        cancel = slot.index_cancel

        def report(progress: Any) -> None:
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"the index run was cancelled; what it committed stays, and "
                                f"`hebbs index {_quote(slot.path.parent)}` does the rest")

            def put() -> None:
                latest[:] = [progress]
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
            if latest:
                progress, latest[:] = msgspec.to_builtins(latest[0]), []
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


def _recalling(command: Recall) -> Callable[["Engine"], RecallResults]:
    def recall(engine: "Engine") -> RecallResults:
        return engine.recall(
            command.cue, strategies=command.strategies, top_k=command.top_k, entity_id=command.entity_id,
            time_range=command.time_range, weights=command.weights,
            include_superseded=command.include_superseded, reinforce=command.reinforce,
            mmr_lambda=command.mmr_lambda,
            seed=None if command.seed is None else resolve_id(engine, command.seed), direction=command.direction,
            max_depth=command.max_depth, edge_types=command.edge_types, alpha=command.alpha,
            analogy=command.analogy, now=command.now, associate=command.associate)
    return recall


def _priming(command: Prime) -> Callable[["Engine"], RecallResults]:
    return lambda engine: engine.prime(command.entity_id, command.similarity_cue, command.max_memories,
                                       now=command.now)


def _getting(command: Get) -> Callable[["Engine"], Memory]:
    return lambda engine: engine.get(resolve_id(engine, command.id))


def _remembering(command: Remember) -> Callable[["Engine"], list[Memory] | Memory]:
    """The remember call (its input checked now, before any vault is touched)."""
    if command.items is not None:
        if command.content is not None:
            raise InvalidInput("remember takes content (one memory) or items (a batch), not both")
        items = [_item(i) for i in command.items]
    elif command.content is None:
        raise InvalidInput("remember needs content (or items for a batch)")
    else:
        items = [_item(command)]

    def remember(engine: "Engine") -> list[Memory] | Memory:
        for item in items:  # short ids, as text output shows them, name what a memory supersedes
            item["supersedes"] = [resolve_id(engine, old) for old in item["supersedes"] or ()]
        memories = engine.remember_many(items, check_contradictions=command.check_contradictions,
                                        consolidate=command.consolidate)
        return memories if command.items is not None else memories[0]
    return remember


def _item(source: Remember | RememberItem) -> dict[str, Any]:
    return {"content": source.content, "importance": source.importance, "context": source.context,
            "entity_id": source.entity_id, "created_at": source.created_at, "kind": source.kind,
            "source": source.source, "supersedes": source.supersedes, "edges": source.edges, "key": source.key}


def _revision(engine: "Engine", item: ReviseItem) -> dict[str, Any]:
    change: dict[str, Any] = {"id": resolve_id(engine, item.id), "content": item.content,
                              "importance": item.importance, "context": item.context, "source": item.source}
    if item.entity_id is not msgspec.UNSET:
        change["entity_id"] = item.entity_id
    return change


def _retrieved(run: "asyncio.Future[Any]") -> None:
    """A run nobody followed may fail: that is reported to its client, not as an unretrieved exception."""
    if not run.cancelled():
        run.exception()


def _quote(path: Path) -> str:
    import shlex

    return shlex.quote(str(path))


def resolve_id(engine: "Engine", text: str) -> str:
    """A full ULID as is; a shorter text as the unique memory id ending with it (what text output shows)."""
    if len(text) >= ULID_LENGTH:
        return text
    if len(text) < SHORT_ID_MIN:
        raise InvalidInput(f"id {text!r} is too short: give the full id or at least its last {SHORT_ID_MIN} characters")
    suffix = text.upper()
    ids = (m.id for m in engine.memories(include_revisions=True) if m.id.endswith(suffix))
    matches = list(itertools.islice(ids, 2))
    if not matches:
        raise NotFound(f"no memory id ends with {text!r}")
    if len(matches) > 1:
        raise InvalidInput(f"id suffix {text!r} is ambiguous: give more characters")
    return matches[0]


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
