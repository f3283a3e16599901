"""Starting and stopping the daemon process: one per HEBBS_HOME, guaranteed by a lock held for life.

`python -m hebbs.daemon` (which is what auto-start spawns) runs it in the foreground. The daemon
takes an exclusive flock on `$HEBBS_HOME/daemon.lock` and keeps it until it exits; the kernel drops
it if the process dies, so whoever gets the lock knows any socket or PID file lying there is stale.
A second daemon started while one serves sees the lock taken and the socket answering, and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import fcntl
import logging
import os
import signal
import socket
import time
from pathlib import Path
from typing import NoReturn

from hebbs.config import DaemonConfig, load_config
from hebbs.errors import InvalidInput
from hebbs.offline import disable_telemetry
from hebbs.paths import ensure_home, hebbs_home, lock_path, log_path, pid_path, socket_path

from .limits import (DEFAULT_CONNECTION_IDLE_TIMEOUT, DEFAULT_FRAME_TIMEOUT, DEFAULT_MAX_CONNECTIONS, Limits, check_seconds,
                     env_number, raise_fd_limit)
from .logsetup import BACKUPS, DEFAULT_MAX_BYTES, setup_logging
from .models import DEFAULT_MODEL_MEMORY_MB

log = logging.getLogger("hebbs.daemon")

DEFAULT_IDLE_TIMEOUT = 300.0
DEFAULT_VAULT_IDLE_TIMEOUT = 300.0
LOCK_WAIT = 15.0


def version() -> str:
    from hebbs import version as package_version

    return package_version()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m hebbs.daemon",
                                     description="Run the hebbs daemon in the foreground.")
    parser.add_argument("--home", help="HEBBS_HOME (default: $HEBBS_HOME or ~/.hebbs)")
    parser.add_argument("--idle-timeout", type=float, default=None,
                        help=f"stop after this many seconds without requests; 0 = never "
                             f"(default: $HEBBS_IDLE_TIMEOUT or {DEFAULT_IDLE_TIMEOUT:.0f})")
    parser.add_argument("--vault-idle-timeout", type=float, default=None,
                        help=f"close a vault after this many seconds unused; 0 = never (default: "
                             f"$HEBBS_VAULT_IDLE_TIMEOUT or {DEFAULT_VAULT_IDLE_TIMEOUT:.0f})")
    parser.add_argument("--max-connections", type=int, default=None,
                        help=f"serve at most this many clients at once; the next gets a BUSY error "
                             f"(default: $HEBBS_MAX_CONNECTIONS or {DEFAULT_MAX_CONNECTIONS})")
    parser.add_argument("--connection-idle-timeout", type=float, default=None,
                        help=f"close a connection that sends nothing for this many seconds, unless it holds a "
                             f"subscription; 0 = never (default: $HEBBS_CONNECTION_IDLE_TIMEOUT or "
                             f"{DEFAULT_CONNECTION_IDLE_TIMEOUT:.0f})")
    parser.add_argument("--frame-timeout", type=float, default=None,
                        help=f"close a connection that leaves a frame half-sent, or a reply unread, this long "
                             f"(default: $HEBBS_FRAME_TIMEOUT or {DEFAULT_FRAME_TIMEOUT:.0f})")
    parser.add_argument("--log-max-bytes", type=int, default=None,
                        help=f"rotate daemon.log at this size, keeping {BACKUPS} old files "
                             f"(default: $HEBBS_LOG_MAX_BYTES or {DEFAULT_MAX_BYTES})")
    parser.add_argument("--model-memory-mb", type=int, default=None,
                        help=f"MiB the warm embedding models of the open vaults may take together; a vault whose "
                             f"model would pass it is refused (default: $HEBBS_MODEL_MEMORY_MB or "
                             f"{DEFAULT_MODEL_MEMORY_MB})")
    parser.add_argument("--log-level", default=os.environ.get("HEBBS_LOG_LEVEL", "INFO"))
    parser.add_argument("--detach", action="store_true",
                        help="run in the background; exit 0 once it listens (or another daemon serves), 1 if it failed")
    args = parser.parse_args(argv)
    defaults = {"idle_timeout": ("HEBBS_IDLE_TIMEOUT", DEFAULT_IDLE_TIMEOUT, float),
                "vault_idle_timeout": ("HEBBS_VAULT_IDLE_TIMEOUT", DEFAULT_VAULT_IDLE_TIMEOUT, float),
                "max_connections": ("HEBBS_MAX_CONNECTIONS", DEFAULT_MAX_CONNECTIONS, int),
                "connection_idle_timeout": ("HEBBS_CONNECTION_IDLE_TIMEOUT", DEFAULT_CONNECTION_IDLE_TIMEOUT, float),
                "frame_timeout": ("HEBBS_FRAME_TIMEOUT", DEFAULT_FRAME_TIMEOUT, float),
                "log_max_bytes": ("HEBBS_LOG_MAX_BYTES", DEFAULT_MAX_BYTES, int),
                "model_memory_mb": ("HEBBS_MODEL_MEMORY_MB", DEFAULT_MODEL_MEMORY_MB, int)}
    configured = _configured(parser, args.home)
    for field, (env, default, kind) in defaults.items():
        if getattr(args, field) is None:
            from_file = getattr(configured, field)
            setattr(args, field, env_number(env, default if from_file is None else from_file, kind))
    if args.model_memory_mb < 1:
        _refuse(parser, f"the model memory budget must be at least 1 MiB; got {args.model_memory_mb}")
    if args.log_max_bytes < 1:
        _refuse(parser, f"the log size cap must be at least 1 byte; got {args.log_max_bytes}")
    try:
        check_seconds(args.idle_timeout, "the idle timeout")
        check_seconds(args.vault_idle_timeout, "the vault idle timeout")
        args.limits = Limits(max_connections=args.max_connections, connection_idle_timeout=args.connection_idle_timeout,
                             frame_timeout=args.frame_timeout)
    except ValueError as exc:
        _refuse(parser, str(exc))
    return args


def _refuse(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    """Stop the start with one line (the start's caller shows it): the usage text would bury it."""
    parser.exit(2, f"{parser.prog}: {message}\n")


def _configured(parser: argparse.ArgumentParser, home: str | None) -> DaemonConfig:
    """[daemon] of $HEBBS_HOME/config.toml; a broken file stops the start with its error, not a trace."""
    try:
        return load_config(hebbs_home(home)).daemon
    except InvalidInput as exc:
        _refuse(parser, str(exc))


def _socket_answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        try:
            sock.connect(str(path))
            return True
        except OSError:
            return False


def acquire_lock(home: Path, wait: float = LOCK_WAIT) -> int | None:
    """The daemon lock's fd, or None when another daemon is serving.

    While the lock is taken we keep trying: its holder may be a daemon that is shutting down (then
    the lock frees soon) or one that is starting (then its socket answers soon and we step aside).
    """
    fd = os.open(lock_path(home), os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if _socket_answers(socket_path(home)) or time.monotonic() > deadline:
                os.close(fd)
                return None
            time.sleep(0.05)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def detach() -> int:
    """Fork into the background. Returns, in the daemon, the fd on which to report readiness.

    The foreground process waits for that report and exits with it, so whoever started us (the
    client's auto-start) knows when the socket answers, and is never left with a zombie child.
    """
    read_end, write_end = os.pipe()
    if os.fork() > 0:
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            report = pipe.read()
        os._exit(0 if report in (b"ok", b"busy") else 1)
    os.close(read_end)
    os.setsid()
    os.chdir("/")  # never pin the directory we were started from
    return write_end


def _report(fd: int | None, message: bytes) -> None:
    if fd is None:
        return
    try:
        os.write(fd, message)
    finally:
        os.close(fd)


def _limit_blas_threads() -> None:
    """One BLAS thread for the daemon's life: recalls embed a query (onnxruntime's threads) and then
    score it with numpy, and on 2 cores BLAS threads spinning beside onnxruntime's made a query 2-4x
    slower than one BLAS thread (figures in docs/embedding.md)."""
    from hebbs.embedding.embed import limit_blas_threads

    try:
        limit_blas_threads(1)
    except Exception:  # threadpoolctl missing or no BLAS found: slower, never wrong
        log.exception("could not limit BLAS threads")


def main(argv: list[str] | None = None) -> int:
    # Before anything can load onnxruntime: its telemetry is decided, for good, when it loads.
    disable_telemetry()
    args = parse_args(argv)
    home = ensure_home(hebbs_home(args.home))
    ready_fd = detach() if args.detach else None
    os.umask(0o077)  # the socket, PID file and log are the user's alone
    setup_logging(log_path(home), args.log_level, args.log_max_bytes)
    # `kill -USR1 PID` writes every thread's stack into the log: how to see what a stuck daemon does.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    lock_fd = acquire_lock(home)
    if lock_fd is None:
        log.info("another daemon serves %s: exiting", home)
        _report(ready_fd, b"busy")
        return 0
    from .server import Daemon  # after the lock: a losing racer exits without importing anything heavy

    # Engine code finds the home through $HEBBS_HOME (the [llm] settings in its config.toml, telling
    # the global vault from a notes folder's): it must be this daemon's home, not the caller's default.
    os.environ["HEBBS_HOME"] = str(home)
    _limit_blas_threads()
    fd_limit = raise_fd_limit()
    limits = args.limits.fitted(fd_limit)
    if limits.max_connections < args.limits.max_connections:
        log.warning("the descriptor limit (%d) leaves room for %d connections, not the %d asked for",
                    fd_limit, limits.max_connections, args.limits.max_connections)

    for stale in (socket_path(home), pid_path(home)):
        if stale.exists():
            log.info("removing stale %s left by a daemon that did not stop cleanly", stale.name)
            _unlink(stale)
    daemon = Daemon(home, idle_timeout=args.idle_timeout, vault_idle_timeout=args.vault_idle_timeout,
                    version=version(), limits=limits, fd_limit=fd_limit, model_memory_mb=args.model_memory_mb)

    def listening() -> None:
        nonlocal ready_fd
        pid_path(home).write_text(f"{os.getpid()}\n")
        _report(ready_fd, b"ok")
        ready_fd = None

    async def run() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, daemon.stop)
        await daemon.serve(on_listening=listening)

    try:
        asyncio.run(run())
    except Exception:
        log.exception("daemon failed")
        return 1
    finally:
        if ready_fd is not None:
            os.close(ready_fd)  # never listened: the waiting parent reads EOF and reports failure
        _unlink(socket_path(home))
        _unlink(pid_path(home))
        log.info("stopped")
        os.close(lock_fd)
    return 0
