"""The commands docs/scale.md's runbook gives a team lead for replicas (scripts/team-postgres, which is
scripts.postgres_local): a synchronous replica made by a command, a failover by kill -9 and `promote`,
the promoted server told of the synchronous standbys it inherited, and the old primary rewound onto
the new timeline by `rejoin` (pg_rewind) and streaming again, with the writes made meanwhile."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from scripts import postgres_local
from scripts.postgres_local import Cluster


def test_replica_promote_and_rejoin_by_command(capsys):
    from daemon_fixtures import wait_until

    root = Path(tempfile.mkdtemp(prefix="hbrb", dir="/tmp")) / "pg"
    try:
        assert postgres_local.main(["start", str(root), "--port", str(postgres_local.free_port())]) == 0
        for _ in range(2):
            assert postgres_local.main(["replica", str(root), "--synchronous"]) == 0
        said = capsys.readouterr().out
        assert "synchronous_standby_names = ANY 1 (replica1, replica2)" in said

        cluster = Cluster(root)
        cluster.load()
        primary, _, replica2 = cluster.servers
        assert primary.name == "primary" and primary.sql("SELECT count(*) FROM pg_stat_replication") == "2"
        primary.sql("CREATE TABLE kept (n int)")
        primary.sql("INSERT INTO kept VALUES (1)")
        primary.kill9()

        # replica2 was made after replica1 was named synchronous: it inherited a list naming replica1 alone.
        assert postgres_local.main(["promote", str(root), "replica2"]) == 0
        said = capsys.readouterr().out
        assert "synchronous_standby_names = 'ANY 1 (replica1)'" in said and "wait for ever" in said
        replica2.sql("ALTER SYSTEM SET synchronous_standby_names = ''")
        replica2.sql("SELECT pg_reload_conf()")
        replica2.sql("INSERT INTO kept VALUES (2)")  # after the fork: the old primary must take this timeline

        assert postgres_local.main(["rejoin", str(root), "primary"]) == 0
        assert "is a replica of" in capsys.readouterr().out
        assert primary.sql("SELECT pg_is_in_recovery()") == "t"
        assert Cluster(root).load().name == "replica2"  # the one running that is no standby
        wait_until(lambda: primary.sql("SELECT string_agg(n::text, ',' ORDER BY n) FROM kept") == "1,2",
                   what="the rejoined primary to replay the new primary's write")
        assert "primary" in replica2.sql("SELECT string_agg(application_name, ',') FROM pg_stat_replication")
    finally:
        with contextlib.suppress(Exception):
            postgres_local.main(["stop", str(root)])
        cluster = Cluster(root)
        cluster.load()
        cluster.remove()
        with contextlib.suppress(OSError):
            root.parent.rmdir()
