"""The daemon's event loop: one Unix socket, many connections, frames in and out.

Each connection is read by its own task and its requests are answered in order; engine calls run
on a worker pool, so a slow or dead client only ever stalls its own task. Bad input is answered
with an error frame (or, when the framing itself is broken, by closing that one connection).

The worker that computed a reply also sends it (WorkerReply): handing the result back to the loop
first cost a thread wake-up and a loop turn between the engine and the client, a quarter of what
the socket added to a recall (bench/bench_daemon.py, docs/performance.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from hebbs.errors import DaemonBusy, HebbsError
from hebbs.paths import socket_path
from hebbs.protocol import (ERROR, HEADER, OK, PROGRESS, BadRequest, DaemonStatus, MessageTooLarge, Request,
                            Response, clip, decode_request, encode_frame, excerpt, frame_length)

from .handlers import SENT, Handlers, Subscription
from .limits import Limits
from .vaults import VaultPool

log = logging.getLogger("hebbs.daemon")
WORKERS = 16
DRAIN_SECONDS = 30.0
# Connections the kernel queues before the daemon accepts them (capped by net.core.somaxconn).
BACKLOG = 1024
# An error message quotes at most this much (of a path, a value) back to the client.
MAX_ERROR_CHARS = 2000


IDLE, FRAME = "idle", "frame"  # what a connection waits for: its next frame, or the rest of one begun


class Stalled(ConnectionError):
    """The client left a frame half-sent, or stopped taking its replies, for longer than frame_timeout."""


class WorkerReply:
    """One OK reply, encoded and written by the worker thread that computed it.

    Made on the loop while nothing else can write to the connection: its send lock is held, its
    write buffer is empty, and its task awaits this request. The worker writes to a duplicate of the
    socket's descriptor: should the transport close the socket meanwhile (the client reset the
    connection), the descriptor's number may be reused for another file, never written to by
    mistake. What the socket does not take at once goes to the transport, on the loop, before the
    request's task resumes (call_soon_threadsafe keeps order)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, writer: asyncio.StreamWriter, fd: int,
                 request_id: Any) -> None:
        self._loop = loop
        self._writer = writer
        self._fd = fd
        self._request_id = request_id
        # Set on the loop once a worker has it: from then on the worker closes it, else the loop does.
        self.handed_over = False

    def encode(self, data: Any) -> bytes | None:
        """The reply frame, or None when it is too large (the loop then sends the usual error)."""
        try:
            return encode_frame(Response(id=self._request_id, status=OK, data=data))
        except MessageTooLarge:
            return None

    def write(self, frame: bytes) -> None:
        try:
            written = os.write(self._fd, frame)
        except BlockingIOError:
            written = 0
        except OSError:
            return  # the client is gone: the loop sees the connection end on its next read
        if written < len(frame):
            self._loop.call_soon_threadsafe(self._writer.write, memoryview(frame)[written:])

    def close(self) -> None:
        os.close(self._fd)


class Connection:
    """One client: its stream, its subscriptions, and a lock so frames never interleave."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, limits: Limits) -> None:
        self.reader = reader
        self.writer = writer
        self.limits = limits
        self.subscriptions: dict[str, Subscription] = {}
        self._send_lock = asyncio.Lock()
        sock = writer.get_extra_info("socket")
        self._fd = -1 if sock is None else sock.fileno()
        # The idle and frame timeouts: what the connection waits for (IDLE, FRAME, or None while it
        # serves), since when, and one watchdog timer for its whole life. asyncio.timeout around each
        # read armed and cancelled a timer twice a request, about 25 µs each on a loaded 2-core machine.
        self._loop = asyncio.get_running_loop()
        self._waiting_for: str | None = None
        self._since = 0.0
        self._expired: str | None = None
        self._watchdog = self._loop.call_later(limits.frame_timeout, self._watch)

    async def send(self, response: Response) -> None:
        try:
            frame = encode_frame(response)
        except MessageTooLarge as exc:
            frame = encode_frame(Response(id=response.id, status=ERROR, status_code=MessageTooLarge.status_code,
                                          error=f"the reply is too large to send ({exc}); ask for less"))
        async with self._send_lock:
            self.writer.write(frame)
            await self._drained()

    async def _drained(self) -> None:
        if not self.writer.transport.get_write_buffer_size():
            return  # the kernel took it all: nothing to wait for (the common case)
        try:
            async with asyncio.timeout(self.limits.frame_timeout):
                await self.writer.drain()
        except TimeoutError:
            raise Stalled(f"the client took no reply data for {self.limits.frame_timeout:g}s") from None

    @contextlib.asynccontextmanager
    async def replying(self, request_id: Any) -> AsyncIterator[WorkerReply | None]:
        """A WorkerReply for this request, or None when the reply must go through the loop (earlier
        replies still queued, the connection closing). A worker it was handed over to closes it."""
        async with self._send_lock:
            transport = self.writer.transport
            if self._fd < 0 or transport.is_closing() or transport.get_write_buffer_size():
                yield None
                return
            reply = WorkerReply(self._loop, self.writer, os.dup(self._fd), request_id)
            try:
                yield reply
            finally:
                if not reply.handed_over:
                    reply.close()
            await self._drained()

    async def progress(self, request_id: Any, data: Any) -> None:
        await self.send(Response(id=request_id, status=PROGRESS, data=data))

    async def read_frame(self) -> bytes | None:
        """The next frame's body; None at a clean end of stream between frames, or when the
        connection sat idle past its timeout (a subscription keeps it open: it waits on purpose)."""
        try:
            self._wait_for(IDLE)
            try:
                first = await self.reader.readexactly(1)
            except asyncio.IncompleteReadError:
                if self._expired == IDLE:
                    log.info("closing a connection idle for %gs", self.limits.connection_idle_timeout)
                return None
            self._wait_for(FRAME)
            try:
                header = first + await self.reader.readexactly(HEADER.size - 1)
                return await self.reader.readexactly(frame_length(header))
            except asyncio.IncompleteReadError:
                if self._expired == FRAME:
                    raise Stalled(f"a frame was left half-sent for {self.limits.frame_timeout:g}s") from None
                raise
        finally:
            self._waiting_for = None

    def _wait_for(self, what: str) -> None:
        self._waiting_for = what
        self._since = self._loop.time()

    def _deadline(self) -> float | None:
        if self._waiting_for == FRAME:
            return self._since + self.limits.frame_timeout
        idle = self.limits.connection_idle_timeout
        if self._waiting_for == IDLE and idle > 0 and not self.subscriptions:
            return self._since + idle
        return None

    def _watch(self) -> None:
        """End the pending read of a connection past its deadline (read_frame then says why)."""
        deadline = self._deadline()
        now = self._loop.time()
        if deadline is not None and now >= deadline:
            self._expired = self._waiting_for
            self.writer.transport.abort()
            return
        # It looks again at the deadline, or sooner: a frame begun meanwhile must not outlast its timeout.
        soon = now + self.limits.frame_timeout
        self._watchdog = self._loop.call_at(soon if deadline is None else min(deadline, soon), self._watch)

    def close(self) -> None:
        """Stop the watchdog: the connection is done."""
        self._watchdog.cancel()


class Daemon:
    def __init__(self, home: Path, *, idle_timeout: float, vault_idle_timeout: float, version: str,
                 limits: Limits | None = None, fd_limit: int | None = None) -> None:
        self.home = home
        self.socket_path = socket_path(home)
        self.idle_timeout = idle_timeout
        self.version = version
        self.limits = limits or Limits()
        self.fd_limit = fd_limit
        self.started_at = time.time()
        self._executor = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="hebbs-engine")
        self.pool = VaultPool(home, vault_idle_timeout, self._executor)
        self.handlers = Handlers(self)
        self.connections: set[Connection] = set()
        self.requests = 0
        self.refused_busy = 0
        self.closed_stalled = 0
        self.model_id: str | None = None
        self._inflight = 0
        self._last_activity = time.monotonic()
        self._stop = asyncio.Event()
        # The Memory Palace web panel (hebbs.daemon.panel), served from this loop; None until started.
        self.panel: Any = None
        # Called with each request that went through the handlers: the panel's live updates.
        self.change_listeners: list[Callable[[Request], None]] = []

    # Running -------------------------------------------------------------------------------

    async def serve(self, on_listening: Callable[[], None] | None = None) -> None:
        server = await asyncio.start_unix_server(self._on_connect, path=str(self.socket_path), backlog=BACKLOG)
        os.chmod(self.socket_path, 0o600)
        log.info("listening on %s (pid %d, idle timeout %ss, vault idle timeout %ss, at most %d connections, "
                 "connection idle timeout %ss, frame timeout %ss, descriptor limit %s)", self.socket_path,
                 os.getpid(), self.idle_timeout, self.pool.idle_timeout, self.limits.max_connections,
                 self.limits.connection_idle_timeout, self.limits.frame_timeout, self.fd_limit)
        if on_listening is not None:
            on_listening()
        background = [asyncio.create_task(self._load_model()), asyncio.create_task(self._housekeeping()),
                      asyncio.create_task(self._start_panel())]
        try:
            await self._stop.wait()
        finally:
            log.info("shutting down")
            server.close()
            if self.panel is not None:
                await self.panel.stop()
            for task in background:
                task.cancel()
            # Let requests already running finish: closing a vault under a running engine call
            # would pull RocksDB out from under it.
            deadline = time.monotonic() + DRAIN_SECONDS
            while self._inflight and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            for conn in list(self.connections):
                conn.writer.close()
            await asyncio.gather(*background, return_exceptions=True)
            await self.pool.close_all()
            self._executor.shutdown(wait=True)

    def stop(self) -> None:
        self._stop.set()

    # The panel --------------------------------------------------------------------------------

    async def _start_panel(self) -> None:
        """Serve the panel at start when [panel] (or $HEBBS_PANEL) says so; a taken port is logged, not fatal."""
        from .panel import PanelService, autostart_port

        port = autostart_port(self.home)
        if port is None:
            return
        try:
            self.panel = self.panel or PanelService(self)
            await self.panel.serve(port)
        except Exception as exc:
            log.warning("the panel is not served: %s", exc)

    async def ensure_panel(self, port: int | None) -> Any:
        from .panel import PanelService

        self.panel = self.panel or PanelService(self)
        return await self.panel.ensure(port)

    def notify_change(self, request: Request) -> None:
        for listener in self.change_listeners:
            try:
                listener(request)
            except Exception:
                log.exception("a change listener failed")

    async def _load_model(self) -> None:
        """Load and warm the default model at start, so the first recall does not pay for it."""
        def load() -> str:
            from hebbs.store.embed import get_embedder

            embedder = get_embedder(None)
            embedder.embed(["warm up"])
            return embedder.model_id

        started = time.monotonic()
        try:
            self.model_id = await self.pool.run(load)
            log.info("model %s loaded in %.1fs", self.model_id, time.monotonic() - started)
        except Exception:
            log.exception("loading the default model failed; vaults will report the error when opened")

    async def _housekeeping(self) -> None:
        # Often enough that neither timeout is overshot by much, never a busy loop.
        timeouts = [t / 4 for t in (self.pool.idle_timeout, self.idle_timeout) if t > 0]
        tick = max(0.05, min([5.0, *timeouts]))
        while True:
            await asyncio.sleep(tick)
            try:
                await self.pool.close_idle()
            except Exception:
                log.exception("closing idle vaults failed")
            if self.idle_timeout > 0 and self._idle_for() >= self.idle_timeout:
                log.info("no requests for %.0fs: stopping", self.idle_timeout)
                self.stop()
                return

    def _idle_for(self) -> float:
        # An open subscription is a client waiting on us: the daemon is not idle while one exists.
        if self._inflight or any(c.subscriptions for c in self.connections):
            return 0.0
        # A browser showing the panel is a user looking: not idle either.
        if self.panel is not None and self.panel.active():
            return 0.0
        return time.monotonic() - self._last_activity

    # Connections ---------------------------------------------------------------------------

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self.connections) >= self.limits.max_connections:
            await self._refuse_busy(writer)
            return
        conn = Connection(reader, writer, self.limits)
        self.connections.add(conn)
        try:
            while not self._stop.is_set():
                try:
                    body = await conn.read_frame()
                except MessageTooLarge as exc:
                    await conn.send(Response(status=ERROR, status_code=exc.status_code, error=str(exc)))
                    break
                except asyncio.IncompleteReadError as exc:
                    log.info("connection closed mid-frame (%d bytes of %s)", len(exc.partial), exc.expected)
                    break
                if body is None:
                    break
                self.requests += 1
                self._inflight += 1
                self._last_activity = time.monotonic()
                try:
                    await self._answer(conn, body)
                finally:
                    self._inflight -= 1
                    self._last_activity = time.monotonic()
        except Stalled as exc:
            self.closed_stalled += 1
            log.info("closing a stalled connection: %s", exc)
        except (ConnectionError, OSError):
            pass  # the client went away; nothing to tell it
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("connection handler failed")
        finally:
            conn.close()
            conn.subscriptions.clear()
            self.connections.discard(conn)
            await _close(writer)

    async def _refuse_busy(self, writer: asyncio.StreamWriter) -> None:
        """Tell a client over the connection limit so, in a frame it reads as the reply to its request."""
        self.refused_busy += 1
        log.warning("refusing a connection: %d connections open, the limit (--max-connections)",
                    len(self.connections))
        frame = encode_frame(Response(status=ERROR, status_code=DaemonBusy.status_code,
                                      error=f"the daemon is serving {len(self.connections)} connections, its limit; "
                                            "close idle clients, try again shortly, or raise --max-connections"))
        try:
            writer.write(frame)
            async with asyncio.timeout(1.0):
                await writer.drain()
        except (TimeoutError, ConnectionError, OSError):
            pass
        await _close(writer)

    async def _answer(self, conn: Connection, body: bytes) -> None:
        request_id: Any = None
        try:
            request = decode_request(body)
            request_id = request.id
            data = await self.handlers.dispatch(conn, request)
            if data is SENT:
                return  # the worker that computed it sent it
            response = Response(id=request_id, status=OK, data=data)
        except BadRequest as exc:
            response = Response(id=exc.request_id, status=ERROR, status_code=exc.status_code, error=str(exc))
        except HebbsError as exc:
            response = Response(id=request_id, status=ERROR, status_code=exc.status_code,
                                error=clip(str(exc), MAX_ERROR_CHARS))
        except ConnectionError:
            raise  # this client is gone (a progress frame could not be sent): no reply to give
        except Exception as exc:
            log.exception("request %s failed", excerpt(request_id))
            response = Response(id=request_id, status=ERROR, status_code="INTERNAL",
                                error=clip(f"{type(exc).__name__}: {exc}", MAX_ERROR_CHARS))
        await conn.send(response)

    def status(self) -> DaemonStatus:
        return DaemonStatus(
            version=self.version, pid=os.getpid(), home=str(self.home), socket=str(self.socket_path),
            started_at=int(self.started_at * 1_000_000), uptime_s=round(time.time() - self.started_at, 3),
            idle_timeout_s=self.idle_timeout, vault_idle_timeout_s=self.pool.idle_timeout, model=self.model_id,
            connections=len(self.connections), max_connections=self.limits.max_connections,
            refused_busy=self.refused_busy, subscriptions=sum(len(c.subscriptions) for c in self.connections),
            requests=self.requests, open_vaults=self.pool.describe(),
            panel=None if self.panel is None else self.panel.serving(),
        )


async def _close(writer: asyncio.StreamWriter) -> None:
    if writer.transport.get_write_buffer_size():
        # Replies the client never took: close() would wait for them to drain, holding the
        # descriptor for as long as the client stays deaf. Drop them.
        writer.transport.abort()
        return
    writer.close()
    try:
        async with asyncio.timeout(1.0):
            await writer.wait_closed()
    except (TimeoutError, ConnectionError, OSError):
        pass
