"""The SDK's transport: finding (and starting) the daemon, and one request's frames over a blocking
socket (Client) or an asyncio stream (AsyncClient). Everything else the two clients share is in
hebbs/client.py.

Like the CLI, this module must not import numpy, the model or the engine.
"""

from __future__ import annotations

import fcntl
import os
import select
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import HebbsError, InvalidInput
from .fsutil import last_lines
from .paths import ensure_home, hebbs_home, log_path, socket_path, spawn_lock_path
from .protocol import (ERROR, HEADER, PROGRESS, DaemonUnavailable, ExportChunk, ProtocolError, _Command, decode_data,
                       decode_response, error_from_frame, frame_length, progress_type, recv_frame, result_type)
from .writekeys import safe_to_resend

if TYPE_CHECKING:
    import asyncio

START_TIMEOUT = 60.0
ProgressCallback = Callable[[Any], None]


# Finding (and starting) the daemon ------------------------------------------------------------

CONNECT_TIMEOUT = 5.0


def open_socket(path: Path, timeout: float | None) -> socket.socket:
    """A socket connected to path. A full accept queue (EAGAIN: the daemon is swamped) is waited out
    for up to CONNECT_TIMEOUT, then raised as the BlockingIOError it is."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        deadline = time.monotonic() + CONNECT_TIMEOUT
        while True:
            try:
                sock.connect(str(path))
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        sock.settimeout(timeout)
        return sock
    except BaseException:
        sock.close()
        raise


def answers(path: Path) -> bool:
    try:
        open_socket(path, 1.0).close()
        return True
    except OSError:
        return False


def log_tail(home: Path, since: int = 0, lines: int = 20) -> str:
    """The log's last lines written from byte `since` on (what one start attempt wrote, not older runs)."""
    tail = last_lines(log_path(home), lines, since=since)
    return "(no log)" if tail is None else "\n".join(tail) or "(nothing in the log)"


def start_daemon(home: Path | str | None = None, *, idle_timeout: float | None = None,
                 vault_idle_timeout: float | None = None) -> bool:
    """Start a daemon for home unless one answers. Returns whether this call started it.

    Clients that race here queue on a flock, and each checks again once it holds it, so one
    daemon is spawned; the daemon's own lock makes sure of it even if something else starts one.
    """
    import subprocess

    home = ensure_home(hebbs_home(home))
    path = socket_path(home)
    if len(str(path).encode()) > 100:
        raise DaemonUnavailable(f"socket path {path} is too long for a Unix socket; use a shorter HEBBS_HOME")
    lock_fd = os.open(spawn_lock_path(home), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        if answers(path):
            return False
        # -P: `-m` would otherwise put the caller's working directory first on sys.path, and a daemon
        # started inside a checkout of hebbs would run that checkout's code, not the installed one.
        command = [sys.executable, "-P", "-m", "hebbs.daemon", "--detach", "--home", str(home)]
        if idle_timeout is not None:
            command += ["--idle-timeout", str(idle_timeout)]
        if vault_idle_timeout is not None:
            command += ["--vault-idle-timeout", str(vault_idle_timeout)]
        log_fd = os.open(log_path(home), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        began = os.fstat(log_fd).st_size
        try:
            done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd,
                                  timeout=START_TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            raise DaemonUnavailable(f"the daemon did not answer within {START_TIMEOUT:.0f}s; "
                                    f"see {log_path(home)}:\n{log_tail(home, began)}") from None
        finally:
            os.close(log_fd)
        if done.returncode != 0 or not answers(path):
            raise DaemonUnavailable(f"the daemon failed to start (exit {done.returncode}); "
                                    f"see {log_path(home)}:\n{log_tail(home, began)}")
        return True
    finally:
        os.close(lock_fd)


def connect(home: Path, *, autostart: bool = True, timeout: float | None = None) -> socket.socket:
    """A connected socket to home's daemon, starting the daemon first if none answers."""
    path = socket_path(home)
    try:
        return open_socket(path, timeout)
    except (FileNotFoundError, ConnectionRefusedError):
        # No socket, or one a crashed daemon left behind: either way nobody is listening.
        if not autostart:
            raise DaemonUnavailable(f"no hebbs daemon answers on {path}; start one with `hebbs daemon start`") from None
    except OSError as exc:
        raise unreachable(path, exc) from None
    start_daemon(home)
    try:
        return open_socket(path, timeout)
    except OSError as exc:
        raise unreachable(path, exc) from None


def unreachable(path: Path, exc: OSError) -> HebbsError:
    if isinstance(exc, NotADirectoryError):  # HEBBS_HOME names a file: a wrong path, not a missing daemon
        return InvalidInput(f"{path.parent} is not a directory, so it cannot be a HEBBS_HOME")
    if isinstance(exc, (BlockingIOError, TimeoutError)):
        return DaemonUnavailable(f"the daemon on {path} is not accepting connections (it is swamped: its queue of "
                                 f"new connections stayed full for {CONNECT_TIMEOUT:.0f}s); try again shortly")
    return DaemonUnavailable(f"cannot connect to the daemon on {path}: {exc}")


def closed_by_daemon(sock: socket.socket) -> bool:
    """Whether the daemon closed this connection while it sat unused (it closes idle ones)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True


def pending_error(sock: socket.socket) -> HebbsError | None:
    """An error frame the daemon sent before closing (BUSY), if one waits unread on sock."""
    try:
        sock.settimeout(0.5)
        body = recv_frame(sock)
        reply = decode_response(body) if body is not None else None
    except (OSError, HebbsError):
        return None
    if reply is None or reply.status != ERROR:
        return None
    return error_from_frame(reply.status_code, reply.error or reply.status_code)


# One request's frames ---------------------------------------------------------------------

def may_retry(attempt: int, exc: "Vanished", command: _Command) -> bool:
    """Sending failed: nothing reached the daemon. Reading failed: it may have acted, so only
    commands that change nothing, or whose every memory has an idempotency key (writekeys.py), are
    sent again. Either way, once."""
    return attempt == 0 and (not exc.sent or safe_to_resend(command))


def gone(exc: "Vanished", command: _Command) -> DaemonUnavailable:
    return DaemonUnavailable(f"the daemon went away during {command.tag()}: {exc}")


PENDING = object()  # settle: the reply was a progress frame or not ours; read on


def settle(reply: Any, request_id: Any, command: _Command, progress: ProgressCallback | None) -> Any:
    """One frame of a reply: its decoded result, or PENDING when more frames must be read."""
    if reply.status == PROGRESS:
        if progress is not None:
            progress(decode_data(reply.data, progress_type(command)))
        return PENDING
    if reply.id != request_id and reply.status != ERROR:
        return PENDING  # a reply to an earlier request whose reader gave up: not ours
    check(reply)
    return decode_data(reply.data, result_type(command))


def export_chunk(reply: Any, records: bool = False) -> list[Any] | None:
    """The memories (or records) of one export frame, or None at the final frame (raising if it is an error)."""
    if reply.status == PROGRESS:
        chunk = decode_data(reply.data, ExportChunk)
        return chunk.records if records else chunk.memories
    check(reply)
    return None


class Vanished(Exception):
    """The daemon's end of the connection is gone (sent: whether the request may have reached it)."""

    def __init__(self, message: str, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


def next_frame(sock: socket.socket, request_id: Any) -> Any:
    try:
        body = recv_frame(sock)
    except (ConnectionError, ProtocolError) as exc:
        raise Vanished(str(exc), sent=True) from None
    if body is None:
        raise Vanished("connection closed before the reply", sent=True)
    return decode_response(body)


def check(reply: Any) -> None:
    if reply.status == ERROR:
        raise error_from_frame(reply.status_code, reply.error or reply.status_code)


def read_reply(sock: socket.socket, request_id: Any, command: _Command, progress: ProgressCallback | None) -> Any:
    while (result := settle(next_frame(sock, request_id), request_id, command, progress)) is PENDING:
        pass
    return result


async def aopen(path: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """An asyncio connection to path; like open_socket, waits out a full accept queue for a while."""
    import asyncio

    deadline = time.monotonic() + CONNECT_TIMEOUT
    while True:
        try:
            return await asyncio.open_unix_connection(str(path))
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.02)


async def apending_error(reader: asyncio.StreamReader) -> HebbsError | None:
    import asyncio

    try:
        async with asyncio.timeout(0.5):
            reply = await anext_frame(reader)
    except (TimeoutError, Vanished, HebbsError):
        return None
    if reply.status != ERROR:
        return None
    return error_from_frame(reply.status_code, reply.error or reply.status_code)


async def anext_frame(reader: asyncio.StreamReader) -> Any:
    import asyncio

    try:
        header = await reader.readexactly(HEADER.size)
        body = await reader.readexactly(frame_length(header))
    except (asyncio.IncompleteReadError, ConnectionError) as exc:
        raise Vanished(f"connection closed: {exc}", sent=True) from None
    return decode_response(body)


async def aread_reply(reader: asyncio.StreamReader, request_id: Any, command: _Command,
                       progress: ProgressCallback | None) -> Any:
    while (result := settle(await anext_frame(reader), request_id, command, progress)) is PENDING:
        pass
    return result
