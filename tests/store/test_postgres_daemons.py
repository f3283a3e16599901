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
TOTAL_WRITES = 3 * WRITERS_PER_DAEMON * WRITES_PER_WRITER
KILL_MARKS = [TOTAL_WRITES * (k + 1) // (KILLS + 1) for k in range(KILLS)]


def _pid_or_none(home) -> int | None:
    try:
        return home.pid()
    except Exception:  # noqa: BLE001 - being restarted right now
        return None


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
    all_killed = threading.Event()
    try:
        for home, folder in zip(homes, folders):
            home.hebbs("init", str(folder), "--store", pg_server.url, "--name", name)
            home.start()

        def writer(d: int, w: int) -> None:
            client = homes[d].client(folders[d])
            try:
                for n in range(WRITES_PER_WRITER):
                    if n == WRITES_PER_WRITER - 1:
                        # The last write waits for every kill: on a fast machine the writes could
                        # otherwise all be done before the daemons died, and the scenario never happen.
                        all_killed.wait(300)
                    key = f"d{d}w{w}n{n}"
                    deadline = time.monotonic() + 120
                    while True:
                        try:
                            memory = client.remember(f"note {key} about the zebra{key} rollout",
                                                     key=key, consolidate=False)
                            break
                        except Exception:  # noqa: BLE001 - the daemon was killed: the same key again
                            assert time.monotonic() < deadline, f"{key} never acknowledged"
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
            try:
                for k, mark in enumerate(KILL_MARKS):
                    # Each kill once its share of the writes is acknowledged, with writers still writing.
                    wait_until(lambda: len(acked) >= mark or stop_killing.is_set(), timeout=300,
                               what=f"{mark} acknowledged writes before kill {k + 1}")
                    if stop_killing.is_set():
                        return
                    home, deadline = homes[k % len(homes)], time.monotonic() + 60
                    while (pid := _pid_or_none(home)) is None:
                        assert time.monotonic() < deadline, "the daemon never came back to be killed"
                        time.sleep(0.05)
                    os.kill(pid, signal.SIGKILL)
                    kills.append(pid)
                    wait_until(lambda: not alive(pid), what="the killed daemon to be gone")
            finally:
                all_killed.set()  # never leave a writer waiting on kills that will not come

        threads = [threading.Thread(target=writer, args=(d, w)) for d in range(3) for w in range(WRITERS_PER_DAEMON)]
        chaos = threading.Thread(target=killer)
        for t in [*threads, chaos]:
            t.start()
        for t in threads:
            t.join()
        stop_killing.set()
        chaos.join()
        assert not errors, errors
        # The daemons died under writers: each kill waited for its share of acknowledged writes while every
        # writer's last write waited for the kills. A writer need not see one: the SDK sends a keyed remember
        # again itself after a lost reply (docs/python-api.md), and its own loop above may never run.
        assert len(kills) == KILLS

        # What PostgreSQL holds: every acknowledged write once, and nothing twice.
        rows = pg_server.sql(
            "SELECT encode(m.value, 'hex') FROM hebbs.memories m JOIN hebbs.vaults v ON v.id = m.vault "
            f"WHERE v.name = '{name}'").split()
        stored = [msgspec.msgpack.decode(bytes.fromhex(r), type=Memory) for r in rows]
        contents = [m.content for m in stored]
        assert len(contents) == len(set(contents)), "a write was stored twice"
        by_id = {m.id: m for m in stored}
        assert len(acked) == TOTAL_WRITES
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


def test_a_subscription_is_fed_what_another_daemon_wrote(pg_server):
    """subscribe across machines: a feed on one daemon matches a memory another daemon acknowledged just
    before, without waiting for the listener's catch-up."""
    from daemon_fixtures import DaemonHome, short_tmp

    homes = [DaemonHome() for _ in range(2)]
    folders = [short_tmp("hbs") for _ in homes]
    name = f"sub-{folders[0].name}"
    try:
        for home, folder in zip(homes, folders):
            home.hebbs("init", str(folder), "--store", pg_server.url, "--name", name)
            home.start()
        reader, writer = homes[0].client(folders[0]), homes[1].client(folders[1])
        try:
            subscription = reader.subscribe(confidence_threshold=0.0)
            assert subscription.feed("the quokka7 release train") == []
            for n in range(5):
                memory = writer.remember(f"release train {n}: the quokka7 build number {n} leaves on day {n}",
                                         consolidate=False)
                pushed = subscription.feed(f"quokka7 build number {n} leaves on day {n}")
                assert memory.id in [r.memory.id for r in pushed], n
            subscription.close()
        finally:
            reader.close()
            writer.close()
    finally:
        for home in homes:
            home.cleanup()
