"""Several `hebbs index` runs of one notes tree into one vault in PostgreSQL (two daemons, two homes, two
checkouts of the tree: two machines): the files are split between them by claims in the store, so
every section is embedded once and stored once; a killed indexer's claims are taken over when its
lease lapses, and the other one finishes the tree."""

from __future__ import annotations

import os
import random
import shutil
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec

from hebbs.schema import Memory

pytest_plugins = ["daemon_fixtures"]

FILES, SECTIONS = 48, 4
WORDS = ("harbor lantern quarry meadow falcon copper willow saddle ember glacier orchid tundra velvet "
         "summit pepper marble cobalt thistle canyon juniper").split()


def _tree(root: Path, files: int = FILES) -> int:
    """A notes tree of `files` notes with SECTIONS sections each, every section its own text. Returns how
    many sections it holds."""
    rng = random.Random(25)
    for f in range(files):
        lines = [f"# Note {f}\n"]
        for s in range(SECTIONS):
            words = " ".join(rng.choice(WORDS) for _ in range(12))
            lines.append(f"## Part {s} of note {f}\n\nItem n{f}s{s}: the {words} plan, revision {f * 7 + s}.\n")
        (root / f"note-{f:02d}.md").write_text("\n".join(lines))
    return files * SECTIONS


def _attach(home, folder: Path, url: str, name: str, lease: float) -> None:
    home.hebbs("init", str(folder), "--store", url, "--name", name)
    config = folder / ".hebbs" / "config.toml"
    config.write_text(config.read_text().replace("[store]\n", f"[store]\nclaim_lease = {lease}\n", 1))


def _stored(pg_server, name: str) -> list[Memory]:
    rows = pg_server.sql(
        "SELECT encode(m.value, 'hex') FROM hebbs.memories m JOIN hebbs.vaults v ON v.id = m.vault "
        f"WHERE v.name = '{name}' AND get_byte(m.key, 0) = 1").split()
    return [msgspec.msgpack.decode(bytes.fromhex(r), type=Memory) for r in rows]


def _sections(stored: list[Memory]) -> list[tuple]:
    return [(m.context["file"], tuple(m.context["heading_path"]), m.context["chunk"]) for m in stored
            if m.context.get("origin") == "vault" and m.kind.name != "REVISION"]


def _checkouts(n: int) -> tuple[list[Path], int]:
    from daemon_fixtures import short_tmp

    first = short_tmp("hbt")
    total = _tree(first)
    folders = [first]
    for _ in range(n - 1):
        other = short_tmp("hbt")
        shutil.rmtree(other)
        shutil.copytree(first, other)
        folders.append(other)
    return folders, total


def _index(home, folder: Path, out: dict, key: str) -> None:
    client = home.client(folder)
    try:
        out[key] = client.index(folder)
    except BaseException as exc:  # noqa: BLE001 - the test reads it
        out[key] = exc
    finally:
        client.close()


@contextmanager
def _two_machines(pg_server, prefix: str, lease: float) -> Iterator[tuple[list, list[Path], int, str]]:
    """Two started daemons (homes) with a checkout of the tree each, both attached to one vault in
    PostgreSQL: (homes, folders, sections in the tree, the vault's name). Stopped and removed after."""
    from daemon_fixtures import DaemonHome, wait_until

    homes = [DaemonHome() for _ in range(2)]
    folders, total = _checkouts(2)
    name = f"{prefix}-{folders[0].name}"
    try:
        for home, folder in zip(homes, folders):
            _attach(home, folder, pg_server.url, name, lease=lease)
            home.start()
        # Both ready to claim before either indexes: a daemon still loading its model (it loads in the
        # background after start) or opening the vault could find every claim taken by the other.
        for home, folder in zip(homes, folders):
            with home.client(folder) as client:
                wait_until(lambda client=client: client.status(vault=False).model is not None, timeout=600,
                           what="the daemon's model to load")
                client.stats()
        yield homes, folders, total, name
    finally:
        for home in homes:
            home.cleanup()
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)


def _index_both(homes: list, folders: list[Path], out: dict) -> list[threading.Thread]:
    """Both machines' index runs, started at once; each one's summary (or exception) lands in out[n]."""
    runs = [threading.Thread(target=_index, args=(home, folder, out, n))
            for n, (home, folder) in enumerate(zip(homes, folders))]
    for t in runs:
        t.start()
    return runs


def test_two_indexers_split_one_tree_and_store_each_section_once(pg_server):
    with _two_machines(pg_server, "idx", lease=30) as (homes, folders, total, name):
        out: dict = {}
        for t in _index_both(homes, folders, out):
            t.join()
        a, b = out[0], out[1]
        assert not isinstance(a, BaseException) and not isinstance(b, BaseException), (a, b)
        # Split: both embedded, together each section once.
        assert a.embedded > 0 and b.embedded > 0, (a.embedded, b.embedded)
        assert a.embedded + b.embedded == total
        assert a.sections_total == b.sections_total == total
        sections = _sections(_stored(pg_server, name))
        assert len(sections) == total and len(set(sections)) == total
        # Each folder's manifest holds the tree: a second run embeds nothing, in either.
        for home, folder in zip(homes, folders):
            client = home.client(folder)
            try:
                again = client.index(folder)
                assert again.embedded == 0 and again.sections_total == total
                assert client.stats().memories == total
            finally:
                client.close()


def test_a_killed_indexers_claims_are_taken_over(pg_server):
    from daemon_fixtures import alive, wait_until

    with _two_machines(pg_server, "kil", lease=3) as (homes, folders, total, name):
        victim = homes[0].pid()
        owner = f"%:{victim}:%"

        def claims(where: str) -> int:
            return int(pg_server.sql(f"SELECT count(*) FROM hebbs.claims c JOIN hebbs.vaults v ON v.id = c.vault "
                                     f"WHERE v.name = '{name}' AND {where}"))

        out: dict = {}
        runs = _index_both(homes, folders, out)
        # The first vault opened on a fresh server creates hebbs' tables: until then there is no
        # claim to count (run alone, this test used to ask before they existed).
        wait_until(lambda: pg_server.sql("SELECT to_regclass('hebbs.claims') IS NOT NULL") == "t",
                   timeout=600, what="the indexers to create hebbs' tables")
        # Killed once it has finished one claim and holds another: mid-run, with work in hand.
        wait_until(lambda: claims(f"c.owner LIKE '{owner}' AND c.done") >= 1
                   and claims(f"c.owner LIKE '{owner}' AND NOT c.done") >= 1,
                   timeout=600, what="the first indexer to finish a claim and hold the next")
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: not alive(victim), what="the killed daemon to be gone")
        for t in runs:
            t.join()
        assert isinstance(out[0], BaseException)  # its run died with it
        survivor = out[1]
        assert not isinstance(survivor, BaseException), survivor
        assert survivor.sections_total == total
        assert claims("NOT c.done") == 0
        assert claims("c.attempts > 1") >= 1  # the killed indexer's claim was taken over
        sections = _sections(_stored(pg_server, name))
        assert len(sections) == total and len(set(sections)) == total

        # Restarted, the killed indexer adopts what is there: nothing embedded, nothing stored twice.
        homes[0].start()
        client = homes[0].client(folders[0])
        try:
            again = client.index(folders[0])
            assert again.embedded == 0 and again.sections_total == total
        finally:
            client.close()
        sections = _sections(_stored(pg_server, name))
        assert len(sections) == total and len(set(sections)) == total
