"""The daemon's socket: one Unix socket, a thread per connection, and an event loop for the rest.

Each connection is served by a thread of its own, with blocking reads: it reads a request, answers
it, and reads the next, so a slow or dead client only ever stalls its own thread. A request that is
one engine call on an open vault (recall, prime, get, remember: Handlers.direct) is run by that
thread itself. Every other request goes to the event loop, whose handlers run their engine calls on
a worker pool; meanwhile the connection's thread sends the progress frames the handler asks for.

Before, the loop read every connection and handed each call to a worker, which wrote the reply: two
thread wake-ups between the client and the engine (on a 2-core VM, waking an idle thread is costly),
plus the loop's own Python. That was most of what the socket added to a recall (bench/bench_daemon.py,
docs/performance.md).

Bad input is answered with an error frame (or, when the framing itself is broken, by closing that one
connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import queue
import select
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec

from hebbs.errors import DaemonBusy, HebbsError
from hebbs.paths import socket_path
from hebbs.protocol import (ERROR, HEADER, OK, PROGRESS, BadRequest, DaemonStatus, MessageTooLarge, Pong, Request,
                            Response, Stopping, clip, decode_request, encode_frame, excerpt, frame_length)

from .handlers import Handlers, Work
from .subscriptions import Subscription
from .limits import Limits
from .models import DEFAULT_MODEL_MEMORY_MB, ModelPool
from .vaults import VaultPool

log = logging.getLogger("hebbs.daemon")
WORKERS = 16
DRAIN_SECONDS = 30.0
# Connections the kernel queues before the daemon accepts them (capped by net.core.somaxconn).
BACKLOG = 1024
# An error message quotes at most this much (of a path, a value) back to the client.
MAX_ERROR_CHARS = 2000
RECV_CHUNK = 1 << 16
# Frames up to this size are read without asking the budget: every request but a big batch.
SMALL_FRAME = 1 << 20
# What all connections together may hold of frames still arriving (a frame is up to 16 MiB): a
# bigger one waits for room, up to its frame timeout, without its bytes being read.
FRAME_MEMORY = 64 << 20


class FrameBudget:
    """The bytes of unfinished large frames held across connections, bounded: many clients each
    leaving a 16 MiB frame one byte short cannot make the daemon hold them all."""

    def __init__(self, total: int = FRAME_MEMORY) -> None:
        self.total = total
        self.held = 0
        self._room = threading.Condition()

    def take(self, size: int, deadline: float) -> bool:
        """Reserve `size` bytes; False when there was no room before the deadline."""
        size = min(size, self.total)  # a frame larger than the budget waits until it is all free
        with self._room:
            while self.held + size > self.total:
                left = deadline - time.monotonic()
                if left <= 0 or not self._room.wait(left):
                    if self.held + size > self.total:
                        return False
            self.held += size
            return True

    def give(self, size: int) -> None:
        with self._room:
            self.held -= min(size, self.total)
            self._room.notify_all()


class Stalled(ConnectionError):
    """The client left a frame half-sent, or stopped taking its replies, for longer than frame_timeout."""


class _Idle(Exception):
    """The connection sent nothing for its idle timeout."""


class Connection:
    """One client, served by its own thread: its socket, its subscriptions, and the frames the loop
    hands it to send while one of its requests runs there (progress, subscription pushes)."""

    def __init__(self, sock: socket.socket, limits: Limits, loop: asyncio.AbstractEventLoop,
                 budget: FrameBudget | None = None) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.limits = limits
        self.budget = budget or FrameBudget()
        self.subscriptions: dict[str, Subscription] = {}
        self._loop = loop
        self._buffer = bytearray()
        # (frame, the loop's future to settle once it is sent), or None: the request on the loop is done.
        self._outbox: "queue.SimpleQueue[tuple[bytes, asyncio.Future[None]] | None]" = queue.SimpleQueue()
        # Whether a request of this connection runs on the loop, so that its thread takes frames to send.
        self._taking = False
        self._taking_lock = threading.Lock()
        # When the connection began waiting for its next request (None: not waiting), and whether the
        # daemon closed it to make room (evict). The lock makes reading a request's first bytes and
        # being closed for idleness exclusive: a request read is answered, one not read is not run.
        self.idle_since: float | None = None
        self._evicted = False
        self._idle_lock = threading.Lock()
        # A pipe the loop writes to when a subscription of this connection has a push waiting: it wakes
        # the thread from its wait for the next request (made at the first subscribe).
        self._wake: tuple[int, int] | None = None
        self._wake_lock = threading.Lock()  # a wake from the loop never writes to a pipe being closed

    # Reading -------------------------------------------------------------------------------

    def read_frame(self) -> bytes | None:
        """The next frame's body; None at a clean end of stream between frames, or when the
        connection sat idle past its timeout (a subscription keeps it open: it waits on purpose)."""
        idle = self.limits.connection_idle_timeout
        try:
            if not self._await_request(None if idle <= 0 or self.subscriptions else time.monotonic() + idle):
                return None
        except _Idle:
            log.info("closing a connection idle for %gs", idle)
            return None
        deadline = time.monotonic() + self.limits.frame_timeout
        try:
            if self._fill(HEADER.size, deadline):
                length = frame_length(bytes(self._buffer[:HEADER.size]))
                reserved = length if length > SMALL_FRAME else 0
                if reserved and not self.budget.take(reserved, deadline):
                    raise Stalled(f"no room for a {length >> 20} MiB frame for {self.limits.frame_timeout:g}s: "
                                  "other connections hold the daemon's frame memory")
                try:
                    if self._fill(HEADER.size + length, deadline):
                        body = bytes(self._buffer[HEADER.size:HEADER.size + length])
                        del self._buffer[:HEADER.size + length]
                        return body
                finally:
                    if reserved:
                        self._buffer = bytearray(self._buffer)  # give the grown buffer's memory back
                        self.budget.give(reserved)
        except _Idle:
            raise Stalled(f"a frame was left half-sent for {self.limits.frame_timeout:g}s") from None
        log.info("connection closed mid-frame (%d bytes)", len(self._buffer))
        return None

    def _await_request(self, deadline: float | None) -> bool:
        """Wait for the next request's first bytes: False at the end of the stream or once evicted; _Idle
        past the deadline."""
        if self._buffer:
            return True
        with self._idle_lock:
            self.idle_since = time.monotonic()
        try:
            while True:
                self._send_pushes()
                with self._idle_lock:
                    if self._evicted:
                        return False
                    try:
                        chunk: bytes | None = self.sock.recv(RECV_CHUNK)
                        self.idle_since = None
                    except BlockingIOError:
                        chunk = None
                if chunk is None:
                    self._wait_request(deadline)
                    continue
                self._buffer += chunk
                return bool(chunk)
        finally:
            with self._idle_lock:
                self.idle_since = None

    def _wait_request(self, deadline: float | None) -> None:
        """Wait until the socket is readable or a push waits to be sent; _Idle past the deadline."""
        if self._wake is None:
            return self._wait(select.POLLIN, deadline)
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic()) * 1000
        poller = select.poll()
        poller.register(self.sock, select.POLLIN)
        poller.register(self._wake[0], select.POLLIN)
        ready = poller.poll(timeout)
        if not ready:
            raise _Idle()
        if any(fd == self._wake[0] for fd, _ in ready):
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake[0], 4096)

    def _send_pushes(self) -> None:
        """Send what the subscriptions of this connection hold for it (on its own thread, between requests)."""
        for subscription in list(self.subscriptions.values()):
            push = subscription.take()
            if push is not None:
                self.send_frame(_frame(Response(id=subscription.request_id, status=PROGRESS, data=push)))

    def open_pushes(self) -> None:
        with self._wake_lock:
            if self._wake is None:
                read, write = os.pipe()
                os.set_blocking(read, False)
                os.set_blocking(write, False)
                self._wake = (read, write)

    def wake(self) -> None:
        """Tell the connection's thread a push waits (from the loop; never blocks: a full pipe already wakes it)."""
        with self._wake_lock:
            if self._wake is not None:
                with contextlib.suppress(OSError):
                    os.write(self._wake[1], b"!")

    def close(self) -> None:
        self.sock.close()
        with self._wake_lock:
            wake, self._wake = self._wake, None
        for fd in wake or ():
            os.close(fd)

    def evict(self) -> bool:
        """Close this connection if it waits for a request (and holds no subscription): the daemon is
        full and a new client needs its slot. False when it is busy: it stays."""
        with self._idle_lock:
            if self.idle_since is None or self.subscriptions or self._evicted or self._request_arrived():
                return False
            self._evicted = True
        self.shutdown()
        return True

    def _request_arrived(self) -> bool:
        """Whether bytes of a request wait unread on the socket (its thread is about to take them)."""
        try:
            return bool(self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return False  # a broken connection: closing it is no loss

    def _fill(self, size: int, deadline: float | None) -> bool:
        """Read until the buffer holds `size` bytes: False at the end of the stream; _Idle past the deadline."""
        while len(self._buffer) < size:
            try:
                # At most a chunk at a time: recv allocates what it is asked for before the bytes come.
                chunk = self.sock.recv(RECV_CHUNK if size - len(self._buffer) <= RECV_CHUNK else 1 << 20)
            except BlockingIOError:
                self._wait(select.POLLIN, deadline)
                continue
            if not chunk:
                return False
            self._buffer += chunk
        return True

    def _wait(self, event: int, deadline: float | None) -> None:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic()) * 1000
        poller = select.poll()
        poller.register(self.sock, event)
        if not poller.poll(timeout):
            raise _Idle()

    # Writing -------------------------------------------------------------------------------

    def send(self, response: Response) -> None:
        self.send_frame(_frame(response))

    def send_frame(self, frame: bytes) -> None:
        view = memoryview(frame)
        deadline = time.monotonic() + self.limits.frame_timeout
        while view:
            try:
                view = view[self.sock.send(view):]
            except BlockingIOError:
                try:
                    self._wait(select.POLLOUT, deadline)
                except _Idle:
                    raise Stalled(f"the client took no reply data for {self.limits.frame_timeout:g}s") from None

    async def progress(self, request_id: Any, data: Any) -> None:
        """Send a progress frame (on the loop, for a handler): this connection's thread sends it."""
        frame = _frame(Response(id=request_id, status=PROGRESS, data=data))
        sent = self._loop.create_future()
        with self._taking_lock:
            if not self._taking:
                raise ConnectionResetError("the connection is no longer waiting for this request")
            self._outbox.put((frame, sent))
        await sent

    def on_loop(self, answer: "Future[Response]") -> Response:
        """Wait for a request running on the loop, sending the frames it hands over meanwhile."""
        answer.add_done_callback(lambda _: self._outbox.put(None))
        alive = True
        while (item := self._outbox.get()) is not None:
            frame, sent = item
            error: BaseException | None = None
            if alive:
                try:
                    self.send_frame(frame)
                except (ConnectionError, OSError) as exc:
                    alive, error = False, exc
            else:
                error = ConnectionResetError("the client went away")
            self._loop.call_soon_threadsafe(_settle, sent, error)
        with self._taking_lock:
            self._taking = False
            while True:  # frames handed over after the request ended: nobody will send them
                try:
                    leftover = self._outbox.get_nowait()
                except queue.Empty:
                    break
                if leftover is not None:
                    self._loop.call_soon_threadsafe(_settle, leftover[1], ConnectionResetError("request ended"))
        return answer.result()

    def taking_frames(self) -> None:
        with self._taking_lock:
            self._taking = True

    def shutdown(self) -> None:
        """End the connection from outside its thread: a blocked read or write returns at once."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)


def _frame(response: Response) -> bytes:
    """The reply's frame; whatever the reply holds, a frame goes out (a reply that cannot be encoded
    would end the connection without one, and the client would think the daemon died)."""
    try:
        try:
            return encode_frame(response)
        except UnicodeEncodeError:
            # A name read from disk that is not UTF-8 (Python holds its bytes as lone surrogates: 0xE9 as
            # "\udce9"): JSON cannot carry it, so it goes escaped ("caf\\xe9.md") rather than no reply at all.
            return encode_frame(_escaped(msgspec.to_builtins(response)))
    except MessageTooLarge as exc:
        return encode_frame(Response(id=response.id, status=ERROR, status_code=MessageTooLarge.status_code,
                                     error=f"the reply is too large to send ({exc}); ask for less"))
    except Exception as exc:  # noqa: BLE001 - a bug, answered as one
        log.exception("the reply to request %s could not be encoded", excerpt(response.id))
        return encode_frame(Response(id=response.id, status=ERROR, status_code="INTERNAL",
                                     error=clip(f"the reply could not be encoded: {type(exc).__name__}: {exc!r}",
                                                MAX_ERROR_CHARS)))


def _escaped(value: Any) -> Any:
    """value with every text that is not valid Unicode written with backslash escapes."""
    if isinstance(value, str):
        try:
            value.encode()
            return value
        except UnicodeEncodeError:
            try:
                return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            except UnicodeEncodeError:  # a surrogate no byte stands for
                return value.encode("utf-8", "backslashreplace").decode()
    if isinstance(value, dict):
        return {_escaped(k): _escaped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    return value


def _settle(future: "asyncio.Future[None]", error: BaseException | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


class Daemon:
    def __init__(self, home: Path, *, idle_timeout: float, vault_idle_timeout: float, version: str,
                 limits: Limits | None = None, fd_limit: int | None = None,
                 model_memory_mb: int = DEFAULT_MODEL_MEMORY_MB) -> None:
        self.home = home
        self.socket_path = socket_path(home)
        self.idle_timeout = idle_timeout
        self.version = version
        self.limits = limits or Limits()
        self.frame_budget = FrameBudget()
        self.fd_limit = fd_limit
        self.started_at = time.time()
        self._executor = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="hebbs-engine")
        self.pool = VaultPool(home, vault_idle_timeout, self._executor, ModelPool(model_memory_mb))
        self.handlers = Handlers(self)
        self.connections: set[Connection] = set()
        self.requests = 0
        self.refused_busy = 0
        self.model_id: str | None = None
        # Connection threads and the loop both count requests: under this lock. Once stopping is set,
        # no connection starts another request (the vaults are about to close).
        self._counts = threading.Lock()
        self._stopping = False
        self._inflight = 0
        self._last_activity = time.monotonic()
        self._stop = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        # The Memory Palace web panel (hebbs.daemon.panel), served from this loop; None until started.
        self.panel: Any = None
        # Called with each request that went through the handlers, and each write a connection's thread
        # did (Handlers.direct; its reads change nothing a listener shows): the panel's live updates.
        self.change_listeners: list[Callable[[Request], None]] = []
        # A write may bring a memory an open subscription waits for.
        self.change_listeners.append(lambda request: self.handlers.push_after_write(request, self.connections))

    # Running -------------------------------------------------------------------------------

    async def serve(self, on_listening: Callable[[], None] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.socket_path))
        os.chmod(self.socket_path, 0o600)
        listener.listen(BACKLOG)
        listener.setblocking(False)
        self._loop.add_reader(listener.fileno(), self._accept, listener)
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
            self._loop.remove_reader(listener.fileno())
            listener.close()
            if self.panel is not None:
                await self.panel.stop()
            for task in background:
                task.cancel()
            # Let requests already running finish, and start no more: closing a vault under a running
            # engine call would pull RocksDB out from under it. An index run may take hours: it stops
            # at its next batch instead, keeping what it committed (the next run adopts it).
            with self._counts:
                self._stopping = True
            self.pool.stop_index_runs("the daemon is stopping")
            deadline = time.monotonic() + DRAIN_SECONDS
            while self._inflight and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            for conn in list(self.connections):
                conn.shutdown()
            await asyncio.gather(*background, return_exceptions=True)
            await self.pool.close_all()
            self._executor.shutdown(wait=True)

    def stop(self) -> None:
        self._stop.set()

    # The daemon's own commands (their declarations name these methods: `daemon=`) ---------------

    def pong(self) -> Pong:
        return Pong(version=self.version, pid=os.getpid())

    def stop_after_reply(self) -> Stopping:
        # Stop once this reply is on its way, not before.
        asyncio.get_running_loop().call_later(0.05, self.stop)
        return Stopping(pid=os.getpid())

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
            embedder = self.pool.models.acquire(None, pinned=True)
            embedder.warm()
            return embedder.model_id

        started = time.monotonic()
        try:
            self.model_id = await self.pool.run(load)
            log.info("model %s loaded in %.1fs", self.model_id, time.monotonic() - started)
        except Exception:
            log.exception("loading the default model failed; vaults will report the error when opened")
        # What is loaded by now (the modules, the model, the tokenizer: ~34,000 tracked objects) lives
        # as long as the daemon: out of the collector's sight, the full collection that now and then
        # lands on a request no longer walks them all. Objects of vaults opened
        # later are not frozen: they stay collectable when the vault closes.
        gc.freeze()

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
        if self._inflight or any(c.subscriptions for c in list(self.connections)):
            return 0.0
        # A browser showing the panel is a user looking: not idle either.
        if self.panel is not None and self.panel.active():
            return 0.0
        return time.monotonic() - self._last_activity

    # Connections ---------------------------------------------------------------------------

    def _accept(self, listener: socket.socket) -> None:
        """On the loop, when clients are waiting: a thread for each (or a BUSY frame past the limit)."""
        assert self._loop is not None
        while True:
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of descriptors, say: the client waits in the backlog
                log.warning("accepting a connection failed: %s", exc)
                return
            if len(self.connections) >= self.limits.max_connections and not self._evict_longest_idle():
                self._refuse_busy(sock)
                continue
            conn = Connection(sock, self.limits, self._loop, self.frame_budget)
            self.connections.add(conn)
            try:
                threading.Thread(target=self._serve, args=(conn,), name="hebbs-connection", daemon=True).start()
            except RuntimeError as exc:  # no thread to be had (a process or memory limit): as if busy
                log.warning("no thread for a new connection: %s", exc)
                self.connections.discard(conn)
                self._refuse_busy(sock)

    def _evict_longest_idle(self) -> bool:
        """Make room for a new client: close the connection that has waited longest for its next request.
        Idle clients (an SDK Client kept open, an MCP server between calls) would otherwise hold every
        slot for their idle timeout, and lock out each new CLI call. An evicted SDK client reconnects
        on its next call. False when every connection is busy: the new client gets BUSY."""
        waiting = sorted((c for c in list(self.connections) if c.idle_since is not None and not c.subscriptions),
                         key=lambda c: c.idle_since or 0.0)
        for conn in waiting:
            since = conn.idle_since
            if conn.evict():
                self.connections.discard(conn)
                log.info("at the connection limit (%d): closed the connection idle longest (%.1fs) for a new client",
                         self.limits.max_connections, time.monotonic() - (since or time.monotonic()))
                return True
        return False

    def _serve(self, conn: Connection) -> None:
        """A connection's thread: its requests, one after another, until it ends."""
        try:
            while True:
                try:
                    body = conn.read_frame()
                except MessageTooLarge as exc:
                    conn.send(Response(status=ERROR, status_code=exc.status_code, error=str(exc)))
                    break
                if body is None or not self._begin():
                    break
                try:
                    self._answer(conn, body)
                finally:
                    self._end()
        except Stalled as exc:
            log.info("closing a stalled connection: %s", exc)
        except (ConnectionError, OSError):
            pass  # the client went away; nothing to tell it
        except Exception:
            log.exception("connection handler failed")
        finally:
            conn.subscriptions.clear()
            self.connections.discard(conn)
            conn.close()

    def _begin(self) -> bool:
        with self._counts:
            if self._stopping:
                return False
            self.requests += 1
            self._inflight += 1
            self._last_activity = time.monotonic()
            return True

    def _end(self) -> None:
        with self._counts:
            self._inflight -= 1
            self._last_activity = time.monotonic()

    def _refuse_busy(self, sock: socket.socket) -> None:
        """Tell a client over the connection limit so, in a frame it reads as the reply to its request."""
        self.refused_busy += 1
        log.warning("refusing a connection: %d connections open, the limit (--max-connections)",
                    len(self.connections))
        frame = encode_frame(Response(status=ERROR, status_code=DaemonBusy.status_code,
                                      error=f"the daemon is serving {len(self.connections)} connections, its limit; "
                                            "close idle clients, try again shortly, or raise --max-connections"))
        with contextlib.suppress(OSError):
            sock.setblocking(False)
            sock.send(frame)  # a few hundred bytes: an empty socket buffer takes them at once
        sock.close()

    def _answer(self, conn: Connection, body: bytes) -> None:
        """On the connection's thread: one request, answered."""
        assert self._loop is not None
        request_id: Any = None
        try:
            request = decode_request(body)
            request_id = request.id
            work = self.handlers.direct(request)
            if work is not None:
                response = self._run_direct(request, work)
                if response is not None:
                    conn.send(response)
                    return
            conn.taking_frames()
            response = conn.on_loop(asyncio.run_coroutine_threadsafe(self._respond(conn, request), self._loop))
        except CancelledError:  # the loop stopped under the request
            raise ConnectionAbortedError("the daemon is stopping") from None
        except ConnectionError:
            raise  # this client is gone: no reply to give
        except BadRequest as exc:
            response = Response(id=exc.request_id, status=ERROR, status_code=exc.status_code, error=str(exc))
        except Exception as exc:  # noqa: BLE001 - _failure tells a user error from a bug
            response = _failure(exc, request_id)
        except BaseException as exc:
            if not _panic(exc):
                raise
            response = _failure(RuntimeError(f"{type(exc).__name__}: {exc}"), request_id)
        conn.send(response)

    def _run_direct(self, request: Request, work: Work) -> Response | None:
        """The request's engine call, on this thread, when its vault is open; None when it is not (the
        loop then opens it). The change listeners' call for a write is queued on the loop before the
        reply goes out, so whatever the client asks next through the loop (the panel's reads too)
        runs after the listeners were told."""
        assert self._loop is not None
        if not work.on_vault:
            return Response(id=request.id, status=OK, data=work.call(None))
        slot = self.pool.slot(request.vault_path)
        engine = self.pool.try_use(slot)
        if engine is None:
            return None
        try:
            # A write needs no turn of its own: the engine embeds outside its write lock and shares the
            # WAL sync of concurrent writers (Engine.remember_many).
            data = work.call(engine)
        finally:
            self.pool.release(slot)
        if work.writes and self.change_listeners:
            self._loop.call_soon_threadsafe(self.notify_change, request)
        return Response(id=request.id, status=OK, data=data)

    async def _respond(self, conn: Connection, request: Request) -> Response:
        """On the loop: a request whose handler is not one engine call on an open vault."""
        try:
            data = await self.handlers.dispatch(conn, request)
        except ConnectionError:
            raise  # this client is gone (a progress frame could not be sent): no reply to give
        except Exception as exc:  # noqa: BLE001 - _failure tells a user error from a bug
            return _failure(exc, request.id)
        except BaseException as exc:
            if not _panic(exc):
                raise
            return _failure(RuntimeError(f"{type(exc).__name__}: {exc}"), request.id)
        return Response(id=request.id, status=OK, data=data)

    async def status(self, vault_path: str | None = None) -> DaemonStatus:
        """The daemon's state, with the statistics of the vault a request names (`Status`, declared `daemon=`)."""
        status = DaemonStatus(
            version=self.version, pid=os.getpid(), home=str(self.home), socket=str(self.socket_path),
            started_at=int(self.started_at * 1_000_000), uptime_s=round(time.time() - self.started_at, 3),
            idle_timeout_s=self.idle_timeout, vault_idle_timeout_s=self.pool.idle_timeout, model=self.model_id,
            connections=len(self.connections), max_connections=self.limits.max_connections,
            refused_busy=self.refused_busy, subscriptions=sum(len(c.subscriptions) for c in list(self.connections)),
            requests=self.requests, open_vaults=self.pool.describe(), models=self.pool.models.describe(),
            model_memory_mb=self.pool.models.budget_mib,
            panel=None if self.panel is None else self.panel.serving(),
        )
        if vault_path:
            status.vault = await self.handlers.call_at(vault_path, lambda engine: engine.stats())
        return status


def _panic(exc: BaseException) -> bool:
    """A native library's panic (pyo3's PanicException is a BaseException): answered as an error, not
    left to end the connection's thread without a reply."""
    return not isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit, CancelledError))


def _failure(exc: Exception, request_id: Any) -> Response:
    """The error reply for a request that raised: its message for a HebbsError, else INTERNAL (logged)."""
    if isinstance(exc, HebbsError):
        return Response(id=request_id, status=ERROR, status_code=exc.status_code, error=clip(str(exc), MAX_ERROR_CHARS))
    log.exception("request %s failed", excerpt(request_id), exc_info=exc)
    return Response(id=request_id, status=ERROR, status_code="INTERNAL",
                    error=clip(f"{type(exc).__name__}: {exc}", MAX_ERROR_CHARS))
