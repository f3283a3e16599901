"""What the team bench's parts share: a vault attached to a PostgreSQL store, one embedding per text for the
whole run, daemons of their own home, and timing."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from hebbs.client import Client, start_daemon
from hebbs.embedding.embed import get_embedder



def attach(vault: Path, url: str, name: str, similar: str = "local") -> None:
    vault.mkdir(parents=True, exist_ok=True, mode=0o700)
    (vault / "config.toml").write_text(f'[store]\nurl = "{url}"\nname = "{name}"\nsimilar = "{similar}"\n')


def cached_embedder():
    """The real model, each text embedded once for the whole run: every store gets the same vectors."""
    embedder = get_embedder()
    real = embedder.embed
    memo: dict[str, np.ndarray] = {}

    def embed(texts):
        texts = list(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in memo]
        if missing:
            for text, vector in zip(missing, real(missing)):
                memo[text] = vector
        return np.vstack([memo[t] for t in texts]) if texts else real(texts)

    embedder.embed = embed
    return embedder


class Daemon:
    def __init__(self, folder: Path) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="hbt", dir="/tmp"))
        self.folder = folder
        start_daemon(self.home, idle_timeout=0)

    def client(self) -> Client:
        return Client(vault=self.folder, home=self.home)

    def cpu_seconds(self) -> float:
        """The daemon's CPU time so far (user + system, every thread)."""
        pid = Client(global_=True, home=self.home).ping().pid
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        try:
            Client(global_=True, home=self.home, autostart=False).shutdown()
        except Exception:  # noqa: BLE001 - already gone
            pass
        shutil.rmtree(self.home, ignore_errors=True)


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


@contextmanager
def daemons_on(folders: list[Path]) -> Iterator[tuple[list[Daemon], list[Client]]]:
    """A daemon for each folder and a client of each; closed and stopped whatever happens."""
    daemons: list[Daemon] = []
    clients: list[Client] = []
    try:
        for folder in folders:
            daemons.append(Daemon(folder))
            clients.append(daemons[-1].client())
        yield daemons, clients
    finally:
        for c in clients:
            c.close()
        for d in daemons:
            d.stop()


def found_after(client, token: str, acked: float) -> float:
    """Milliseconds from `acked` (a perf_counter reading) until `client`'s BM25 returns `token`."""
    while not client.recall(token, strategies=["lexical"], top_k=1, reinforce=False).results:
        time.sleep(0.002)
    return (time.perf_counter() - acked) * 1000


class KeyedWriter:
    """A thread that remembers through a client of its own (`connect()`), one keyed memory after another,
    until stopped, as a daemon's user writes through a failover (the team bench's failover parts and
    tests/store's failover tests): `acked` maps each acknowledged key to (memory id, monotonic time); an
    error of a `retry` type is retried with the same key (stored once if the cut-off write had committed)
    and its status code kept in `retried`; any other ends the thread, kept in `errors`."""

    def __init__(self, connect: Callable[[], Any], text: str, retry: tuple[type[BaseException], ...] = ()) -> None:
        self.acked: dict[str, tuple[str, float]] = {}
        self.retried: list[str] = []
        self.errors: list[BaseException] = []
        self._connect, self._text, self._retry = connect, text, retry
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._write)

    def __enter__(self) -> "KeyedWriter":
        self._thread.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self._stop.set()
        if exc_type is None:
            self._thread.join()
        # else: the caller's cleanup stops the daemon, which ends a write waiting on it, and the thread with it

    def _write(self) -> None:
        client = self._connect()
        n = 0
        try:
            while not self._stop.is_set():
                key = f"k{n}"
                try:
                    memory = client.remember(self._text.format(key=key), key=key, consolidate=False)
                except self._retry as exc:
                    self.retried.append(getattr(exc, "status_code", type(exc).__name__))
                    continue
                self.acked[key] = (memory.id, time.monotonic())
                n += 1
        except BaseException as exc:  # noqa: BLE001 - the caller reports it
            self.errors.append(exc)
        finally:
            client.close()
