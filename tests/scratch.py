"""Short folders directly under /tmp, removed when the test process's session ends.

A daemon's home holds its Unix socket, whose path must stay under ~107 bytes, which pytest's
tmp_path does not promise. A folder a daemon still had open when its test removed it can come back
when the daemon writes to it; removing every one again at the session's end (after every fixture,
so after every daemon has stopped) leaves nothing in /tmp (a run left over a hundred, 20 MB, before).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

_MADE: list[Path] = []


def short_tmp(prefix: str = "hb") -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    _MADE.append(path)
    return path


def remove_all() -> None:
    for path in _MADE:
        shutil.rmtree(path, ignore_errors=True)
    _MADE.clear()
