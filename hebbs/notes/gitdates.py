"""A note's own date when its notes folder is a git work tree: the time of the last commit that
changed it, for a file whose bytes are what that commit holds.

A clone, a checkout or a copy stamps every file with the time it was written, so without front-matter
dates a freshly cloned folder of notes would all be dated the day it was indexed. Git remembers when
each file last changed. A file edited since (its bytes differ from HEAD's) keeps its mtime, which then
is the truth. Anything git cannot answer (no git, not a work tree, a repository it refuses, a slow
history) leaves the mtime.

git runs with the repository's configuration able to run nothing: a notes folder may come from anyone,
and `core.fsmonitor` or a pager in its `.git/config` would otherwise be commands run by indexing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

__all__ = ["commit_times"]

TIMEOUT = 20.0  # seconds for each git call: a slower history is not worth holding up an index
_SAFE = ["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "core.pager=cat",
         "-c", "core.quotePath=false", "--no-pager"]


def commit_times(root: Path, files: Mapping[str, bytes]) -> dict[str, int]:
    """{relative path: last commit time in microseconds} for those of `files` (path relative to root
    -> the bytes read) that HEAD holds with these very bytes."""
    if not files or shutil.which("git") is None:
        return {}
    top = _git(root, "rev-parse", "--show-toplevel")
    if not top:
        return {}
    try:
        prefix = Path(os.path.realpath(root)).relative_to(os.path.realpath(top.strip())).as_posix()
    except ValueError:
        return {}
    prefix = "" if prefix == "." else prefix + "/"
    listing = _git(root, "ls-tree", "-r", "-z", "--full-tree", "HEAD")
    if listing is None:
        return {}
    blobs: dict[str, str] = {}
    for record in listing.split("\0"):
        meta, _, path = record.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == "blob" and path.startswith(prefix):
            blobs[path[len(prefix):]] = parts[2]
    clean = {rel for rel, data in files.items()
             if blobs.get(rel) == hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()}
    if not clean:
        return {}
    log = _git(root, "log", "--format=@%ct", "--name-only", "--no-renames", "-z", "HEAD", "--", ".")
    if log is None:
        return {}
    out: dict[str, int] = {}
    when = 0
    for field in log.replace("\n", "\0").split("\0"):
        if field.startswith("@") and field[1:].isdigit():
            when = int(field[1:])
        elif field.startswith(prefix):
            rel = field[len(prefix):]
            if rel in clean and rel not in out and when:
                out[rel] = when * 1_000_000
    return out


def _git(root: Path, *args: str) -> str | None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_TERMINAL_PROMPT"] = "0"
    try:
        done = subprocess.run(["git", *_SAFE, *args], cwd=root, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", errors="replace")
