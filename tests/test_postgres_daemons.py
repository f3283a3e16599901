"""Three daemons (three homes, three folders: three machines) writing one vault in PostgreSQL at once,
each killed with SIGKILL along the way: no acknowledged write is lost, none is stored twice, and every
daemon's catalog, HNSW and BM25 indexes converge on the same vault."""

from __future__ import annotations

import os
import signal
import threading
import time

import msgspec

from hebbs.schema import Memory

pytest_plugins = ["daemon_fixtures"]

WRITERS_PER_DAEMON = 2
WRITES_PER_WRITER = 25
KILLS = 3


def test_three_daemons_one_vault_with_kill9(pg_server):
    from daemon_fixtures import DaemonHome, alive, short_tmp, wait_until

    homes = [DaemonHome() for _ in range(3)]
    folders = [short_tmp("hbn") for _ in homes]
    name = f"team-{folders[0].name}"
    acked: dict[str, str] = {}  # key -> id, for every write a daemon acknowledged
    lock = threading.Lock()
    errors: list[BaseException] = []
    stop_killing = threading.Event()
    kills: list[int] = []
    retries: list[str] = []
    try:
        for home, folder in zip(homes, folders):
            home.hebbs("init", str(folder), "--store", pg_server.url, "--name", name)
            home.start()

        def writer(d: int, w: int) -> None:
            client = homes[d].client(folders[d])
            try:
                for n in range(WRITES_PER_WRITER):
                    key = f"d{d}w{w}n{n}"
                    deadline = time.monotonic() + 120
                    while True:
                        try:
                            memory = client.remember(f"note {key} about the zebra{key} rollout",
                                                     key=key, consolidate=False)
                            break
                        except Exception:  # noqa: BLE001 - the daemon was killed: the same key again
                            assert time.monotonic() < deadline, f"{key} never acknowledged"
                            retries.append(key)
                            client.close()
                            time.sleep(0.2)
                            client = homes[d].client(folders[d])
                    with lock:
                        assert acked.setdefault(key, memory.id) == memory.id
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)
            finally:
                client.close()

        def killer() -> None:
            for k in range(KILLS):
                if stop_killing.wait(1.5):
                    return
                home = homes[k % len(homes)]
                try:
                    pid = home.pid()
                except Exception:  # noqa: BLE001 - being restarted right now
                    continue
                os.kill(pid, signal.SIGKILL)
                kills.append(pid)
                wait_until(lambda: not alive(pid), what="the killed daemon to be gone")

        threads = [threading.Thread(target=writer, args=(d, w)) for d in range(3) for w in range(WRITERS_PER_DAEMON)]
        chaos = threading.Thread(target=killer)
        for t in [*threads, chaos]:
            t.start()
        for t in threads:
            t.join()
        stop_killing.set()
        chaos.join()
        assert not errors, errors
        assert len(kills) == KILLS and retries  # the daemons did die under writers

        # What PostgreSQL holds: every acknowledged write once, and nothing twice.
        rows = pg_server.sql(
            "SELECT encode(m.value, 'hex') FROM hebbs.memories m JOIN hebbs.vaults v ON v.id = m.vault "
            f"WHERE v.name = '{name}'").split()
        stored = [msgspec.msgpack.decode(bytes.fromhex(r), type=Memory) for r in rows]
        contents = [m.content for m in stored]
        assert len(contents) == len(set(contents)), "a write was stored twice"
        by_id = {m.id: m for m in stored}
        assert len(acked) == 3 * WRITERS_PER_DAEMON * WRITES_PER_WRITER
        lost = [key for key, mid in acked.items() if mid not in by_id or key not in by_id[mid].content]
        assert not lost, f"acknowledged writes lost: {lost}"
        assert len(stored) == len(acked)

        # Every daemon converges on the same vault: catalog, BM25 and HNSW.
        head = int(pg_server.sql(f"SELECT seq FROM hebbs.vaults WHERE name = '{name}'"))
        for home, folder in zip(homes, folders):
            client = home.client(folder)
            try:
                wait_until(lambda: client.stats().write_seq == head, what="a daemon to catch up")
                assert client.stats().memories == len(stored)
                for key in list(acked)[::15]:
                    lexical = client.recall(f"zebra{key}", strategies=["lexical"], top_k=1).results
                    assert lexical[0].memory.id == acked[key]
                similar = client.recall(f"note {list(acked)[0]} about the zebra rollout", strategies=["similarity"],
                                        top_k=len(stored)).results
                found = {r.memory.id for r in similar}
                assert found == set(acked.values())
            finally:
                client.close()
    finally:
        stop_killing.set()
        for home in homes:
            home.cleanup()
