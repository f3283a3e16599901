"""File helpers shared by everything hebbs writes beside its database: durable replacement, and the
last lines of a log for an error message.

A kill -9 at any moment must leave either the old file or the new one: write a temp file in the same
directory, fsync it, rename it over the target, then fsync the directory so the rename itself survives.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def atomic_write(path: Path, data: bytes, *, mode: int = 0o600, durable: bool = True) -> None:
    """Replace path with data: readers see the old file or the new one, never a part.
    durable=False: not fsynced, for a file a power cut may lose (two fsyncs cost 8-40 ms at every open)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)


class AtomicText:
    """A text file written as a new file beside `path` (0600) and renamed over it by close(): the
    rename replaces whatever was at `path` (a planted symlink, another user's file) instead of
    writing through it, and a reader or a crash sees the old file or the whole new one. abort()
    leaves `path` as it was."""

    def __init__(self, path: Path) -> None:
        self.path = path
        fd, self._tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.fchmod(fd, 0o600)
        self._file = os.fdopen(fd, "w", encoding="utf-8")

    def write(self, text: str) -> int:
        return self._file.write(text)

    def close(self) -> None:
        if self._file.closed:
            return
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            os.replace(self._tmp, self.path)
        except BaseException:
            self.abort()
            raise
        fsync_dir(self.path.parent)

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()
        with contextlib.suppress(OSError):
            os.unlink(self._tmp)


def fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def last_lines(path: Path | str, count: int, *, since: int = 0) -> list[str] | None:
    """The last `count` lines of a log from byte `since` on (what one run of a program wrote), blank
    ones at either end left out; None when the file cannot be read."""
    try:
        with open(path, "rb") as f:
            f.seek(since)
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    return text.strip().splitlines()[-count:]
