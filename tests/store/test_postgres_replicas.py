"""Reads on streaming replicas (`[store] read_url`), with read-your-writes kept for the writer: a daemon
reads on a replica only once it has replayed past the daemon's own last commit and the head it caught
up with, else on the primary. Real primary and asynchronous streaming replica (pg_fixtures.py); a
replica made to lag by pausing its replay (pg_wal_replay_pause)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from hebbs import Engine
from pg_fixtures import running_cluster

pytest_plugins = ["daemon_fixtures"]


def _wait(predicate, timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _read_url(cluster) -> str:
    """The replica first, the primary after it: prefer-standby falls back to the primary."""
    primary, replica = cluster.servers
    return (f"postgresql://postgres@127.0.0.1:{replica.port},127.0.0.1:{primary.port}/postgres"
            f"?target_session_attrs=prefer-standby&connect_timeout=2&passfile={primary.passfile}")


def _attach(path: Path, cluster, name: str) -> None:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    (path / "config.toml").write_text(f'[store]\nurl = "{cluster.servers[0].url}"\nname = "{name}"\n'
                                      f'read_url = "{_read_url(cluster)}"\n')


def _pause_replay(replica) -> None:
    replica.sql("SELECT pg_wal_replay_pause()")
    _wait(lambda: replica.sql("SELECT pg_get_wal_replay_pause_state()") == "paused", what="replay to pause")


def test_reads_go_to_a_caught_up_replica_and_never_to_a_lagging_one(tmp_path: Path, embedder):
    with running_cluster(replicas=1) as cluster:
        primary, replica = cluster.servers
        name = f"r-{uuid.uuid4().hex[:10]}"
        _attach(tmp_path / "a", cluster, name)
        _attach(tmp_path / "b", cluster, name)
        a = Engine.open(tmp_path / "a", embedder=embedder)
        b = Engine.open(tmp_path / "b", embedder=embedder)
        try:
            reads = a.vault.store.reads
            first = a.remember("the staging database is called quokka7", entity_id="infra")
            # The writer reads its own write at once, wherever from.
            assert a.get(first.id).content == first.content
            assert [r.memory.id for r in a.recall("quokka7", strategies=["lexical"])] == [first.id]
            # Once the replica has replayed the write, reads go there.
            before = reads["replica"]
            _wait(lambda: a.get(first.id) is not None and reads["replica"] > before, what="a read on the replica")
            assert replica.sql("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                               f"'hebbs reads vault {a.vault.store.vault_id}'") != "0"

            # A replica that lags is not read by the writer: every read after its write is the primary's,
            # and each finds the write (the replica does not have it).
            _pause_replay(replica)
            second = a.remember("the production database is called wallaby9", entity_id="infra")
            on_replica = reads["replica"]
            assert a.get(second.id).content == second.content
            assert [r.memory.id for r in a.recall("wallaby9", strategies=["lexical"])] == [second.id]
            assert a.recall("what is the production database called", strategies=["similarity"])[0].memory.id == second.id
            assert reads["replica"] == on_replica
            assert replica.sql(f"SELECT count(*) FROM hebbs.memories m JOIN hebbs.vaults v ON v.id = m.vault "
                               f"WHERE v.name = '{name}'") == "1"
            # Another engine catches up by sequence from the primary's change log, and reads the records
            # its indexes now name from the primary too.
            _wait(lambda: second.id in b.vault, what="the other engine to catch up")
            assert b.get(second.id).content == second.content
            assert [r.memory.id for r in b.recall("wallaby9", strategies=["lexical"])] == [second.id]

            # Replay resumed: reads return to the replica.
            replica.sql("SELECT pg_wal_replay_resume()")
            before = reads["replica"]
            _wait(lambda: a.get(second.id) is not None and reads["replica"] > before, what="reads back on the replica")

            # The replica gone: reads go to the primary, no error.
            replica.stop("immediate")
            before = reads["primary"]
            assert a.get(second.id).content == second.content
            assert [r.memory.id for r in a.recall("quokka7", strategies=["lexical"])] == [first.id]
            assert reads["primary"] > before
        finally:
            a.close()
            b.close()


def test_two_daemons_with_replica_reads(tmp_path: Path):
    """Through real daemons: the writer's recall finds its write at once with the replica paused, the
    other daemon finds it too, and recalls reach the replica once it replays again."""
    from daemon_fixtures import DaemonHome, short_tmp

    with running_cluster(replicas=1) as cluster:
        primary, replica = cluster.servers
        name = f"rd-{uuid.uuid4().hex[:10]}"
        homes = [DaemonHome() for _ in range(2)]
        folders = [short_tmp("hbr") for _ in homes]
        try:
            for home, folder in zip(homes, folders):
                home.hebbs("init", str(folder), "--store", primary.url, "--name", name)
                text = (folder / ".hebbs" / "config.toml").read_text()
                (folder / ".hebbs" / "config.toml").write_text(
                    text.replace(f'name = "{name}"', f'name = "{name}"\nread_url = "{_read_url(cluster)}"'))
                home.start()
            writer, reader = homes[0].client(folders[0]), homes[1].client(folders[1])
            try:
                writer.recall("warm up")
                reader.recall("warm up")
                _pause_replay(replica)
                memory = writer.remember("the release train leaves on platform numbat4", consolidate=False)
                assert [r.memory.id for r in writer.recall("numbat4", strategies=["lexical"]).results] == [memory.id]
                assert writer.get(memory.id).content == memory.content
                _wait(lambda: [r.memory.id for r in reader.recall("numbat4", strategies=["lexical"]).results]
                      == [memory.id], what="the other daemon to see the write")
                replica.sql("SELECT pg_wal_replay_resume()")

                def replica_reads() -> int:
                    return int(replica.sql("SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_tables "
                                           "WHERE schemaname = 'hebbs'"))
                before = replica_reads()
                _wait(lambda: (writer.recall("numbat4").results and reader.recall("numbat4").results
                               and replica_reads() > before), what="recalls to read on the replica")
            finally:
                writer.close()
                reader.close()
        finally:
            for home in homes:
                home.cleanup()


def test_pgvector_similar_runs_on_the_replica(tmp_path: Path, embedder):
    """similar = "pgvector": the HNSW search, the costliest read, is the replica's once it has the vectors."""
    with running_cluster(replicas=1) as cluster:
        replica = cluster.servers[1]
        name = f"rv-{uuid.uuid4().hex[:10]}"
        _attach(tmp_path / "a", cluster, name)
        config = tmp_path / "a" / "config.toml"
        config.write_text(config.read_text() + 'similar = "pgvector"\n')
        with Engine.open(tmp_path / "a", embedder=embedder) as a:
            memories = [a.remember(text) for text in ("the staging database is called quokka7",
                                                       "lunch is served at noon in the atrium",
                                                       "the build server runs on a raspberry pi")]
            # Enough other vectors (random ones, no memory behind them) that the planner searches the
            # HNSW index rather than sorting every row.
            store = a.vault.store
            store._run(f"INSERT INTO hebbs.vectors (vault, key, embedding) SELECT %s, '\\x00'::bytea || "
                       f"uuid_send(gen_random_uuid()), (SELECT array_agg(random() - 0.5 + d * 0 + g * 0) "
                       f"FROM generate_series(1, {embedder.dim}) AS d)::vector FROM generate_series(1, 3000) AS g",
                       (store.vault_id,))
            store._run("ANALYZE hebbs.vectors")
            # Written around hebbs' commits, so its read-your-writes does not wait for them: the replica
            # must have replayed the rows and their statistics, or its planner (under load, seen once)
            # sorted the few rows it had and never scanned the index the check below counts.
            head = cluster.servers[0].sql("SELECT pg_current_wal_lsn()")
            _wait(lambda: replica.sql(f"SELECT pg_last_wal_replay_lsn() >= '{head}'::pg_lsn") == "t",
                  timeout=120, what="the replica to replay the vectors and their statistics")
            reads = store.reads
            before = reads["replica"]
            cue = "where does the build server run"

            def found_on_replica() -> bool:
                hits = a.recall(cue, strategies=["similarity"], top_k=1)
                return hits[0].memory.id == memories[2].id and reads["replica"] > before
            _wait(found_on_replica, what="a similarity search on the replica")
            # The replica's own statistics: its copy of the HNSW index was scanned (flushed within ~10 s).
            index = f"vectors_hnsw_{a.vault.store.vault_id}_vector"
            _wait(lambda: int(replica.sql(f"SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes "
                                          f"WHERE indexrelname = '{index}'")) > 0, timeout=120,
                  what="the replica's HNSW scans")
